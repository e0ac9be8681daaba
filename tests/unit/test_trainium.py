"""Trainium2/3 in the environment file: LNC, UltraServers, Capacity Block fallbacks and warnings.

Each case edits prod.yaml (16 x trn2.48xlarge on a Capacity Block in us-east-2) and checks the exact lines a
user sees, or the resources a valid variant synthesizes.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from aws_cdk import aws_sns as sns

from neuronkit import catalog
from neuronkit.config import ConfigError, Environment, parse_environment
from neuronkit.constructs.capacity_block import CapacityBlockWatch
from neuronkit.stacks import build_environment
from tests.conftest import ROOT, new_app
from tests.templates import bare_stack, resources, template

FILE = "environments/prod.yaml"
PROD = yaml.safe_load((ROOT / FILE).read_text())


def edited(edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    data = copy.deepcopy(PROD)
    edit(data)
    return data


def problems(edit: Callable[[dict[str, Any]], None]) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_environment(edited(edit), FILE)
    return err.value.problems


def ultraservers(data: dict[str, Any]) -> None:
    """prod's cluster as 4 u-trn2x64 UltraServers (16 x trn2u.48xlarge) on an UltraServer Capacity Block."""
    c = data["training"][0]
    c["instance_type"] = c["capacity"]["instance_type"] = "trn2u.48xlarge"
    c["ultraserver"] = c["capacity"]["ultraserver_type"] = "u-trn2x64"
    del c["capacity"]["reservation_id"]
    c["capacity"]["reservation_ids"] = [f"cr-0a1b2c3d4e5f6071{i}" for i in range(4)]  # one per UltraServer


def synth(data: dict[str, Any], tmp_path: Path) -> dict[str, dict[str, Any]]:
    app = new_app(tmp_path / "cdk.out")
    build_environment(app, parse_environment(data, FILE))
    return {s.stack_name: s.template for s in app.synth().stacks}


# --------------------------------------------------------------------------------------------
# catalog
# --------------------------------------------------------------------------------------------
def test_every_trainium_fact_names_a_known_source() -> None:
    facts = catalog.trainium_facts()
    sources = set(facts["sources"])
    for name, entry in [*facts["families"].items(), *facts["ultraservers"].items()]:
        assert entry["source"] in sources, name
        assert entry.get("lnc_source", entry["source"]) in sources, name
    assert catalog.lnc_default("trn2") == 2 and catalog.lnc_allowed("trn2") == (1, 2)
    assert catalog.lnc_default("trn1") is None and catalog.lnc_allowed("trn1") == ()
    assert catalog.ultraservers_for("trn2u.48xlarge") == ["u-trn2x64"]
    # Trn3's instance types are not in our sources yet: the catalog says so instead of guessing a name.
    assert catalog.ultraserver("trn3-gen2")["instance_type"] is None and "unverified" in catalog.ultraserver("trn3-gen2")


# --------------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------------
def test_prod_runs_trn2_on_a_capacity_block_with_the_default_lnc() -> None:
    env = parse_environment(copy.deepcopy(PROD), FILE)
    cluster = env.training[0]
    assert (cluster.instance_type, cluster.capacity.type, cluster.lnc) == ("trn2.48xlarge", "capacity-block", None)


def test_lnc_must_be_a_setting_of_the_family() -> None:
    assert problems(lambda d: d["training"][0].__setitem__("lnc", 3)) == [
        f"{FILE}: training[0].lnc: 3 is not allowed; use 1 or 2"
    ]


def test_an_ultraserver_needs_its_own_server_type_and_an_ultraserver_block() -> None:
    assert problems(lambda d: d["training"][0].__setitem__("ultraserver", "u-trn2x64")) == [
        f"{FILE}: training[0].instance_type: u-trn2x64 UltraServers are built of trn2u.48xlarge; use it as instance_type",
        f"{FILE}: training[0].capacity.ultraserver_type: the cluster runs u-trn2x64 UltraServers; buy an UltraServer block "
        "and set ultraserver_type: u-trn2x64",
    ]


def test_an_ultraserver_cluster_scales_in_whole_ultraservers() -> None:
    def six(d: dict[str, Any]) -> None:
        ultraservers(d)
        d["training"][0]["max_size"] = 6
        d["training"][0]["capacity"]["instance_count"] = 8
        d["training"][0]["capacity"]["reservation_ids"] = d["training"][0]["capacity"]["reservation_ids"][:2]
        d["training"][0]["desired_size"] = 2

    assert problems(six) == [
        f"{FILE}: training[0].max_size: 6 is not whole u-trn2x64 UltraServers (4 servers each); use 4 or 8",
        f"{FILE}: training[0].desired_size: 2 is not whole u-trn2x64 UltraServers (4 servers each); use 4",
    ]


