"""training: Trainium clusters (capacity, AMI, GPU pool, AWS Batch) and their rules against the catalog."""

from __future__ import annotations

import datetime as dt
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator

from neuronkit import catalog
from neuronkit.config.base import AZ_ID_RE, RESERVATION_RE, Strict, _foreign_az, _raise_all
from neuronkit.config.neuron import Workload, lnc_problem


class Ami(Strict):
    """Either a catalog AMI family, whose image a CDK context lookup finds at the first synth and pins in
    cdk.context.json (a Neuron DLAMI family: the image of the pool's Neuron release), or an AMI id of your own.
    Only `track: latest` resolves AWS's public SSM parameter at deploy instead."""

    family: str | None = Field(default=None, description="A family from neuronkit/catalog/amis.yaml.")
    track: Literal["release", "latest"] = Field(
        default="release",
        description="release: the image of the pool's Neuron release (GPU/ECS families: the newest at the first synth), "
        "pinned in cdk.context.json; latest: AWS's public latest parameter, re-resolved at every deploy (floating).",
    )
    ami_id: Annotated[str, Field(pattern=r"^ami-[0-9a-f]{8,17}$")] | None = None
    root_device_name: str | None = Field(default=None, description="Required with ami_id, e.g. /dev/sda1.")

    @model_validator(mode="after")
    def _one(self) -> Ami:
        # Whether the family exists and boots the cluster's type is checked with the cluster (_check_cluster).
        problems: list[tuple[str, str]] = []
        if self.family and self.ami_id:
            problems.append(("", "give either family or ami_id, not both; remove one"))
        if self.ami_id and not self.root_device_name:
            problems.append(("root_device_name", "required with ami_id (e.g. /dev/sda1 for Ubuntu, /dev/xvda for Amazon Linux)"))
        _raise_all(problems)
        return self


class OnDemand(Strict):
    type: Literal["on-demand"] = "on-demand"


class Odcr(Strict):
    """On-Demand Capacity Reservation: created by the stack (bills from creation) or an existing id."""

    type: Literal["odcr"]
    create: bool = Field(default=True, description="Create the reservation in the cluster's placement group.")
    reservation_id: Annotated[str, Field(pattern=RESERVATION_RE)] | None = None
    instance_count: int = Field(ge=1, description="Instances reserved.")
    end_date: dt.datetime | None = Field(default=None, description="Release a created reservation at this time (UTC).")
    keep_when_idle: bool = Field(
        default=False,
        description="A created reservation bills whether used or not: with idle_scale_down or a day/night shift "
        "that empties the cluster, validation refuses the file unless this says you accept paying for it.",
    )

    @model_validator(mode="after")
    def _check(self) -> Odcr:
        if self.create and self.reservation_id:
            why = "create: true, the default, makes a new reservation"
            _raise_all([("create", f"set create: false to use the existing reservation_id ({why})")])
        if not self.create and not self.reservation_id:
            fix = "name the existing reservation (cr-...) or set create: true"
            _raise_all([("reservation_id", f"required with create: false; {fix}")])
        return self


