"""The whole environment file: its top-level keys and the checks that span sections."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from neuronkit import catalog
from neuronkit.config import addressing
from neuronkit.config.base import ACCOUNT_RE, NAME_RE, REGION_RE, Strict, _foreign_az, _raise_all
from neuronkit.config.eks import (
    Eks,
    eks_autoscaling_problems,
    eks_monitoring_problems,
    eks_neuron_problems,
    eks_node_image_problems,
    eks_pool_problems,
    eks_section_problems,
    eks_top_level_problems,
    eks_unsupported_type_problems,
)
from neuronkit.config.inference import (
    InferenceFleet,
    _inference_problems,
    default_latency_warnings,
    eks_serving_warnings,
    latency_threshold_problems,
    serving_image_problems,
    serving_warnings,
)
from neuronkit.config.monitoring import Budget, Monitoring, _day_night_problems, idle_reservation_problems
from neuronkit.config.network import Network
from neuronkit.config.neuron import PoolRelease, container_problems, dlami_problems, neuron_families, resolve
from neuronkit.config.pilot import Pilot, pilot_problems
from neuronkit.config.storage import Storage
from neuronkit.config.training import (
    TrainingCluster,
    _check_cluster,
    ami_family,
    block_only_problems,
    block_only_warnings,
    offering_warnings,
)


class Environment(Strict):
    """One neuronkit environment (one file under environments/)."""

    schema_: str | None = Field(default=None, alias="$schema", description="Editor hint; ignored.")
    name: Annotated[str, Field(pattern=NAME_RE)]
    account: Annotated[str, Field(pattern=ACCOUNT_RE, description="12-digit AWS account id.")]
    region: Annotated[str, Field(pattern=REGION_RE, description="AWS region, e.g. us-east-1.")]
    cost_center: str = "ml-platform"
    platform: Literal["asg", "eks"] = Field(
        default="asg",
        description="asg: pools are Auto Scaling groups (and AWS Batch); eks: an Amazon EKS cluster whose pools are "
        "managed node groups (docs/eks.md).",
    )
    eks: Eks | None = Field(default=None, description="The EKS cluster of platform: eks (version, access, endpoint).")
    tags: dict[str, str] = Field(default_factory=dict)
    network: Network = Field(description="VPC layout with az_ids, e.g. az_ids: [use1-az6].")
    storage: Storage = Storage()
    training: list[TrainingCluster] = Field(default_factory=list)
    inference: list[InferenceFleet] = Field(default_factory=list)
    monitoring: Monitoring = Monitoring()
    budget: Budget | None = None
    pilot: Pilot | None = Field(default=None, description="A workload run side by side on Trainium and GPUs (docs/adoption.md).")
    neuron_sdk: str | None = Field(
        default=None,
        description="Neuron SDK release every Neuron pool runs unless it names its own (e.g. 2.28.1); defaults per "
        "pool to the newest release that fully supports its workload on its instance family.",
    )

    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)

    @model_validator(mode="after")
    def _cross(self) -> Environment:
        problems = _tag_problems(self.tags)
        problems += _cross_problems(self.region, self.network, self.storage, list(enumerate(self.training)))
        problems += _inference_problems(self.region, self.network, list(enumerate(self.inference)), self.platform)
        problems += _platform_problems(self)
        problems += _day_night_problems(self.monitoring.day_night, self.training, self.inference)
        problems += latency_threshold_problems(self.monitoring.alarms.p99_latency_ms, list(enumerate(self.inference)))
        problems += idle_reservation_problems(self.region, self.monitoring.day_night, self.training)
        problems += _neuron_problems(self.neuron_sdk, list(enumerate(self.training)), list(enumerate(self.inference)))[0]
        problems += pilot_problems(self.pilot, self.training, self.inference)
        problems += address_problems(self.network, self.training, self.inference, self.eks if self.platform == "eks" else None)
        if self.platform == "eks":
            problems = _eks_refusals_first(problems, self)
        _raise_all(problems)
        return self

    @property
    def warnings(self) -> list[str]:
        """What passes validation but deserves a look, one line per key (without the file name): Neuron
        workloads in maintenance, floating AMIs. ``validate`` prints them; synth prints them once."""
        return neuron_warnings(self)

    @property
    def lustre_az_id(self) -> str | None:
        lustre = self.storage.lustre
        if lustre is None:
            return None
        if lustre.az_id:
            return lustre.az_id
        return self.training[0].az_id if self.training else self.network.az_ids[0]


def _eks_refusals_first(problems: list[tuple[str, str]], env: Environment) -> list[tuple[str, str]]:
    """A pool type EKS cannot boot (Trn3) is one line: what else its key (an unknown type) or its pool's capacity
    says is left out."""
    refused = eks_unsupported_type_problems(list(enumerate(env.training)), list(enumerate(env.inference)))
    keys = {k for k, _ in refused}
    pools = {k.split(".")[0] + ".capacity" for k in keys}
    kept = [p for p in problems if p[0] not in keys and not any(p[0].startswith(q) for q in pools)]
    return kept + refused


def _platform_problems(env: Environment) -> list[tuple[str, str]]:
    """platform: eks: the eks section, and every pool or top-level key EKS does not honour (one line each)."""
    problems = eks_section_problems(env.platform, env.eks)
    if env.platform != "eks":
        problems += [
            (f"training[{i}].cluster_queue", "a Kueue ClusterQueue exists on platform: eks only; remove it")
            for i, c in enumerate(env.training)
            if c.cluster_queue is not None
        ]
    if env.platform == "eks":
        problems += eks_pool_problems(list(enumerate(env.training)), list(enumerate(env.inference)))
        problems += eks_top_level_problems(set(env.model_fields_set))
        problems += eks_monitoring_problems(env.monitoring.day_night is not None)
        releases = _pool_releases(env.neuron_sdk, list(enumerate(env.training)), list(enumerate(env.inference)))[0]
        versions = sorted({r.release.version for r in releases.values() if r.release is not None})
        problems += eks_neuron_problems(env.eks, versions)
        if env.eks is not None:
            problems += eks_autoscaling_problems(
                env.eks.version, dra=env.eks.neuron.dra, node_autoscaler=env.eks.autoscales, fleets=bool(env.inference),
                installs=env.eks.installs("cluster_autoscaler"),
            )  # fmt: skip
            problems += _component_problems(env)[0]
            if env.eks.existing is not None and env.network.existing is None:
                problems.append(
                    (
                        "network.existing",
                        f"required with eks.existing: the VPC of cluster {env.eks.existing.cluster_name} (vpc_id and a "
                        "private subnet per AZ ID of network.az_ids)",
                    )
                )
        problems += eks_node_image_problems(env.eks, versions)[0]
    return problems


def _component_problems(env: Environment) -> tuple[list[tuple[str, str]], list[str]]:
    from neuronkit.config.eks import component_problems

    assert env.eks is not None
    return component_problems(env.eks, **component_needs(env))


def component_needs(env: Environment) -> dict[str, bool]:
    """What the file's pools need of the cluster's components: Neuron pools (the Neuron chart), EFA pools (the EFA
    device plugin), GPU groups (the NVIDIA device plugin), a served fleet, fleets, training, Lustre."""
    from neuronkit import catalog as _catalog
    from neuronkit.config.inference import model_spec

    neuron_types = [c.instance_type for c in env.training] + [t for f in env.inference for t in f.neuron_types]
    gpu = any(c.gpu_pool is not None for c in env.training) or any(f.fallback_types for f in env.inference)
    efa = False
    for c in env.training:
        try:
            efa = efa or _catalog.get(c.instance_type).efa_supported
            efa = efa or (c.gpu_pool is not None and _catalog.get(c.gpu_pool.instance_type).efa_supported)
        except (KeyError, AttributeError):
            continue
    served = any(model_spec(f) is not None for f in env.inference)
    return {
        "neuron": bool(neuron_types), "efa": efa, "gpu": gpu, "served": served, "fleets": bool(env.inference),
        "training": bool(env.training), "lustre": env.storage.lustre is not None,
    }  # fmt: skip


def address_problems(
    network: Network, training: list[TrainingCluster], inference: list[InferenceFleet], eks: Eks | None = None
) -> list[tuple[str, str]]:
    """The VPC the kit creates must hold every pool at its maximum size, twice over for rolling replacements
    (the subnets are the largest the block holds, or network.private_subnet_prefix: docs/network.md; an existing
    VPC's subnets are its owner's business). On EKS
    every pod takes an address of its node's subnet too: each node counts 1 + max_pods_per_node + the VPC CNI's
    warm addresses, and each subnet keeps room for the control plane's interfaces."""
    if network.existing is not None:
        return []
    try:
        need = addressing.addresses_per_az(
            network.az_ids, training, inference, pods_per_node=addressing.eks_pod_addresses(eks.max_pods_per_node) if eks else 0
        )
    except KeyError:  # an unknown type: its own check names it
        return []
    az, most = max(need.items(), key=lambda kv: kv[1])
    with_public = network.nat_gateways > 0
    where = f"the pools at their max_size: {az} needs {most:,} addresses, its subnet twice that for rolling replacements"
    if eks is not None:
        where += f" (EKS: {eks.max_pods_per_node} pods per node, each with its own address)"
    smallest = addressing.private_prefix_for(most)  # the smallest subnet that would hold them
    if network.private_subnet_prefix is not None:
        prefix = network.private_subnet_prefix
        try:
            addressing.plan_subnets(network.cidr, len(network.az_ids), prefix, with_public)
        except ValueError:
            return [("network.private_subnet_prefix", f"{len(network.az_ids)} private /{prefix} subnets do not fit "
                     f"{network.cidr} beside the public ones; use a larger prefix number or a larger network.cidr")]  # fmt: skip
        if not addressing.holds(prefix, most):
            return [("network.private_subnet_prefix", f"/{prefix} subnets cannot hold {where}; set /{smallest} or "
                     "lower (a new prefix replaces the subnets: docs/network.md) or lower max_size")]  # fmt: skip
        return []
    try:
        prefix = addressing.largest_private_prefix(network.cidr, len(network.az_ids), with_public)
    except ValueError:
        return [("network.cidr", f"{network.cidr} cannot hold {len(network.az_ids)} private subnets; use a larger network.cidr")]
    if not addressing.holds(prefix, most):
        if smallest < 16:  # larger than any VPC block AWS allows (Amazon VPC User Guide: /16 to /28)
            fix = "no VPC holds that: lower max_size or spread the pools over more AZ IDs"
        else:
            fix = f"use a larger network.cidr (a /{max(16, smallest - 1)} or /16) or lower max_size" + (
                " or eks.max_pods_per_node" if eks is not None else ""
            )
        return [("network.cidr", f"{network.cidr} cannot hold subnets for {where}; {fix}")]
    return []


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
    problems.extend(block_only_problems(region, clusters))
    lustre = storage.lustre if storage is not None else None
    if lustre is not None and lustre.az_id:
        foreign = _foreign_az(lustre.az_id, region) if region is not None else None
        if foreign:
            problems.append(("storage.lustre.az_id", foreign))
        elif az_ids is not None and lustre.az_id not in az_ids:
            fix = f"add it there or pick one of {', '.join(az_ids)}"
            problems.append(("storage.lustre.az_id", f"'{lustre.az_id}' is not in network.az_ids; {fix}"))
    return problems


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
    valid_fleets = [(i, f) for i, f in fleets if f is not None]
    top = data.get("neuron_sdk")
    top = top if isinstance(top, str) else None
    return (
        _cross_problems(region, network, _valid(Storage, data.get("storage", {})), clusters)
        + _inference_problems(region, network, valid_fleets, "eks" if data.get("platform") == "eks" else "asg")
        + _neuron_problems(top, clusters, valid_fleets)[0]
        # The pools that are valid alone already need this many addresses: too many is a problem whatever the rest.
        + (
            address_problems(network, [c for _, c in clusters], [f for _, f in valid_fleets], _eks_of(data))
            if network is not None
            else []
        )
    )


