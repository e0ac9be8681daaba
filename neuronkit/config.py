"""The environment file: a typed, validated description of one neuronkit environment.

``environments/<name>.yaml`` is parsed into frozen pydantic models. Every check that can be made
without AWS runs here (instance types, AZ-ID offerings and AMI support come from the catalog), and
every problem is reported as one line naming the file, the key path and the fix, e.g.::

    environments/prod.yaml: training[0].instance_type: 'trn9.big' is not a known instance type; ...

``load_environment`` raises :class:`ConfigError` holding all problems of a file at once.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import re
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from neuronkit import catalog

ACCOUNT_RE = r"^\d{12}$"
REGION_RE = r"^[a-z]{2}(-gov)?-[a-z]+-\d$"
AZ_ID_RE = r"^[a-z]{2,5}\d-az\d+$"
NAME_RE = r"^[a-z][a-z0-9-]{0,23}$"
RESERVATION_RE = r"^cr-[0-9a-f]{8}([0-9a-f]{9})?$"

LUSTRE_THROUGHPUT = {"PERSISTENT_2": (125, 250, 500, 1000)}

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


def _fail(loc: str, msg: str) -> PydanticCustomError:
    # The location is carried in the message context so the formatter can name the full key path.
    return PydanticCustomError("neuronkit", "{loc}: {msg}", {"loc": loc, "msg": msg})


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
        if len(set(self.az_ids)) != len(self.az_ids):
            raise _fail("az_ids", "AZ IDs must be unique")
        try:
            net = ipaddress.ip_network(self.cidr)
        except ValueError:
            raise _fail("cidr", f"'{self.cidr}' is not a CIDR block; use e.g. 10.0.0.0/16") from None
        if not 16 <= net.prefixlen <= 20:
            raise _fail("cidr", f"'{self.cidr}' must be a /16 to /20 block")
        if self.nat_gateways > len(self.az_ids):
            raise _fail("nat_gateways", f"{self.nat_gateways} is more than one per AZ ID ({len(self.az_ids)}); lower it")
        if self.existing is not None:
            missing = [a for a in self.az_ids if a not in self.existing.subnet_ids]
            if missing:
                raise _fail("existing.subnet_ids", f"no subnet for AZ ID(s) {', '.join(missing)}; add one per entry of network.az_ids")
        return self


# --------------------------------------------------------------------------------------------
# storage
# --------------------------------------------------------------------------------------------
class Lustre(Strict):
    """FSx for Lustre 2.15 scratch or persistent file system."""

    deployment_type: Literal["SCRATCH_2", "PERSISTENT_2"] = "SCRATCH_2"
    size_gib: int = Field(default=1200, description="1200, 2400, then steps of 2400 GiB.")
    throughput_mbps_per_tib: int | None = Field(default=None, description="PERSISTENT_2 only: 125, 250, 500 or 1000.")
    az_id: str | None = Field(default=None, description="Defaults to the first training cluster's AZ ID.")
    link_checkpoints: bool = Field(
        default=True,
        description="Also link the checkpoints bucket (PERSISTENT_2 only: scratch file systems hold one association).",
    )

    @model_validator(mode="after")
    def _check(self) -> Lustre:
        size = self.size_gib
        if size not in (1200, 2400) and not (size > 2400 and size % 2400 == 0):
            lower = max(1200, (size // 2400) * 2400) if size > 1200 else 1200
            raise _fail("size_gib", f"{size} is not valid for {self.deployment_type}; use 1200, 2400 or a multiple of 2400 (e.g. {lower} or {lower + 2400 if lower >= 2400 else 2400})")
        allowed = LUSTRE_THROUGHPUT.get(self.deployment_type)
        if allowed is None and self.throughput_mbps_per_tib is not None:
            raise _fail("throughput_mbps_per_tib", f"{self.deployment_type} has a fixed throughput (200 MB/s/TiB); remove the key or use PERSISTENT_2")
        if allowed is not None:
            if self.throughput_mbps_per_tib is None:
                raise _fail("throughput_mbps_per_tib", f"required for {self.deployment_type}; use one of {', '.join(map(str, allowed))}")
            if self.throughput_mbps_per_tib not in allowed:
                raise _fail("throughput_mbps_per_tib", f"{self.throughput_mbps_per_tib} is not valid for {self.deployment_type}; use one of {', '.join(map(str, allowed))}")
        if self.deployment_type == "SCRATCH_2" and self.link_checkpoints:
            raise _fail("link_checkpoints", "SCRATCH_2 holds one data repository association (datasets); set link_checkpoints: false or use PERSISTENT_2")
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
        if self.family and self.ami_id:
            raise _fail("", "give either family or ami_id, not both")
        if self.family and self.family not in catalog.ami_families():
            raise _fail("family", f"'{self.family}' is not a known AMI family; use one of {', '.join(catalog.ami_families())}")
        if self.ami_id and not self.root_device_name:
            raise _fail("root_device_name", "required with ami_id (e.g. /dev/sda1 for Ubuntu, /dev/xvda for Amazon Linux)")
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
        if self.create == bool(self.reservation_id):
            raise _fail("", "an odcr either sets create: true or names an existing reservation_id (cr-...), not both")
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
        facts = catalog.capacity_facts()["capacity_blocks"]
        if self.instance_type not in facts["instance_types"]:
            raise _fail("instance_type", f"Capacity Blocks are not sold for {self.instance_type}; use one of {', '.join(facts['instance_types'])}")
        if self.instance_count not in facts["sizes"]:
            raise _fail("instance_count", f"a Capacity Block holds {', '.join(map(str, facts['sizes']))} instances, not {self.instance_count}")
        if self.end <= self.start:
            raise _fail("end", "must be after capacity.start")
        return self


Capacity = Annotated[OnDemand | Odcr | CapacityBlock, Field(discriminator="type")]


class TrainingCluster(Strict):
    """A Trainium cluster: one instance type in one AZ ID and a cluster placement group."""

    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,15}$")] = "train"
    instance_type: str
    az_id: Annotated[str, Field(pattern=AZ_ID_RE)]
    min_size: int = Field(default=0, ge=0)
    max_size: int = Field(ge=1)
    desired_size: int | None = Field(default=None, description="Defaults to min_size.")
    ami: Ami = Ami()
    capacity: Capacity = OnDemand()
    root_volume_gib: int | None = Field(default=None, description="Defaults to the catalog's minimum for the accelerator (512 GiB on Trainium).")
    compile_cache: Literal["local", "s3"] = Field(default="local", description="Neuron compile cache on local NVMe or in the artifacts bucket.")
    scale_in_protection: bool = True


class Environment(Strict):
    """One neuronkit environment (one file under environments/)."""

    schema_: str | None = Field(default=None, alias="$schema", description="Editor hint; ignored.")
    name: Annotated[str, Field(pattern=NAME_RE)]
    account: Annotated[str, Field(pattern=ACCOUNT_RE, description="12-digit AWS account id.")]
    region: Annotated[str, Field(pattern=REGION_RE, description="AWS region, e.g. us-east-1.")]
    cost_center: str = "ml-platform"
    tags: dict[str, str] = Field(default_factory=dict)
    network: Network
    storage: Storage = Storage()
    training: list[TrainingCluster] = Field(default_factory=list)

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _cross(self) -> Environment:
        problems: list[tuple[str, str]] = []
        region_prefix = _az_prefix(self.region)
        for i, az in enumerate(self.network.az_ids):
            if not az.startswith(region_prefix + "-"):
                problems.append((f"network.az_ids[{i}]", f"'{az}' is not an AZ ID of {self.region} (they start with '{region_prefix}-')"))
        names = [c.name for c in self.training]
        if len(set(names)) != len(names):
            problems.append(("training", "cluster names must be unique"))
        for i, cluster in enumerate(self.training):
            problems.extend(_check_cluster(f"training[{i}]", cluster, self))
        if self.storage.lustre and self.storage.lustre.az_id and self.storage.lustre.az_id not in self.network.az_ids:
            problems.append(("storage.lustre.az_id", f"'{self.storage.lustre.az_id}' is not in network.az_ids; add it there or pick one of {', '.join(self.network.az_ids)}"))
        if problems:
            raise _MultiProblem(problems)
        return self

    @property
    def lustre_az_id(self) -> str | None:
        lustre = self.storage.lustre
        if lustre is None:
            return None
        if lustre.az_id:
            return lustre.az_id
        return self.training[0].az_id if self.training else self.network.az_ids[0]


class _MultiProblem(ValueError):
    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{k}: {m}" for k, m in problems))


def _az_prefix(region: str) -> str:
    """AZ-ID prefix of a region: us-east-1 -> use1, ap-southeast-2 -> apse2, eu-north-1 -> eun1."""
    parts = region.split("-")
    geo, direction, number = parts[0], parts[-2], parts[-1]
    abbrev = {"east": "e", "west": "w", "north": "n", "south": "s", "central": "c", "northeast": "ne",
              "southeast": "se", "northwest": "nw", "southwest": "sw"}.get(direction, direction[0])  # fmt: skip
    return f"{geo}{abbrev}{number}"


def _check_cluster(loc: str, c: TrainingCluster, env: Environment) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    types = catalog.instance_types()
    if c.instance_type not in types:
        trn = sorted(n for n, t in types.items() if t.accelerator == "trainium")
        return [(f"{loc}.instance_type", f"'{c.instance_type}' is not a known instance type; use a Trainium type: {', '.join(trn)}")]
    it = types[c.instance_type]
    if it.accelerator != "trainium":
        kind = "an inference-only Inferentia type" if it.accelerator == "inferentia" else f"not a Trainium type ({it.accelerator})"
        out.append((f"{loc}.instance_type", f"'{c.instance_type}' is {kind}; training clusters need trn1/trn1n/trn2 (inference fleets take inf2)"))
    if c.az_id not in env.network.az_ids:
        out.append((f"{loc}.az_id", f"'{c.az_id}' is not in network.az_ids; add it there"))
    offered = it.az_ids(env.region)
    if c.az_id not in offered:
        where = ", ".join(offered) if offered else f"no AZ of {env.region}"
        out.append((f"{loc}.az_id", f"{c.instance_type} is not offered in {c.az_id} ({env.region}); offered in: {where}"))
    if c.min_size > c.max_size:
        out.append((f"{loc}.min_size", f"min_size {c.min_size} is greater than max_size {c.max_size}; raise max_size or lower min_size"))
    if c.desired_size is not None and not c.min_size <= c.desired_size <= c.max_size:
        out.append((f"{loc}.desired_size", f"{c.desired_size} must lie between min_size {c.min_size} and max_size {c.max_size}"))
    if it.efa_supported and "cluster" not in it.placement_strategies:
        out.append((f"{loc}.instance_type", f"{c.instance_type} does not support cluster placement groups"))
    fam = c.ami.family or (None if c.ami.ami_id else catalog.default_ami_family("neuron"))
    if fam is not None and fam in catalog.ami_families():
        ami = catalog.ami_families()[fam]
        if not ami.supports_type(c.instance_type):
            good = [n for n, a in catalog.ami_families().items() if a.kind == "neuron" and a.supports_type(c.instance_type)]
            fix = f"use one of {', '.join(good)}" if good else "pin an ami_id of an AMI that supports it (Neuron DLAMIs dropped Inf1 in 2.26.1)"
            out.append((f"{loc}.ami.family", f"'{fam}' does not support {c.instance_type}; {fix}"))
        elif ami.kind != "neuron":
            out.append((f"{loc}.ami.family", f"'{fam}' is a {ami.kind} AMI; a training cluster boots a Neuron DLAMI"))
    minimum = catalog.capacity_facts()["min_root_volume_gib"].get(it.accelerator, 100)
    if c.root_volume_gib is not None and c.root_volume_gib < minimum:
        out.append((f"{loc}.root_volume_gib", f"{c.root_volume_gib} GiB is below the {minimum} GiB a {it.accelerator} node needs; raise it"))
    cap = c.capacity
    if isinstance(cap, Odcr):
        if c.max_size > cap.instance_count:
            out.append((f"{loc}.max_size", f"max_size {c.max_size} is more than the capacity reservation holds ({cap.instance_count}); lower max_size or raise capacity.instance_count"))
    elif isinstance(cap, CapacityBlock):
        limit = catalog.capacity_facts()["capacity_blocks"]["max_instances"]
        if cap.instance_type != c.instance_type:
            out.append((f"{loc}.capacity.instance_type", f"the Capacity Block holds {cap.instance_type}, not the cluster's {c.instance_type}; make them match"))
        if cap.az_id != c.az_id:
            out.append((f"{loc}.capacity.az_id", f"the Capacity Block is in {cap.az_id}, not the cluster's {c.az_id}; make them match"))
        if c.max_size > cap.instance_count:
            out.append((f"{loc}.max_size", f"max_size {c.max_size} is more than the capacity reservation holds ({cap.instance_count}); lower max_size or raise capacity.instance_count"))
        if c.max_size > limit:
            out.append((f"{loc}.max_size", f"a Capacity Block cluster holds at most {limit} nodes"))
    return out


# --------------------------------------------------------------------------------------------
# loading and error formatting
# --------------------------------------------------------------------------------------------
def _loc(parts: tuple[int | str, ...]) -> str:
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            # Discriminated unions add the tag as a path element; it is not a key of the file.
            if p in ("on-demand", "odcr", "capacity-block"):
                continue
            out += ("." if out else "") + p
    return out


def _format(path: str, err: ValidationError) -> list[str]:
    lines: list[str] = []
    for e in err.errors():
        loc = _loc(tuple(e["loc"]))
        ctx = e.get("ctx") or {}
        if e["type"] == "neuronkit":
            key = ".".join(x for x in (loc, ctx["loc"]) if x)
            lines.append(f"{path}: {key}: {ctx['msg']}")
            continue
        if e["type"] == "value_error" and isinstance(ctx.get("error"), _MultiProblem):
            prefix = f"{loc}." if loc else ""
            for key, msg in ctx["error"].problems:
                lines.append(f"{path}: {prefix}{key}: {msg}")
            continue
        if e["type"] == "extra_forbidden":
            parent, _, key = loc.rpartition(".")
            where = f"under {parent}" if parent else "at the top level"
            lines.append(f"{path}: {loc}: unknown key '{key}' {where}; check the spelling (see schema/environment.schema.json)")
        elif e["type"] == "missing":
            lines.append(f"{path}: {loc}: required key is missing; add it")
        elif e["type"] == "string_pattern_mismatch":
            lines.append(f"{path}: {loc}: {e['input']!r} is malformed; {_pattern_hint(loc)}")
        elif e["type"] == "union_tag_invalid" or e["type"] == "literal_error":
            lines.append(f"{path}: {loc}: {e['input']!r} is not allowed; use one of {ctx.get('expected_tags') or ctx.get('expected')}")
        else:
            lines.append(f"{path}: {loc}: {e['msg']}")
    return lines


def _pattern_hint(loc: str) -> str:
    last = loc.rsplit(".", 1)[-1]
    hints = {
        "account": "use the 12-digit account id, e.g. '123456789012' (quoted)",
        "region": "use a region code such as us-east-1",
        "name": "use lower-case letters, digits and dashes, starting with a letter",
        "reservation_id": "use the reservation id, e.g. cr-0123456789abcdef0",
        "vpc_id": "use a VPC id, e.g. vpc-0123456789abcdef0",
        "ami_id": "use an AMI id, e.g. ami-0123456789abcdef0",
    }
    if re.search(r"az_id", last) or "az_ids" in loc:
        return "use an AZ ID such as use1-az6 (not an AZ name like us-east-1a)"
    return hints.get(re.sub(r"\[\d+\]$", "", last), "check the format")


def parse_environment(data: Any, path: str) -> Environment:
    """Validate already-parsed YAML data; raises ConfigError with one line per problem."""
    if not isinstance(data, dict):
        raise ConfigError([f"{path}: the file must hold a mapping of keys (name, account, region, ...)"])
    stem = Path(path).stem
    data = dict(data)
    data.setdefault("name", stem)
    try:
        env = Environment.model_validate(data)
    except ValidationError as err:
        raise ConfigError(_format(path, err)) from None
    if env.name != stem:
        raise ConfigError([f"{path}: name: '{env.name}' differs from the file name '{stem}'; rename the file or the key"])
    return env


def load_environment(path: str | Path) -> Environment:
    """Read and validate one environment file."""
    p = Path(path)
    shown = _display(p)
    try:
        text = p.read_text()
    except OSError as err:
        raise ConfigError([f"{shown}: cannot read the file ({err.strerror})"]) from None
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError([f"{shown}: not valid YAML{where}: {getattr(err, 'problem', err)}"]) from None
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