class CapacityBlock(Strict):
    """An EC2 Capacity Block for ML, bought outside CloudFormation and referenced by id."""

    type: Literal["capacity-block"]
    reservation_id: Annotated[str, Field(pattern=RESERVATION_RE)] | None = Field(
        default=None, description="The block's Capacity Reservation id (cr-...)."
    )
    reservation_ids: list[Annotated[str, Field(pattern=RESERVATION_RE)]] = Field(
        default_factory=list,
        description="UltraServer blocks: EC2 makes each UltraServer its own Capacity Block and reservation; list one id "
        "per UltraServer here instead of reservation_id (the cluster launches through a resource group of them).",
    )
    instance_type: str = Field(description="The block's instance type (must match the cluster).")
    az_id: Annotated[str, Field(pattern=AZ_ID_RE)] = Field(description="The block's AZ ID (must match the cluster).")
    instance_count: int = Field(ge=1)
    start: dt.datetime = Field(description="Block start (UTC, ISO 8601).")
    end: dt.datetime = Field(description="Block end (UTC, ISO 8601).")
    ultraserver_type: str | None = Field(
        default=None,
        description="An UltraServer block (e.g. u-trn2x64): instance_count still counts instances, 4 per u-trn2x64 UltraServer.",
    )
    drain_minutes: int = Field(
        default=15,
        ge=5,
        le=120,
        description="Before EC2 reclaims the nodes (30 minutes before the end), the cluster scales to zero this much "
        "earlier; each node asks its job to checkpoint and waits for it (a termination lifecycle hook).",
    )
    warn_hours_before_end: list[int] = Field(
        default_factory=lambda: [24, 2],
        description="Notify the alarm topic this many hours before the block ends (EC2 itself warns 40 minutes before).",
    )
    upfront_fee_usd: float | None = Field(
        default=None,
        gt=0,
        description="What the block cost (its UpfrontFee, shown by `neuronkit capacity offerings` and the purchase): "
        "`neuronkit cost` prices the cluster by it, since a block has its own rate, not the On-Demand one.",
    )
    fallback: Literal["none", "on-demand", "gpu-pool"] = Field(
        default="none",
        description="When the block ends: none; on-demand (an on-demand sibling cluster takes over the nodes); "
        "gpu-pool (the cluster's gpu_pool scales to its max_size).",
    )
    checkpoint_budget_minutes: int = Field(
        default=15,
        ge=1,
        le=120,
        description="How long a training job needs to write a checkpoint and stop (docs/training-on-eks.md): jobs are "
        "asked to checkpoint this long before the block's earliest drain, and `neuronkit job render --deadline` refuses "
        "a job that would run past it.",
    )

    @property
    def reservations(self) -> list[str]:
        """Every reservation of the block: one for an instance block, one per UltraServer for an UltraServer block."""
        return [self.reservation_id] if self.reservation_id else list(self.reservation_ids)

    @model_validator(mode="after")
    def _check(self) -> CapacityBlock:
        # Catalog facts (types sold, sizes) are checked with the cluster (_check_cluster), so that a
        # wrong block does not hide the cluster's other problems.
        problems: list[tuple[str, str]] = []
        longest = int(catalog.capacity_facts()["capacity_blocks"]["max_duration_days"])
        if self.end <= self.start:
            start, end = self.start.isoformat(), self.end.isoformat()
            problems.append(("end", f"{end} is not after start {start}; copy both from the block you bought"))
        elif self.end - self.start > dt.timedelta(days=longest):
            problems.append(
                ("end", f"a Capacity Block lasts at most {longest} days; copy start and end from the block you bought")
            )
        if self.reservation_id and self.reservation_ids:
            problems.append(
                ("reservation_ids", "give reservation_id (one block) or reservation_ids (one per UltraServer), not both")
            )
        elif not self.reservations:
            problems.append(
                ("reservation_id", "required key is missing; add the CapacityReservationId purchase-capacity-block printed")
            )
        elif self.reservation_ids and self.ultraserver_type is None:
            problems.append(
                (
                    "reservation_ids",
                    "only UltraServer blocks come as several reservations; use reservation_id for an instance block",
                )
            )
        if len(set(self.reservations)) != len(self.reservations):
            problems.append(("reservation_ids", "lists a reservation twice; list each UltraServer's reservation once"))
        _raise_all(problems)
        return self


Capacity = Annotated[OnDemand | Odcr | CapacityBlock, Field(discriminator="type")]


