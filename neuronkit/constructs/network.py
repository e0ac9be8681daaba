"""A VPC whose subnets are placed by AZ ID, with private node subnets and VPC endpoints."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache

from aws_cdk import Annotations, CfnResource, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_logs as logs
from aws_cdk import custom_resources as cr
from constructs import Construct

from neuronkit.config.addressing import holds, largest_private_prefix, plan_subnets, private_prefix_for
from neuronkit.constructs import arns, pseudo, values
from neuronkit.constructs.compliance import acknowledge

# The arithmetic lives in neuronkit.config.addressing (validation uses it too); re-exported for existing imports.
__all__ = ["AcceleratorNetwork", "plan_subnets", "private_prefix_for", "retention_days"]


# The id of the singleton function aws-cdk-lib's AwsCustomResource adds to a stack: "AWS" + its UUID without dashes.


@cache
def _aws_custom_resource_provider() -> str:
    """The construct id of the function CDK runs AwsCustomResource calls with (one per stack). Read on first use, not
    at import: importing the kit makes no call to the jsii kernel (app.py imports it beside the main thread)."""
    return "AWS" + cr.AwsCustomResource.PROVIDER_FUNCTION_UUID.replace("-", "")


class AcceleratorNetwork(Construct):
    """Network for accelerator nodes: subnets placed by AZ ID, no public IPs on nodes.

    Creates a VPC with one private subnet per AZ ID (``private_prefix``, default the largest the block holds
    beside the public subnets: a pool's size never moves a subnet; ``addresses_per_az`` must fit twice over, else
    ValueError), optional NAT
    gateways in small public subnets (defaults to one), an S3 gateway endpoint, interface endpoints
    (defaults to SSM, logs, metrics, STS, ECR) so S3 and SSM traffic never crosses a NAT gateway, and
    VPC flow logs to CloudWatch Logs (defaults to 90 days), and (``restrict_default_security_group``,
    default True) takes every rule out of the VPC's default security group. ``batch_task_default_group`` (a VPC
    with an AWS Batch pool on an EFA type) keeps the group's member-to-member ingress and gives it egress to
    its members and HTTPS instead, because Batch puts multi-node job containers there (docs/batch.md). With ``existing_vpc_id`` it creates
    nothing and uses the given VPC and subnets (endpoints are then the VPC owner's business).

    Public attributes: ``vpc`` (an ``ec2.IVpc`` for L2 constructs), ``vpc_id``,
    ``subnet_ids`` (AZ ID -> private subnet id) and ``az_ids``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        az_ids: Sequence[str],
        cidr: str = "10.0.0.0/16",
        addresses_per_az: Mapping[str, int] | None = None,
        private_prefix: int | None = None,
        nat_gateways: int = 1,
        interface_endpoints: Sequence[str] = (),
        flow_log_retention_days: int = 90,
        existing_vpc_id: str | None = None,
        existing_subnet_ids: Mapping[str, str] | None = None,
        restrict_default_security_group: bool = True,
        batch_task_default_group: bool = False,
    ) -> None:
        super().__init__(scope, id)
        self.az_ids = list(az_ids)
        self.route_table_ids: dict[str, str] = {}
        if existing_vpc_id is not None:
            subnets = dict(existing_subnet_ids or {})
            missing = [a for a in self.az_ids if a not in subnets]
            if missing:
                raise ValueError(f"network.existing.subnet_ids: no subnet for {', '.join(missing)}")
            self.vpc_id = existing_vpc_id
            self.subnet_ids = {a: subnets[a] for a in self.az_ids}
            self.vpc_cidr = None
            self.vpc = self._as_ivpc()
            return

        need = max((addresses_per_az or {}).get(a, 0) for a in self.az_ids)
        prefix = private_prefix or largest_private_prefix(cidr, len(self.az_ids), nat_gateways > 0)
        if not holds(prefix, need):
            raise ValueError(
                f"private_prefix: /{prefix} subnets cannot hold {need} addresses twice over; use /{private_prefix_for(need)}"
            )
        private_cidrs, public_cidrs = plan_subnets(cidr, len(self.az_ids), prefix, nat_gateways > 0)
        vpc = ec2.CfnVPC(self, "Vpc", cidr_block=cidr, enable_dns_hostnames=True, enable_dns_support=True)
        self.vpc_id = vpc.ref
        self.vpc_cidr = cidr
        self.subnet_ids = {}
        nat_ids = self._public_subnets(vpc, public_cidrs, nat_gateways)
        route_tables = self._private_subnets(vpc, private_cidrs, nat_ids)
        self._endpoints(vpc, cidr, route_tables, interface_endpoints)
        self._flow_logs(vpc, flow_log_retention_days)
        if restrict_default_security_group:
            self._restrict_default_security_group(vpc, keep_ingress=batch_task_default_group)
        if batch_task_default_group:
            self._batch_task_default_group(vpc)
        self.vpc = self._as_ivpc()

    def _public_subnets(self, vpc: ec2.CfnVPC, public_cidrs: Sequence[str], nat_gateways: int) -> list[str]:
        """With NAT gateways: the internet gateway, one small public subnet per AZ ID, the gateways' ids."""
        nat_ids: list[str] = []
        if nat_gateways > 0:
            # Each ``.ref`` read is a round trip to the jsii kernel: read once (docs/performance.md).
            igw = ec2.CfnInternetGateway(self, "Igw").ref
            attach = ec2.CfnVPCGatewayAttachment(self, "IgwAttachment", vpc_id=self.vpc_id, internet_gateway_id=igw)
            public_rt = ec2.CfnRouteTable(self, "PublicRouteTable", vpc_id=self.vpc_id).ref
            route = ec2.CfnRoute(
                self, "PublicDefaultRoute", route_table_id=public_rt, destination_cidr_block="0.0.0.0/0", gateway_id=igw
            )
            route.node.add_dependency(attach)
            for i, (az, block) in enumerate(zip(self.az_ids, public_cidrs, strict=True)):
                sub = ec2.CfnSubnet(
                    self,
                    f"Public{i}",
                    vpc_id=self.vpc_id,
                    cidr_block=block,
                    availability_zone_id=az,
                    map_public_ip_on_launch=False,
                ).ref
                ec2.CfnSubnetRouteTableAssociation(self, f"Public{i}Rt", subnet_id=sub, route_table_id=public_rt)
                if i < nat_gateways:
                    eip = ec2.CfnEIP(self, f"NatEip{i}", domain="vpc")
                    nat = ec2.CfnNatGateway(self, f"Nat{i}", subnet_id=sub, allocation_id=eip.attr_allocation_id)
                    nat.node.add_dependency(attach)
                    nat_ids.append(nat.ref)
        return nat_ids

    def _private_subnets(self, vpc: ec2.CfnVPC, private_cidrs: Sequence[str], nat_ids: Sequence[str]) -> list[str]:
        """One private subnet and route table per AZ ID (out through a NAT gateway when there is one)."""
        route_tables = []
        for i, (az, block) in enumerate(zip(self.az_ids, private_cidrs, strict=True)):
            sub = ec2.CfnSubnet(
                self, f"Private{i}", vpc_id=self.vpc_id, cidr_block=block, availability_zone_id=az, map_public_ip_on_launch=False
            ).ref
            rt = ec2.CfnRouteTable(self, f"Private{i}RouteTable", vpc_id=self.vpc_id).ref
            ec2.CfnSubnetRouteTableAssociation(self, f"Private{i}Rt", subnet_id=sub, route_table_id=rt)
            if nat_ids:
                ec2.CfnRoute(
                    self,
                    f"Private{i}DefaultRoute",
                    route_table_id=rt,
                    destination_cidr_block="0.0.0.0/0",
                    nat_gateway_id=nat_ids[i % len(nat_ids)],
                )
            self.subnet_ids[az] = sub
            self.route_table_ids[az] = rt
            route_tables.append(rt)
        return route_tables

    def _endpoints(self, vpc: ec2.CfnVPC, cidr: str, route_tables: list[str], interface_endpoints: Sequence[str]) -> None:
        """The S3 gateway endpoint on every private route table, and the interface endpoints with their group."""
        ec2.CfnVPCEndpoint(
            self,
            "S3Endpoint",
            vpc_id=self.vpc_id,
            service_name=f"com.amazonaws.{pseudo.REGION}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=route_tables,
        )
        if interface_endpoints:
            group = ec2.CfnSecurityGroup(
                self,
                "EndpointSecurityGroup",
                group_description="HTTPS from the VPC to interface endpoints",
                vpc_id=self.vpc_id,
                security_group_ingress=[
                    ec2.CfnSecurityGroup.IngressProperty(
                        ip_protocol="tcp", from_port=443, to_port=443, cidr_ip=cidr, description="HTTPS from the VPC"
                    )
                ],
                security_group_egress=[
                    ec2.CfnSecurityGroup.EgressProperty(
                        ip_protocol="tcp", from_port=443, to_port=443, cidr_ip=cidr, description="Responses within the VPC"
                    )
                ],
            )
            sg, subnets = group.ref, list(self.subnet_ids.values())
            for service in interface_endpoints:
                ec2.CfnVPCEndpoint(
                    self,
                    "Endpoint" + "".join(part.capitalize() for part in service.split(".")),
                    vpc_id=self.vpc_id,
                    service_name=f"com.amazonaws.{pseudo.REGION}.{service}",
                    vpc_endpoint_type="Interface",
                    private_dns_enabled=True,
                    subnet_ids=subnets,
                    security_group_ids=[sg],
                )

    def _flow_logs(self, vpc: ec2.CfnVPC, flow_log_retention_days: int) -> None:
        """Every flow of the VPC to a retained CloudWatch Logs group."""
        log_group = logs.LogGroup(self, "FlowLogs", removal_policy=RemovalPolicy.RETAIN)
        cfn_group = log_group.node.default_child
        assert isinstance(cfn_group, logs.CfnLogGroup)
        # The L2 takes an enum; the file gives days, so set the nearest value CloudWatch accepts.
        cfn_group.retention_in_days = retention_days(flow_log_retention_days)
        role = iam.Role(self, "FlowLogsRole", assumed_by=values.service_principal("vpc-flow-logs.amazonaws.com"))
        role.add_to_policy(
            iam.PolicyStatement(
                actions=["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"],
                resources=[log_group.log_group_arn],
            )
        )
        ec2.CfnFlowLog(
            self,
            "FlowLog",
            resource_id=self.vpc_id,
            resource_type="VPC",
            traffic_type="ALL",
            log_destination_type="cloud-watch-logs",
            log_group_name=log_group.log_group_name,
            deliver_logs_permission_arn=role.role_arn,
        )

    def _batch_task_default_group(self, vpc: ec2.CfnVPC) -> None:
        """What AWS Batch multi-node job containers on EFA types need from the VPC's default security group.

        Batch runs each MNP node's container in the ``awsvpc`` network mode on an interface of its own, with the
        compute environment's security groups or, when it names none, the VPC's default group (Batch User Guide,
        "Multi-node parallel jobs" > compute environments). On EFA types the compute environment cannot name
        groups (its launch template carries the network interfaces), so the containers get the default group:
        AWS's ingress from the group's own members stays (node 1 reaches node 0's MASTER_PORT and root
        communicator), and egress goes to the members (all traffic) and to HTTPS (S3 through the gateway endpoint,
        the interface endpoints). Security Hub's EC2.2 then reports the default group as not restricted.
        """
        group = vpc.attr_default_security_group
        ec2.CfnSecurityGroupEgress(
            self,
            "DefaultGroupToMembers",
            group_id=group,
            ip_protocol="-1",
            destination_security_group_id=group,
            description="Batch multi-node containers: rendezvous and collectives between job nodes",
        )
        ec2.CfnSecurityGroupEgress(
            self,
            "DefaultGroupHttps",
            group_id=group,
            ip_protocol="tcp",
            from_port=443,
            to_port=443,
            cidr_ip="0.0.0.0/0",
            description="Batch multi-node containers: S3 (gateway endpoint) and the VPC's interface endpoints over HTTPS",
        )

    def _restrict_default_security_group(self, vpc: ec2.CfnVPC, *, keep_ingress: bool = False) -> None:
        """Revoke the rules AWS puts in a new VPC's default group (all traffic from the group itself, all out).

        Nothing of the kit uses that group, but anything launched into the VPC without a group of its own
        gets it (Security Hub control EC2.2). CloudFormation cannot change a default group's rules, so two
        custom resources revoke them through the EC2 API on create and put them back on delete, as CDK's own
        Vpc does with @aws-cdk/aws-ec2:restrictDefaultSecurityGroup (docs/aws-contracts.md).
        """
        group = vpc.attr_default_security_group
        arn = arns.format_arn(self, service="ec2", resource="security-group", resource_name=group)
        rules = {
            "Ingress": [{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group}]}],
            "Egress": [{"IpProtocol": "-1", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}],
        }
        if keep_ingress:
            del rules["Ingress"]
        for direction, permissions in rules.items():
            call = {"service": "EC2", "parameters": {"GroupId": group, "IpPermissions": permissions}}
            cr.AwsCustomResource(
                self,
                f"RestrictDefault{direction}",
                resource_type="Custom::RestrictDefaultSecurityGroup",
                install_latest_aws_sdk=False,
                on_create=cr.AwsSdkCall(
                    **call,
                    action=f"revokeSecurityGroup{direction}",
                    physical_resource_id=cr.PhysicalResourceId.of(f"default-security-group-{direction.lower()}"),
                    ignore_error_codes_matching="InvalidPermission.NotFound",  # already revoked
                ),
                # Put back (turning the option off restores AWS's default), unless someone already did.
                on_delete=cr.AwsSdkCall(
                    **call,
                    action=f"authorizeSecurityGroup{direction}",
                    ignore_error_codes_matching="InvalidPermission.Duplicate",
                ),
                policy=cr.AwsCustomResourcePolicy.from_statements(
                    [
                        iam.PolicyStatement(
                            actions=[f"ec2:RevokeSecurityGroup{direction}", f"ec2:AuthorizeSecurityGroup{direction}"],
                            resources=[arn],
                        )
                    ]
                ),
            )
        # The function CDK runs the calls with (one per stack) logs through AWS's basic execution policy.
        provider = Stack.of(self).node.try_find_child(_aws_custom_resource_provider())
        if provider is not None:
            function = provider.node.default_child
            if isinstance(function, CfnResource):
                # CDK adds DependsOn its role, which the function's Role GetAtt already orders (cfn-lint W3005).
                function.add_deletion_override("DependsOn")
            acknowledge(
                provider,
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
                "CDK's AwsCustomResource function: AWS-maintained policy that only lets it write its own logs",
            )

    def _as_ivpc(self) -> ec2.IVpc:
        # The L2 Vpc places subnets by AZ name; ours are placed by AZ ID. This view carries only what
        # L2 constructs (security groups, Lambda functions) read: the VPC id and the private subnets.
        view = ec2.Vpc.from_vpc_attributes(
            self,
            "View",
            vpc_id=self.vpc_id,
            availability_zones=[f"{Stack.of(self).region}-{a}" for a in self.az_ids],
            private_subnet_ids=list(self.subnet_ids.values()),
            private_subnet_route_table_ids=list(self.route_table_ids.values()) or None,
        )
        if not self.route_table_ids:
            # An existing VPC's route tables are its owner's; nothing here reads them.
            Annotations.of(view).acknowledge_warning(
                "@aws-cdk/aws-ec2:noSubnetRouteTableId", "the kit never reads an existing subnet's route table"
            )
        return view


# Retention periods CloudWatch Logs accepts (PutRetentionPolicy API).
_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)


def log_group(scope: Construct, id: str, days: int, name: str | None = None) -> logs.LogGroup:
    """A log group removed with its stack (its logs expire anyway; a retained group of a fixed name would block
    the next deploy), kept ``days`` days, rounded up to a retention CloudWatch Logs accepts (the L2 takes an enum)."""
    group = logs.LogGroup(scope, id, log_group_name=name, removal_policy=RemovalPolicy.DESTROY)
    cfn = group.node.default_child
    assert isinstance(cfn, logs.CfnLogGroup)
    cfn.retention_in_days = retention_days(days)
    return group


def retention_days(days: int) -> int:
    """The smallest retention CloudWatch Logs accepts that keeps logs at least ``days`` days."""
    for allowed in _RETENTION_DAYS:
        if allowed >= days:
            return allowed
    return _RETENTION_DAYS[-1]
