"""TrainingCluster: placement, capacity (on-demand, ODCR, Capacity Block), safety for long jobs."""

from __future__ import annotations

import re
from typing import Any

import pytest
from aws_cdk.assertions import Match, Template

from neuronkit import catalog
from neuronkit.config import load_environment
from neuronkit.stacks import build_environment
from tests.conftest import ROOT, Synth, new_app


def _one(synth_or_template: dict[str, Any], type_: str, pool: str | None = None) -> dict[str, Any]:
    """The one resource of ``type_``; with ``pool``, of that pool's cluster only (a stack may hold several)."""
    found = [
        r
        for k, r in synth_or_template["Resources"].items()
        if r["Type"] == type_ and (pool is None or re.match(rf"Cluster{pool.replace('-', '')}[A-Z]", k))
    ]
    assert len(found) == 1, f"{len(found)} {type_}"
    return found[0]


@pytest.fixture(scope="module")
def block() -> dict[str, Any]:
    """The Capacity Block fixture environment, synthesized once for this module."""
    app = new_app()
    stacks = build_environment(app, load_environment(ROOT / "tests/fixtures/capacity-block.yaml"))
    assert stacks.training is not None
    return Template.from_stack(stacks.training).to_json()


def test_prod_cluster_uses_a_cluster_placement_group(synth: Synth) -> None:
    t = synth.template("prod-training")
    Template.from_json(t).has_resource_properties("AWS::EC2::PlacementGroup", {"Strategy": "cluster"})
    group = _one(t, "AWS::AutoScaling::AutoScalingGroup", "pretrain")["Properties"]
    assert group["PlacementGroup"] == {
        "Ref": next(k for k, v in t["Resources"].items() if v["Type"] == "AWS::EC2::PlacementGroup" and "pretraingpu" not in k)
    }


def test_prod_group_is_one_subnet_protected_and_sized_from_the_file(synth: Synth) -> None:
    group = _one(synth.template("prod-training"), "AWS::AutoScaling::AutoScalingGroup", "pretrain")
    props = group["Properties"]
    assert len(props["VPCZoneIdentifier"]) == 1
    assert (props["MinSize"], props["MaxSize"], props["DesiredCapacity"]) == ("0", "16", "16")
    assert props["NewInstancesProtectedFromScaleIn"] is True
    # No rolling update or replacing update: a template change never replaces running nodes.
    assert "UpdatePolicy" not in group
    # The template version is pinned (the number current at deploy), not $Latest.
    assert props["LaunchTemplate"]["Version"] == {
        "Fn::GetAtt": [props["LaunchTemplate"]["LaunchTemplateId"]["Ref"], "LatestVersionNumber"]
    }


def test_dev_group_scales_to_zero(synth: Synth) -> None:
    props = _one(synth.template("dev-training"), "AWS::AutoScaling::AutoScalingGroup")["Properties"]
    assert props["MinSize"] == "0" and "DesiredCapacity" not in props


def test_prod_odcr_is_created_in_the_placement_group_and_targeted(synth: Synth) -> None:
    t = synth.template("prod-training")
    odcr = _one(t, "AWS::EC2::CapacityReservation")["Properties"]
    assert odcr["InstanceType"] == "trn1.32xlarge"
    assert odcr["InstanceCount"] == 16
    assert odcr["AvailabilityZoneId"] == "use1-az6"
    assert odcr["InstanceMatchCriteria"] == "targeted"
    assert "placement-group/" in str(odcr["PlacementGroupArn"])
    data = _one(t, "AWS::EC2::LaunchTemplate", "pretrain")["Properties"]["LaunchTemplateData"]
    odcr_id = next(k for k, v in t["Resources"].items() if v["Type"] == "AWS::EC2::CapacityReservation")
    assert data["CapacityReservationSpecification"]["CapacityReservationTarget"]["CapacityReservationId"] == {"Ref": odcr_id}
    assert "InstanceMarketOptions" not in data