class TrainingCluster(Strict):
    """A Trainium cluster: one instance type in one AZ ID and a cluster placement group."""

    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,15}$")] = "train"
    instance_type: str = Field(description="A Trainium instance type, e.g. trn1.32xlarge.")
    az_id: Annotated[str, Field(pattern=AZ_ID_RE)] = Field(description="The AZ ID the cluster runs in, e.g. use1-az6.")
    min_size: int = Field(default=0, ge=0, description="Fewest nodes; 0 lets the cluster scale to zero.")
    max_size: int = Field(ge=1, description="Most nodes the cluster scales out to.")
    desired_size: int | None = Field(default=None, description="Defaults to min_size.")
    ami: Ami = Ami()
    capacity: Capacity = OnDemand()
    root_volume_gib: int | None = Field(
        default=None,
        ge=1,
        le=catalog.max_root_volume_gib(),
        description="Defaults to the catalog's minimum for the accelerator (512 GiB on Trainium).",
    )
    compile_cache: Literal["local", "s3"] = Field(
        default="local", description="Neuron compile cache on local NVMe or in the artifacts bucket."
    )
    scale_in_protection: bool = True
    idle_scale_down: bool = Field(
        default=False, description="When the idle alarm fires (monitoring.idle_*), scale this cluster to min_size."
    )
    scheduler: Literal["none", "batch"] = Field(
        default="none", description="none: a plain Auto Scaling cluster; batch: an AWS Batch compute environment and queue."
    )
    container_image: str | None = Field(
        default=None,
        description="scheduler: batch: the training container image of the job definition template; defaults to the "
        "release matrix's container for the cluster's neuron_sdk and workload.",
    )
    neuron_sdk: str | None = Field(
        default=None, description="Neuron SDK release of this cluster (overrides the top-level neuron_sdk), e.g. 2.28.1."
    )
    workload: Workload = Field(
        default="pytorch-training", description="What the cluster runs (checked against the release matrix)."
    )
    gpu_pool: GpuPool | None = Field(default=None, description="An optional GPU pool beside the cluster (CUDA-only steps).")
    ultraserver: str | None = Field(
        default=None,
        description="Run as whole UltraServers of this type (e.g. u-trn2x64: 4 x trn2u.48xlarge on one NeuronLink "
        "domain): sizes are multiples of its servers and the hostfile ranks each UltraServer's nodes together.",
    )
    lnc: Literal[1, 2] | None = Field(
        default=None,
        description="Logical NeuronCore setting (Trn2/Trn3: 1 or 2; defaults to the catalog's, 2), passed to the "
        "runtime as NEURON_LOGICAL_NC_CONFIG.",
    )
    cluster_queue: Annotated[str, Field(pattern=r"^[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?$")] | None = Field(
        default=None,
        description="platform: eks: an existing Kueue ClusterQueue (its cohort, fair sharing and quotas) the pool's "
        "jobs queue in: the kit creates the LocalQueue and a ResourceFlavor for the pool's node group pointing at it, "
        "not a ClusterQueue of its own, and `neuronkit summary` prints the stanza to add to it (docs/training-on-eks.md).",
    )


class GpuPool(Strict):
    """A GPU training pool beside a Trainium cluster: same storage, security and hostfile conventions."""

    instance_type: str = Field(description="A GPU instance type, e.g. p5.48xlarge or p4d.24xlarge.")
    az_id: Annotated[str, Field(pattern=AZ_ID_RE)] | None = Field(default=None, description="Defaults to the cluster's AZ ID.")
    min_size: int = Field(default=0, ge=0)
    max_size: int = Field(default=1, ge=1)
    desired_size: int | None = None
    ami: Ami = Ami()
    container_image: str | None = Field(
        default=None,
        description="scheduler: batch: the CUDA training image of the GPU pool's job definition template (required there).",
    )


