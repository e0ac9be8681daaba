"""The environment file: a typed, validated description of one neuronkit environment.

``environments/<name>.yaml`` is parsed into frozen pydantic models. Every check that can be made
without AWS runs here (instance types, AZ-ID offerings and AMI support come from the catalog), and
every problem is reported as one line naming the file, the key path and the fix, e.g.::

    environments/prod.yaml: training[0].instance_type: 'trn9.big' is not a known instance type; ...

``load_environment`` raises :class:`ConfigError` holding all problems of a file at once.
"""

from __future__ import annotations

import datetime as dt
import difflib
import ipaddress
import re
import typing
import zoneinfo
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic.fields import FieldInfo

from neuronkit import catalog

ACCOUNT_RE = r"^\d{12}$"
REGION_RE = r"^[a-z]{2}(-gov)?-[a-z]+-\d$"
AZ_ID_RE = r"^[a-z]{2,5}\d-az\d+$"
NAME_RE = r"^[a-z][a-z0-9-]{0,23}$"
RESERVATION_RE = r"^cr-[0-9a-f]{8}([0-9a-f]{9})?$"

SERVE_COMMAND_MAX = 1024
CRON_RE = r"^\s*(\S+\s+){4}\S+\s*$"

LUSTRE_THROUGHPUT = {"PERSISTENT_2": (125, 250, 500, 1000)}
# The retention periods CloudWatch Logs accepts (AWS::Logs::LogGroup RetentionInDays).
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)

# Interface endpoints nodes use, so S3/SSM/logs/metrics/ECR traffic never crosses the NAT gateway.
DEFAULT_INTERFACE_ENDPOINTS = (
    "ssm",
    "ssmmessages",
    "ec2messages",
    "logs",
    "monitoring",
    "sts",
    "ecr.api",
    "ecr.dkr",
)


class ConfigError(Exception):
    """One or more problems in environment files; ``problems`` holds one line each."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class _MultiProblem(ValueError):
    """Raised by a validator with every problem it found, as (key path relative to the model, message)."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{k}: {m}" if k else m for k, m in problems))


def _raise_all(problems: list[tuple[str, str]]) -> None:
    # Validators collect every problem of their section, so one run reports all of them.
    if problems:
        raise _MultiProblem(problems)


# --------------------------------------------------------------------------------------------
# network
# --------------------------------------------------------------------------------------------
class ExistingVpc(Strict):
    """An existing VPC to deploy into instead of creating one."""

    vpc_id: Annotated[str, Field(pattern=r"^vpc-[0-9a-f]{8,17}$")]
    subnet_ids: dict[Annotated[str, Field(pattern=AZ_ID_RE)], Annotated[str, Field(pattern=r"^subnet-[0-9a-f]{8,17}$")]] = Field(
        description="Private subnet for each AZ ID the environment uses."
    )


class Network(Strict):
    """VPC layout. Subnets are placed by AZ ID, never by AZ name."""

    az_ids: list[Annotated[str, Field(pattern=AZ_ID_RE)]] = Field(
        min_length=1, description="AZ IDs (e.g. use1-az6) to create subnets in."
    )
    cidr: str = Field(default="10.0.0.0/16", description="VPC CIDR block (a /16 to /20).")
    nat_gateways: int = Field(default=1, ge=0, description="NAT gateways for outbound internet (pip, registries). 0 = isolated.")
    interface_endpoints: list[str] = Field(default=list(DEFAULT_INTERFACE_ENDPOINTS))
    flow_log_retention_days: int = Field(default=90, ge=1)
    existing: ExistingVpc | None = None

    @model_validator(mode="after")
    def _check(self) -> Network:
        problems: list[tuple[str, str]] = []
        for i, az in enumerate(self.az_ids):
            if az in self.az_ids[:i]:
                problems.append((f"az_ids[{i}]", f"'{az}' is listed twice; AZ IDs must be unique, remove one"))
        try:
            net = ipaddress.ip_network(self.cidr)
        except ValueError:
            problems.append(("cidr", f"'{self.cidr}' is not a CIDR block; use e.g. 10.0.0.0/16"))
        else:
            if not 16 <= net.prefixlen <= 20:
                problems.append(("cidr", f"'{self.cidr}' must be a /16 to /20 block, e.g. 10.0.0.0/16"))
        if self.nat_gateways > len(self.az_ids):
            problems.append(("nat_gateways", f"{self.nat_gateways} is more than one per AZ ID ({len(self.az_ids)}); lower it"))
        if self.existing is not None:
            missing = [a for a in self.az_ids if a not in self.existing.subnet_ids]
            if missing:
                problems.append(
                    ("existing.subnet_ids", f"no subnet for AZ ID(s) {', '.join(missing)}; add one per entry of network.az_ids")
                )
        _raise_all(problems)
        return self


