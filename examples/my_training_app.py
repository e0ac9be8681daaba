#!/usr/bin/env python3
"""A user's own CDK app that reuses neuronkit's constructs with its own VPC and stack.

    python examples/my_training_app.py        # synthesizes into cdk.out/examples

It creates storage and a 4-node trn1.32xlarge cluster inside an existing VPC (ids of your own).
"""

from __future__ import annotations

from aws_cdk import App, Environment, Stack
from aws_cdk import aws_ec2 as ec2
from constructs import Construct

from neuronkit.constructs import AmiSpec, NodePoolSpec, TrainingCluster, TrainingStorage
from neuronkit.constructs.storage import LustreSpec


class ResearchTrainingStack(Stack):
    def __init__(self, scope: Construct, id: str, **kwargs: object) -> None:
        super().__init__(scope, id, **kwargs)  # type: ignore[arg-type]
        vpc = ec2.Vpc.from_vpc_attributes(
            self,
            "Vpc",
            vpc_id="vpc-0a1b2c3d4e5f67890",
            availability_zones=["us-east-1a"],
            private_subnet_ids=["subnet-0a1b2c3d4e5f67890"],
            private_subnet_route_table_ids=["rtb-0a1b2c3d4e5f67890"],
        )
        storage = TrainingStorage(
            self,
            "Storage",
            vpc=vpc,
            subnet_id="subnet-0a1b2c3d4e5f67890",
            lustre=LustreSpec(deployment_type="SCRATCH_2", size_gib=2400),
        )
        self.cluster = TrainingCluster(
            self,
            "Cluster",
            environment="research",
            name="llama",
            nodes=NodePoolSpec("trn1.32xlarge", max_size=4, ami=AmiSpec.family("neuron-base-ubuntu-24.04")),
            vpc=vpc,
            subnet_id="subnet-0a1b2c3d4e5f67890",
            az_id="use1-az6",
            storage=storage.access(),
        )


def build(app: App) -> ResearchTrainingStack:
    return ResearchTrainingStack(app, "research-training", env=Environment(account="444444444444", region="us-east-1"))


if __name__ == "__main__":
    app = App(outdir="cdk.out/examples")
    build(app)
    app.synth()