def _check_cluster(loc: str, c: TrainingCluster, region: str | None, az_ids: list[str] | None) -> list[tuple[str, str]]:
    """Problems of one training cluster against the catalog, the region and network.az_ids (None: unknown)."""
    out: list[tuple[str, str]] = []

    def add(key: str, msg: str) -> None:
        out.append((f"{loc}.{key}", msg))

    types = catalog.instance_types()
    trainium = ", ".join(sorted(n for n, t in types.items() if t.accelerator == "trainium"))
    it = types.get(c.instance_type)
    named = catalog.named_types().get(c.instance_type)
    if it is None and named is not None:
        add(
            "instance_type",
            f"{c.instance_type} is a {named['family']} type [{named['source']}] whose chips, memory and EFA are not in the "
            f"catalog (neuronkit/catalog/trainium.yaml named_types); run `neuronkit catalog refresh` with an account "
            f"that offers it, or use a Trainium type: {trainium}",
        )
    elif it is None:
        add("instance_type", f"'{c.instance_type}' is not a known instance type; use a Trainium type: {trainium}")
    elif it.accelerator != "trainium":
        kind = "an inference-only Inferentia type" if it.accelerator == "inferentia" else f"a {it.accelerator} type"
        add("instance_type", f"'{c.instance_type}' is {kind}; a training cluster needs a Trainium type: {trainium}")
    elif it.efa_supported and "cluster" not in it.placement_strategies:
        add("instance_type", f"{c.instance_type} does not support cluster placement groups; use another Trainium type")

    foreign = _foreign_az(c.az_id, region) if region is not None else None
    if foreign:
        add("az_id", foreign)
    else:
        if az_ids is not None and c.az_id not in az_ids:
            add("az_id", f"'{c.az_id}' is not in network.az_ids; add it there")
        offered = it.az_ids(region) if it is not None and region is not None else None
        if offered is not None and c.az_id not in offered and not _sold_outside_offerings(c):
            fix = (
                f"use one of {', '.join(offered)}"
                if offered
                else f"it is offered in no AZ of {region}; use another region or type"
            )
            add("az_id", f"{c.instance_type} is not offered in {c.az_id} ({region}; {catalog.offerings_source()}); {fix}")
        elif offered is not None and c.az_id not in offered and isinstance(c.capacity, CapacityBlock):
            if c.capacity.fallback == "on-demand":
                add(
                    "capacity.fallback",
                    f"on-demand {c.instance_type} is not offered in {c.az_id} ({region}; {catalog.offerings_source()}); "
                    "use fallback: gpu-pool or none",
                )

    if c.min_size > c.max_size:
        add("min_size", f"min_size {c.min_size} is greater than max_size {c.max_size}; raise max_size or lower min_size")
    elif c.desired_size is not None and not c.min_size <= c.desired_size <= c.max_size:
        add("desired_size", f"{c.desired_size} must lie between min_size {c.min_size} and max_size {c.max_size}")

    ami_problem = _ami_problem(c, it)
    if ami_problem:
        add("ami.family", ami_problem)
    if it is not None:
        minimum = catalog.min_root_volume_gib(it)
        if c.root_volume_gib is not None and c.root_volume_gib < minimum:
            add("root_volume_gib", f"{c.root_volume_gib} GiB is below the {minimum} GiB a {it.accelerator} node needs; raise it")

    cap = c.capacity
    if isinstance(cap, Odcr) and c.max_size > cap.instance_count:
        fix = "lower max_size or raise capacity.instance_count"
        add("max_size", f"max_size {c.max_size} is more than the capacity reservation holds ({cap.instance_count}); {fix}")
    elif isinstance(cap, CapacityBlock):
        facts = catalog.capacity_facts()["capacity_blocks"]
        sold, sizes = facts["instance_types"], facts["sizes"]
        if cap.instance_type not in sold:
            add("capacity.instance_type", f"Capacity Blocks are not sold for {cap.instance_type}; use one of {', '.join(sold)}")
        if cap.instance_type != c.instance_type:
            add(
                "capacity.instance_type",
                f"the Capacity Block holds {cap.instance_type}, not the cluster's {c.instance_type}; make them match",
            )
        if cap.az_id != c.az_id:
            add("capacity.az_id", f"the Capacity Block is in {cap.az_id}, not the cluster's {c.az_id}; make them match")
        if cap.instance_count not in sizes:
            counts = ", ".join(map(str, sizes[:-1])) + f" or {sizes[-1]}"
            add("capacity.instance_count", f"{cap.instance_count} is not a Capacity Block size; use {counts}")
        if c.max_size > cap.instance_count:
            fix = "lower max_size or buy a larger block"
            add("max_size", f"max_size {c.max_size} is more than the Capacity Block holds ({cap.instance_count}); {fix}")
        elif c.max_size > facts["max_instances"]:
            add("max_size", f"a Capacity Block cluster holds at most {facts['max_instances']} nodes; lower max_size")
    if c.gpu_pool is not None:
        pool = c.gpu_pool
        gpu = types.get(pool.instance_type)
        if gpu is None or gpu.accelerator != "gpu":
            add("gpu_pool.instance_type", f"'{pool.instance_type}' is not a GPU type; use one of {', '.join(_gpu_types())}")
        else:
            az = pool.az_id or c.az_id
            offered = gpu.az_ids(region) if region is not None else None
            if offered is not None and az not in offered:
                add(
                    "gpu_pool.az_id",
                    f"{pool.instance_type} is not offered in {az} ({region}; {catalog.offerings_source()}); "
                    f"use one of {', '.join(offered) or 'none'}",
                )
            problem = _family_problem(pool.ami, "ecs-gpu" if c.scheduler == "batch" else "gpu", pool.instance_type)
            if problem:
                add("gpu_pool.ami.family", problem)
        if pool.az_id and az_ids is not None and pool.az_id not in az_ids:
            add("gpu_pool.az_id", f"'{pool.az_id}' is not in network.az_ids; add it there")
        if pool.min_size > pool.max_size:
            add(
                "gpu_pool.min_size",
                f"min_size {pool.min_size} is greater than max_size {pool.max_size}; raise max_size or lower min_size",
            )
    out.extend((f"{loc}.{key}", msg) for key, msg in _batch_problems(c))
    out.extend((f"{loc}.{key}", msg) for key, msg in _trainium_problems(c))
    return out


