#!/usr/bin/env python3
"""A user's own CDK app that puts an Inferentia fleet with GPU fallback into an existing VPC.

    python examples/my_inference_app.py        # synthesizes into cdk.out/examples

Two subnets of your own (one per AZ ID), an artifacts bucket that holds the compiled model, a bucket
for load balancer access logs and a topic for scaling notifications, and the cdk-nag rules the kit
itself passes, applied with one call (without the logs bucket or the topic, cdk-nag stops the synth).
"""

from __future__ import annotations

from aws_cdk import App, Environment, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_s3 as s3
from constructs import Construct

from neuronkit.constructs import FleetNodesSpec, InferenceFleet, ServeSpec, compliance


class ChatServingStack(Stack):
    def __init__(self, scope: Construct, id: str, **kwargs: object) -> None:
        super().__init__(scope, id, **kwargs)  # type: ignore[arg-type]
        vpc = ec2.Vpc.from_vpc_attributes(
            self,
            "Vpc",
            vpc_id="vpc-0a1b2c3d4e5f67890",
            vpc_cidr_block="10.30.0.0/16",
            availability_zones=["us-east-1a", "us-east-1b"],
            private_subnet_ids=["subnet-0aaaaaaaaaaaaaaa1", "subnet-0bbbbbbbbbbbbbbb2"],
            private_subnet_route_table_ids=["rtb-0aaaaaaaaaaaaaaa1", "rtb-0bbbbbbbbbbbbbbb2"],
        )
        self.fleet = InferenceFleet(
            self,
            "Chat",
            environment="research",
            name="chat",
            nodes=FleetNodesSpec(neuron_types=["inf2.xlarge"], fallback_types=["g5.xlarge"], min_size=1, max_size=4),
            vpc=vpc,
            subnet_ids={"use1-az6": "subnet-0aaaaaaaaaaaaaaa1", "use1-az4": "subnet-0bbbbbbbbbbbbbbb2"},
            artifacts_bucket="research-artifacts-444444444444-us-east-1",
            model_s3_prefix="models/tiny-llama/neuron/",
            access_logs_bucket=s3.Bucket.from_bucket_name(self, "Logs", "research-logs-444444444444-us-east-1"),
            notifications_topic_arn="arn:aws:sns:us-east-1:444444444444:research-alerts",
            serve=ServeSpec(
                neuron="vllm serve $MODEL_DIR --device neuron --port $PORT",
                gpu="vllm serve $MODEL_DIR --port $PORT",
            ),
        )


def build(app: App) -> ChatServingStack:
    return ChatServingStack(app, "research-serving", env=Environment(account="444444444444", region="us-east-1"))


if __name__ == "__main__":
    app = App(outdir="cdk.out/examples")
    build(app)
    compliance.apply(app)  # the kit's cdk-nag rules (AwsSolutions) on your app: a finding fails synth
    app.synth()