def _eks_of(data: dict[str, Any]) -> Eks | None:
    """The eks section of a platform: eks file, when it is valid on its own (defaults when absent)."""
    if data.get("platform") != "eks":
        return None
    eks = _valid(Eks, data.get("eks") or {})
    return eks if eks is not None else Eks()


def _pool_releases(
    top: str | None, clusters: list[tuple[int, TrainingCluster]], fleets: list[tuple[int, InferenceFleet]]
) -> tuple[dict[str, PoolRelease], list[tuple[str, str]], list[str]]:
    """Every Neuron pool's release (by pool name), with the problems and warnings of the whole file."""
    pools: dict[str, PoolRelease] = {}
    problems: list[tuple[str, str]] = []
    warnings: list[str] = []
    for i, c in clusters:
        it = catalog.instance_types().get(c.instance_type)
        families = neuron_families([c.instance_type]) if it is not None and it.accelerator == "trainium" else ()
        if not families:
            continue  # not a Trainium type the matrix knows: reported on instance_type
        pool, p, w = resolve(f"training[{i}]", top, c.neuron_sdk, families, c.workload)
        pools[c.name] = pool
        problems += p
        warnings += w
        if c.scheduler == "batch":
            problems += container_problems(f"training[{i}]", c.container_image, pool)
        elif c.ami.track != "latest":
            problems += dlami_problems(f"training[{i}].ami", ami_family(c), pool)
    for i, f in fleets:
        families = neuron_families(list(f.neuron_types))
        if not families:
            continue
        pool, p, w = resolve(f"inference[{i}]", top, f.neuron_sdk, families, f.workload)
        pools[f.name] = pool
        problems += p
        warnings += w
        if f.neuron_ami.track != "latest" and not f.neuron_ami.ami_id:
            fam = f.neuron_ami.family or catalog.default_ami_family("neuron")
            problems += dlami_problems(f"inference[{i}].neuron_ami", fam, pool)
        if f.model is not None and f.images.neuron is None and pool.release is not None:
            problems += serving_image_problems(f"inference[{i}]", pool.release)
    if top is not None and not any(p.inherited for p in pools.values()) and pools:
        warnings.append("neuron_sdk: every pool names its own release; the top-level one is unused")
    return pools, problems, warnings


