"""``neuronkit preflight`` on an existing VPC: can the kit's deploy-time functions reach what they call, and is the
CIDR the ALB admits the VPC's? Read-only EC2 and EKS calls (DescribeRouteTables, DescribeVpcEndpoints,
DescribeNatGateways, DescribeVpcs, DescribeVpcAttribute, eks:DescribeCluster).

On EKS the kubectl/Helm handler (aws-cdk-lib ``aws_eks_v2`` ``KubectlProvider``) runs in the private subnets the kit
gives it, which are ``network.existing.subnet_ids`` (neuronkit/stacks/eks.py), and so does the provider framework's
onEvent function (kubectl-provider.js: ``new cr.Provider(this, "Provider", {onEventHandler: handler, vpc, vpcSubnets:
privateSubnets, securityGroups})``). From there the handler calls the EKS API (``aws eks update-kubeconfig``:
eks:DescribeCluster, no --role-arn in its kubectl-handler apply/helm; its token is a GetCallerIdentity URL presigned
locally by aws-cli's eks/get_token.py, so no STS call), the framework invokes the handler
through Lambda and PUTs its answer to CloudFormation's pre-signed S3 URL (custom-resources provider-framework
runtime cfn-response.js, ``submitResponse`` to ``event.ResponseURL``), and Helm pulls the kit's charts from their
public registries (catalog ``repository`` of each chart: registry.k8s.io, public.ecr.aws, aws.github.io,
kedacore.github.io, kubernetes.github.io). So each handler subnet needs either a default route to a NAT gateway
(everything is then reachable), or interface endpoints for ``eks`` and ``lambda`` with private DNS and an S3 endpoint
(a gateway endpoint on the subnet's route table, or an interface endpoint with private DNS); public chart registries
are on the internet, which no VPC endpoint reaches ("Access an AWS service using an interface VPC endpoint", Amazon VPC
PrivateLink guide: an endpoint serves its one service), so without NAT every chart the kit installs fails.
``ecr.api``/``ecr.dkr`` interface endpoints and the ``s3`` gateway endpoint serve images in your own (private) ECR only.

On your own cluster (``eks.existing``) the handler reaches the API server through the endpoint's private access (which
needs the VPC's ``enableDnsSupport`` and ``enableDnsHostnames``: EKS user guide, "Cluster API server endpoint"), or
through its public access from the NAT gateways' addresses, which ``publicAccessCidrs`` must then include (EKS user
guide, "Cluster API server endpoint": with private access off, "requests that originate from within your cluster's
VPC ... leave the VPC"; publicAccessCidrs limits the public endpoint to those blocks).

The ALB's security group admits ``network.cidr`` (the serving fleets' listener): on an existing VPC that block must be
inside the VPC's CIDR blocks, or the clients of the VPC are refused and some other network is admitted.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING, Any

from neuronkit.account.check import Check

if TYPE_CHECKING:
    from neuronkit.config import Environment

HANDLER_SERVICES = ("eks", "lambda")  # the interface endpoints of what the handler and the provider framework call
IMAGE_ENDPOINTS = ("ecr.api", "ecr.dkr")  # interface endpoints of private ECR; with the s3 gateway endpoint


def _charts(env: Environment) -> list[str]:
    """The Helm charts the kit installs on this cluster (each pulled from a public registry at deploy time)."""
    if env.eks is None:
        return []
    charts = ("neuron", "efa_device_plugin", "nvidia_device_plugin", "load_balancer_controller", "cluster_autoscaler",
              "keda", "jobset", "kueue")  # fmt: skip
    return [c for c in charts if env.eks.installs(c)]


def _route_tables(ec2: Any, vpc_id: str) -> tuple[dict[str, dict[str, Any]], dict[str, Any] | None]:
    """Route table per explicitly associated subnet, and the VPC's main table (which the other subnets use)."""
    pages = ec2.get_paginator("describe_route_tables").paginate(Filters=[{"Name": "vpc-id", "Values": [vpc_id]}])
    tables = [t for page in pages for t in page["RouteTables"]]
    by_subnet = {a["SubnetId"]: t for t in tables for a in t.get("Associations") or [] if a.get("SubnetId")}
    main = next((t for t in tables for a in t.get("Associations") or [] if a.get("Main")), None)
    return by_subnet, main