def _sold_outside_offerings(c: TrainingCluster) -> bool:
    """Capacity Block and UltraServer pools: EC2 sells them where the recorded on-demand offerings may not list the
    type (Trn2 UltraServer nodes are sold through blocks only). Outside the offerings they warn instead of failing."""
    block_here = isinstance(c.capacity, CapacityBlock) and c.capacity.az_id == c.az_id
    return block_here or c.ultraserver is not None


def block_only(instance_type: str, region: str | None) -> dict[str, Any] | None:
    """The catalog's sourced, dated fact that ``instance_type`` is sold only through Capacity Blocks in ``region``
    (capacity.yaml ``block_only``), or None."""
    if region is None:
        return None
    entry = (catalog.capacity_facts().get("block_only") or {}).get(instance_type, {}).get(region)
    return entry if isinstance(entry, dict) and entry.get("source") and entry.get("as_of") else None


def _on_demand_keys(c: TrainingCluster) -> list[str]:
    """The keys of a cluster that ask EC2 for on-demand capacity of its type: its capacity, or its block's fallback."""
    if isinstance(c.capacity, OnDemand):
        return ["capacity"]
    if isinstance(c.capacity, CapacityBlock) and c.capacity.fallback == "on-demand":
        return ["capacity.fallback"]
    return []


def block_only_problems(region: str | None, training: list[tuple[int, TrainingCluster]]) -> list[tuple[str, str]]:
    """A capacity problem for each on-demand pool of a type the catalog sources as sold only through Capacity Blocks
    in the region: it would never get capacity (independent of any budget setting)."""
    out = []
    for i, c in training:
        fact = block_only(c.instance_type, region)
        for key in _on_demand_keys(c) if fact else []:
            assert fact is not None
            out.append(
                (
                    f"training[{i}].{key}",
                    f"{c.instance_type} is sold only through EC2 Capacity Blocks for ML in {region} ({fact['source']}, "
                    f"read {fact['as_of']}): on-demand capacity of it cannot be had; buy a block (`neuronkit capacity "
                    f"offerings --type {c.instance_type} ...`) and set capacity: {{type: capacity-block, ...}}, or use an "
                    "existing reservation (capacity: {type: odcr, reservation_id: cr-...})",
                )
            )
    return out


