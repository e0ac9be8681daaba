"""The example app imports the constructs from the installed package and synthesizes."""

from __future__ import annotations

import importlib.util

from aws_cdk.assertions import Template

from neuronkit import catalog
from tests.conftest import ROOT, new_app


def test_user_app_reuses_the_constructs() -> None:
    spec = importlib.util.spec_from_file_location("my_training_app", ROOT / "examples" / "my_training_app.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    stack = module.build(new_app())
    template = Template.from_stack(stack)
    template.resource_count_is("AWS::AutoScaling::AutoScalingGroup", 1)
    template.resource_count_is("AWS::FSx::FileSystem", 1)
    data = template.to_json()
    lt = next(r for r in data["Resources"].values() if r["Type"] == "AWS::EC2::LaunchTemplate")
    interfaces = lt["Properties"]["LaunchTemplateData"]["NetworkInterfaces"]
    assert sum(1 for n in interfaces if n["InterfaceType"] == "efa-only") == catalog.get("trn1.32xlarge").efa_max_interfaces
    group = next(r for r in data["Resources"].values() if r["Type"] == "AWS::AutoScaling::AutoScalingGroup")
    assert group["Properties"]["VPCZoneIdentifier"] == ["subnet-0a1b2c3d4e5f67890"]
