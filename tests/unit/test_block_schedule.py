"""Capacity Block schedules against the clock (neuronkit.clock), on both platforms: Auto Scaling refuses a scheduled
action in the past, so a running block gets no start action and starts at its size, and an ended block is refused."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
import yaml
from aws_cdk import App, Environment, Stack

from neuronkit import clock
from neuronkit.config import block_problems, load_environment
from neuronkit.constructs import AmiSpec, CapacitySpec, NodePoolSpec, TrainingCluster
from neuronkit.constructs.eks import ClusterSpec, NeuronEksCluster, NeuronNodeGroup, NodeGroupSpec
from tests.conftest import ROOT
from tests.templates import ACCOUNT, REGION, SUBNET_ID, VPC_ID, group_name, imported_vpc, one, resources, template

START, END = dt.datetime(2030, 3, 1, 11, 30, tzinfo=dt.UTC), dt.datetime(2030, 3, 15, 11, 30, tzinfo=dt.UTC)
BLOCK = CapacitySpec(kind="capacity-block", reservation_id="cr-0a1b2c3d4e5f60718", start=START, end=END)
BEFORE, DURING, AFTER = "2030-02-01T00:00:00Z", "2030-03-02T08:00:00Z", "2030-03-15T11:00:00Z"
# 15 drain minutes + EC2's 30 minutes before the end: the scale-down is at 10:45; one minute before and after it.
JUST_BEFORE_STOP, JUST_AT_STOP = "2030-03-15T10:44:00Z", "2030-03-15T10:45:00Z"


def _stack(now: str) -> Stack:
    app = App(context={clock.CONTEXT_KEY: now}, builtin_cloud_formation_validation=False)
    return Stack(app, "Test", env=Environment(account=ACCOUNT, region=REGION))


def _eks(now: str) -> dict[str, Any]:
    stack = _stack(now)
    from aws_cdk import aws_ec2 as ec2

    vpc = ec2.Vpc.from_vpc_attributes(
        stack,
        "Vpc",
        vpc_id=VPC_ID,
        availability_zones=["us-east-1a", "us-east-1b"],
        private_subnet_ids=["subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2"],
    )
    cluster = NeuronEksCluster(
        stack,
        "Eks",
        spec=ClusterSpec(name="team", admins=["arn:aws:iam::123456789012:role/platform-admin"]),
        vpc=vpc,
        subnets=vpc.private_subnets,
    )
    NeuronNodeGroup(
        stack, "Train", environment="team", cluster=cluster, subnets=vpc.private_subnets[:1], script="#!/bin/bash\necho check\n",
        spec=NodeGroupSpec(name="pretrain", instance_types=["trn2.48xlarge"], max_size=16, capacity=BLOCK),
    )  # fmt: skip
    return template(stack)


def _asg(now: str) -> dict[str, Any]:
    stack = _stack(now)
    TrainingCluster(
        stack, "Cluster", environment="team", name="pretrain", vpc=imported_vpc(stack), subnet_id=SUBNET_ID, az_id="use1-az6",
        nodes=NodePoolSpec(instance_type="trn2.48xlarge", max_size=8, ami=AmiSpec(root_device_name="/dev/sda1", ami_id="ami-0123456789abcdef0")),
        capacity=BLOCK, scale_in_protection=False,
    )  # fmt: skip
    return template(stack)


def _actions(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Scheduled actions by their step (BlockStart / BlockEnd, from the logical id)."""
    out = {}
    for logical, action in resources(data, "AWS::AutoScaling::ScheduledAction").items():
        step = "BlockStart" if "BlockStart" in logical else "BlockEnd" if "BlockEnd" in logical else logical
        out[step] = action["Properties"]
    return out


def _node_group_sizes(data: dict[str, Any]) -> tuple[int, int, int]:
    groups = [g for g in resources(data, "AWS::EKS::Nodegroup").values() if group_name(g) == "team-pretrain"]
    assert len(groups) == 1
    sizes = groups[0]["Properties"]["ScalingConfig"]
    return sizes["MinSize"], sizes["DesiredSize"], sizes["MaxSize"]


@pytest.mark.parametrize("build", [_eks, _asg], ids=["eks", "asg"])
def test_an_upcoming_block_scales_up_at_its_start_and_down_before_its_end(build: Any) -> None:
    actions = _actions(build(BEFORE))
    assert actions["BlockStart"]["StartTime"] == "2030-03-01T11:30:00Z"
    assert actions["BlockEnd"]["StartTime"] == "2030-03-15T10:45:00Z"
    assert actions["BlockEnd"]["DesiredCapacity"] == 0