def block_only_warnings(region: str, training: list[TrainingCluster]) -> list[tuple[str, str]]:
    """Without a sourced block-only fact: a warning for an on-demand pool of a type the catalog has no On-Demand price
    for and knows to be sold through Capacity Blocks (capacity.yaml ``unverified_block_only``)."""
    unverified = catalog.capacity_facts().get("unverified_block_only") or {}
    out = []
    for i, c in enumerate(training):
        if c.instance_type not in unverified or block_only(c.instance_type, region) is not None:
            continue
        for key in _on_demand_keys(c):
            out.append(
                (
                    f"training[{i}].{key}",
                    f"on-demand {c.instance_type} may get no capacity in {region}: {unverified[c.instance_type]}; the "
                    "catalog holds no sourced fact that it is block-only there, so this is a warning: prefer capacity: "
                    "{type: capacity-block, ...} or an existing reservation",
                )
            )
    return out


def offering_warnings(region: str, training: list[TrainingCluster]) -> list[tuple[str, str]]:
    """(key, line) for each Capacity Block or UltraServer cluster outside the catalog's offerings: accepted, named
    with the data's source and date. The same line acknowledges cfn-lint's region rule on the cluster's templates."""
    out = []
    for i, c in enumerate(training):
        it = catalog.instance_types().get(c.instance_type)
        if it is None or c.az_id in it.az_ids(region) or not _sold_outside_offerings(c):
            continue
        how = "a Capacity Block" if isinstance(c.capacity, CapacityBlock) else f"{c.ultraserver} UltraServers"
        out.append(
            (
                f"training[{i}].az_id",
                f"{c.instance_type} is not offered in {c.az_id} ({region}; {catalog.offerings_source()}); accepted because "
                f"the cluster runs on {how}, which EC2 sells apart from on-demand offerings; `neuronkit preflight` checks "
                "the block in the account and `neuronkit catalog refresh` updates the offerings",
            )
        )
    return out


def _trainium_problems(c: TrainingCluster) -> list[tuple[str, str]]:
    """UltraServers (whole units of the right type), the LNC setting, and Capacity Block lifecycle options."""
    out: list[tuple[str, str]] = []
    problem = lnc_problem([c.instance_type], c.lnc)
    if problem:
        out.append(("lnc", problem))
    cap = c.capacity
    if c.ultraserver is not None:
        unit = catalog.ultraserver(c.ultraserver)
        known = ", ".join(catalog.trainium_facts()["ultraservers"])
        if unit is None:
            out.append(("ultraserver", f"'{c.ultraserver}' is not an UltraServer type the catalog knows; use one of {known}"))
        else:
            servers = int(unit["servers"])
            if unit.get("instance_type") and unit["instance_type"] != c.instance_type:
                out.append(
                    (
                        "instance_type",
                        f"{c.ultraserver} UltraServers are built of {unit['instance_type']}; use it as instance_type",
                    )
                )
            elif not unit.get("instance_type"):
                out.append(
                    (
                        "ultraserver",
                        f"the catalog does not know the instance type of {c.ultraserver} servers yet; run `neuronkit catalog "
                        "refresh` with an account that offers it (docs/trainium.md)",
                    )
                )
            for key, value in (("min_size", c.min_size), ("max_size", c.max_size), ("desired_size", c.desired_size)):
                if value is not None and value % servers:
                    lower, upper = value // servers * servers, (value // servers + 1) * servers
                    fix = f"use {lower} or {upper}" if lower else f"use {upper}"
                    out.append((key, f"{value} is not whole {c.ultraserver} UltraServers ({servers} servers each); {fix}"))
            if isinstance(cap, CapacityBlock) and cap.ultraserver_type != c.ultraserver:
                out.append(
                    (
                        "capacity.ultraserver_type",
                        f"the cluster runs {c.ultraserver} UltraServers; buy an UltraServer block and set ultraserver_type: {c.ultraserver}",
                    )
                )
    if isinstance(cap, CapacityBlock):
        unit = catalog.ultraserver(cap.ultraserver_type) if cap.ultraserver_type else None
        if unit is not None and cap.instance_count % int(unit["servers"]):
            out.append(
                (
                    "capacity.instance_count",
                    f"{cap.instance_count} is not whole {cap.ultraserver_type} UltraServers ({unit['servers']} servers each)",
                )
            )
        elif unit is not None and len(cap.reservations) != cap.instance_count // int(unit["servers"]):
            wanted = cap.instance_count // int(unit["servers"])
            out.append(
                (
                    "capacity.reservation_ids",
                    f"{cap.instance_count} instances are {wanted} {cap.ultraserver_type} UltraServers, each its own reservation; "
                    f"list {wanted} ids, got {len(cap.reservations)}",
                )
            )
        if cap.ultraserver_type is not None and c.ultraserver is None:
            out.append(
                (
                    "ultraserver",
                    f"the Capacity Block is of {cap.ultraserver_type} UltraServers; set ultraserver: {cap.ultraserver_type}",
                )
            )
        if cap.fallback == "gpu-pool" and c.gpu_pool is None:
            out.append(("capacity.fallback", "gpu-pool needs the cluster's gpu_pool; add one or use on-demand or none"))
        if cap.fallback == "on-demand" and c.scheduler == "batch":
            out.append(
                ("capacity.fallback", "on-demand fallback is for Auto Scaling clusters; Batch queues take another environment")
            )
        longest = int(catalog.capacity_facts()["capacity_blocks"]["max_duration_days"])
        for j, hours in enumerate(cap.warn_hours_before_end):
            if hours < 1 or hours > 24 * longest:
                out.append(
                    (
                        f"capacity.warn_hours_before_end[{j}]",
                        f"{hours} is not between 1 hour and the {longest} days a block can last",
                    )
                )
    return out