def test_an_ultraserver_block_lists_one_reservation_per_ultraserver() -> None:
    def three(d: dict[str, Any]) -> None:
        ultraservers(d)
        d["training"][0]["capacity"]["reservation_ids"].pop()

    assert problems(three) == [
        f"{FILE}: training[0].capacity.reservation_ids: 16 instances are 4 u-trn2x64 UltraServers, each its own "
        "reservation; list 4 ids, got 3"
    ]

    def both(d: dict[str, Any]) -> None:
        ultraservers(d)
        d["training"][0]["capacity"]["reservation_id"] = "cr-0a1b2c3d4e5f60718"

    assert problems(both) == [
        f"{FILE}: training[0].capacity.reservation_ids: give reservation_id (one block) or reservation_ids (one per "
        "UltraServer), not both"
    ]
    assert problems(lambda d: d["training"][0]["capacity"].__setitem__("reservation_ids", ["cr-0a1b2c3d4e5f60719"])) == [
        f"{FILE}: training[0].capacity.reservation_ids: give reservation_id (one block) or reservation_ids (one per "
        "UltraServer), not both"
    ]


def test_an_ultraserver_block_needs_the_cluster_to_say_ultraserver() -> None:
    def block_only(d: dict[str, Any]) -> None:
        ultraservers(d)
        del d["training"][0]["ultraserver"]

    assert problems(block_only) == [
        f"{FILE}: training[0].ultraserver: the Capacity Block is of u-trn2x64 UltraServers; set ultraserver: u-trn2x64"
    ]


def test_an_ultraserver_whose_server_type_is_unknown_says_how_to_learn_it() -> None:
    assert problems(lambda d: d["training"][0].__setitem__("ultraserver", "trn3-gen1"))[0] == (
        f"{FILE}: training[0].ultraserver: the catalog does not know the instance type of trn3-gen1 servers yet; run "
        "`neuronkit catalog refresh` with an account that offers it (docs/trainium.md)"
    )


def test_a_gpu_pool_fallback_needs_a_gpu_pool() -> None:
    def no_pool(d: dict[str, Any]) -> None:
        d["training"][0]["capacity"]["fallback"] = "gpu-pool"
        del d["training"][0]["gpu_pool"]

    assert problems(no_pool) == [
        f"{FILE}: training[0].capacity.fallback: gpu-pool needs the cluster's gpu_pool; add one or use on-demand or none"
    ]