def _default_route(table: dict[str, Any] | None) -> dict[str, Any] | None:
    routes = (table or {}).get("Routes") or []
    return next((r for r in routes if r.get("DestinationCidrBlock") == "0.0.0.0/0" and r.get("State") != "blackhole"), None)


def interface_services(endpoints: list[dict[str, Any]], region: str) -> set[str]:
    """The services the VPC's available interface endpoints serve to its own subnets by name (private DNS on), e.g.
    ``{"eks", "lambda"}``."""
    return {
        e["ServiceName"].removeprefix(f"com.amazonaws.{region}.")
        for e in endpoints
        if e.get("VpcEndpointType") == "Interface"
        and e.get("PrivateDnsEnabled")
        # An S3 interface endpoint with "private DNS only for inbound resolver endpoint" leaves the VPC's own S3
        # traffic to the gateway endpoint ("routes traffic that originates from the VPC to the gateway endpoint and
        # traffic that originates from on-premises to the interface endpoint", Amazon S3 User Guide, "AWS
        # PrivateLink for Amazon S3"): it does not serve the handler's subnets (moto does not model DnsOptions).
        and not (e.get("DnsOptions") or {}).get("PrivateDnsOnlyForInboundResolverEndpoint")
    }


def _s3_reachable(endpoints: list[dict[str, Any]], interface: set[str], table: dict[str, Any] | None) -> bool:
    """S3 from a subnet without NAT: an interface endpoint with private DNS, or a gateway endpoint on its route table
    (a gateway endpoint serves only the route tables it is associated with: Amazon VPC PrivateLink guide, "Gateway
    endpoints")."""
    if "s3" in interface:
        return True
    table_id = (table or {}).get("RouteTableId")
    return any(
        e.get("VpcEndpointType") == "Gateway"
        and str(e.get("ServiceName", "")).endswith(".s3")
        and table_id in (e.get("RouteTableIds") or [])
        for e in endpoints
    )


_WHAT = {
    "eks": "the EKS API (the kubectl handler's eks:DescribeCluster)",
    "lambda": "Lambda (the provider framework invokes the handler)",
    "s3": "S3 (the provider framework PUTs its answer to CloudFormation's pre-signed S3 URL)",
}


def _unreachable(name: str, subnet_id: str, why: str, missing: list[str], region: str, table_id: str | None) -> Check:
    interface = [s for s in missing if s != "s3"]
    fixes = [f"com.amazonaws.{region}.{{{','.join(interface)}}} (interface, private DNS)"] if interface else []
    if "s3" in missing:
        fixes.append(f"com.amazonaws.{region}.s3 (gateway, on route table {table_id or 'the VPC main table'})")
    return Check("FAIL", name, f"{subnet_id} {why} and the VPC has no endpoint for {', '.join(missing)}: the kit's "
                 f"deploy-time functions cannot reach {'; '.join(_WHAT[s] for s in missing)}",
                 f"route 0.0.0.0/0 to a NAT gateway, or add endpoints {' and '.join(fixes)}")  # fmt: skip