def _batch_problems(c: TrainingCluster) -> list[tuple[str, str]]:
    """What scheduler: batch (an AWS Batch compute environment and queue) needs, or what only it uses."""
    out: list[tuple[str, str]] = []
    pool = c.gpu_pool
    if c.scheduler != "batch":
        unused = "only used with scheduler: batch; remove it or set scheduler: batch"
        if c.container_image is not None:
            out.append(("container_image", unused))
        if pool is not None and pool.container_image is not None:
            out.append(("gpu_pool.container_image", unused))
        return out
    # The Neuron image defaults to the release matrix's container (checked in neuronkit/config/neuron.py).
    if not isinstance(c.capacity, OnDemand):
        out.append(
            (
                "capacity.type",
                f"{c.capacity.type} is not available with scheduler: batch (AWS Batch runs multi-node jobs on on-demand "
                "capacity only); remove capacity or use scheduler: none",
            )
        )
    queue_sized = "AWS Batch sizes the compute environment from the jobs in its queue; remove it (min_size keeps nodes running)"
    if c.desired_size is not None:
        out.append(("desired_size", queue_sized))
    if c.idle_scale_down:
        out.append(("idle_scale_down", "AWS Batch scales an idle compute environment down to min_size by itself; remove it"))
    if pool is not None:
        if not pool.container_image:
            out.append(
                ("gpu_pool.container_image", "required with scheduler: batch (the CUDA training image of the GPU job definition)")
            )
        if pool.desired_size is not None:
            out.append(("gpu_pool.desired_size", queue_sized))
    return out


def ami_family(c: TrainingCluster) -> str | None:
    """The catalog AMI family a cluster's nodes boot (given, or the default for its scheduler); None when pinned.

    scheduler: batch nodes need an ECS-capable AMI (``ecs-neuron``); plain clusters boot a Neuron DLAMI.
    """
    if c.ami.ami_id:
        return None
    return c.ami.family or catalog.default_ami_family("ecs-neuron" if c.scheduler == "batch" else "neuron")


def gpu_ami_family(c: TrainingCluster) -> str | None:
    """The catalog AMI family of a cluster's GPU pool (given, or the default for the scheduler); None when pinned."""
    pool = c.gpu_pool
    if pool is None or pool.ami.ami_id:
        return None
    return pool.ami.family or catalog.default_ami_family("ecs-gpu" if c.scheduler == "batch" else "gpu")


def _gpu_types() -> list[str]:
    return sorted(n for n, t in catalog.instance_types().items() if t.accelerator == "gpu")