def test_an_upcoming_block_keeps_the_eks_node_group_empty() -> None:
    assert _node_group_sizes(_eks(BEFORE)) == (0, 0, 16)


@pytest.mark.parametrize("now", [DURING, JUST_BEFORE_STOP])
def test_a_running_block_on_eks_gets_no_start_action_and_starts_at_its_size(now: str) -> None:
    data = _eks(now)
    actions = _actions(data)
    assert set(actions) == {"BlockEnd"}, "a start action in the past fails the deploy"
    assert actions["BlockEnd"]["StartTime"] == "2030-03-15T10:45:00Z"
    assert _node_group_sizes(data) == (0, 16, 16)


def test_a_running_block_on_auto_scaling_gets_no_start_action_and_starts_at_its_size() -> None:
    data = _asg(DURING)
    actions = _actions(data)
    assert set(actions) == {"BlockEnd"}
    group = one(data, "AWS::AutoScaling::AutoScalingGroup")["Properties"]
    assert (group["MinSize"], group["DesiredCapacity"], group["MaxSize"]) == ("0", "8", "8")


@pytest.mark.parametrize("build", [_eks, _asg], ids=["eks", "asg"])
@pytest.mark.parametrize("now", [JUST_AT_STOP, AFTER])
def test_a_block_past_its_scale_down_is_refused_at_synth(build: Any, now: str) -> None:
    with pytest.raises(ValueError, match="cr-0a1b2c3d4e5f60718 is over.*remove the block or replace it"):
        build(now)


def test_the_system_clock_is_used_without_the_context_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(clock, "utc_now", lambda: clock.parse(DURING))
    assert clock.now(Stack(App(), "Bare")) == dt.datetime(2030, 3, 2, 8, tzinfo=dt.UTC)
    monkeypatch.setattr(clock, "utc_now", lambda: clock.parse(BEFORE))
    assert clock.now(Stack(App(), "Bare")) == dt.datetime(2030, 2, 1, tzinfo=dt.UTC)


def test_a_malformed_context_time_says_the_key_and_the_format() -> None:
    with pytest.raises(ValueError, match="context neuronkit:now: 'soon' is not an ISO 8601 time"):
        clock.now(Stack(App(context={clock.CONTEXT_KEY: "soon"}), "Bare"))


def _prod_with_block_ending(tmp_path: Path, end: str) -> Path:
    data = yaml.safe_load((ROOT / "environments" / "prod.yaml").read_text())
    cap = data["training"][0]["capacity"]
    assert cap["type"] == "capacity-block"
    cap["start"], cap["end"] = "2030-03-01T11:30:00Z", end
    path = tmp_path / "environments" / "prod.yaml"
    path.parent.mkdir()
    path.write_text(yaml.safe_dump(data))
    return path


def test_validate_refuses_a_block_past_its_scale_down_with_one_line(tmp_path: Path) -> None:
    env = load_environment(_prod_with_block_ending(tmp_path, "2030-03-15T11:30:00Z"))
    assert block_problems(list(env.training), clock.parse(BEFORE)) == []
    assert block_problems(list(env.training), clock.parse(DURING)) == [], "a running block is fine: no start action"
    (problem,) = block_problems(list(env.training), clock.parse(JUST_AT_STOP))
    key, fix = problem
    assert key == "training[0].capacity.end"
    assert "cr-0a1b2c3d4e5f60718 is over" in fix and fix.endswith("remove the block or replace it with the new one you bought")


def test_the_validate_command_prints_the_file_key_and_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from neuronkit.cli import main

    path = _prod_with_block_ending(tmp_path, "2030-03-15T11:30:00Z")
    monkeypatch.setattr(clock, "utc_now", lambda: clock.parse(AFTER))
    assert main(["validate", "--file", str(path)]) == 1
    lines = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("warning:")]
    assert lines == [line for line in lines if line.startswith(f"{path}: training[0].capacity.end: the Capacity Block")]
    assert len(lines) == 1
    monkeypatch.setattr(clock, "utc_now", lambda: clock.parse(DURING))
    assert main(["validate", "--file", str(path)]) == 0


def test_validate_takes_the_time_to_check_at(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from neuronkit.cli import main

    path = _prod_with_block_ending(tmp_path, "2030-03-15T11:30:00Z")
    assert main(["validate", "--file", str(path), "--now", DURING]) == 0
    assert main(["validate", "--file", str(path), "--now", AFTER]) == 1
    assert f"{path}: training[0].capacity.end: the Capacity Block" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["validate", "--file", str(path), "--now", "tomorrow"])
    assert "'tomorrow' is not an ISO 8601 time" in capsys.readouterr().err