def _neuron_problems(
    top: str | None, clusters: list[tuple[int, TrainingCluster]], fleets: list[tuple[int, InferenceFleet]]
) -> tuple[list[tuple[str, str]], list[str]]:
    _, problems, warnings = _pool_releases(top, clusters, fleets)
    # One line per key: a top-level neuron_sdk that fails several pools is named once per pool.
    return list(dict.fromkeys(problems)), list(dict.fromkeys(warnings))


def pool_releases(env: Environment) -> dict[str, PoolRelease]:
    """The Neuron release each Neuron pool of a valid environment runs (by pool name)."""
    return _pool_releases(env.neuron_sdk, list(enumerate(env.training)), list(enumerate(env.inference)))[0]


def _tag_problems(tags: dict[str, str]) -> list[tuple[str, str]]:
    """What AWS refuses in a tag (Tagging AWS resources: reserved aws: prefix, key 128 and value 256 characters)."""
    out: list[tuple[str, str]] = []
    for key, value in tags.items():
        if key.lower().startswith("aws:"):
            out.append((f"tags.{key}", "keys starting with aws: are reserved by AWS; rename the key"))
        if not 1 <= len(key) <= 128:
            out.append((f"tags.{key[:20]}...", f"a tag key holds 1 to 128 characters, this one {len(key)}; shorten it"))
        if len(value) > 256:
            out.append((f"tags.{key}", f"a tag value holds at most 256 characters, this one {len(value)}; shorten it"))
    return out