def check_handler_network(env: Environment, ec2: Any, eks: Any) -> list[Check]:
    """The handler subnets' routes and endpoints, and (eks.existing) the cluster endpoint's access from them."""
    existing = env.network.existing
    if env.platform != "eks" or existing is None:
        return []
    region = env.region
    by_subnet, main = _route_tables(ec2, existing.vpc_id)
    pages = ec2.get_paginator("describe_vpc_endpoints").paginate(Filters=[{"Name": "vpc-id", "Values": [existing.vpc_id]}])
    endpoints = [e for page in pages for e in page["VpcEndpoints"] if e.get("State", "available").lower() == "available"]
    interface = interface_services(endpoints, region)
    charts = _charts(env)
    out: list[Check] = []
    nat_ids: set[str] = set()
    for az_id, subnet_id in existing.subnet_ids.items():
        name = f"network handler subnet {az_id}"
        table = by_subnet.get(subnet_id, main)
        route = _default_route(table)
        if route is not None and route.get("NatGatewayId"):
            nat_ids.add(str(route["NatGatewayId"]))
            out.append(Check("PASS", name, f"{subnet_id} routes 0.0.0.0/0 to {route['NatGatewayId']}: EKS, Lambda, S3 and "
                             "the chart registries are reachable"))  # fmt: skip
            continue
        if route is not None and not str(route.get("GatewayId") or "").startswith("igw-"):
            target = next((str(v) for k, v in route.items() if k.endswith("Id") and v), "a target")
            out.append(Check("WARN", name, f"{subnet_id} routes 0.0.0.0/0 to {target}: preflight cannot tell whether it "
                             "reaches the internet (EKS, Lambda, S3, the chart registries)", ""))  # fmt: skip
            continue
        missing = [s for s in HANDLER_SERVICES if s not in interface]
        if not _s3_reachable(endpoints, interface, table):
            missing.append("s3")
        why = "routes 0.0.0.0/0 to an internet gateway (a Lambda function in a VPC gets no public address)" if route else (
            "has no default route")  # fmt: skip
        if missing:
            out.append(_unreachable(name, subnet_id, why, missing, region, (table or {}).get("RouteTableId")))
        if charts:
            images = [s for s in IMAGE_ENDPOINTS if s not in interface]
            gateway_s3 = any(e.get("VpcEndpointType") == "Gateway" and e["ServiceName"].endswith(".s3") for e in endpoints)
            note = "" if images or not gateway_s3 else " (its ecr.api, ecr.dkr and s3 endpoints serve private ECR only)"
            out.append(Check("FAIL", f"{name} charts", f"{subnet_id} {why}: the charts the kit installs ({', '.join(charts)}) "
                             f"come from public registries, which no VPC endpoint reaches{note}",
                             "route 0.0.0.0/0 to a NAT gateway, or set those eks.components to existing"))  # fmt: skip
        elif not missing:
            out.append(Check("PASS", name, f"{subnet_id}: interface endpoints for {', '.join(HANDLER_SERVICES)}, and S3"))
    if env.eks is not None and env.eks.existing is not None:
        out += _endpoint_access(env, eks, ec2, nat_ids)
    return out


def _endpoint_access(env: Environment, eks: Any, ec2: Any, nat_ids: set[str]) -> list[Check]:
    assert env.eks is not None and env.eks.existing is not None
    cluster_name = env.eks.existing.cluster_name
    name = f"EKS cluster {cluster_name} endpoint access"
    try:
        vpc_config = eks.describe_cluster(name=cluster_name)["cluster"].get("resourcesVpcConfig") or {}
    except Exception as err:  # noqa: BLE001 - the cluster check (check_existing_cluster) reports a missing cluster
        if "ResourceNotFound" in type(err).__name__ or "ResourceNotFound" in str(err):
            return []
        raise
    if vpc_config.get("endpointPrivateAccess"):
        private = _private_dns(env, ec2, name, str(vpc_config.get("vpcId") or env.network.existing.vpc_id))  # type: ignore[union-attr]
        if private.status == "PASS" or not vpc_config.get("endpointPublicAccess", True):
            return [private]
        # The VPC cannot resolve the private endpoint: the name resolves to the public one, which the handler reaches
        # through its NAT gateways if publicAccessCidrs admit them (the public path below decides).
        public = _public_path(name, cluster_name, vpc_config, ec2, nat_ids)
        return [public] if public.status == "PASS" else [private]
    if not vpc_config.get("endpointPublicAccess", True):
        return [Check("FAIL", name, "neither private nor public access is on", "")]
    return [_public_path(name, cluster_name, vpc_config, ec2, nat_ids)]


