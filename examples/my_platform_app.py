#!/usr/bin/env python3
"""A user's own CDK app with a plain ``ec2.Vpc``: an Inferentia fleet served by the kit's pinned vLLM containers
(ServingSpec) and a Trainium cluster, checked by the kit's cdk-nag rules.

    python examples/my_platform_app.py        # synthesizes into cdk.out/examples

The constructs take CDK's own types: the VPC and a SubnetSelection, the bucket and the topic as IBucket and
ITopic. docs/constructs.md shows this app; tests/unit/test_docs_constructs.py synthesizes it with cdk-nag.
"""

from __future__ import annotations

from aws_cdk import App, Environment, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from constructs import Construct

from neuronkit.constructs import (
    AmiSpec,
    FleetNodesSpec,
    InferenceFleet,
    ModelSpec,
    NodePoolSpec,
    ServingSpec,
    TrainingCluster,
    compliance,
    neuron_release,
)


class PlatformStack(Stack):
    def __init__(self, scope: Construct, id: str, **kwargs: object) -> None:
        super().__init__(scope, id, **kwargs)  # type: ignore[arg-type]
        vpc = ec2.Vpc(
            self,
            "Vpc",
            ip_addresses=ec2.IpAddresses.cidr("10.40.0.0/16"),
            availability_zones=["us-east-1a", "us-east-1b"],
            nat_gateways=1,
            subnet_configuration=[
                ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=24),
                ec2.SubnetConfiguration(name="nodes", subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, cidr_mask=20),
            ],
            flow_logs={"all": ec2.FlowLogOptions(traffic_type=ec2.FlowLogTrafficType.ALL)},
        )
        logs = s3.Bucket(
            self,
            "Logs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            removal_policy=RemovalPolicy.RETAIN,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
        )
        compliance.acknowledge(logs, "AwsSolutions-S1", "this is the access-log bucket itself")
        artifacts = s3.Bucket(
            self,
            "Artifacts",
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            removal_policy=RemovalPolicy.RETAIN,
            server_access_logs_bucket=logs,
            server_access_logs_prefix="artifacts/",
        )
        alerts = sns.Topic(self, "Alerts", master_key=kms.Key(self, "AlertsKey", enable_key_rotation=True), enforce_ssl=True)
        release = neuron_release("2.28.1")
        self.fleet = InferenceFleet(
            self,
            "Chat",
            environment="research",
            name="chat",
            nodes=FleetNodesSpec(
                neuron_types=["inf2.xlarge"],
                fallback_types=["g5.xlarge"],
                max_size=4,
                neuron_ami=AmiSpec(root_device_name="/dev/sda1", ami_id="ami-0123456789abcdef0"),
                gpu_ami=AmiSpec(root_device_name="/dev/sda1", ami_id="ami-0123456789abcdef1"),
            ),
            vpc=vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS),
            artifacts_bucket=artifacts,
            serving=ServingSpec(
                model=ModelSpec(id="TinyLlama/TinyLlama-1.1B-Chat-v1.0", s3_prefix="models/tiny/", parameters_billion=1.1),
                neuron_release=release,
            ),
            access_logs_bucket=logs,
            notifications_topic=alerts,
        )
        self.cluster = TrainingCluster(
            self,
            "Cluster",
            environment="research",
            name="llama",
            nodes=NodePoolSpec(
                "trn1.32xlarge", max_size=4, ami=AmiSpec(root_device_name="/dev/sda1", ami_id="ami-0123456789abcdef2")
            ),
            vpc=vpc,
            vpc_subnets=ec2.SubnetSelection(subnet_type=ec2.SubnetType.PRIVATE_WITH_EGRESS, availability_zones=["us-east-1a"]),
            notifications_topic=alerts,
            expected_neuron_driver=release.driver,
        )


def build(app: App) -> PlatformStack:
    return PlatformStack(app, "research-platform", env=Environment(account="444444444444", region="us-east-1"))


if __name__ == "__main__":
    app = App(outdir="cdk.out/examples")
    build(app)
    compliance.apply(app)  # the kit's cdk-nag rules (AwsSolutions) on your app: a finding fails synth
    app.synth()
