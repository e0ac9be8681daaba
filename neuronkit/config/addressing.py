"""How many subnet addresses an environment needs, and how its VPC block is carved: plain Python.

Validation (neuronkit.config) refuses a file whose nodes cannot fit its VPC block, with the same arithmetic
the network construct uses to size its subnets, so both live here, free of CDK imports.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import TYPE_CHECKING

from neuronkit import catalog

if TYPE_CHECKING:
    from neuronkit.config.inference import InferenceFleet
    from neuronkit.config.training import TrainingCluster

# Addresses AWS reserves in every subnet (network, router, DNS, future, broadcast): Amazon VPC User Guide,
# "Subnet CIDR blocks".
RESERVED_PER_SUBNET = 5
PUBLIC_PREFIX = 26
# The smallest subnet AWS allows is a /28 (Amazon VPC User Guide, "Subnet CIDR blocks").
MAX_SUBNET_PREFIX = 28
# Addresses per AZ beyond the nodes: interface endpoints, Lustre servers, load balancers.
SERVICE_ADDRESSES = 64


def addresses_per_node(instance_type: catalog.InstanceType) -> int:
    """Subnet addresses one node takes: only the primary interface has one (efa-only take none)."""
    return 1


def batch_addresses_per_node(instance_type: catalog.InstanceType) -> int:
    """Subnet addresses one Batch node takes: the instance's, plus the ENI of its multi-node job task.

    Batch runs multi-node parallel jobs in the ECS ``awsvpc`` network mode, which gives each node's job
    container its own elastic network interface in the node's subnet.
    """
    return addresses_per_node(instance_type) + 1


def eks_pod_addresses(max_pods_per_node: int) -> int:
    """Addresses an EKS node takes beyond its own: with the VPC CNI (no prefix delegation) every pod gets an
    address of the node's subnet, and the CNI keeps ``warm_ip_target`` more ready (catalog/eks.yaml)."""
    return max_pods_per_node + int(catalog.eks_facts()["pods"]["warm_ip_target"])


def addresses_per_az(
    az_ids: Iterable[str], training: Iterable[TrainingCluster], inference: Iterable[InferenceFleet], pods_per_node: int = 0
) -> dict[str, int]:
    """Addresses each AZ ID's private subnet must hold at every pool's maximum size.

    ``pods_per_node`` (EKS, :func:`eks_pod_addresses`) adds each node's pod addresses, and each subnet keeps the
    control plane's addresses; 0 (the default platform) adds nothing.
    """
    base = SERVICE_ADDRESSES + (int(catalog.eks_facts()["pods"]["control_plane_addresses_per_subnet"]) if pods_per_node else 0)
    need = dict.fromkeys(az_ids, base)

    def add(az: str, count: int) -> None:
        need[az] = need.get(az, base) + count

    for c in training:
        # Batch nodes also hold their multi-node job's task ENI; the GPU pool is a compute environment too.
        per_node = batch_addresses_per_node if c.scheduler == "batch" else addresses_per_node
        add(c.az_id, c.max_size * (per_node(catalog.get(c.instance_type)) + pods_per_node))
        if c.gpu_pool is not None:
            add(
                c.gpu_pool.az_id or c.az_id,
                c.gpu_pool.max_size * (per_node(catalog.get(c.gpu_pool.instance_type)) + pods_per_node),
            )
    for f in inference:
        # The group balances across its AZ IDs, but when one AZ lacks capacity (or fails) every node
        # may land in another: size each of the fleet's subnets for the whole fleet.
        widest = max(addresses_per_node(catalog.get(t)) for t in (*f.neuron_types, *f.fallback_types)) + pods_per_node
        for az in f.az_ids:
            add(az, f.max_size * widest)
    return need


def private_prefix_for(addresses: int) -> int:
    """Smallest subnet (at most /24) holding ``addresses`` twice over, for rolling replacements: the smallest
    ``network.private_subnet_prefix`` that fits (validation suggests it); subnets are not sized by it."""
    need = 2 * addresses + RESERVED_PER_SUBNET
    prefix = 24
    while (1 << (32 - prefix)) < need:
        prefix -= 1
    return prefix


def largest_private_prefix(cidr: str, az_count: int, with_public: bool) -> int:
    """The default private subnet prefix: the largest subnets the VPC block holds beside the public ones.

    It depends on the block, the number of AZ IDs and whether there are public subnets only, never on the pools:
    raising a max_size must not move a subnet (a new CidrBlock replaces the subnet, and with it the file system
    and every node group inside). Validation checks that the pools fit (:func:`fits`)."""
    net = ipaddress.IPv4Network(cidr)
    for prefix in range(net.prefixlen + 1, MAX_SUBNET_PREFIX + 1):
        try:
            plan_subnets(cidr, az_count, prefix, with_public)
        except ValueError:
            continue
        return prefix
    raise ValueError(f"network.cidr: {cidr} cannot hold {az_count} private subnets")


def holds(prefix: int, addresses: int) -> bool:
    """Whether a /prefix subnet holds ``addresses`` twice over (rolling replacements) beside AWS's reserved ones."""
    return (1 << (32 - prefix)) >= 2 * addresses + RESERVED_PER_SUBNET


def plan_subnets(cidr: str, az_count: int, private_prefix: int, with_public: bool) -> tuple[list[str], list[str]]:
    """Carve private subnets from the start of the VPC block and /26 public subnets from its end.

    Raises ValueError with the fix when the block is too small.
    """
    net = ipaddress.IPv4Network(cidr)
    private = list(net.subnets(new_prefix=private_prefix))[:az_count] if private_prefix >= net.prefixlen else []
    public_pool = list(net.subnets(new_prefix=PUBLIC_PREFIX))
    public = public_pool[-az_count:] if with_public else []
    if len(private) < az_count or any(p.overlaps(q) for p in private for q in public):
        raise ValueError(
            f"network.cidr: {cidr} cannot hold {az_count} private /{private_prefix} subnets"
            + (f" and {az_count} public /{PUBLIC_PREFIX} subnets" if with_public else "")
            + "; use a larger block (e.g. a /16) or fewer nodes"
        )
    return [str(p) for p in private], [str(p) for p in public]
