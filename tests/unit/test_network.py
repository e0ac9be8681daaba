"""AcceleratorNetwork and EfaSecurityGroup: AZ-ID placement, private nodes, endpoints, EFA rules."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from aws_cdk import Environment as CdkEnv
from aws_cdk import Stack
from aws_cdk.assertions import Annotations, Match, Template

from neuronkit.constructs import AcceleratorNetwork, plan_subnets
from neuronkit.constructs.network import private_prefix_for, retention_days
from tests.conftest import ROOT, Synth, new_app

NETWORK_STACKS = ("dev-network", "prod-network")
AZ_IDS = {"dev-network": ("use1-az6", "use1-az4"), "prod-network": ("use2-az1", "use2-az2")}  # the files' network.az_ids


@pytest.mark.parametrize("stack", NETWORK_STACKS)
def test_subnets_are_placed_by_az_id_never_by_name(synth: Synth, stack: str) -> None:
    subnets = synth.resources(stack, "AWS::EC2::Subnet").values()
    assert subnets
    for subnet in subnets:
        props = subnet["Properties"]
        assert props["AvailabilityZoneId"] in AZ_IDS[stack]
        assert "AvailabilityZone" not in props
        assert props["MapPublicIpOnLaunch"] is False


def test_private_subnet_per_az_id_sized_for_the_cluster(synth: Synth) -> None:
    private = {
        k: v["Properties"]
        for k, v in synth.resources("prod-network", "AWS::EC2::Subnet").items()
        if k.startswith("NetworkPrivate")
    }
    assert sorted(p["AvailabilityZoneId"] for p in private.values()) == ["use2-az1", "use2-az2"]
    # The largest private subnets the /16 holds beside the two public /26 (the block's last quarter keeps them).
    assert {p["CidrBlock"] for p in private.values()} == {"10.20.0.0/18", "10.20.64.0/18"}


def _network_templates(env: Any) -> dict[str, Any]:
    from neuronkit.stacks import build_environment

    app = new_app()
    stacks = build_environment(app, env)
    return {k: v for k, v in app.synth().get_stack_by_name(stacks.network.stack_name).template["Resources"].items()}


def test_raising_a_pools_max_size_moves_no_subnet() -> None:
    """A new CidrBlock replaces the subnet and everything inside (the Lustre file system, the groups): the subnet
    plan depends on the block and the AZ IDs only, never on the pools (neuronkit 0.1 sized it from them)."""
    from neuronkit.config import load_environment

    prod = load_environment(ROOT / "environments" / "prod.yaml")
    fleet = prod.inference[0]
    bigger = prod.model_copy(
        update={"inference": [fleet.model_copy(update={"max_size": fleet.max_size * 8}), *prod.inference[1:]]}
    )
    assert _network_templates(prod) == _network_templates(bigger)


def test_an_explicit_subnet_prefix_is_kept_and_checked(tmp_path: Path) -> None:
    import yaml

    from neuronkit.config import ConfigError, load_environment

    data = yaml.safe_load((ROOT / "environments" / "prod.yaml").read_text())
    data["network"]["private_subnet_prefix"] = 24  # what neuronkit 0.1 deployed for prod
    path = tmp_path / "prod.yaml"
    path.write_text(yaml.safe_dump(data))
    subnets = [
        r["Properties"]["CidrBlock"]
        for k, r in _network_templates(load_environment(path)).items()
        if k.startswith("NetworkPrivate") and r["Type"] == "AWS::EC2::Subnet"
    ]
    assert sorted(subnets) == ["10.20.0.0/24", "10.20.1.0/24"]
    data["inference"][0]["max_size"] = 96  # 96 more nodes in each of the fleet's AZ IDs: a /24 no longer holds them
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as err:
        load_environment(path)
    (line,) = [p for p in err.value.problems if "private_subnet_prefix" in p]
    assert line.startswith(f"{path}: network.private_subnet_prefix: /24 subnets cannot hold the pools at their max_size")
    assert "set /23 or lower" in line and "docs/network.md" in line


def test_s3_gateway_and_interface_endpoints(synth: Synth) -> None:
    endpoints = [e["Properties"] for e in synth.resources("prod-network", "AWS::EC2::VPCEndpoint").values()]
    # ServiceName is Fn::Join ["", ["com.amazonaws.", {"Ref": "AWS::Region"}, ".<service>"]].
    by_service = {e["ServiceName"]["Fn::Join"][1][-1].lstrip("."): e for e in endpoints}
    assert by_service["s3"]["VpcEndpointType"] == "Gateway"
    assert len(by_service["s3"]["RouteTableIds"]) == 2
    interface = {k for k, e in by_service.items() if e["VpcEndpointType"] == "Interface"}
    assert interface == {"ssm", "ssmmessages", "ec2messages", "logs", "monitoring", "sts", "ecr.api", "ecr.dkr"}
    assert all(by_service[k]["PrivateDnsEnabled"] for k in interface)


def test_nat_gateways_and_flow_logs(synth: Synth) -> None:
    Template.from_json(synth.template("prod-network")).resource_count_is("AWS::EC2::NatGateway", 2)
    Template.from_json(synth.template("dev-network")).resource_count_is("AWS::EC2::NatGateway", 1)
    flow = Template.from_json(synth.template("prod-network"))
    flow.has_resource_properties("AWS::EC2::FlowLog", {"TrafficType": "ALL", "ResourceType": "VPC"})
    flow.has_resource_properties("AWS::Logs::LogGroup", {"RetentionInDays": 90})


@pytest.mark.parametrize(
    "stack",
    [
        "dev-network",
        "prod-network",
        "dev-storage",
        "prod-storage",
        "dev-training",
        "prod-training",
        "dev-inference",
        "prod-inference",
    ],
)
def test_no_ingress_from_anywhere(synth: Synth, stack: str) -> None:
    for res in synth.template(stack)["Resources"].values():
        rules = []
        if res["Type"] == "AWS::EC2::SecurityGroup":
            rules = res["Properties"].get("SecurityGroupIngress", [])
        elif res["Type"] == "AWS::EC2::SecurityGroupIngress":
            rules = [res["Properties"]]
        for rule in rules:
            assert rule.get("CidrIp") != "0.0.0.0/0" and rule.get("CidrIpv6") != "::/0", rule


@pytest.mark.parametrize("stack", ["dev-training", "prod-training"])
def test_efa_security_group_allows_all_traffic_to_and_from_itself(synth: Synth, stack: str) -> None:
    # One EFA group per cluster or pool (dev also has an AWS Batch compute environment): each one.
    groups = [k for k in synth.resources(stack, "AWS::EC2::SecurityGroup") if "EfaSecurityGroup" in k]
    assert groups
    ingress = [r["Properties"] for r in synth.resources(stack, "AWS::EC2::SecurityGroupIngress").values()]
    egress = [r["Properties"] for r in synth.resources(stack, "AWS::EC2::SecurityGroupEgress").values()]
    for sg in groups:
        self_ref = {"Fn::GetAtt": [sg, "GroupId"]}
        assert any(
            r["IpProtocol"] == "-1" and r["GroupId"] == self_ref and r["SourceSecurityGroupId"] == self_ref for r in ingress
        )
        assert any(
            r["IpProtocol"] == "-1" and r["GroupId"] == self_ref and r["DestinationSecurityGroupId"] == self_ref for r in egress
        )


def test_subnet_plan_refuses_a_block_too_small() -> None:
    with pytest.raises(ValueError, match=r"network.cidr: 10.0.0.0/20 cannot hold 3 private /21 subnets"):
        plan_subnets("10.0.0.0/20", 3, 21, True)
    private, public = plan_subnets("10.0.0.0/16", 2, 24, True)
    assert private == ["10.0.0.0/24", "10.0.1.0/24"] and public == ["10.0.255.128/26", "10.0.255.192/26"]


def test_subnet_size_grows_with_addresses() -> None:
    assert private_prefix_for(80) == 24
    assert private_prefix_for(300) == 22
    assert retention_days(90) == 90 and retention_days(100) == 120


def test_existing_vpc_creates_no_network_resources() -> None:
    app = new_app()
    stack = Stack(app, "Existing", env=CdkEnv(account="123456789012", region="us-east-1"))
    net = AcceleratorNetwork(
        stack,
        "Net",
        az_ids=["use1-az6"],
        existing_vpc_id="vpc-0123456789abcdef0",
        existing_subnet_ids={"use1-az6": "subnet-0123456789abcdef0"},
    )
    assert net.subnet_ids == {"use1-az6": "subnet-0123456789abcdef0"}
    assert Template.from_stack(stack).to_json().get("Resources", {}) == {}
    # Its route tables are unknown and unread: no CDK warning asks the user to provide them.
    Annotations.from_stack(stack).has_no_warning("*", Match.any_value())


def test_the_vpc_view_carries_each_private_subnets_route_table() -> None:
    stack = Stack(new_app(), "Own", env=CdkEnv(account="123456789012", region="us-east-1"))
    net = AcceleratorNetwork(stack, "Net", az_ids=["use1-az4", "use1-az6"])
    tables = [stack.resolve(s.route_table.route_table_id) for s in net.vpc.private_subnets]
    assert len(tables) == 2 and all(t["Ref"].startswith(f"NetPrivate{i}RouteTable") for i, t in enumerate(tables))
    Annotations.from_stack(stack).has_no_warning("*", Match.any_value())


def test_the_default_security_group_can_keep_its_rules_and_an_existing_vpc_is_left_alone() -> None:
    def custom(stack: Stack) -> int:
        resources = Template.from_stack(stack).to_json().get("Resources", {})
        return sum(r["Type"] == "Custom::RestrictDefaultSecurityGroup" for r in resources.values())

    own = Stack(new_app(), "Own", env=CdkEnv(account="123456789012", region="us-east-1"))
    AcceleratorNetwork(own, "Net", az_ids=["use1-az4"])
    kept = Stack(new_app(), "Kept", env=CdkEnv(account="123456789012", region="us-east-1"))
    AcceleratorNetwork(kept, "Net", az_ids=["use1-az4"], restrict_default_security_group=False)
    assert (custom(own), custom(kept)) == (2, 0)


def test_review_says_how_to_keep_a_deployed_subnet() -> None:
    """Upgrading from neuronkit 0.1 (subnets sized from the pools) moves the subnets of an unchanged file: the review
    names the key that keeps them, and the file system inside is replaced with them."""
    from neuronkit.reports.review import compare_templates

    def template(cidr: str) -> dict[str, Any]:
        return {"Resources": {
            "NetworkPrivate0": {"Type": "AWS::EC2::Subnet", "Properties": {"VpcId": "vpc-1", "CidrBlock": cidr}},
            "Lustre": {"Type": "AWS::FSx::FileSystem", "DeletionPolicy": "Retain",
                       "Properties": {"FileSystemType": "LUSTRE", "SubnetIds": [{"Ref": "NetworkPrivate0"}]}},
        }}  # fmt: skip

    changes = {c.logical_id: c for c in compare_templates({"s": template("10.20.0.0/24")}, {"s": template("10.20.0.0/18")})}
    subnet = changes["NetworkPrivate0"]
    assert subnet.action == "replaced" and "set network.private_subnet_prefix: 24 in the file: docs/network.md" in subnet.why
    assert changes["Lustre"].action == "replaced"
    assert compare_templates({"s": template("10.20.0.0/24")}, {"s": template("10.20.0.0/24")}) == []
