"""Capacity pools: the Auto Scaling groups (and, on ``platform: eks``, the managed node groups) of an environment,
read from cdk.out or from the environment file.

Every Auto Scaling group and EKS node group the kit synthesizes carries CloudFormation resource Metadata under
the key ``neuronkit``::

    "Metadata": {"neuronkit": {"environment": "prod", "region": "us-east-1", "pool": "pretrain",
                               "role": "training", "instance_types": ["trn1.32xlarge"],
                               "neuron_types": ["trn1.32xlarge"], "fallback_types": [],
                               "min_size": 0, "max_size": 16, "desired_size": 16, "capacity": "odcr"}}

``instance_types`` is in launch priority order (for inference fleets the Neuron types first, then the GPU
fallback types). On ``platform: eks`` a fleet's GPU fallback types are a node group of their own (``<fleet>-gpu``),
whose Metadata says whose fallback it is: ``"fallback_for": "<fleet>"``; ``neuronkit cost`` compares the fleet with
that group's first type, as it compares an Auto Scaling fleet with its first GPU ``fallback_types`` entry. :func:`pools_from_cdk_out` reads that contract from ``cdk.out/*.template.json``;
:func:`pools_from_environment` derives the same pools from a validated environment without a synth.
Both return :class:`Pool` values, so ``neuronkit cost`` and the synth summary work from either source.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

METADATA_KEY = "neuronkit"
# A fleet's compile group (one node per new compiled-artifact key, docs/serving.md) carries this key
# instead: it is no capacity pool, so the readers here skip it.
COMPILE_METADATA_KEY = "neuronkit-precompile"
# How a launch template's (or compute environment's) image was chosen, as neuronkit.constructs.launch_template
# writes it (constructs/launch_template.py imports it from here). Here so the reports never import the CDK.
IMAGE_METADATA = "neuronkit:image"
ASG_TYPE = "AWS::AutoScaling::AutoScalingGroup"
# An EKS managed node group of the kit carries the same Metadata (neuronkit/constructs/eks/nodegroup.py).
NODEGROUP_TYPE = "AWS::EKS::Nodegroup"
# A training cluster with scheduler: batch is a Batch compute environment with the same Metadata (constructs/batch.py).
BATCH_TYPE = "AWS::Batch::ComputeEnvironment"
ROLES = ("training", "training-gpu", "inference")
CAPACITY_TYPES = ("on-demand", "odcr", "capacity-block")


def pool_metadata(
    *,
    environment: str,
    region: str,
    pool: str,
    role: str,
    neuron_types: list[str],
    fallback_types: list[str],
    min_size: int,
    max_size: int,
    desired_size: int | None,
    capacity: str,
    **extra: Any,
) -> dict[str, Any]:
    """The contract above, as the constructs write it (``extra``: az_id(s), listener, LNC, block dates...)."""
    return {
        "environment": environment,
        "region": region,
        "pool": pool,
        "role": role,
        "instance_types": [*neuron_types, *fallback_types],
        "neuron_types": list(neuron_types),
        "fallback_types": list(fallback_types),
        "min_size": min_size,
        "max_size": max_size,
        "desired_size": desired_size if desired_size is not None else min_size,
        "capacity": capacity,
        **extra,
    }


class PoolError(Exception):
    """A cdk.out folder or template that does not follow the Metadata contract; one line per problem."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


@dataclass(frozen=True)
class Pool:
    """One Auto Scaling group: what it launches and how many.

    ``stack`` is the CloudFormation stack (template) name, or None when the pool was derived from an
    environment file rather than read from cdk.out.
    """

    environment: str
    region: str
    pool: str
    role: str
    instance_types: tuple[str, ...]
    neuron_types: tuple[str, ...]
    fallback_types: tuple[str, ...]
    min_size: int
    max_size: int
    desired_size: int
    capacity: str
    stack: str | None = None
    reserved: int = 0  # instances of an On-Demand Capacity Reservation the stack creates (billed used or not)
    # A Capacity Block: what it cost (its UpfrontFee, paid at purchase) and how long it runs.
    block_fee: float | None = None
    block_hours: float | None = None
    # A fleet's compile groups (docs/serving.md): one node of each of these types runs while a rollout compiles new keys.
    compile_types: tuple[str, ...] = ()
    # platform: eks: the fleet whose GPU fallback node group this pool is (Metadata ``fallback_for``), else None.
    fallback_for: str | None = None

    @property
    def key(self) -> tuple[str, str, str]:
        """Identity of a pool across two synths (stack names may change, this does not)."""
        return (self.environment, self.pool, self.role)

    @property
    def primary_type(self) -> str:
        """The type the group launches first: the first Neuron type, else the first type."""
        return self.neuron_types[0] if self.neuron_types else self.instance_types[0]

    @property
    def label(self) -> str:
        return f"{self.environment}/{self.pool}"


