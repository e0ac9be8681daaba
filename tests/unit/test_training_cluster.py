"""TrainingCluster on bare stacks: placement, capacity (on-demand, ODCR, Capacity Block), safety for long jobs."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest
from aws_cdk.assertions import Template

from neuronkit import catalog
from neuronkit.constructs import AmiSpec, CapacitySpec, NodePoolSpec, TrainingCluster
from neuronkit.constructs.storage import StorageAccess
from tests.templates import SUBNET_ID, bare_stack, imported_vpc, logical_id, one, resources, template

AMI = AmiSpec(root_device_name="/dev/sda1", ami_id="ami-0123456789abcdef0")
STORAGE = StorageAccess(
    datasets_bucket="team-datasets-123456789012-us-east-1",
    checkpoints_bucket="team-checkpoints-123456789012-us-east-1",
    artifacts_bucket="team-artifacts-123456789012-us-east-1",
)


NODE_POOL_FIELDS = ("instance_type", "min_size", "max_size", "desired_size", "ami", "root_volume_gib")


def cluster(**overrides: Any) -> dict[str, Any]:
    """One TrainingCluster in a bare stack, with explicit arguments; returns the template."""
    stack = bare_stack()
    pool: dict[str, Any] = {"instance_type": "trn1.32xlarge", "max_size": 16, "ami": AMI}
    pool.update({k: overrides.pop(k) for k in NODE_POOL_FIELDS if k in overrides})
    args: dict[str, Any] = {
        "environment": "team",
        "name": "pretrain",
        "nodes": NodePoolSpec(**pool),
        "vpc": imported_vpc(stack),
        "subnet_id": SUBNET_ID,
        "az_id": "use1-az6",
        "storage": STORAGE,
    }
    args.update(overrides)
    TrainingCluster(stack, "Cluster", **args)
    return template(stack)


@pytest.fixture(scope="module")
def odcr() -> dict[str, Any]:
    """16 x trn1.32xlarge on an ODCR the construct creates, S3 compile cache."""
    return cluster(desired_size=16, capacity=CapacitySpec(kind="odcr", create_count=16), compile_cache="s3")


@pytest.fixture(scope="module")
def block() -> dict[str, Any]:
    start, end = dt.datetime(2030, 3, 1, 11, 30, tzinfo=dt.UTC), dt.datetime(2030, 3, 15, 11, 30, tzinfo=dt.UTC)
    spec = CapacitySpec(
        kind="capacity-block", reservation_id="cr-0123456789abcdef0", start=start, end=end, upfront_fee_usd=90_000.0
    )
    return cluster(instance_type="trn2.48xlarge", az_id="use2-az3", max_size=8, capacity=spec, scale_in_protection=False, lnc=2)


def test_cluster_uses_a_cluster_placement_group(odcr: dict[str, Any]) -> None:
    Template.from_json(odcr).has_resource_properties("AWS::EC2::PlacementGroup", {"Strategy": "cluster"})
    group = one(odcr, "AWS::AutoScaling::AutoScalingGroup")["Properties"]
    assert group["PlacementGroup"] == {"Ref": logical_id(odcr, "AWS::EC2::PlacementGroup")}


def test_group_is_one_subnet_protected_and_sized_from_the_arguments(odcr: dict[str, Any]) -> None:
    group = one(odcr, "AWS::AutoScaling::AutoScalingGroup")
    props = group["Properties"]
    assert props["VPCZoneIdentifier"] == [SUBNET_ID]
    assert (props["MinSize"], props["MaxSize"], props["DesiredCapacity"]) == ("0", "16", "16")
    assert props["NewInstancesProtectedFromScaleIn"] is True
    # No rolling update or replacing update: a template change never replaces running nodes.
    assert "AutoScalingRollingUpdate" not in group.get("UpdatePolicy", {})
    assert "AutoScalingReplacingUpdate" not in group.get("UpdatePolicy", {})
    # The template version is pinned (the number current at deploy), not $Latest.
    assert props["LaunchTemplate"]["Version"] == {
        "Fn::GetAtt": [props["LaunchTemplate"]["LaunchTemplateId"]["Ref"], "LatestVersionNumber"]
    }


def test_group_scales_to_zero_without_a_desired_size() -> None:
    props = one(cluster(instance_type="trn1.2xlarge", max_size=1), "AWS::AutoScaling::AutoScalingGroup")["Properties"]
    assert props["MinSize"] == "0" and "DesiredCapacity" not in props


def test_odcr_is_created_in_the_placement_group_and_targeted(odcr: dict[str, Any]) -> None:
    reservation = one(odcr, "AWS::EC2::CapacityReservation")["Properties"]
    assert reservation["InstanceType"] == "trn1.32xlarge"
    assert reservation["InstanceCount"] == 16
    assert reservation["AvailabilityZoneId"] == "use1-az6"
    assert reservation["InstanceMatchCriteria"] == "targeted"
    assert "placement-group/" in str(reservation["PlacementGroupArn"])
    data = one(odcr, "AWS::EC2::LaunchTemplate")["Properties"]["LaunchTemplateData"]
    target = data["CapacityReservationSpecification"]["CapacityReservationTarget"]
    assert target["CapacityReservationId"] == {"Ref": logical_id(odcr, "AWS::EC2::CapacityReservation")}
    assert "InstanceMarketOptions" not in data


def test_existing_reservation_is_targeted_not_created() -> None:
    data = cluster(capacity=CapacitySpec(kind="odcr", reservation_id="cr-0123456789abcdef0"))
    assert not resources(data, "AWS::EC2::CapacityReservation")
    lt = one(data, "AWS::EC2::LaunchTemplate")["Properties"]["LaunchTemplateData"]
    assert lt["CapacityReservationSpecification"]["CapacityReservationTarget"]["CapacityReservationId"] == "cr-0123456789abcdef0"


def test_metadata_describes_the_pool(odcr: dict[str, Any]) -> None:
    meta = one(odcr, "AWS::AutoScaling::AutoScalingGroup")["Metadata"]["neuronkit"]
    assert meta == {
        "environment": "team",
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
        "reserved": 16,  # the created reservation's size: neuronkit cost prices it apart
    }


def test_node_role_is_limited_to_its_group_and_buckets(odcr: dict[str, Any]) -> None:
    policy = next(p for p in resources(odcr, "AWS::IAM::Policy").values() if "OwnGroup" in str(p))
    statements = {s.get("Sid"): s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    assert str(statements["OwnGroup"]["Resource"]).endswith(":autoScalingGroupName/team-pretrain']]}")
    assert statements["DiscoverPeers"]["Action"] == "ec2:DescribeInstances"
    assert "team-checkpoints-123456789012-us-east-1/*" in str(statements["Checkpoints"]["Resource"])
    assert "s3:*" not in str(policy)
    assert "neuron-compile-cache/pretrain/*" in str(statements["CompileCache"]["Resource"])


def user_data_text(data: dict[str, Any]) -> str:
    """The launch template's user data as text (Fn::Join parts included)."""
    return str(one(data, "AWS::EC2::LaunchTemplate")["Properties"]["LaunchTemplateData"]["UserData"])