def serving_line_warnings(loc: str, f: InferenceFleet) -> list[str]:
    """A Neuron type on a serving line in maintenance or ended (catalog/fit.py line_of, serving.yaml engines): the
    line, its last release and what ends when, one line per line (both platforms)."""
    if f.workload != "vllm-serving":
        return []
    from neuronkit.catalog import fit

    out: list[str] = []
    seen: set[str] = set()
    for j, t in enumerate(f.neuron_types):
        line = fit.line_of(t)
        warning = fit.line_warning(t)
        if line is None or warning is None or line.name in seen:
            continue
        seen.add(line.name)
        out.append(f"{loc}.neuron_types[{j}]: {warning}")
    return out


def serving_lines(env: Environment) -> dict[str, str]:
    """Each serving Neuron pool's line(s) and status, by fleet name (validate's ok line)."""
    from neuronkit.catalog import fit

    out: dict[str, str] = {}
    for f in env.inference:
        if f.workload != "vllm-serving":
            continue
        lines = {ln.name: ln for ln in (fit.line_of(t) for t in f.neuron_types) if ln is not None}
        if lines:
            out[f.name] = ", ".join(ln.short() for ln in lines.values())
    return out


def neuron_warnings(env: Environment) -> list[str]:
    """Maintenance-mode combinations and floating AMIs: they pass validation, visibly (one line each)."""
    warnings = _neuron_problems(env.neuron_sdk, list(enumerate(env.training)), list(enumerate(env.inference)))[1]
    for i, c in enumerate(env.training):
        if c.ami.track == "latest" and not c.ami.ami_id:
            warnings.append(
                f"training[{i}].ami.track: latest re-resolves the AMI at every deploy; nodes of one pool can run different drivers"
            )
        if c.gpu_pool is not None and c.gpu_pool.ami.track == "latest" and not c.gpu_pool.ami.ami_id:
            warnings.append(f"training[{i}].gpu_pool.ami.track: latest re-resolves the AMI at every deploy")
    for i, f in enumerate(env.inference):
        for key, ami in (("neuron_ami", f.neuron_ami), ("gpu_ami", f.gpu_ami)):
            if ami.track == "latest" and not ami.ami_id:
                warnings.append(f"inference[{i}].{key}.track: latest re-resolves the AMI at every deploy")
        if env.platform != "eks":
            warnings += serving_warnings(f"inference[{i}]", f)
        else:
            warnings += eks_serving_warnings(f"inference[{i}]", f)
        warnings += serving_line_warnings(f"inference[{i}]", f)
        warnings += default_latency_warnings(f"inference[{i}]", f, env.monitoring.alarms.p99_latency_ms)
    warnings += [f"{key}: {line}" for key, line in offering_warnings(env.region, list(env.training))]
    warnings += [f"{key}: {line}" for key, line in block_only_warnings(env.region, list(env.training))]
    if env.platform == "eks":
        versions = sorted({r.release.version for r in pool_releases(env).values() if r.release is not None})
        warnings += eks_node_image_problems(env.eks, versions)[1]
        if env.eks is not None:
            warnings += _component_problems(env)[1]
    lustre = env.storage.lustre
    if lustre is not None and not lustre.az_id and env.training:
        az = env.lustre_az_id
        warnings.append(
            f"storage.lustre.az_id: not set, so the file system follows training[0].az_id ({az}); moving that cluster "
            f"would replace the file system and lose its data. Set storage.lustre.az_id: {az} to pin it"
        )
    return warnings


def json_schema() -> dict[str, Any]:
    schema = Environment.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "neuronkit environment"
    return schema