def test_metadata_describes_the_pool(synth: Synth) -> None:
    meta = _one(synth.template("prod-training"), "AWS::AutoScaling::AutoScalingGroup", "pretrain")["Metadata"]["neuronkit"]
    assert meta == {
        "environment": "prod",
        "region": "us-east-1",
        "pool": "pretrain",
        "role": "training",
        "instance_types": ["trn1.32xlarge"],
        "neuron_types": ["trn1.32xlarge"],
        "fallback_types": [],
        "min_size": 0,
        "max_size": 16,
        "desired_size": 16,
        "capacity": "odcr",
        "az_id": "use1-az6",
    }


def test_node_role_is_limited_to_its_group_and_buckets(synth: Synth) -> None:
    t = synth.template("prod-training")
    policy = _one(t, "AWS::IAM::Policy", "pretrain")
    statements = {s.get("Sid"): s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    assert statements["OwnGroup"]["Resource"].endswith(":autoScalingGroupName/prod-pretrain")
    assert statements["DiscoverPeers"]["Action"] == "ec2:DescribeInstances"
    resources = str(statements["Checkpoints"]["Resource"])
    assert "prod-checkpoints-222222222222-us-east-1/*" in resources
    assert "s3:*" not in str(policy)
    cache = str(statements["CompileCache"]["Resource"])
    assert "neuron-compile-cache/pretrain/*" in cache


def test_user_data_checks_the_node_and_carries_catalog_counts(synth: Synth) -> None:
    data = _one(synth.template("prod-training"), "AWS::EC2::LaunchTemplate", "pretrain")["Properties"]["LaunchTemplateData"]
    text = str(data["UserData"])
    facts = catalog.get("trn1.32xlarge")
    assert f"EXPECTED_ACCELERATORS='{facts.neuron_devices}'" in text
    assert f"EXPECTED_EFA='{facts.efa_max_interfaces}'" in text
    assert "check_node" in text and "mount_lustre" in text and "neuronkit-hostfile" in text


def test_capacity_block_launch_template_and_group(block: dict[str, Any]) -> None:
    data = _one(block, "AWS::EC2::LaunchTemplate")["Properties"]["LaunchTemplateData"]
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert (
        data["CapacityReservationSpecification"]["CapacityReservationTarget"]["CapacityReservationId"] == "cr-0123456789abcdef0"
    )
    assert data["InstanceType"] == "trn2.48xlarge"
    group = _one(block, "AWS::AutoScaling::AutoScalingGroup")
    props = group["Properties"]
    # Empty until the block starts; deploys do not reset what the schedule set.
    assert (props["MinSize"], props["DesiredCapacity"], props["MaxSize"]) == ("0", "0", "8")
    assert props["NewInstancesProtectedFromScaleIn"] is False
    assert group["UpdatePolicy"] == {"AutoScalingScheduledAction": {"IgnoreUnmodifiedGroupSizeProperties": True}}
    assert not [r for r in block["Resources"].values() if r["Type"] == "AWS::EC2::CapacityReservation"]


def test_capacity_block_schedule_scales_up_at_start_and_down_before_reclaim(block: dict[str, Any]) -> None:
    actions = sorted(
        (r["Properties"] for r in block["Resources"].values() if r["Type"] == "AWS::AutoScaling::ScheduledAction"),
        key=lambda p: p["StartTime"],
    )
    assert [(a["StartTime"], a["DesiredCapacity"]) for a in actions] == [
        ("2030-03-01T11:30:00Z", 8),
        # 30 minutes before the end EC2 reclaims the nodes (catalog), plus 15 minutes to drain.
        ("2030-03-15T10:45:00Z", 0),
    ]
    Template.from_json(block).resource_count_is("AWS::AutoScaling::ScheduledAction", 2)


def test_template_size_does_not_grow_with_node_count(synth: Synth) -> None:
    dev = Template.from_json(synth.template("prod-training"))
    # One group and one launch template per pool (the cluster and its GPU pool), whatever the node count.
    dev.resource_count_is("AWS::AutoScaling::AutoScalingGroup", 2)
    dev.resource_count_is("AWS::EC2::LaunchTemplate", 2)
    dev.has_resource_properties(
        "AWS::EC2::LaunchTemplate", {"LaunchTemplateData": Match.object_like({"InstanceType": "trn1.32xlarge"})}
    )