# --------------------------------------------------------------------------------------------
# cdk.out
# --------------------------------------------------------------------------------------------
def pools_from_cdk_out(path: str | Path) -> list[Pool]:
    """Read every Auto Scaling group's (and the kit's EKS node groups' and Batch compute environments') ``neuronkit``
    Metadata under ``path``.

    Templates are found recursively (``cdk.out/assembly-*/`` holds the templates of CDK stages).
    Raises :class:`PoolError` when the folder holds no template, or when an Auto Scaling group lacks
    the Metadata or carries a malformed one (each problem names the file, the logical ID and the key).
    """
    root = Path(path)
    if not root.is_dir():
        raise PoolError([f"{root}: no such cdk.out folder; run `make synth` (or `cdk synth`) first"])
    templates = sorted(root.rglob("*.template.json"))
    if not templates:
        raise PoolError([f"{root}: holds no *.template.json; run `make synth` (or `cdk synth`) to fill it"])
    pools: list[Pool] = []
    problems: list[str] = []
    for file in templates:
        shown = str(file)
        try:
            template = json.loads(file.read_text())
        except (OSError, json.JSONDecodeError) as err:
            problems.append(f"{shown}: not a readable JSON template ({err})")
            continue
        stack = file.name.removesuffix(".template.json")
        resources = template.get("Resources", {}) if isinstance(template, dict) else {}
        for logical_id, resource in sorted(resources.items()):
            if not isinstance(resource, dict) or resource.get("Type") not in (ASG_TYPE, NODEGROUP_TYPE, BATCH_TYPE):
                continue
            where = f"{shown}: {logical_id}"
            meta = (resource.get("Metadata") or {}).get(METADATA_KEY)
            if meta is None and resource.get("Type") in (NODEGROUP_TYPE, BATCH_TYPE):
                continue  # a node group or compute environment another construct made (the kit's carry the Metadata)
            if meta is None and COMPILE_METADATA_KEY in (resource.get("Metadata") or {}):
                continue
            if meta is None:
                problems.append(
                    f"{where}: Auto Scaling group has no Metadata.{METADATA_KEY}; "
                    "re-synthesize with this neuronkit version (every group the kit makes carries it)"
                )
                continue
            try:
                pools.append(_pool_from_metadata(meta, stack))
            except _BadMetadata as err:
                problems.append(f"{where}: Metadata.{METADATA_KEY}.{err.key}: {err.message}")
    seen: dict[tuple[str, str, str], str | None] = {}
    for p in pools:
        if p.key in seen:
            problems.append(
                f"{root}: pool {p.label} ({p.role}) appears in both {seen[p.key]} and {p.stack}; pool names must be unique"
            )
        seen.setdefault(p.key, p.stack)
    if problems:
        raise PoolError(problems)
    return pools


class _BadMetadata(Exception):
    def __init__(self, key: str, message: str):
        self.key = key
        self.message = message
        super().__init__(f"{key}: {message}")


def _str(meta: dict[str, Any], key: str) -> str:
    value = meta.get(key)
    if not isinstance(value, str) or not value:
        raise _BadMetadata(key, f"expected a non-empty string, got {value!r}")
    return value


def _types(meta: dict[str, Any], key: str, *, required: bool) -> tuple[str, ...]:
    value = meta.get(key, [] if not required else None)
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise _BadMetadata(key, f"expected a list of instance type names, got {value!r}")
    if required and not value:
        raise _BadMetadata(key, "must name at least one instance type")
    return tuple(value)


def _optional_str(meta: dict[str, Any], key: str) -> str | None:
    return None if meta.get(key) is None else _str(meta, key)


