from __future__ import annotations

from typing import Any

from constructs import Construct

from neuronkit import catalog
from neuronkit.config import Environment
from neuronkit.constructs.batch import batch_addresses_per_node
from neuronkit.constructs.launch_template import addresses_per_node
from neuronkit.constructs.network import AcceleratorNetwork
from neuronkit.stacks.base import NeuronkitStack

# Addresses per AZ beyond the nodes: interface endpoints, Lustre servers, load balancers.
_SERVICE_ADDRESSES = 64


def addresses_per_az(config: Environment) -> dict[str, int]:
    need = {az: _SERVICE_ADDRESSES for az in config.network.az_ids}
    for cluster in config.training:
        if cluster.scheduler == "batch":
            # Batch nodes also hold their multi-node job's task ENI; the GPU pool is a compute environment too.
            need[cluster.az_id] += cluster.max_size * batch_addresses_per_node(catalog.get(cluster.instance_type))
            pool = cluster.gpu_pool
            if pool is not None:
                need[pool.az_id or cluster.az_id] += pool.max_size * batch_addresses_per_node(catalog.get(pool.instance_type))
            continue
        need[cluster.az_id] += cluster.max_size * addresses_per_node(catalog.get(cluster.instance_type))
        gpu = cluster.gpu_pool
        if gpu is not None:
            need[gpu.az_id or cluster.az_id] += gpu.max_size * addresses_per_node(catalog.get(gpu.instance_type))
    for fleet in config.inference:
        # The group balances across its AZ IDs, but when one AZ lacks capacity (or fails) every node
        # may land in another: size each of the fleet's subnets for the whole fleet.
        per_node = max(addresses_per_node(catalog.get(t)) for t in (*fleet.neuron_types, *fleet.fallback_types))
        for az in fleet.az_ids:
            need[az] += fleet.max_size * per_node
    return need


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
            nat_gateways=net.nat_gateways,
            interface_endpoints=net.interface_endpoints,
            flow_log_retention_days=net.flow_log_retention_days,
            existing_vpc_id=net.existing.vpc_id if net.existing else None,
            existing_subnet_ids=net.existing.subnet_ids if net.existing else None,
        )
