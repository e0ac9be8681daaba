from __future__ import annotations

from typing import Any

from constructs import Construct

from neuronkit import catalog
from neuronkit.config import Environment, addressing
from neuronkit.constructs.network import AcceleratorNetwork
from neuronkit.stacks.base import NeuronkitStack


def addresses_per_az(config: Environment) -> dict[str, int]:
    eks = config.eks if config.platform == "eks" else None
    pods = addressing.eks_pod_addresses(eks.max_pods_per_node) if eks is not None else 0
    return addressing.addresses_per_az(config.network.az_ids, config.training, config.inference, pods_per_node=pods)


def batch_on_efa(config: Environment) -> bool:
    """Whether a Batch pool of the environment runs on an EFA type: its multi-node containers then live in the
    VPC's default security group (docs/batch.md)."""
    for c in config.training:
        if c.scheduler != "batch":
            continue
        types = [c.instance_type] + ([c.gpu_pool.instance_type] if c.gpu_pool is not None else [])
        if any(catalog.get(t).efa_supported for t in types):
            return True
    return False


class NetworkStack(NeuronkitStack):
    """The VPC (or the imported one) and its endpoints."""

    def __init__(self, scope: Construct, id: str, *, config: Environment, **kwargs: Any) -> None:
        super().__init__(scope, id, config=config, description="network", **kwargs)
        net = config.network
        self.network = AcceleratorNetwork(
            self,
            "Network",
            az_ids=net.az_ids,
            cidr=net.cidr,
            addresses_per_az=addresses_per_az(config),
            private_prefix=net.private_subnet_prefix,
            nat_gateways=net.nat_gateways,
            interface_endpoints=net.interface_endpoints,
            flow_log_retention_days=net.flow_log_retention_days,
            existing_vpc_id=net.existing.vpc_id if net.existing else None,
            existing_subnet_ids=net.existing.subnet_ids if net.existing else None,
            batch_task_default_group=batch_on_efa(config),
        )
        if net.existing is not None:
            self._record_existing(config)

    def _record_existing(self, config: Environment) -> None:
        """An existing VPC: the stack creates none of its network, and a CloudFormation template needs one resource.
        It records what the environment deploys into (the VPC and the subnet of each AZ ID) in an SSM parameter, which
        `aws ssm get-parameter` shows and deleting the stack removes; nothing of the VPC is changed."""
        import json

        from aws_cdk import aws_ssm as ssm

        existing = config.network.existing
        assert existing is not None
        ssm.StringParameter(
            self,
            "ExistingVpc",
            parameter_name=f"/neuronkit/{config.name}/network",
            string_value=json.dumps({"vpc_id": existing.vpc_id, "subnet_ids": dict(existing.subnet_ids)}, sort_keys=True),
            description=f"neuronkit {config.name}: the existing VPC and subnets the environment deploys into",
        )