def _family_problem(ami: Ami, kind: str, instance_type: str) -> str | None:
    """An AMI family (given, or the default of ``kind``) that does not boot ``instance_type``."""
    fam = ami.family or (None if ami.ami_id else catalog.default_ami_family(kind))
    if fam is None:
        return None
    family = catalog.ami_families().get(fam)
    if family is None:
        return f"'{fam}' is not a known AMI family; use one of {', '.join(catalog.ami_families())}"
    good = [n for n, a in catalog.ami_families().items() if a.kind == kind and a.supports_type(instance_type)]
    if kind.startswith("ecs-") and family.kind != kind:
        return f"'{fam}' is not an ECS-optimized AMI family (AWS Batch nodes run the ECS agent); use one of {', '.join(good)}"
    if family.kind != kind or not family.supports_type(instance_type):
        return f"'{fam}' does not boot {instance_type}; use one of {', '.join(good) or 'a pinned ami_id'}"
    return None


_CAPACITY_TAGS: dict[str, type[BaseModel]] = {"on-demand": OnDemand, "odcr": Odcr, "capacity-block": CapacityBlock}


def _ami_problem(c: TrainingCluster, it: catalog.InstanceType | None) -> str | None:
    """What is wrong with the cluster's AMI family (given or default), or None."""
    families = catalog.ami_families()
    batch = c.scheduler == "batch"
    kind = "ecs-neuron" if batch else "neuron"
    allowed = [n for n, a in families.items() if a.kind == kind]
    fam = ami_family(c)
    if fam is None:
        return None
    ami = families.get(fam)
    if ami is None:
        return f"'{fam}' is not a known AMI family; use one of {', '.join(allowed)}"
    if it is None or not it.is_neuron:
        return None  # an unknown or GPU type is already reported on instance_type; its fix comes first
    named = f"'{fam}'" if c.ami.family else f"the default AMI family '{fam}'"
    good = [n for n in allowed if families[n].supports_type(c.instance_type)]
    fix = (
        f"use one of {', '.join(good)}"
        if good
        else "pin an ami_id of an ECS-capable AMI that supports it"
        if batch
        else "pin an ami_id of an AMI that supports it (Neuron DLAMIs dropped Inf1 in 2.26.1)"
    )
    if batch and ami.kind != kind:
        # Batch registers nodes with the compute environment's ECS cluster: a DLAMI has no ECS agent.
        return f"{named} is not an ECS-optimized AMI family (AWS Batch nodes run the ECS agent); {fix}"
    if not ami.supports_type(c.instance_type):
        return f"{named} does not support {c.instance_type}; {fix}"
    if ami.kind != kind:
        return f"'{fam}' is not a Neuron DLAMI family ({ami.kind}); {fix}"
    return None


def block_problems(training: list[TrainingCluster], now: dt.datetime) -> list[tuple[str, str]]:
    """(key, fix) for each Capacity Block whose scale-down time (end - EC2's reclaim lead - drain_minutes) is not
    after ``now``: Auto Scaling refuses a scheduled action in the past (PutScheduledUpdateGroupAction), so the block's
    scale-down cannot be scheduled. A block that started but scales down later is fine: it gets no start action.
    Time-dependent, so not part of the model's validation: ``neuronkit validate`` and synth call it with the clock."""
    reclaim = int(catalog.capacity_facts()["capacity_blocks"]["reclaim_minutes_before_end"])
    at = now if now.tzinfo else now.replace(tzinfo=dt.UTC)
    out: list[tuple[str, str]] = []
    for i, c in enumerate(training):
        cap = c.capacity
        if not isinstance(cap, CapacityBlock):
            continue
        end = cap.end if cap.end.tzinfo else cap.end.replace(tzinfo=dt.UTC)
        stop = end - dt.timedelta(minutes=reclaim + cap.drain_minutes)
        if stop <= at:
            iso = end.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
            out.append(
                (
                    f"training[{i}].capacity.end",
                    f"the Capacity Block {', '.join(cap.reservations)} is over (ends {iso}; its scale-down "
                    f"{stop.astimezone(dt.UTC).strftime('%Y-%m-%dT%H:%M:%SZ')} has passed and Auto Scaling refuses a "
                    "scheduled action in the past); remove the block or replace it with the new one you bought",
                )
            )
    return out
