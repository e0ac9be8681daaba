"""Every example under examples/ runs exactly as its docstring says: a subprocess in a clean environment.

No context is injected (no cdk.json next to it, default feature flags), so a construct that only works with
one of our flags fails here, as it would in a user's app.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from neuronkit import catalog
from tests.conftest import ROOT, clean_environment

EXAMPLES = sorted((ROOT / "examples").glob("*.py"))


def run_example(script: Path, workdir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script)],
        cwd=workdir,
        env=clean_environment(workdir),
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


@pytest.fixture(scope="module")
def ran(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], tuple[subprocess.CompletedProcess[str], Path]]:
    """Each example runs once per module, in a folder of its own; the tests below read that one run."""
    runs: dict[str, tuple[subprocess.CompletedProcess[str], Path]] = {}

    def get(name: str) -> tuple[subprocess.CompletedProcess[str], Path]:
        if name not in runs:
            workdir = tmp_path_factory.mktemp(Path(name).stem)
            runs[name] = (run_example(ROOT / "examples" / name, workdir), workdir)
        return runs[name]

    return get


@pytest.mark.parametrize("script", EXAMPLES, ids=[s.stem for s in EXAMPLES])
def test_example_runs_by_its_documented_command(script: Path, ran: Callable[[str], Any]) -> None:
    assert f"python examples/{script.name}" in script.read_text(), "the docstring must say how to run it"
    done, tmp_path = ran(script.name)
    assert done.returncode == 0, done.stderr[-3000:]
    assert list((tmp_path / "cdk.out" / "examples").glob("*.template.json")), "the example synthesized no template"
    # Nothing for `cdk synth` to print as a warning: an example shows the way that needs no acknowledging.
    warnings = [
        entry["data"]
        for f in (tmp_path / "cdk.out" / "examples").glob("*.metadata.json")
        for entries in json.loads(f.read_text()).values()
        for entry in entries
        if entry["type"] == "aws:cdk:warning"
    ]
    assert warnings == []


def test_user_training_app_reuses_the_constructs(ran: Callable[[str], Any]) -> None:
    done, tmp_path = ran("my_training_app.py")
    assert done.returncode == 0, done.stderr[-3000:]
    data = json.loads((tmp_path / "cdk.out" / "examples" / "research-training.template.json").read_text())
    resources = data["Resources"].values()
    assert sum(r["Type"] == "AWS::AutoScaling::AutoScalingGroup" for r in resources) == 1
    assert sum(r["Type"] == "AWS::FSx::FileSystem" for r in resources) == 1
    lt = next(r for r in resources if r["Type"] == "AWS::EC2::LaunchTemplate")
    interfaces = lt["Properties"]["LaunchTemplateData"]["NetworkInterfaces"]
    assert sum(1 for n in interfaces if n["InterfaceType"] == "efa-only") == catalog.get("trn1.32xlarge").efa_max_interfaces
    group = next(r for r in resources if r["Type"] == "AWS::AutoScaling::AutoScalingGroup")
    assert group["Properties"]["VPCZoneIdentifier"] == ["subnet-0a1b2c3d4e5f67890"]
    # Access logs reach their bucket through a bucket policy (ACLs are disabled), not the LogDeliveryWrite ACL.
    assert not any(r["Type"] == "AWS::S3::Bucket" and "AccessControl" in r["Properties"] for r in resources)


def test_user_inference_app_gets_fallback_and_passes_cdk_nag(ran: Callable[[str], Any]) -> None:
    done, tmp_path = ran("my_inference_app.py")
    assert done.returncode == 0, done.stderr[-3000:]  # compliance.apply(app) ran: a cdk-nag finding fails here
    data = json.loads((tmp_path / "cdk.out" / "examples" / "research-serving.template.json").read_text())
    resources = list(data["Resources"].values())
    group = next(r for r in resources if r["Type"] == "AWS::AutoScaling::AutoScalingGroup")["Properties"]
    overrides = [o["InstanceType"] for o in group["MixedInstancesPolicy"]["LaunchTemplate"]["Overrides"]]
    assert overrides[0] == "inf2.xlarge" and "g5.xlarge" in overrides
    lb = next(r for r in resources if r["Type"] == "AWS::ElasticLoadBalancingV2::LoadBalancer")["Properties"]
    assert lb["Scheme"] == "internal"


def test_a_plain_vpc_app_serves_with_the_kits_profile_and_trains_passing_cdk_nag(ran: Callable[[str], Any]) -> None:
    done, tmp_path = ran("my_platform_app.py")
    assert done.returncode == 0, done.stderr[-3000:]  # compliance.apply(app) ran: cdk-nag findings and throws fail here
    data = json.loads((tmp_path / "cdk.out" / "examples" / "research-platform.template.json").read_text())
    resources = data["Resources"]
    subnets = {lid for lid, r in resources.items() if r["Type"] == "AWS::EC2::Subnet" and "nodes" in lid.lower()}
    groups = [r["Properties"] for r in resources.values() if r["Type"] == "AWS::AutoScaling::AutoScalingGroup"]
    fleet = next(
        g for g in groups if "MixedInstancesPolicy" in g and g.get("MaxSize") == "4" and len(g["VPCZoneIdentifier"]) == 2
    )
    # The fleet sits in the selected private subnets of the user's Vpc, referenced, not copied.
    assert {z["Ref"] for z in fleet["VPCZoneIdentifier"]} <= subnets
    cluster = next(g for g in groups if "LaunchTemplate" in g and g.get("MaxSize") == "4")
    assert len(cluster["VPCZoneIdentifier"]) == 1 and cluster["VPCZoneIdentifier"][0]["Ref"] in subnets
    # The client ingress is the VPC's own CIDR (a deploy-time attribute), as a rule of its own.
    (ingress,) = [
        r["Properties"]
        for r in resources.values()
        if r["Type"] == "AWS::EC2::SecurityGroupIngress" and "CidrIp" in r["Properties"]
    ]
    assert ingress["CidrIp"] == {
        "Fn::GetAtt": [next(lid for lid, r in resources.items() if r["Type"] == "AWS::EC2::VPC"), "CidrBlock"]
    }
    # The model is read from the user's bucket (an IBucket), and the fleet notifies the user's topic (an ITopic).
    assert "models/tiny/*" in json.dumps(resources) and "Artifacts" in json.dumps(
        [r for r in resources.values() if r["Type"] == "AWS::IAM::Policy"]
    )
    assert any(
        "NotificationConfigurations" in g
        and g["NotificationConfigurations"][0]["TopicARN"]
        == {"Ref": next(lid for lid, r in resources.items() if r["Type"] == "AWS::SNS::Topic")}
        for g in groups
    )


def test_the_plain_vpc_app_is_the_one_docs_constructs_shows() -> None:
    code = (ROOT / "examples" / "my_platform_app.py").read_text()
    body = code[code.index("from aws_cdk import") :]
    assert body in (ROOT / "docs" / "constructs.md").read_text()
