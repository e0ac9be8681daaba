"""InferenceFleet's compile groups: every new compiled-artifact key is compiled before the rolling update.

Per Neuron type with a key, a one-node Auto Scaling group whose identity is the key; CloudFormation waits
for its node's signal (CreationPolicy) before it changes the fleet's group. Tests on a bare Stack.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from aws_cdk import Duration, Stack

from neuronkit.catalog import releases, serving
from neuronkit.constructs import AmiSpec, FleetNodesSpec, InferenceFleet, ServeSpec
from neuronkit.constructs.serving_specs import ServingSpec
from neuronkit.reports.pools import COMPILE_METADATA_KEY
from tests.templates import SUBNET_ID, bare_stack, imported_vpc, resources, template

ASG = "AWS::AutoScaling::AutoScalingGroup"
MODEL = serving.ModelSpec(id="meta-llama/Llama-3.1-8B-Instruct", s3_prefix="models/llama-8b/", parameters_billion=8.0)
RELEASE = releases.release("2.28.1")
LOCK_TIMEOUT = serving.facts()["compiled_cache"]["lock_timeout_seconds"]
PUBLISH = serving.facts()["compiled_cache"]["publish_seconds"]


def _fleet(serving_spec: ServingSpec | None = None, *, serve: ServeSpec | None = None) -> tuple[InferenceFleet, dict[str, Any]]:
    stack = bare_stack()
    fleet = InferenceFleet(
        stack, "Chat", environment="team", name="chat", vpc=imported_vpc(stack), nodes=FleetNodesSpec(
            neuron_types=["inf2.48xlarge", "inf2.24xlarge"], fallback_types=["g6e.12xlarge"], max_size=4,
            neuron_ami=AmiSpec(root_device_name="/dev/sda1", ami_id="ami-0123456789abcdef0"),
            gpu_ami=AmiSpec(root_device_name="/dev/sda1", ami_id="ami-0123456789abcdef1"),
        ),
        subnet_ids={"use1-az6": SUBNET_ID, "use1-az4": "subnet-0bbbbbbbbbbbbbbb2"},
        artifacts_bucket="team-artifacts-123456789012-us-east-1",
        serving=serving_spec if serve is None else None, serve=serve,
        model_s3_prefix="models/own/" if serve else None,
        notifications_topic_arn="arn:aws:sns:us-east-1:123456789012:events",
    )  # fmt: skip
    return fleet, template(stack)


@pytest.fixture(scope="module")
def built() -> tuple[InferenceFleet, dict[str, Any]]:
    return _fleet(ServingSpec(model=MODEL, neuron_release=RELEASE))


def _compile_groups(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {k: g for k, g in resources(data, ASG).items() if COMPILE_METADATA_KEY in (g.get("Metadata") or {})}


def _fleet_group(data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    (pair,) = [(k, g) for k, g in resources(data, ASG).items() if g["Properties"]["AutoScalingGroupName"] == "team-chat"]
    return pair


def test_one_compile_group_per_neuron_type_named_after_its_key(built: tuple[InferenceFleet, dict[str, Any]]) -> None:
    fleet, data = built
    groups = _compile_groups(data)
    by_type = {g["Metadata"][COMPILE_METADATA_KEY]["instance_type"]: g for g in groups.values()}
    assert sorted(by_type) == ["inf2.24xlarge", "inf2.48xlarge"]  # none for the GPU fallback: it compiles nothing
    for t, g in by_type.items():
        key = fleet.profiles[t].cache_key
        assert key and g["Metadata"][COMPILE_METADATA_KEY] == {
            "pool": "chat", "instance_type": t, "cache_key": key, "group": "team-chat"
        }  # fmt: skip
        digest = hashlib.sha256(key.encode()).hexdigest()[:8]
        assert g["Properties"]["AutoScalingGroupName"] == f"team-chat-compile-{t.replace('.', '-')}-{digest}"
        assert {"Key": "neuronkit:compile", "Value": key, "PropagateAtLaunch": False} in g["Properties"]["Tags"]


def test_the_compile_group_starts_one_node_and_waits_for_its_signal(built: tuple[InferenceFleet, dict[str, Any]]) -> None:
    fleet, data = built
    for g in _compile_groups(data).values():
        props = g["Properties"]
        # Desired 1 above a minimum of 0: the node can leave with its desired capacity (decrement to 0).
        assert (props["MinSize"], props["MaxSize"], props["DesiredCapacity"]) == ("0", "1", "1")
        assert props["VPCZoneIdentifier"] == [SUBNET_ID, "subnet-0bbbbbbbbbbbbbbb2"]
        assert props["NotificationConfigurations"][0]["TopicARN"] == "arn:aws:sns:us-east-1:123456789012:events"
        t = g["Metadata"][COMPILE_METADATA_KEY]["instance_type"]
        # The boot (pull, download, load), the longest compile the cache lock allows, and the upload.
        seconds = fleet.profiles[t].boot_seconds + LOCK_TIMEOUT + PUBLISH
        assert g["CreationPolicy"] == {"ResourceSignal": {"Count": 1, "Timeout": Duration.seconds(seconds).to_iso_string()}}
        assert "LifecycleHookSpecificationList" not in props and "TargetGroupARNs" not in props


def test_the_fleet_changes_only_after_every_compile_group(built: tuple[InferenceFleet, dict[str, Any]]) -> None:
    _, data = built
    _, group = _fleet_group(data)
    assert sorted(group["DependsOn"]) == sorted(_compile_groups(data))


def test_the_compile_node_runs_its_types_profile_as_a_compile_node(built: tuple[InferenceFleet, dict[str, Any]]) -> None:
    fleet, data = built
    templates = resources(data, "AWS::EC2::LaunchTemplate")
    for logical_id, g in _compile_groups(data).items():
        t = g["Metadata"][COMPILE_METADATA_KEY]["instance_type"]
        lt = templates[g["Properties"]["LaunchTemplate"]["LaunchTemplateId"]["Ref"]]["Properties"]["LaunchTemplateData"]
        text = json.dumps(lt["UserData"])
        assert "NODE_ROLE='compile'" in text and "LIFECYCLE_HOOK=''" in text
        assert f"SIGNAL_RESOURCE='{logical_id}'" in text
        assert f"ASG_NAME='{g['Properties']['AutoScalingGroupName']}'" in text
        assert f"CACHE_PREFIX='{fleet.profiles[t].cache_key}'" in text
        assert f"TENSOR_PARALLEL='{fleet.profiles[t].tensor_parallel}'" in text
        # The type, AMI and root volume of the type's serving template: the compile needs what serving needs.
        own = templates[Stack.of(fleet).get_logical_id(fleet.launch_templates[t].launch_template)]["Properties"]
        assert {k: lt[k] for k in ("InstanceType", "ImageId", "BlockDeviceMappings")} == {
            k: own["LaunchTemplateData"][k] for k in ("InstanceType", "ImageId", "BlockDeviceMappings")
        }
        assert "NODE_ROLE='serve'" in json.dumps(own["LaunchTemplateData"]["UserData"])
        # Its instances carry the key they compile (and the pool's tags, like every node).
        instance_tags = {
            tag["Key"]: tag["Value"]
            for spec in lt["TagSpecifications"]
            if spec["ResourceType"] == "instance"
            for tag in spec["Tags"]
        }
        assert instance_tags["neuronkit:compile"] == fleet.profiles[t].cache_key and instance_tags["neuronkit:pool"] == "chat"


def test_nodes_may_leave_only_the_compile_groups(built: tuple[InferenceFleet, dict[str, Any]]) -> None:
    _, data = built
    (policy,) = [p for p in resources(data, "AWS::IAM::Policy").values() if "NodeRole" in json.dumps(p["Properties"]["Roles"])]
    (leave,) = [s for s in policy["Properties"]["PolicyDocument"]["Statement"] if s["Sid"] == "LeaveCompileGroup"]
    assert leave["Action"] == "autoscaling:TerminateInstanceInAutoScalingGroup"
    names = sorted(g["Properties"]["AutoScalingGroupName"] for g in _compile_groups(data).values())
    assert sorted(json.dumps(r).split("autoScalingGroupName/")[1].split('"')[0] for r in leave["Resource"]) == names


def test_a_new_key_is_a_new_group_and_an_unchanged_key_keeps_its_group() -> None:
    same = set(_compile_groups(_fleet(ServingSpec(model=MODEL, neuron_release=RELEASE))[1]))
    again = set(_compile_groups(_fleet(ServingSpec(model=MODEL, neuron_release=RELEASE))[1]))
    assert same == again and len(same) == 2
    longer = ServingSpec(
        model=MODEL, neuron_release=RELEASE, profiles={"inf2.24xlarge": serving.ProfileOverride(max_model_len=2048)}
    )
    changed = set(_compile_groups(_fleet(longer)[1]))
    # Only inf2.24xlarge's key changed: its group is new, inf2.48xlarge's is the same resource.
    assert len(changed & same) == 1 and len(changed - same) == 1
    (new,) = changed - same
    assert "inf2-24xlarge" in new.lower() or "inf224xlarge" in new.lower()


def test_no_compile_group_without_a_key_or_when_turned_off() -> None:
    _, off = _fleet(ServingSpec(model=MODEL, neuron_release=RELEASE, precompile=False))
    assert not _compile_groups(off) and "DependsOn" not in _fleet_group(off)[1]
    _, own = _fleet(serve=ServeSpec(neuron="serve --port $PORT", gpu="serve --port $PORT"))
    assert not _compile_groups(own)
    assert "LeaveCompileGroup" not in json.dumps(resources(own, "AWS::IAM::Policy"))