def _int(meta: dict[str, Any], key: str) -> int:
    value = meta.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _BadMetadata(key, f"expected a whole number >= 0, got {value!r}")
    return value


def _pool_from_metadata(meta: Any, stack: str) -> Pool:
    if not isinstance(meta, dict):
        raise _BadMetadata("", f"expected a mapping, got {type(meta).__name__}")
    role = _str(meta, "role")
    if role not in ROLES:
        raise _BadMetadata("role", f"{role!r} is not one of {', '.join(ROLES)}")
    capacity = meta.get("capacity", "on-demand")
    if capacity not in CAPACITY_TYPES:
        raise _BadMetadata("capacity", f"{capacity!r} is not one of {', '.join(CAPACITY_TYPES)}")
    min_size, max_size = _int(meta, "min_size"), _int(meta, "max_size")
    # A group synthesized without a desired capacity starts at its minimum.
    desired = min_size if meta.get("desired_size") is None else _int(meta, "desired_size")
    if not min_size <= desired <= max_size:
        raise _BadMetadata("desired_size", f"{desired} is not between min_size {min_size} and max_size {max_size}")
    return Pool(
        environment=_str(meta, "environment"),
        region=_str(meta, "region"),
        pool=_str(meta, "pool"),
        role=role,
        instance_types=_types(meta, "instance_types", required=True),
        neuron_types=_types(meta, "neuron_types", required=False),
        fallback_types=_types(meta, "fallback_types", required=False),
        min_size=min_size,
        max_size=max_size,
        desired_size=desired,
        capacity=capacity,
        stack=stack,
        reserved=int(meta.get("reserved") or 0),
        compile_types=_types(meta, "compile_types", required=False),
        fallback_for=_optional_str(meta, "fallback_for"),
        **_block_from_metadata(meta),
    )


def _block_from_metadata(meta: dict[str, Any]) -> dict[str, float]:
    out: dict[str, float] = {}
    fee = meta.get("block_fee")
    if fee is not None:
        if isinstance(fee, bool) or not isinstance(fee, int | float) or fee <= 0:
            raise _BadMetadata("block_fee", f"expected a price in USD above 0, got {fee!r}")
        out["block_fee"] = float(fee)
    if meta.get("block_start") and meta.get("block_end"):
        try:
            start = dt.datetime.fromisoformat(str(meta["block_start"]).replace("Z", "+00:00"))
            end = dt.datetime.fromisoformat(str(meta["block_end"]).replace("Z", "+00:00"))
        except ValueError as err:
            raise _BadMetadata("block_end", f"expected ISO 8601 times, {err}") from None
        out["block_hours"] = (end - start).total_seconds() / 3600
    return out


# --------------------------------------------------------------------------------------------
# environment file
# --------------------------------------------------------------------------------------------
def _capacity_name(capacity: Any) -> str:
    if capacity is None:
        return "on-demand"
    if isinstance(capacity, str):
        return capacity
    return str(getattr(capacity, "type", "on-demand"))


def _block_of(capacity: Any) -> tuple[float | None, float | None]:
    """A Capacity Block's fee (None: not given) and hours; (None, None) for any other capacity."""
    if _capacity_name(capacity) != "capacity-block":
        return None, None
    fee = float(capacity.upfront_fee_usd) if capacity.upfront_fee_usd is not None else None
    return fee, (capacity.end - capacity.start).total_seconds() / 3600


def gpu_pool_name(cluster: str) -> str:
    """The pool name of a training cluster's GPU pool (also its Auto Scaling group suffix)."""
    return f"{cluster}-gpu"


def eks_fallback_pool_name(fleet: str, instance_type: str | None = None) -> str:
    """On ``platform: eks``, the node group of a fleet's GPU fallback types (beside the fleet's Neuron node group):
    ``<fleet>-gpu``, the first (or only) one; a served fleet's further types ``<fleet>-gpu-<type>`` (``.`` as ``-``)."""
    return f"{fleet}-gpu" if instance_type is None else f"{fleet}-gpu-{instance_type.replace('.', '-')}"