# --------------------------------------------------------------------------------------------
# storage
# --------------------------------------------------------------------------------------------
class Lustre(Strict):
    """FSx for Lustre 2.15 scratch or persistent file system."""

    deployment_type: Literal["SCRATCH_2", "PERSISTENT_2"] = "SCRATCH_2"
    size_gib: int = Field(default=1200, description="1200, 2400, then steps of 2400 GiB.")
    throughput_mbps_per_tib: int | None = Field(default=None, description="PERSISTENT_2 only: 125, 250, 500 or 1000.")
    az_id: Annotated[str, Field(pattern=AZ_ID_RE)] | None = Field(
        default=None, description="Defaults to the first training cluster's AZ ID."
    )
    link_checkpoints: bool = Field(
        default=True,
        description="Also link the checkpoints bucket at /checkpoints, with automatic export to S3 "
        "(Lustre 2.15 SCRATCH_2 and PERSISTENT_2 both take up to 8 associations).",
    )

    @model_validator(mode="after")
    def _check(self) -> Lustre:
        problems: list[tuple[str, str]] = []
        size, kind, tput = self.size_gib, self.deployment_type, self.throughput_mbps_per_tib
        if size not in (1200, 2400) and not (size > 2400 and size % 2400 == 0):
            below, above = (1200, 2400) if size < 2400 else (size // 2400 * 2400, size // 2400 * 2400 + 2400)
            problems.append(
                ("size_gib", f"{size} is not valid for {kind}; use 1200, 2400 or a multiple of 2400 (e.g. {below} or {above})")
            )
        allowed = LUSTRE_THROUGHPUT.get(kind)
        choices = ", ".join(map(str, allowed or ()))
        if allowed is None and tput is not None:
            problems.append(
                ("throughput_mbps_per_tib", f"{kind} has a fixed throughput (200 MB/s/TiB); remove the key or use PERSISTENT_2")
            )
        elif allowed is not None and tput is None:
            problems.append(("throughput_mbps_per_tib", f"required for {kind}; use one of {choices}"))
        elif allowed is not None and tput not in allowed:
            problems.append(("throughput_mbps_per_tib", f"{tput} is not valid for {kind}; use one of {choices}"))
        _raise_all(problems)
        return self


class Storage(Strict):
    """Buckets (datasets, checkpoints, artifacts) and an optional Lustre file system."""

    lustre: Lustre | None = None
    checkpoint_noncurrent_days: int = Field(default=30, ge=1, description="Keep old checkpoint versions this many days.")


# --------------------------------------------------------------------------------------------
# training
# --------------------------------------------------------------------------------------------
class Ami(Strict):
    """Either a catalog AMI family (resolved from its public SSM parameter at deploy) or a pinned id."""

    family: str | None = Field(default=None, description="A family from neuronkit/catalog/amis.yaml.")
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
    reservation_id: Annotated[str, Field(pattern=RESERVATION_RE)]
    instance_type: str = Field(description="The block's instance type (must match the cluster).")
    az_id: Annotated[str, Field(pattern=AZ_ID_RE)] = Field(description="The block's AZ ID (must match the cluster).")
    instance_count: int = Field(ge=1)
    start: dt.datetime = Field(description="Block start (UTC, ISO 8601).")
    end: dt.datetime = Field(description="Block end (UTC, ISO 8601).")

    @model_validator(mode="after")
    def _check(self) -> CapacityBlock:
        # Catalog facts (types sold, sizes) are checked with the cluster (_check_cluster), so that a
        # wrong block does not hide the cluster's other problems.
        if self.end <= self.start:
            start, end = self.start.isoformat(), self.end.isoformat()
            _raise_all([("end", f"{end} is not after start {start}; copy both from the block you bought")])
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
        default=None, description="Defaults to the catalog's minimum for the accelerator (512 GiB on Trainium)."
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
        default=None, description="scheduler: batch: the training container image of the job definition template."
    )
    gpu_pool: GpuPool | None = Field(default=None, description="An optional GPU pool beside the cluster (CUDA-only steps).")


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


class HealthCheck(Strict):
    path: str = Field(default="/health", pattern=r"^/")
    port: int = Field(default=8080, ge=1, le=65535)
    protocol: Literal["HTTP", "TCP"] = "HTTP"
    interval_seconds: int = Field(default=15, ge=5, le=300)
    healthy_threshold: int = Field(default=2, ge=2, le=10)
    unhealthy_threshold: int = Field(default=3, ge=2, le=10)


class Serve(Strict):
    """Commands that start the model server, per accelerator family (run as a systemd unit)."""

    neuron: str = Field(description="Server command on Inferentia/Trainium nodes; $MODEL_DIR holds the model.")
    gpu: str | None = Field(default=None, description="Server command on GPU fallback nodes (required with fallback_types).")
    gpu_port: int | None = Field(default=None, description="Only to state it: GPU nodes must serve on the fleet's port.")
    gpu_health_check_path: str | None = Field(default=None, description="Only to state it: must equal health_check.path.")