# --------------------------------------------------------------------------------------------
# synthesized
# --------------------------------------------------------------------------------------------
def test_ultraserver_nodes_learn_their_size_and_lnc(tmp_path: Path) -> None:
    templates = synth(edited(ultraservers), tmp_path)
    (group,) = [
        g
        for g in resources(templates["prod-training"], "AWS::AutoScaling::AutoScalingGroup").values()
        if g["Metadata"]["neuronkit"]["pool"] == "pretrain"
    ]
    meta = group["Metadata"]["neuronkit"]
    assert (meta["instance_types"], meta["ultraserver_size"], meta["lnc"]) == (["trn2u.48xlarge"], 4, 2)
    text = json.dumps(templates["prod-training"])
    assert "ULTRASERVER_SIZE='4'" in text and "LNC='2'" in text
    # Each UltraServer is its own block: the nodes launch through a Capacity Reservation resource group of the four.
    ((rg_id, rg),) = resources(templates["prod-training"], "AWS::ResourceGroups::Group").items()
    types = [c["Type"] for c in rg["Properties"]["Configuration"]]
    assert types == ["AWS::EC2::CapacityReservationPool", "AWS::ResourceGroups::Generic"]
    assert len(rg["Properties"]["Resources"]) == 4
    (lt,) = [
        t
        for t in resources(templates["prod-training"], "AWS::EC2::LaunchTemplate").values()
        if t["Properties"]["LaunchTemplateData"]["InstanceType"] == "trn2u.48xlarge"
    ]
    data = lt["Properties"]["LaunchTemplateData"]
    target = data["CapacityReservationSpecification"]["CapacityReservationTarget"]
    assert target == {"CapacityReservationResourceGroupArn": {"Fn::GetAtt": [rg_id, "Arn"]}}
    assert data["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    # The block's EventBridge rules match every UltraServer's reservation.
    rules = resources(templates["prod-monitoring"], "AWS::Events::Rule").values()
    matched = [
        r["Properties"]["EventPattern"]["detail"]["capacity-reservation-id"]
        for r in rules
        if "EventPattern" in r["Properties"] and "capacity-reservation-id" in r["Properties"]["EventPattern"].get("detail", {})
    ]
    assert matched and all(len(ids) == 4 for ids in matched)


@pytest.mark.parametrize("fallback", ["on-demand", "gpu-pool"])
def test_something_takes_over_when_the_block_ends(fallback: str, tmp_path: Path) -> None:
    data = edited(lambda d: d["training"][0]["capacity"].__setitem__("fallback", fallback))
    env: Environment = parse_environment(copy.deepcopy(data), FILE)
    templates = synth(data, tmp_path)
    training = templates["prod-training"]
    groups = {
        g["Properties"]["AutoScalingGroupName"]: g for g in resources(training, "AWS::AutoScaling::AutoScalingGroup").values()
    }
    block = groups["prod-pretrain"]["Metadata"]["neuronkit"]
    target = "prod-pretrain-ondemand" if fallback == "on-demand" else "prod-pretrain-gpu"
    assert target in groups
    taking_over = [
        a["Properties"]
        for a in resources(training, "AWS::AutoScaling::ScheduledAction").values()
        if a["Properties"].get("StartTime") == block["scale_down_at"] and a["Properties"].get("DesiredCapacity")
    ]
    (action,) = taking_over
    size = env.training[0].max_size if fallback == "on-demand" else env.training[0].gpu_pool.max_size
    assert action["DesiredCapacity"] == size == action["MaxSize"]
    assert "Ref" in action["AutoScalingGroupName"]
    if fallback == "on-demand":
        sibling = groups[target]
        # Empty until the block ends, On-Demand (no reservation, no capacity-block market), same type.
        assert (sibling["Properties"]["MinSize"], sibling["Properties"]["DesiredCapacity"]) == ("0", "0")
        assert sibling["Metadata"]["neuronkit"]["capacity"] == "on-demand"
        assert sibling["Metadata"]["neuronkit"]["instance_types"] == ["trn2.48xlarge"]


# --------------------------------------------------------------------------------------------
# CapacityBlockWatch on a bare stack
# --------------------------------------------------------------------------------------------
def test_capacity_block_watch_tells_the_topic_before_and_at_the_end() -> None:
    stack = bare_stack()
    topic = sns.Topic(stack, "Topic")
    end = dt.datetime(2030, 3, 15, 11, 30, tzinfo=dt.UTC)
    watch = CapacityBlockWatch(
        stack,
        "Watch",
        environment="team",
        pool="pretrain",
        reservation_ids=["cr-0123456789abcdef0"],
        end=end,
        scale_down_at=end - dt.timedelta(minutes=45),
        topic=topic,
        warn_hours_before_end=[2, 24],
        fallback="gpu-pool",
    )
    data = template(stack)
    rules = {r["Properties"].get("Description"): r["Properties"] for r in resources(data, "AWS::Events::Rule").values()}
    patterns = [r["EventPattern"] for r in rules.values() if "EventPattern" in r]
    assert sorted(p["detail-type"][0] for p in patterns) == ["Capacity Block Delivered", "Capacity Block Expiration Warning"]
    assert all(
        p["source"] == ["aws.ec2"] and p["detail"] == {"capacity-reservation-id": ["cr-0123456789abcdef0"]} for p in patterns
    )
    # One-time notices 24 h and 2 h before the end: EventBridge crons with the year.
    schedules = sorted(r["ScheduleExpression"] for r in rules.values() if "ScheduleExpression" in r)
    assert schedules == ["cron(30 11 14 3 ? 2030)", "cron(30 9 15 3 ? 2030)"]
    assert sorted(watch.notices) == [2, 24]
    for rule in rules.values():
        (target,) = rule["Targets"]
        assert target["Arn"] == {"Ref": stack.get_logical_id(topic.node.default_child)}
        assert "the GPU pool takes over" in target["Input"] or "is delivered" in target["Input"]
    (alarm,) = resources(data, "AWS::CloudWatch::Alarm").values()
    props = alarm["Properties"]
    assert props["AlarmName"] == "team-pretrain-capacity-block-ending" and props["ActionsEnabled"] is True
    assert props["MetricName"] == "TriggeredRules" and props["Namespace"] == "AWS/Events"
    assert props["TreatMissingData"] == "notBreaching"