def _public_path(name: str, cluster_name: str, vpc_config: dict[str, Any], ec2: Any, nat_ids: set[str]) -> Check:
    """The handler reaches the public endpoint through its subnets' NAT gateways, whose addresses publicAccessCidrs
    must admit."""
    cidrs = [ipaddress.ip_network(c) for c in vpc_config.get("publicAccessCidrs") or ["0.0.0.0/0"]]
    if not nat_ids:
        return Check("FAIL", name, "private access is off and the handler subnets have no NAT gateway: the handler "
                     "cannot reach the public endpoint", f"aws eks update-cluster-config --name {cluster_name} "
                     "--resources-vpc-config endpointPrivateAccess=true")  # fmt: skip
    nats = ec2.describe_nat_gateways(NatGatewayIds=sorted(nat_ids))["NatGateways"]
    addresses = sorted({a["PublicIp"] for n in nats for a in n.get("NatGatewayAddresses") or [] if a.get("PublicIp")})
    outside = [a for a in addresses if not any(ipaddress.ip_address(a) in c for c in cidrs)]
    if addresses and not outside:
        return Check("PASS", name, f"public access admits the NAT gateways' addresses ({', '.join(addresses)})")
    return Check("FAIL", name, f"private access is off and publicAccessCidrs ({', '.join(map(str, cidrs))}) do not "
                 f"admit the NAT gateways' addresses ({', '.join(outside or ['none found'])})",
                 f"turn on private access (aws eks update-cluster-config --name {cluster_name} --resources-vpc-config "
                 "endpointPrivateAccess=true) or add those addresses to publicAccessCidrs")  # fmt: skip


_FLAG = {"enableDnsSupport": "enable-dns-support", "enableDnsHostnames": "enable-dns-hostnames"}


def _private_dns(env: Environment, ec2: Any, name: str, vpc_id: str) -> Check:
    """Private access serves the VPC only with both DNS attributes on (EKS user guide, "Cluster API server endpoint",
    "Cluster private endpoint": "In order for the private hosted zone to properly route traffic to your API server, your
    VPC must have enableDnsHostnames and enableDnsSupport set to true"). Its DHCP options (AmazonProvidedDNS, the same
    sentence) are not checked."""
    off = [
        attribute
        for attribute, key in (("enableDnsSupport", "EnableDnsSupport"), ("enableDnsHostnames", "EnableDnsHostnames"))
        if not ec2.describe_vpc_attribute(VpcId=vpc_id, Attribute=attribute)[key]["Value"]
    ]
    if off:
        fix = "; ".join(f"aws ec2 modify-vpc-attribute --vpc-id {vpc_id} --{_FLAG[a]} Value=true" for a in off)
        return Check("FAIL", name, f"private access is on but {vpc_id} has {' and '.join(off)} off: the API server's "
                     "name does not resolve to its private addresses from the VPC",
                     fix)  # fmt: skip
    return Check("PASS", name, f"private access is on and {vpc_id} resolves private DNS: the handler reaches the API "
                 "server from the VPC")  # fmt: skip


def check_alb_cidr(env: Environment, vpc: dict[str, Any] | None) -> list[Check]:
    """``network.cidr``, which the serving ALBs admit, inside the existing VPC's CIDR blocks (DescribeVpcs)."""
    if env.network.existing is None or vpc is None or not env.inference:
        return []
    blocks = [
        a["CidrBlock"]
        for a in vpc.get("CidrBlockAssociationSet") or [{"CidrBlock": vpc.get("CidrBlock")}]
        if a.get("CidrBlock") and (a.get("CidrBlockState") or {}).get("State", "associated") == "associated"
    ]
    mine = ipaddress.ip_network(env.network.cidr)
    if any(mine.subnet_of(ipaddress.ip_network(b)) for b in blocks):  # type: ignore[arg-type]
        return [
            Check(
                "PASS", "network alb cidr", f"network.cidr {mine} is inside {env.network.existing.vpc_id} ({', '.join(blocks)})"
            )
        ]
    return [Check("FAIL", "network alb cidr", f"the serving ALBs admit network.cidr {mine}, which is outside "
                  f"{env.network.existing.vpc_id}'s CIDR blocks ({', '.join(blocks)})",
                  f"set network.cidr to the VPC's block ({blocks[0] if blocks else 'see DescribeVpcs'})")]  # fmt: skip


__all__ = ["check_alb_cidr", "check_handler_network"]
