"""Launch rules of node instances that moto does not enforce, on every synthesized template of every environment file
(the session's project: environments/ and tests/fixtures/user_environments/) and of every example under
examples/environments/ (synthesized here once). docs/aws-contracts.md lists each rule with its document."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from neuronkit.config import load_environment
from tests.conftest import ROOT, Synth, pinned_app

EXAMPLE_FILES = sorted((ROOT / "examples" / "environments").glob("*.yaml"))


@pytest.fixture(scope="module")
def example_templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Stack name -> template of every example environment under examples/environments/."""
    from neuronkit.stacks import build_environment

    out: dict[str, dict[str, Any]] = {}
    for path in EXAMPLE_FILES:
        env = load_environment(path)
        app, _ = pinned_app(lambda app, env=env: build_environment(app, env), tmp_path_factory.mktemp(path.stem))
        out.update({s.stack_name: s.template for s in app.synth().stacks})
    return out


def _all_templates(synth: Synth, examples: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    assert examples, "examples/environments/ holds example files"
    return {**synth.templates, **examples}


def _of_type(templates: dict[str, dict[str, Any]], type_: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for stack, template in templates.items():
        for lid, r in template["Resources"].items():
            if r["Type"] == type_:
                yield stack, lid, r


def test_no_launch_template_exposes_instance_tags_in_imds(synth: Synth, example_templates: dict[str, dict[str, Any]]) -> None:
    """Amazon EKS User Guide, "Maintain nodes yourself with self-managed nodes"
    (https://docs.aws.amazon.com/eks/latest/userguide/worker.html): "Tags in Amazon EC2 Instance Metadata Service
    (IMDS) are not compatible with EKS nodes" ... enabling them "can cause instance launch failures". EKS and Auto
    Scaling put tags with "/" in their keys on node instances (k8s.io/cluster-autoscaler/..., aws:autoscaling:...),
    which EC2 refuses to expose in IMDS (aws-cli#8825, eksctl#8383). The kit reads no tag from IMDS: every launch
    template of every file, on both paths, keeps InstanceMetadataTags off."""
    templates = _all_templates(synth, example_templates)
    found = list(_of_type(templates, "AWS::EC2::LaunchTemplate"))
    assert found, "the project and the examples synthesize launch templates"
    eks = [s for s, _, _ in found if any(True for _ in _of_type({s: templates[s]}, "AWS::EKS::Nodegroup"))]
    assert eks and len(eks) < len(found), "both paths (Auto Scaling and EKS node groups) are checked"
    for stack, lid, lt in found:
        options = lt["Properties"]["LaunchTemplateData"].get("MetadataOptions") or {}
        assert options.get("InstanceMetadataTags", "disabled") == "disabled", (stack, lid)


def test_a_capacity_block_node_group_names_its_type_in_the_launch_template_only(
    synth: Synth, example_templates: dict[str, dict[str, Any]]
) -> None:
    """Amazon EKS User Guide, "Create a managed node group with Capacity Blocks for ML"
    (https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html): the launch template's
    LaunchTemplateData must include InstanceMarketOptions with MarketType "capacity-block", a
    CapacityReservationTarget with the block's CapacityReservationId, and "InstanceType set to an instance type that
    supports Capacity Blocks"; "If ... any of the other above required launch template values are missing, then the
    create request will be rejected." A node group whose launch template names an instance type may not list
    instanceTypes itself (Amazon EKS User Guide, "Customize managed nodes with launch templates")."""
    templates = _all_templates(synth, example_templates)
    blocks = 0
    for stack, lid, group in _of_type(templates, "AWS::EKS::Nodegroup"):
        props = group["Properties"]
        if props.get("CapacityType") != "CAPACITY_BLOCK":
            continue
        blocks += 1
        lt_id = props["LaunchTemplate"]["Id"]["Ref"]
        data = templates[stack]["Resources"][lt_id]["Properties"]["LaunchTemplateData"]
        assert data["InstanceMarketOptions"]["MarketType"] == "capacity-block", (stack, lid)
        assert "CapacityReservationId" in json.dumps(data["CapacityReservationSpecification"]), (stack, lid)
        assert isinstance(data.get("InstanceType"), str) and data["InstanceType"], (stack, lid)
        assert not props.get("InstanceTypes"), (stack, lid)
    assert blocks >= 2, "the EKS example and the user-like EKS fixture each run a Capacity Block node group"


def test_the_eks_example_is_among_the_checked_files(example_templates: dict[str, dict[str, Any]]) -> None:
    assert any(Path(p).stem == "eks" for p in EXAMPLE_FILES)
    assert any(r["Type"] == "AWS::EKS::Nodegroup" for t in example_templates.values() for r in t["Resources"].values())