def test_user_data_checks_the_node_and_carries_catalog_counts(odcr: dict[str, Any]) -> None:
    text = str(one(odcr, "AWS::EC2::LaunchTemplate")["Properties"]["LaunchTemplateData"]["UserData"])
    facts = catalog.get("trn1.32xlarge")
    assert f"EXPECTED_ACCELERATORS='{facts.neuron_devices}'" in text
    assert f"EXPECTED_EFA='{facts.efa_max_interfaces}'" in text
    assert "check_node" in text and "neuronkit-hostfile" in text


def test_capacity_block_launch_template_and_group(block: dict[str, Any]) -> None:
    data = one(block, "AWS::EC2::LaunchTemplate")["Properties"]["LaunchTemplateData"]
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    assert (
        data["CapacityReservationSpecification"]["CapacityReservationTarget"]["CapacityReservationId"] == "cr-0123456789abcdef0"
    )
    assert data["InstanceType"] == "trn2.48xlarge"
    group = one(block, "AWS::AutoScaling::AutoScalingGroup")
    props = group["Properties"]
    # Empty until the block starts; deploys do not reset what the schedule set.
    assert (props["MinSize"], props["DesiredCapacity"], props["MaxSize"]) == ("0", "0", "8")
    assert props["NewInstancesProtectedFromScaleIn"] is False
    assert group["UpdatePolicy"]["AutoScalingScheduledAction"] == {"IgnoreUnmodifiedGroupSizeProperties": True}
    assert not resources(block, "AWS::EC2::CapacityReservation")
    # The block's capacity is already placed close together: no placement group of our own to ask for more.
    assert not resources(block, "AWS::EC2::PlacementGroup")
    assert "Placement" not in data


def test_capacity_block_nodes_drain_through_a_termination_hook(block: dict[str, Any]) -> None:
    facts = catalog.software_facts()["lifecycle"]
    hooks = {
        h["LifecycleTransition"]: h
        for h in one(block, "AWS::AutoScaling::AutoScalingGroup")["Properties"]["LifecycleHookSpecificationList"]
    }
    drain = hooks["autoscaling:EC2_INSTANCE_TERMINATING"]
    # 15 minutes (the default drain_minutes) to checkpoint; unanswered, the termination goes on.
    assert (drain["LifecycleHookName"], drain["HeartbeatTimeout"], drain["DefaultResult"]) == (
        facts["drain_hook_name"],
        900,
        "CONTINUE",
    )
    text = user_data_text(block)
    assert f"DRAIN_HOOK='{facts['drain_hook_name']}'" in text and "DRAIN_SECONDS='900'" in text
    assert "LNC='2'" in text