class ScheduledCapacity(Strict):
    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,31}$")]
    cron: str = Field(description="Recurrence in cron format, e.g. '0 8 * * 1-5'.")
    min_size: int | None = Field(default=None, ge=0)
    max_size: int | None = Field(default=None, ge=0)
    desired_size: int | None = Field(default=None, ge=0)


class InferenceFleet(Strict):
    """An Auto Scaling group of Inferentia instances behind a load balancer, with GPU fallback."""

    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,15}$")] = "serve"
    neuron_types: list[str] = Field(min_length=1, description="Inferentia (or Trainium) types, in priority order.")
    fallback_types: list[str] = Field(default_factory=list, description="GPU types launched when Neuron capacity is short.")
    az_ids: list[Annotated[str, Field(pattern=AZ_ID_RE)]] = Field(min_length=2, description="At least two AZ IDs.")
    min_size: int = Field(default=1, ge=0)
    max_size: int = Field(ge=1)
    desired_size: int | None = None
    load_balancer: Literal["alb", "nlb"] = Field(default="alb", description="alb: HTTP servers; nlb: gRPC/TCP servers.")
    internal: bool = True
    port: int = Field(default=8080, ge=1, le=65535)
    health_check: HealthCheck = HealthCheck()
    health_check_grace_seconds: int = Field(default=900, ge=60, description="Neuron models can take minutes to load.")
    warmup_seconds: int = Field(default=600, ge=0, description="Instance warm-up before a node counts for scaling.")
    model_s3_prefix: str = Field(description="Compiled Neuron artifacts under the artifacts bucket, e.g. models/llama/neuron/.")
    gpu_model_s3_prefix: str | None = Field(default=None, description="Model for GPU nodes; defaults to model_s3_prefix.")
    serve: Serve
    requests_per_target: int = Field(default=100, ge=1, description="Target tracking on ALB requests per target per minute.")
    min_healthy_percentage: int = Field(default=90, ge=0, le=100, description="Instance refresh keeps this much in service.")
    scheduled_actions: list[ScheduledCapacity] = Field(default_factory=list)
    neuron_ami: Ami = Ami()
    gpu_ami: Ami = Ami()
    rebalance_minutes: int = Field(default=30, ge=5, description="How often the rebalancer moves GPU nodes back to Neuron.")


class Alarms(Strict):
    """Alarm thresholds; each has a default that suits most environments."""

    idle_utilization_percent: float = Field(default=5.0, ge=0, le=100)
    idle_minutes: int = Field(default=60, ge=5, le=1440, description="One-minute alarm points: at most a day.")
    p99_latency_ms: int = Field(default=2000, ge=1)
    error_5xx_percent: float = Field(default=5.0, ge=0, le=100)
    fallback_hours: int = Field(
        default=6, ge=1, le=168, description="GPU fallback instances in service for longer than this (at most a week)."
    )
    lustre_free_percent: float = Field(default=10.0, ge=0, le=100)
    quota_usage_percent: float = Field(default=80.0, ge=1, le=100)
    execution_errors: int = Field(
        default=0, ge=0, description="Neuron execution errors per pool in 5 minutes above which the alarm fires."
    )


