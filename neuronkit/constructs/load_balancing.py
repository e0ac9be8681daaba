"""The internal load balancer of a serving fleet on either platform: the client ingress rule of its security group and
the Application Load Balancer with its listener and TLS policy (``InferenceFleet`` and ``EksServingFleet``)."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import RemovalPolicy, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_s3 as s3
from constructs import Construct

from neuronkit.catalog import serving
from neuronkit.constructs import durations
from neuronkit.constructs.compliance import acknowledge
from neuronkit.constructs.serving_specs import HealthCheckSpec, TlsSpec


def access_logs_bucket(scope: Construct, given: s3.IBucket | None) -> s3.IBucket:
    """A load balancer's access-log bucket: the one given, else one of the construct's own (id ``AccessLogs``: SSE-S3,
    which ALB access logs need; no public access, TLS only, kept on stack deletion), so a construct works alone and
    passes cdk-nag's ELB2 without a caller's bucket (issue 49: a missing bucket used to fail cdk-nag with a jsii
    traceback)."""
    if given is not None:
        return given
    bucket = s3.Bucket(
        scope, "AccessLogs", encryption=s3.BucketEncryption.S3_MANAGED, block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
        enforce_ssl=True, object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED, removal_policy=RemovalPolicy.RETAIN,
    )  # fmt: skip
    acknowledge(bucket, "AwsSolutions-S1", "the load balancer's access-log destination; logging it would log the logs")
    return bucket


def client_ingress(scope: Construct, group: ec2.SecurityGroup, vpc: ec2.IVpc, cidr: str | None, port: int) -> None:
    """Clients reach the listener from ``cidr``, by default the VPC's CIDR. A CIDR known only at deploy (an ``ec2.Vpc``'s
    is a CloudFormation attribute) becomes a rule of its own resource, outside the group's inline rules that cdk-nag's
    AwsSolutions-EC23 reads and cannot evaluate. Shared by the Auto Scaling and the EKS serving paths."""
    cidr = cidr or vpc.vpc_cidr_block
    if not Token.is_unresolved(cidr):
        group.add_ingress_rule(ec2.Peer.ipv4(cidr), ec2.Port.tcp(port), "Clients in the VPC")
        return
    rule = ec2.CfnSecurityGroupIngress(
        scope,
        "ClientIngress",
        group_id=group.security_group_id,
        ip_protocol="tcp",
        from_port=port,
        to_port=port,
        cidr_ip=cidr,
        description="Clients in the VPC",
    )
    # cdk-nag cannot evaluate a deploy-time CIDR ("Rule threw an error"); this one is the VPC's own block.
    acknowledge(rule, "AwsSolutions-EC23", "ingress from the VPC's own CIDR block (a deploy-time attribute), never 0.0.0.0/0")


def application_load_balancer(
    scope: Construct,
    *,
    vpc: ec2.IVpc,
    subnets: Sequence[ec2.ISubnet],
    security_group: ec2.ISecurityGroup,
    idle_timeout_seconds: int,
    port: int,
    listener_port: int,
    tls: TlsSpec | None,
    health_check: HealthCheckSpec,
    target_type: elbv2.TargetType,
    access_logs_bucket: s3.IBucket | None,
    log_prefix: str,
    deregistration_delay_seconds: int | None = None,
    target_group_id: str = "Targets",
    algorithm: elbv2.TargetGroupLoadBalancingAlgorithmType | None = None,
) -> tuple[elbv2.ApplicationLoadBalancer, elbv2.ApplicationTargetGroup, elbv2.ApplicationListener]:
    """A fleet's internal ALB, its one target group (instance targets on the Auto Scaling path, IP targets on EKS) and
    its listener: invalid headers dropped, the fleet's idle timeout, access logs, HTTPS with the catalog's TLS policy
    when ``tls`` names a certificate. Shared by the Auto Scaling and the EKS serving paths. ``target_group_id`` is the
    target group's construct ID (default ``Targets``; a new ID replaces the target group). ``algorithm``: the target
    group's ``load_balancing.algorithm.type`` (default the ALB's, round robin)."""
    hc = health_check
    alb = elbv2.ApplicationLoadBalancer(
        scope,
        "LoadBalancer",
        vpc=vpc,
        internet_facing=False,
        vpc_subnets=ec2.SubnetSelection(subnets=list(subnets)),
        security_group=security_group,
        drop_invalid_header_fields=True,
        idle_timeout=durations.seconds(idle_timeout_seconds),
    )
    if access_logs_bucket is not None:
        alb.log_access_logs(access_logs_bucket, prefix=log_prefix)
    atg = elbv2.ApplicationTargetGroup(
        scope,
        target_group_id,
        vpc=vpc,
        port=port,
        protocol=elbv2.ApplicationProtocol.HTTP,
        target_type=target_type,
        load_balancing_algorithm_type=algorithm,
        deregistration_delay=durations.seconds(deregistration_delay_seconds)
        if deregistration_delay_seconds is not None
        else None,
        health_check=elbv2.HealthCheck(
            path=hc.path,
            port=str(hc.port or port),
            protocol=elbv2.Protocol.HTTP,
            interval=durations.seconds(hc.interval_seconds),
            healthy_threshold_count=hc.healthy_threshold,
            unhealthy_threshold_count=hc.unhealthy_threshold,
        ),
    )
    # open=False: the security group admits the VPC only (the L2 default opens 0.0.0.0/0).
    listener = alb.add_listener(
        "Listener",
        port=listener_port,
        protocol=elbv2.ApplicationProtocol.HTTPS if tls else elbv2.ApplicationProtocol.HTTP,
        certificates=[elbv2.ListenerCertificate.from_arn(tls.certificate_arn)] if tls else None,
        default_target_groups=[atg],
        open=False,
    )
    if tls:
        tls_policy(listener)
    return alb, atg, listener


def tls_policy(listener: elbv2.ApplicationListener | elbv2.NetworkListener) -> None:
    """The catalog's TLS policy (TLS 1.3 and 1.2), set on the L1: the L2 enum names it differently."""
    cfn = listener.node.default_child
    assert isinstance(cfn, elbv2.CfnListener)
    cfn.add_property_override("SslPolicy", serving.facts()["tls_policy"])