def test_capacity_block_metadata_carries_its_dates_and_fee(block: dict[str, Any]) -> None:
    meta = one(block, "AWS::AutoScaling::AutoScalingGroup")["Metadata"]["neuronkit"]
    assert (meta["capacity"], meta["block_start"], meta["block_end"]) == (
        "capacity-block",
        "2030-03-01T11:30:00Z",
        "2030-03-15T11:30:00Z",
    )
    assert (meta["scale_down_at"], meta["block_fee"], meta["lnc"]) == ("2030-03-15T10:45:00Z", 90_000.0, 2)


def test_on_demand_clusters_have_no_drain_hook(odcr: dict[str, Any]) -> None:
    (hook,) = one(odcr, "AWS::AutoScaling::AutoScalingGroup")["Properties"]["LifecycleHookSpecificationList"]
    assert hook["LifecycleTransition"] == "autoscaling:EC2_INSTANCE_LAUNCHING"
    assert "DRAIN_HOOK=''" in user_data_text(odcr)


def test_capacity_block_schedule_scales_up_at_start_and_down_before_reclaim(block: dict[str, Any]) -> None:
    actions = sorted(
        (r["Properties"] for r in resources(block, "AWS::AutoScaling::ScheduledAction").values()), key=lambda p: p["StartTime"]
    )
    assert [(a["StartTime"], a["DesiredCapacity"]) for a in actions] == [
        ("2030-03-01T11:30:00Z", 8),
        # 30 minutes before the end EC2 reclaims the nodes (catalog), plus 15 minutes to drain.
        ("2030-03-15T10:45:00Z", 0),
    ]


@pytest.mark.parametrize("nodes", [1, 256])
def test_template_size_does_not_grow_with_node_count(nodes: int) -> None:
    data = cluster(max_size=nodes, desired_size=nodes, capacity=CapacitySpec(kind="odcr", create_count=nodes))
    assert len(resources(data, "AWS::AutoScaling::AutoScalingGroup")) == 1
    assert len(resources(data, "AWS::EC2::LaunchTemplate")) == 1
    assert len(data["Resources"]) == len(cluster(capacity=CapacitySpec(kind="odcr", create_count=16))["Resources"])


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"max_size": 2, "min_size": 3}, "min_size 3 is greater than max_size 2"),
        ({"max_size": 2, "desired_size": 3}, "desired_size 3 must lie between min_size and max_size"),
        ({"max_size": 2, "min_size": -1}, "min_size -1 is negative"),
        ({"max_size": 2, "root_volume_gib": 100}, "root_volume_gib 100 GiB is below the 512 GiB a trainium node needs"),
    ],
)
def test_a_node_pool_spec_is_checked_when_it_is_made(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        NodePoolSpec("trn1.32xlarge", **fields)
    assert NodePoolSpec("trn1.32xlarge", max_size=2).root_gib == 512  # the catalog's Trainium minimum


def test_a_node_may_remove_only_its_ready_tag_from_itself(odcr: dict[str, Any]) -> None:
    """A node that tagged itself ready and then failed removes the tag (training-node.sh fail_node) so that its peers'
    hostfiles drop it: ec2:DeleteTags on instances of its own group, for that key only. EC2 API reference, DeleteTags:
    "If you omit this parameter, we delete all user-defined tags for the specified resources", so the request must
    name its keys (aws:TagKeys not null)."""
    from pathlib import Path

    from neuronkit.constructs.groups import READY_TAG

    statements = [s for p in resources(odcr, "AWS::IAM::Policy").values() for s in p["Properties"]["PolicyDocument"]["Statement"]]
    (untag,) = [s for s in statements if "ec2:DeleteTags" in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])]
    assert untag["Action"] == "ec2:DeleteTags"
    (tag,) = [s for s in statements if s["Action"] == "ec2:CreateTags"]
    assert untag["Resource"] == tag["Resource"]
    assert untag["Condition"] == {
        "StringEquals": tag["Condition"]["StringEquals"],
        "ForAllValues:StringEquals": {"aws:TagKeys": [READY_TAG]},
        "Null": {"aws:TagKeys": "false"},
    }
    assert tag["Condition"]["StringEquals"] == {"aws:ResourceTag/aws:autoscaling:groupName": "team-pretrain"}
    # ... and that key is the one the boot script removes (and sets).
    script = (Path(__file__).parents[2] / "neuronkit" / "userdata" / "training-node.sh").read_text()
    assert f'delete-tags --region "${{REGION}}" --resources "${{INSTANCE_ID}}" --tags Key={READY_TAG}' in script
    assert f"Key={READY_TAG},Value=true" in script