class DayNight(Strict):
    """Serve by day, train by night: scheduled capacity for the inference fleets and training clusters."""

    time_zone: str = Field(default="UTC", description="IANA time zone, e.g. America/New_York.")
    day_starts: str = Field(default="08:00", pattern=r"^([01]\d|2[0-3]):[0-5]\d$")
    night_starts: str = Field(default="20:00", pattern=r"^([01]\d|2[0-3]):[0-5]\d$")
    inference_day_desired: int = Field(ge=0)
    inference_night_desired: int = Field(ge=0)
    training_night_desired: int = Field(ge=0)
    training_day_desired: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _check(self) -> DayNight:
        problems: list[tuple[str, str]] = []
        try:
            zoneinfo.ZoneInfo(self.time_zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            problems.append(
                ("time_zone", f"'{self.time_zone}' is not an IANA time zone; use e.g. America/New_York, Europe/Paris or UTC")
            )
        if self.day_starts == self.night_starts:
            problems.append(
                ("night_starts", f"equals day_starts ({self.day_starts}); the day and the night need different start times")
            )
        _raise_all(problems)
        return self


class Monitoring(Strict):
    emails: list[Annotated[str, Field(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")]] = Field(default_factory=list)
    log_retention_days: int = Field(default=30, ge=1)
    namespace: str = Field(default="Neuronkit", description="CloudWatch namespace of the Neuron metrics.")
    alarms: Alarms = Alarms()
    day_night: DayNight | None = None

    @model_validator(mode="after")
    def _check(self) -> Monitoring:
        if self.log_retention_days not in LOG_RETENTION_DAYS:
            close = min(LOG_RETENTION_DAYS, key=lambda d: abs(d - self.log_retention_days))
            allowed = ", ".join(map(str, LOG_RETENTION_DAYS))
            _raise_all(
                [
                    (
                        "log_retention_days",
                        f"{self.log_retention_days} is not a CloudWatch Logs retention; use e.g. {close} ({allowed})",
                    )
                ]
            )
        return self


class Budget(Strict):
    monthly_usd: float = Field(gt=0, description="Monthly limit; notifications at 80% and 100%.")


class Environment(Strict):
    """One neuronkit environment (one file under environments/)."""

    schema_: str | None = Field(default=None, alias="$schema", description="Editor hint; ignored.")
    name: Annotated[str, Field(pattern=NAME_RE)]
    account: Annotated[str, Field(pattern=ACCOUNT_RE, description="12-digit AWS account id.")]
    region: Annotated[str, Field(pattern=REGION_RE, description="AWS region, e.g. us-east-1.")]
    cost_center: str = "ml-platform"
    tags: dict[str, str] = Field(default_factory=dict)
    network: Network = Field(description="VPC layout with az_ids, e.g. az_ids: [use1-az6].")
    storage: Storage = Storage()
    training: list[TrainingCluster] = Field(default_factory=list)
    inference: list[InferenceFleet] = Field(default_factory=list)
    monitoring: Monitoring = Monitoring()
    budget: Budget | None = None

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _cross(self) -> Environment:
        problems = _cross_problems(self.region, self.network, self.storage, list(enumerate(self.training)))
        problems += _inference_problems(self.region, self.network, list(enumerate(self.inference)))
        problems += _day_night_problems(self.monitoring.day_night, self.training, self.inference)
        _raise_all(problems)
        return self

    @property
    def lustre_az_id(self) -> str | None:
        lustre = self.storage.lustre
        if lustre is None:
            return None
        if lustre.az_id:
            return lustre.az_id
        return self.training[0].az_id if self.training else self.network.az_ids[0]


def _day_night_problems(
    shift: DayNight | None, clusters: list[TrainingCluster], fleets: list[InferenceFleet]
) -> list[tuple[str, str]]:
    """Each day/night capacity must lie within the size limits of every group it is applied to."""
    if shift is None:
        return []
    out: list[tuple[str, str]] = []
    key = "monitoring.day_night"
    for field, value in (
        ("inference_day_desired", shift.inference_day_desired),
        ("inference_night_desired", shift.inference_night_desired),
    ):
        for i, f in enumerate(fleets):
            if not f.min_size <= value <= f.max_size:
                out.append(
                    (
                        f"{key}.{field}",
                        f"{value} is outside inference[{i}] ({f.name})'s min_size {f.min_size} .. max_size {f.max_size}; pick a value in that range",
                    )
                )
    for field, value in (
        ("training_night_desired", shift.training_night_desired),
        ("training_day_desired", shift.training_day_desired),
    ):
        for i, c in enumerate(clusters):
            if c.scheduler != "none" or isinstance(c.capacity, CapacityBlock):
                continue  # Batch sizes its own compute environment; a Capacity Block cluster follows the block's schedule
            if not c.min_size <= value <= c.max_size:
                out.append(
                    (
                        f"{key}.{field}",
                        f"{value} is outside training[{i}] ({c.name})'s min_size {c.min_size} .. max_size {c.max_size}; pick a value in that range",
                    )
                )
    return out


_CAPACITY_TAGS: dict[str, type[BaseModel]] = {"on-demand": OnDemand, "odcr": Odcr, "capacity-block": CapacityBlock}


# --------------------------------------------------------------------------------------------
# checks across sections (catalog facts, AZ IDs, capacity)
# --------------------------------------------------------------------------------------------
def _cross_problems(
    region: str | None, network: Network | None, storage: Storage | None, clusters: list[tuple[int, TrainingCluster]]
) -> list[tuple[str, str]]:
    """Checks that span sections. Each argument is None (or a cluster missing from ``clusters``) when that
    part of the file failed its own validation; checks needing it are skipped, the others still run."""
    problems: list[tuple[str, str]] = []
    az_ids = network.az_ids if network is not None else None
    if region is not None and az_ids is not None:
        for i, az in enumerate(az_ids):
            foreign = _foreign_az(az, region)
            if foreign:
                problems.append((f"network.az_ids[{i}]", foreign))
    first: dict[str, int] = {}
    for i, cluster in clusters:
        if cluster.name in first:
            taken = f"'{cluster.name}' is already the name of training[{first[cluster.name]}]"
            problems.append((f"training[{i}].name", f"{taken}; give each cluster its own name"))
        first.setdefault(cluster.name, i)
        problems.extend(_check_cluster(f"training[{i}]", cluster, region, az_ids))
    lustre = storage.lustre if storage is not None else None
    if lustre is not None and lustre.az_id:
        foreign = _foreign_az(lustre.az_id, region) if region is not None else None
        if foreign:
            problems.append(("storage.lustre.az_id", foreign))
        elif az_ids is not None and lustre.az_id not in az_ids:
            fix = f"add it there or pick one of {', '.join(az_ids)}"
            problems.append(("storage.lustre.az_id", f"'{lustre.az_id}' is not in network.az_ids; {fix}"))
    return problems


def _az_prefix(region: str) -> str:
    """AZ-ID prefix of a region: us-east-1 -> use1, ap-southeast-2 -> apse2, us-gov-west-1 -> usgw1."""
    parts = region.split("-")
    geo, direction, number = parts[0] + ("g" if "gov" in parts else ""), parts[-2], parts[-1]
    abbrev = {"east": "e", "west": "w", "north": "n", "south": "s", "central": "c", "northeast": "ne",
              "southeast": "se", "northwest": "nw", "southwest": "sw"}.get(direction, direction[0])  # fmt: skip
    return f"{geo}{abbrev}{number}"


def _foreign_az(az: str, region: str) -> str | None:
    """The problem with an AZ ID that belongs to another region, or None."""
    prefix = _az_prefix(region)
    if az.startswith(prefix + "-"):
        return None
    known = sorted({z for t in catalog.instance_types().values() for z in t.az_ids(region)})
    fix = f"use one of {', '.join(known)}" if known else f"AZ IDs of {region} start with '{prefix}-'"
    return f"'{az}' is not an AZ ID of {region}; {fix}"


def _check_cluster(loc: str, c: TrainingCluster, region: str | None, az_ids: list[str] | None) -> list[tuple[str, str]]:
    """Problems of one training cluster against the catalog, the region and network.az_ids (None: unknown)."""
    out: list[tuple[str, str]] = []

    def add(key: str, msg: str) -> None:
        out.append((f"{loc}.{key}", msg))

    types = catalog.instance_types()
    trainium = ", ".join(sorted(n for n, t in types.items() if t.accelerator == "trainium"))
    it = types.get(c.instance_type)
    if it is None:
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
        if offered is not None and c.az_id not in offered:
            fix = (
                f"use one of {', '.join(offered)}"
                if offered
                else f"it is offered in no AZ of {region}; use another region or type"
            )
            add("az_id", f"{c.instance_type} is not offered in {c.az_id} ({region}); {fix}")

    if c.min_size > c.max_size:
        add("min_size", f"min_size {c.min_size} is greater than max_size {c.max_size}; raise max_size or lower min_size")
    elif c.desired_size is not None and not c.min_size <= c.desired_size <= c.max_size:
        add("desired_size", f"{c.desired_size} must lie between min_size {c.min_size} and max_size {c.max_size}")

    ami_problem = _ami_problem(c, it)
    if ami_problem:
        add("ami.family", ami_problem)
    if it is not None:
        minimum = catalog.capacity_facts()["min_root_volume_gib"].get(it.accelerator, 100)
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
                    f"{pool.instance_type} is not offered in {az} ({region}); use one of {', '.join(offered) or 'none'}",
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
    if not c.container_image:
        out.append(("container_image", "required with scheduler: batch (the training image of the job definition template)"))
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


def _inference_problems(
    region: str | None, network: Network | None, fleets: list[tuple[int, InferenceFleet]]
) -> list[tuple[str, str]]:
    """Checks of inference fleets against the catalog, the region and network.az_ids."""
    out: list[tuple[str, str]] = []
    types = catalog.instance_types()
    neuron_ok = ", ".join(sorted(n for n, t in types.items() if t.accelerator == "inferentia" and t.family != "inf1"))
    names: dict[str, int] = {}
    for i, f in fleets:
        loc = f"inference[{i}]"

        def add(key: str, msg: str, loc: str = loc) -> None:
            out.append((f"{loc}.{key}" if key else loc, msg))

        if f.name in names:
            add("name", f"'{f.name}' is already the name of inference[{names[f.name]}]; give each fleet its own name")
        names.setdefault(f.name, i)
        for j, t in enumerate(f.neuron_types):
            it = types.get(t)
            if it is None or not it.is_neuron:
                add(f"neuron_types[{j}]", f"'{t}' is not an Inferentia or Trainium type; use e.g. {neuron_ok}")
            else:
                problem = _family_problem(f.neuron_ami, "neuron", t)
                if problem:
                    add("neuron_ami.family", problem)
                _offered(add, f"neuron_types[{j}]", t, f.az_ids, region)
        for j, t in enumerate(f.fallback_types):
            it = types.get(t)
            if it is None or it.accelerator != "gpu" or it.gpus == 0:
                add(f"fallback_types[{j}]", f"'{t}' has no GPU; fallback types must be GPU types: {', '.join(_gpu_types())}")
            else:
                problem = _family_problem(f.gpu_ami, "gpu", t)
                if problem:
                    add("gpu_ami.family", problem)
                _offered(add, f"fallback_types[{j}]", t, f.az_ids, region)
        if f.fallback_types and not f.serve.gpu:
            add("serve.gpu", "required when fallback_types is set: the command that starts the server on GPU nodes")
        if f.load_balancer == "alb" and f.health_check.protocol != "HTTP":
            add("health_check.protocol", "an ALB checks health over HTTP; use protocol: HTTP or load_balancer: nlb")
        if not f.internal:
            add(
                "internal",
                "internet-facing load balancers are not supported (nodes sit in private subnets); "
                "set internal: true and front the fleet with your own edge (API Gateway, CloudFront)",
            )
        for key, command in (("serve.neuron", f.serve.neuron), ("serve.gpu", f.serve.gpu or "")):
            if "'" in command or "\n" in command:
                add(
                    key,
                    "may not contain single quotes or newlines (it is written into the node's environment file); "
                    "use double quotes, or put a start script in the model prefix and run that",
                )
            elif len(command) > SERVE_COMMAND_MAX:
                add(
                    key,
                    f"{len(command)} characters is too long (at most {SERVE_COMMAND_MAX}); put a start script in the model prefix",
                )
        for key, prefix in (("model_s3_prefix", f.model_s3_prefix), ("gpu_model_s3_prefix", f.gpu_model_s3_prefix or "x/")):
            if not re.match(r"^[A-Za-z0-9!_.*()/-]+/$", prefix) or prefix.startswith("/"):
                add(
                    key,
                    f"'{prefix}' is not a key prefix of the artifacts bucket; use e.g. models/llama-3-8b/neuron/ (no leading /, ends with /)",
                )
        seen_actions: set[str] = set()
        for j, action in enumerate(f.scheduled_actions):
            if action.name in seen_actions:
                add(f"scheduled_actions[{j}].name", f"'{action.name}' is used twice; give each scheduled action its own name")
            seen_actions.add(action.name)
            if not re.match(CRON_RE, action.cron):
                add(
                    f"scheduled_actions[{j}].cron",
                    f"'{action.cron}' is not a cron expression of 5 fields (minute hour day month weekday), e.g. '0 8 * * 1-5'",
                )
            if action.min_size is None and action.max_size is None and action.desired_size is None:
                add(f"scheduled_actions[{j}]", "sets no size; give min_size, max_size or desired_size")
        if f.serve.gpu_port is not None and f.serve.gpu_port != f.port:
            add(
                "serve.gpu_port",
                f"GPU nodes would serve on {f.serve.gpu_port} but Neuron nodes on {f.port}; one target group serves both, "
                "so start both servers on the same port",
            )
        if f.serve.gpu_health_check_path is not None and f.serve.gpu_health_check_path != f.health_check.path:
            add(
                "serve.gpu_health_check_path",
                f"'{f.serve.gpu_health_check_path}' differs from health_check.path '{f.health_check.path}'; one target group "
                "checks both families, so serve the same health path on both",
            )
        if f.health_check.port != f.port:
            add(
                "health_check.port",
                f"{f.health_check.port} differs from port {f.port}; Neuron and GPU nodes share one target group, "
                "so the server must answer health checks on its serving port",
            )
        if f.min_size > f.max_size:
            add("min_size", f"min_size {f.min_size} is greater than max_size {f.max_size}; raise max_size or lower min_size")
        elif f.desired_size is not None and not f.min_size <= f.desired_size <= f.max_size:
            add("desired_size", f"{f.desired_size} must lie between min_size {f.min_size} and max_size {f.max_size}")
        if network is not None:
            for j, az in enumerate(f.az_ids):
                if az not in network.az_ids:
                    add(f"az_ids[{j}]", f"'{az}' is not in network.az_ids; add it there")
    return out


def _offered(add: Any, key: str, instance_type: str, az_ids: list[str], region: str | None) -> None:
    if region is None:
        return
    offered = catalog.get(instance_type).az_ids(region)
    missing = [a for a in az_ids if a not in offered]
    if missing:
        add(key, f"{instance_type} is not offered in {', '.join(missing)} ({region}); offered in: {', '.join(offered) or 'none'}")


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


# --------------------------------------------------------------------------------------------
# loading and error formatting
# --------------------------------------------------------------------------------------------
def _loc(parts: tuple[int | str, ...]) -> str:
    out = ""
    for i, p in enumerate(parts):
        if isinstance(p, int):
            out += f"[{p}]"
        elif p in _CAPACITY_TAGS and i and parts[i - 1] == "capacity":
            continue  # discriminated unions add the tag as a path element; it is not a key of the file
        else:
            out += ("." if out else "") + p
    return out


def _model_at(parts: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model class whose keys live at ``parts`` (a pydantic error location), or None."""
    model: type[BaseModel] | None = Environment
    for i, p in enumerate(parts):
        if isinstance(p, int) or model is None:
            continue
        if p in _CAPACITY_TAGS and i and parts[i - 1] == "capacity":
            model = _CAPACITY_TAGS[p]
            continue
        field = model.model_fields.get(p) or next((f for f in model.model_fields.values() if f.alias == p), None)
        model = _model_in(field.annotation) if field is not None else None
    return model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _field_at(parts: tuple[int | str, ...]) -> FieldInfo | None:
    model = _model_at(parts[:-1])
    return model.model_fields.get(str(parts[-1])) if model is not None and parts else None


def _format(path: str, err: ValidationError) -> list[str]:
    lines: list[str] = []
    # Required keys missing per mapping: an unknown key next to one is most likely its misspelling.
    missing: dict[tuple[int | str, ...], list[str]] = {}
    for e in err.errors():
        if e["type"] == "missing":
            missing.setdefault(tuple(e["loc"])[:-1], []).append(str(e["loc"][-1]))
    for e in err.errors():
        parts = tuple(e["loc"])
        loc = _loc(parts)
        ctx = e.get("ctx") or {}
        value = e.get("input")
        shown = repr(value) if isinstance(value, str | int | float | bool) or value is None else None
        kind = e["type"]
        if kind == "value_error" and isinstance(ctx.get("error"), _MultiProblem):
            for key, msg in ctx["error"].problems:
                lines.append(f"{path}: {'.'.join(x for x in (loc, key) if x)}: {msg}")
        elif kind == "extra_forbidden":
            lines.append(f"{path}: {loc}: {_unknown_key(parts, missing.get(parts[:-1], []))}")
        elif kind == "missing":
            field = _field_at(parts)
            desc = (field.description or "").rstrip(".") if field is not None else ""
            if desc[:2].istitle():  # "Most nodes ..." reads "add it (most nodes ...)"; "VPC ..." stays
                desc = desc[0].lower() + desc[1:]
            what = f" ({desc})" if desc else ""
            lines.append(f"{path}: {loc}: required key is missing; add it{what}")
        elif kind == "string_pattern_mismatch":
            lines.append(f"{path}: {loc}: {shown} is malformed; {_pattern_hint(loc)}")
        elif kind == "string_type" and isinstance(value, int | float):
            lines.append(f"{path}: {loc}: {value} is a number, not text; put it in quotes: '{value}'")
        elif kind == "union_tag_invalid":
            lines.append(f"{path}: {loc}: type {ctx.get('tag')!r} is not allowed; use one of {ctx.get('expected_tags')}")
        elif kind == "union_tag_not_found":
            lines.append(f"{path}: {loc}: add a type key: one of {', '.join(map(repr, _CAPACITY_TAGS))}")
        elif kind == "literal_error":
            lines.append(f"{path}: {loc}: {shown} is not allowed; use {ctx.get('expected')}")
        elif kind.startswith("datetime"):
            lines.append(f"{path}: {loc}: {shown} is not a date and time; use ISO 8601 in UTC, e.g. 2026-12-01T11:30:00Z")
        else:
            got = f" (got {shown})" if shown is not None else ""
            lines.append(f"{path}: {loc}: {e['msg']}{got}")
    return lines


def _unknown_key(parts: tuple[int | str, ...], missing: list[str]) -> str:
    key = str(parts[-1])
    parent = _loc(parts[:-1])
    where = f"under {parent}" if parent else "at the top level"
    model = _model_at(parts[:-1])
    allowed = [f.alias or n for n, f in model.model_fields.items() if n != "schema_"] if model is not None else []
    close = difflib.get_close_matches(key, missing, n=1, cutoff=0.4) or difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if close:
        return f"unknown key '{key}' {where}; did you mean '{close[0]}'?"
    if allowed:
        return f"unknown key '{key}' {where}; allowed keys: {', '.join(allowed)}"
    return f"unknown key '{key}' {where}; check the spelling (see schema/environment.schema.json)"


def _pattern_hint(loc: str) -> str:
    last = loc.rsplit(".", 1)[-1]
    hints = {
        "account": "use the 12-digit account id, e.g. '123456789012' (quoted)",
        "region": "use a region code such as us-east-1",
        "name": "use lower-case letters, digits and dashes, starting with a letter"
        + (" (at most 24 characters)" if loc == "name" else " (at most 16 characters)"),
        "reservation_id": "use the reservation id, e.g. cr-0123456789abcdef0",
        "vpc_id": "use a VPC id, e.g. vpc-0123456789abcdef0",
        "ami_id": "use an AMI id, e.g. ami-0123456789abcdef0",
    }
    if re.search(r"az_id", last) or "az_ids" in loc:
        return "use an AZ ID such as use1-az6 (not an AZ name like us-east-1a)"
    return hints.get(re.sub(r"\[\d+\]$", "", last), "check the format")


def _valid(model: type[BaseModel], raw: Any) -> Any:
    try:
        return model.model_validate(raw)
    except ValidationError:
        return None


def _cross_problems_of_parts(data: dict[str, Any]) -> list[tuple[str, str]]:
    """The cross-section checks on every section that is valid on its own.

    Pydantic runs Environment's cross checks only when every field is valid, so a typo in one place
    would hide e.g. an unknown instance type in another; validating the sections one by one reports both.
    """
    region = data.get("region")
    region = region if isinstance(region, str) and re.match(REGION_RE, region) else None
    training = data.get("training", [])
    valid = [(i, _valid(TrainingCluster, raw)) for i, raw in enumerate(training if isinstance(training, list) else [])]
    clusters = [(i, c) for i, c in valid if c is not None]
    network = _valid(Network, data.get("network"))
    inference = data.get("inference", [])
    fleets = [(i, _valid(InferenceFleet, raw)) for i, raw in enumerate(inference if isinstance(inference, list) else [])]
    return _cross_problems(region, network, _valid(Storage, data.get("storage", {})), clusters) + _inference_problems(
        region, network, [(i, f) for i, f in fleets if f is not None]
    )


def parse_environment(data: Any, path: str) -> Environment:
    """Validate already-parsed YAML data; raises ConfigError with one line per problem (all of them)."""
    if not isinstance(data, dict):
        raise ConfigError([f"{path}: the file must hold a mapping of keys (name, account, region, ...)"])
    stem = Path(path).stem
    data = dict(data)
    data.setdefault("name", stem)
    problems: list[str] = []
    name = data["name"]
    if isinstance(name, str) and re.match(NAME_RE, name) and name != stem:
        problems.append(f"{path}: name: '{name}' differs from the file name '{stem}'; rename the file or the key")
    try:
        env = Environment.model_validate(data)
    except ValidationError as err:
        problems.extend(_format(path, err))
        if not any(e["loc"] == () for e in err.errors()):  # the cross checks did not run: run them per section
            problems.extend(f"{path}: {key}: {msg}" for key, msg in _cross_problems_of_parts(data))
        raise ConfigError(problems) from None
    if problems:
        raise ConfigError(problems)
    return env


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key given twice in one mapping (PyYAML silently keeps the last one)."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # `<<: *anchor` merges are allowed and may be overridden
        key = loader.construct_object(key_node)  # type: ignore[no-untyped-call]
        if not isinstance(key, typing.Hashable):
            continue  # construct_mapping reports unhashable keys itself
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"key '{key}' is given twice in one mapping (first at line {seen[key] + 1}); keep one",
                key_node.start_mark,
            )
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_environment(path: str | Path) -> Environment:
    """Read and validate one environment file."""
    p = Path(path)
    shown = _display(p)
    try:
        text = p.read_text()
    except OSError as err:
        raise ConfigError([f"{shown}: cannot read the file ({err.strerror})"]) from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = str(getattr(err, "problem", None) or err)
        if not isinstance(err, yaml.constructor.ConstructorError):  # a syntax error, not a duplicate key
            problem += "; check the indentation and quoting on that line and the one before"
        raise ConfigError([f"{shown}: not valid YAML{where}: {problem}"]) from None
    return parse_environment(data, shown)


def _display(p: Path) -> str:
    try:
        return str(p.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(p)


def environment_files(directory: str | Path = "environments") -> list[Path]:
    return sorted(Path(directory).glob("*.yaml"))


def load_all(directory: str | Path = "environments", only: str | None = None) -> list[Environment]:
    """Load every environment (or the one named ``only``); collects problems across files."""
    files = environment_files(directory)
    if only is not None:
        files = [f for f in files if f.stem == only]
        if not files:
            known = ", ".join(f.stem for f in environment_files(directory)) or "none"
            raise ConfigError([f"{directory}/{only}.yaml: no such environment; known environments: {known}"])
    envs, problems = [], []
    for f in files:
        try:
            envs.append(load_environment(f))
        except ConfigError as err:
            problems.extend(err.problems)
    if problems:
        raise ConfigError(problems)
    return envs


def json_schema() -> dict[str, Any]:
    schema = Environment.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "neuronkit environment"
    return schema