def eks_fallback_groups(fleet: str, fallback_types: Sequence[str], served: bool) -> list[tuple[str, list[str]]]:
    """On ``platform: eks``, a fleet's GPU fallback node groups as (pool name, types), in the file's order. A served
    fleet gets one group per type (each type has its own Deployment of whole-node pods and the spill fills them in
    order); the first keeps ``<fleet>-gpu``, so adding a type never replaces it. A fleet without a model keeps one
    group of all its fallback types."""
    if not fallback_types:
        return []
    if not served:
        return [(eks_fallback_pool_name(fleet), list(fallback_types))]
    return [(eks_fallback_pool_name(fleet, None if i == 0 else t), [t]) for i, t in enumerate(fallback_types)]


def fallback_pool_name(cluster: str) -> str:
    """The pool name of the on-demand cluster that takes over when a cluster's Capacity Block ends."""
    return f"{cluster}-ondemand"


def _on_demand(
    env: Any,
    pool: str,
    role: str,
    neuron: tuple[str, ...],
    gpu: tuple[str, ...],
    low: int,
    high: int,
    desired: int,
    fallback_for: str | None = None,
) -> Pool:
    """A pool of on-demand capacity beside a file's cluster or fleet (its GPU pool, its on-demand sibling, or on EKS
    its fallback node group, ``fallback_for`` the fleet)."""
    return Pool(
        environment=env.name, region=env.region, pool=pool, role=role, instance_types=neuron + gpu, neuron_types=neuron,
        fallback_types=gpu, min_size=low, max_size=high, desired_size=desired, capacity="on-demand",
        fallback_for=fallback_for,
    )  # fmt: skip


def pools_from_environment(env: Any) -> list[Pool]:
    """The pools an environment will synthesize: one per training cluster and one per inference fleet.

    Works with environments that have no ``inference`` section. Desired capacity defaults to the
    minimum, as in the environment file.
    """
    pools: list[Pool] = []
    for c in env.training:
        pools.append(
            Pool(
                environment=env.name,
                region=env.region,
                pool=c.name,
                role="training",
                instance_types=(c.instance_type,),
                neuron_types=(c.instance_type,),
                fallback_types=(),
                min_size=c.min_size,
                max_size=c.max_size,
                desired_size=c.min_size if c.desired_size is None else c.desired_size,
                capacity=_capacity_name(c.capacity),
                block_fee=_block_of(c.capacity)[0],
                block_hours=_block_of(c.capacity)[1],
            )
        )
        if getattr(c.capacity, "fallback", "none") == "on-demand":
            # The sibling cluster that takes over when the block ends: empty until then (stacks/training.py).
            pools.append(_on_demand(env, fallback_pool_name(c.name), "training", (c.instance_type,), (), 0, c.max_size, 0))
        gpu = c.gpu_pool
        if gpu is not None:
            desired = gpu.min_size if gpu.desired_size is None else gpu.desired_size
            pools.append(
                _on_demand(
                    env, gpu_pool_name(c.name), "training-gpu", (), (gpu.instance_type,), gpu.min_size, gpu.max_size, desired
                )
            )
    eks = getattr(env, "platform", "asg") == "eks"
    for f in env.inference:
        neuron = tuple(f.neuron_types)
        fallback = tuple(f.fallback_types)
        desired = f.desired_size
        # EKS: a served fleet's groups keep room above the serving maximum for the compile Job and a surge pod
        # (kubernetes/serving.headroom_nodes), as stacks/eks.py sizes them.
        from neuronkit.kubernetes.serving import headroom_nodes

        served = eks and f.model is not None
        if eks and fallback:
            # EKS: the fallback types are node groups of their own (one per type for a served fleet), each empty at
            # first and up to the fleet's max_size (stacks/eks.py), so the fleet's maximum is the groups' together.
            high = f.max_size + (headroom_nodes("gpu") if served else 0)
            for name, types in eks_fallback_groups(f.name, fallback, served):
                pools.append(_on_demand(env, name, "inference", (), tuple(types), 0, high, 0, f.name))
            fallback = ()
        pools.append(
            Pool(
                environment=env.name,
                region=env.region,
                pool=f.name,
                role="inference",
                instance_types=neuron + fallback,
                neuron_types=neuron,
                fallback_types=fallback,
                min_size=f.min_size,
                max_size=f.max_size + (headroom_nodes("neuron") if served else 0),
                desired_size=f.min_size if desired is None else desired,
                capacity="on-demand",
                compile_types=neuron if f.model is not None and f.precompile else (),
            )
        )
    return pools
