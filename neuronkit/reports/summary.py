"""A Markdown summary of a synthesized app (a cdk.out folder), written for pull request comments.

Per environment: a Mermaid ``flowchart`` (VPC and subnets by AZ ID -> compute pools -> storage), the stacks
and what each holds, the compute pools (instance types, min/desired/max, chips, NeuronCores, GPUs, EFA
interfaces and bandwidth, capacity source), storage (buckets, file systems with type and size), alarms, and
the On-Demand cost estimate when :mod:`neuronkit.reports.cost` can price the pools.

Only the stacks listed in ``manifest.json`` are read, so stale templates left in the folder by an earlier
synth do not show up. Pools come from the ``neuronkit`` Metadata of each Auto Scaling group
(:func:`neuronkit.reports.pools.pools_from_cdk_out`); hardware facts from :mod:`neuronkit.catalog`. Nothing here
calls AWS.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronkit import catalog
from neuronkit.catalog import fit, releases
from neuronkit.kubernetes import report as kubernetes_report
from neuronkit.rehearsal import NOT_A_RESOURCE, Assembly, RehearsalError, StackInfo, read_assembly
from neuronkit.reports.pools import (
    BATCH_TYPE,
    COMPILE_METADATA_KEY,
    IMAGE_METADATA,
    METADATA_KEY,
    Pool,
    PoolError,
    pools_from_cdk_out,
)

ASG_TYPE = "AWS::AutoScaling::AutoScalingGroup"
NODEGROUP_TYPE = "AWS::EKS::Nodegroup"  # platform: eks: the kit's node groups carry the same pool Metadata
BUCKET_TYPE = "AWS::S3::Bucket"
FILE_SYSTEM_TYPES = {
    "AWS::FSx::FileSystem": "FSx",
    "AWS::EFS::FileSystem": "EFS",
}
ALARM_TYPES = ("AWS::CloudWatch::Alarm", "AWS::CloudWatch::CompositeAlarm")
RETAINED = ("Retain", "RetainExceptOnCreate", "Snapshot")
DASH = "–"


class SummaryError(Exception):
    """The folder is not a readable cloud assembly, or a pool's Metadata is malformed; one line per problem."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


# --------------------------------------------------------------------------------------------
# what the templates hold
# --------------------------------------------------------------------------------------------
@dataclass
class PoolView:
    stack: str
    logical_id: str
    pool: Pool
    az_id: str | None
    subnets: list[str]  # node ids of the subnets the group launches into
    meta: dict[str, Any] = field(default_factory=dict)  # the group's neuronkit metadata (LNC, UltraServer, block)


@dataclass
class Subnet:
    node: str
    label: str
    az_id: str


@dataclass
class Storage:
    stack: str
    logical_id: str
    kind: str  # "S3 bucket" | "FSx for Lustre" | ...
    name: str
    details: str
    retained: bool
    logs_for: list[str] = field(default_factory=list)  # buckets whose access logs land here


@dataclass
class Alarm:
    stack: str
    logical_id: str
    name: str
    metric: str


@dataclass
class EnvironmentView:
    name: str
    account: str
    region: str
    stacks: list[StackInfo] = field(default_factory=list)
    vpcs: list[tuple[str, str]] = field(default_factory=list)  # (node id, label)
    subnets: list[Subnet] = field(default_factory=list)
    pools: list[PoolView] = field(default_factory=list)
    storage: list[Storage] = field(default_factory=list)
    alarms: list[Alarm] = field(default_factory=list)


@dataclass
class Image:
    """The image one launch template or Batch compute environment boots, and how it was chosen."""

    stack: str
    pool: str
    where: str  # launch template | compute environment
    instance_types: str
    release: str | None
    ami: str  # an AMI id, or the public parameter a floating image resolves from
    pinned_by: str  # ami_id | cdk.context.json | floating | catalog (EKS node groups)
    workload: str | None = None
    driver: str | None = None  # the image's own driver where the catalog knows it (EKS node images)


def _node_group_images(stack: StackInfo) -> list[Image]:
    """EKS node groups: the AMI type and release version each group boots, with its driver and build date from the
    catalog's node image table (each Neuron group pins the newest image in its pool's driver window)."""
    from neuronkit.catalog import eks_images

    out = []
    for _, r in _resources(stack, "AWS::EKS::Nodegroup"):
        meta = (r.get("Metadata") or {}).get(METADATA_KEY)
        if not isinstance(meta, dict):
            continue
        props = r.get("Properties") or {}
        ami_type, version = str(props.get("AmiType", "")), str(props.get("ReleaseVersion", ""))
        row = eks_images.node_image("neuron" if ami_type.endswith("NEURON") else "gpu", version)
        built = f", built {row.date}" if row is not None else ", not in the catalog's image table"
        types = ", ".join(props.get("InstanceTypes") or meta.get("instance_types") or [])
        out.append(
            Image(
                stack.name, str(meta.get("pool")), "node group", types, None, f"{ami_type} {version}{built}", "catalog",
                driver=(row.driver if row is not None else None),
            )
        )  # fmt: skip
    return out


def _images(stack: StackInfo) -> list[Image]:
    out = []
    for logical_id, r in _resources(stack, "AWS::EC2::LaunchTemplate", "AWS::Batch::ComputeEnvironment"):
        meta = (r.get("Metadata") or {}).get(IMAGE_METADATA)
        if not isinstance(meta, dict):
            continue
        props = r.get("Properties") or {}
        if r["Type"] == "AWS::EC2::LaunchTemplate":
            data = props.get("LaunchTemplateData") or {}
            image, types = data.get("ImageId"), str(data.get("InstanceType", "?"))
            tags = [t for spec in data.get("TagSpecifications", []) for t in spec.get("Tags", [])]
            pool = next((t["Value"] for t in tags if t.get("Key") == "neuronkit:pool"), logical_id)
            if any(t.get("Key") == "neuronkit:compile" for t in tags):
                continue  # a compile group's template: the same image as its type's serving template
            where = "launch template"
        else:
            res = props.get("ComputeResources") or {}
            image = next((c.get("ImageIdOverride") for c in res.get("Ec2Configuration", [])), None)
            types = ", ".join(res.get("InstanceTypes", []))
            pool = str((res.get("Tags") or {}).get("neuronkit:pool", logical_id))
            where = "compute environment"
        if isinstance(image, dict) and "Ref" in image:
            image = (stack.template.get("Parameters") or {}).get(image["Ref"], {}).get("Default", image["Ref"])
        out.append(
            Image(
                stack.name,
                str(pool),
                where,
                types,
                meta.get("release"),
                str(image),
                str(meta.get("pinned_by")),
                meta.get("workload"),
            )
        )
    return out


def _image_rows(view: EnvironmentView) -> list[list[str]]:
    rows = []
    for s in view.stacks:
        for i in [*_images(s), *_node_group_images(s)]:
            driver = i.driver or (releases.release(i.release).driver if i.release in releases.versions() else DASH)
            ami = f"floating: {i.ami}" if i.pinned_by == "floating" else f"`{i.ami}`"
            rows.append(
                [i.pool, i.where, i.stack, i.instance_types, i.release or DASH, i.workload or DASH, driver, ami, i.pinned_by]
            )
    return rows


def _serving_rows(view: EnvironmentView) -> list[list[str]]:
    """Per type of each model-served fleet: the pinned image, tensor parallelism and compiled-artifact key."""
    rows = []
    for s in view.stacks:
        compiled_first = {(c.get("pool"), c.get("instance_type"), c.get("cache_key")) for c in _compile_groups(s)}
        for _, r in _resources(s, "AWS::AutoScaling::AutoScalingGroup"):
            meta = ((r.get("Metadata") or {}).get("neuronkit") or {}) if isinstance(r.get("Metadata"), dict) else {}
            for t, p in (meta.get("profiles") or {}).items():
                key = p.get("cache_key")
                gate = " (compiled before the rollout)" if (meta.get("pool"), t, key) in compiled_first else ""
                rows.append(
                    [
                        str(meta.get("pool")),
                        str(meta.get("model")),
                        t,
                        f"`{p.get('image')}`",
                        str(p.get("tensor_parallel")),
                        f"`{key}`{gate}" if key else DASH,
                        str(meta.get("listener", DASH)),
                    ]
                )
    return rows


def _resources(stack: StackInfo, *types: str) -> list[tuple[str, dict[str, Any]]]:
    return stack.resources(*types)


def _compile_groups(stack: StackInfo) -> list[dict[str, Any]]:
    """The ``neuronkit-precompile`` Metadata of the stack's compile groups (one per new compiled-artifact key)."""
    out = []
    for _, r in _resources(stack, ASG_TYPE):
        meta = r.get("Metadata")
        found = meta.get(COMPILE_METADATA_KEY) if isinstance(meta, dict) else None
        if isinstance(found, dict):
            out.append(found)
    return out


def _path_name(resource: dict[str, Any], fallback: str) -> str:
    """A readable name: the logical ID without CDK's 8-character hash (``NetworkPrivate090286E04`` -> ``NetworkPrivate0``).

    (The ``aws:cdk:path`` metadata would read better but only the CDK CLI writes it, so the same app would be
    summarized differently when synthesized in-process.)
    """
    del resource
    return re.sub(r"[0-9A-F]{8}$", "", fallback) or fallback


def _node(*parts: str) -> str:
    return "_".join(re.sub(r"[^A-Za-z0-9]", "_", p) for p in parts if p)


def _label(text: str) -> str:
    """Text safe inside a quoted Mermaid label: no quotes, brackets or braces."""
    return re.sub(r"[\"\[\]{}()<>|]", "", text).replace("#", "No. ")


def _exports(assembly: Assembly) -> dict[str, tuple[str, str]]:
    """Export name -> (stack name, logical id it references)."""
    out = {}
    for s in assembly.stacks:
        for output in (s.template.get("Outputs") or {}).values():
            name = (output.get("Export") or {}).get("Name")
            value = output.get("Value")
            if isinstance(name, str) and isinstance(value, dict) and "Ref" in value:
                out[name] = (s.name, str(value["Ref"]))
    return out


def _refs(value: Any, stack: StackInfo, exports: dict[str, tuple[str, str]]) -> list[tuple[str, str]]:
    """(stack, logical id) of every Ref or Fn::ImportValue in ``value``."""
    found: list[tuple[str, str]] = []
    if isinstance(value, dict):
        if "Ref" in value and isinstance(value["Ref"], str):
            found.append((stack.name, value["Ref"]))
        elif "Fn::ImportValue" in value and isinstance(value["Fn::ImportValue"], str):
            if value["Fn::ImportValue"] in exports:
                found.append(exports[value["Fn::ImportValue"]])
        else:
            for v in value.values():
                found += _refs(v, stack, exports)
    elif isinstance(value, list):
        for v in value:
            found += _refs(v, stack, exports)
    return found


def _bucket(stack: StackInfo, logical_id: str, resource: dict[str, Any]) -> Storage:
    props = resource.get("Properties") or {}
    name = props.get("BucketName")
    details = []
    if (props.get("VersioningConfiguration") or {}).get("Status") == "Enabled":
        details.append("versioned")
    rules = (props.get("BucketEncryption") or {}).get("ServerSideEncryptionConfiguration") or []
    algorithms = sorted(
        {str((r.get("ServerSideEncryptionByDefault") or {}).get("SSEAlgorithm")) for r in rules if isinstance(r, dict)}
    )
    if algorithms:
        details.append("encrypted " + "/".join(a.replace("aws:kms", "SSE-KMS").replace("AES256", "SSE-S3") for a in algorithms))
    lifecycle = (props.get("LifecycleConfiguration") or {}).get("Rules") or []
    if lifecycle:
        details.append(f"{len(lifecycle)} lifecycle rule(s)")
    return Storage(
        stack=stack.name,
        logical_id=logical_id,
        kind="S3 bucket",
        name=name if isinstance(name, str) else f"{_path_name(resource, logical_id)} (name generated at deploy)",
        details=", ".join(details) or DASH,
        retained=resource.get("DeletionPolicy") in RETAINED,
    )


def _file_system(stack: StackInfo, logical_id: str, resource: dict[str, Any]) -> Storage:
    props = resource.get("Properties") or {}
    kind = props.get("FileSystemType")
    service = FILE_SYSTEM_TYPES.get(resource.get("Type", ""), resource.get("Type", ""))
    title = f"{service} for {str(kind).title() if kind != 'ONTAP' else 'NetApp ONTAP'}" if kind else service
    details = []
    if props.get("FileSystemTypeVersion"):
        details.append(f"{kind} {props['FileSystemTypeVersion']}")
    lustre = props.get("LustreConfiguration") or {}
    if lustre.get("DeploymentType"):
        details.append(str(lustre["DeploymentType"]))
    if props.get("StorageCapacity") is not None:
        details.append(f"{props['StorageCapacity']} GiB")
    if lustre.get("PerUnitStorageThroughput"):
        details.append(f"{lustre['PerUnitStorageThroughput']} MB/s per TiB")
    if props.get("StorageType"):
        details.append(str(props["StorageType"]))
    return Storage(
        stack=stack.name,
        logical_id=logical_id,
        kind=title,
        name=_path_name(resource, logical_id),
        details=", ".join(details) or DASH,
        retained=resource.get("DeletionPolicy") in RETAINED,
    )


# Units of the CloudWatch metrics the kit alarms on whose alarms carry no Unit (CloudWatch docs: FSx for
# Lustre metrics, Application Load Balancer metrics).
_METRIC_UNITS = {"FreeDataStorageCapacity": "Bytes", "TargetResponseTime": "Seconds"}


def _threshold(metric: str, unit: Any, value: Any) -> str:
    """A threshold as a reader says it: 120 GiB rather than 128849018880, 2 s rather than 2."""
    unit = unit if isinstance(unit, str) else _METRIC_UNITS.get(metric, "Bytes" if metric.endswith("Bytes") else "")
    if not isinstance(value, int | float) or isinstance(value, bool):
        return str(value)
    if unit == "Bytes":
        for factor, name in ((2**40, "TiB"), (2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
            if abs(value) >= factor:
                return f"{value / factor:,.4g} {name}"
        return f"{value:g} bytes"
    if unit == "Seconds":
        return f"{value:g} s"
    if unit == "Percent":
        return f"{value:g}%"
    return f"{value:g}"


def _alarm(stack: StackInfo, logical_id: str, resource: dict[str, Any]) -> Alarm:
    props = resource.get("Properties") or {}
    name = props.get("AlarmName")
    metric = props.get("MetricName")
    if isinstance(metric, str):
        comparison = str(props.get("ComparisonOperator", "")).replace("Threshold", "")
        threshold = _threshold(metric, props.get("Unit"), props.get("Threshold", ""))
        metric = f"{props.get('Namespace', '')} {metric} {comparison} {threshold}".strip()
    elif props.get("AlarmRule"):
        metric = "composite"
    else:
        metric = "metric math" if props.get("Metrics") else DASH
    return Alarm(
        stack=stack.name,
        logical_id=logical_id,
        name=name if isinstance(name, str) else _path_name(resource, logical_id),
        metric=str(metric),
    )


def environments(cdk_out: str | Path) -> list[EnvironmentView]:
    """Read a cdk.out folder into one view per environment (stacks grouped by their environment tag)."""
    try:
        assembly = read_assembly(cdk_out)
    except RehearsalError as err:
        raise SummaryError([err.message]) from None
    try:
        pools = pools_from_cdk_out(cdk_out)
    except PoolError as err:
        raise SummaryError(err.problems) from None
    by_key = {(p.stack, p.pool, p.role): p for p in pools}
    exports = _exports(assembly)
    views: dict[str, EnvironmentView] = {}
    subnet_nodes: dict[tuple[str, str], str] = {}
    existing_az: dict[str, str] = {}  # subnet id -> AZ ID of an existing VPC (network stack's record)
    for name, stacks in assembly.environments().items():
        view = EnvironmentView(name=name, account=stacks[0].account, region=stacks[0].region, stacks=stacks)
        views[name] = view
        for s in stacks:
            for logical_id, vpc in _resources(s, "AWS::EC2::VPC"):
                cidr = (vpc.get("Properties") or {}).get("CidrBlock", "")
                view.vpcs.append((_node(name, "vpc", logical_id), f"{s.name}: VPC {cidr}".strip()))
            for _, parameter in _resources(s, "AWS::SSM::Parameter"):
                existing_az.update(_existing_subnets(parameter))
            for logical_id, subnet in _resources(s, "AWS::EC2::Subnet"):
                props = subnet.get("Properties") or {}
                az = props.get("AvailabilityZoneId") or props.get("AvailabilityZone") or "AZ not set"
                node = _node(name, "subnet", logical_id)
                subnet_nodes[(s.name, logical_id)] = node
                cidr = props.get("CidrBlock", "")
                view.subnets.append(Subnet(node=node, label=f"{_path_name(subnet, logical_id)} {cidr}".strip(), az_id=str(az)))
    for name, view in views.items():
        for s in view.stacks:
            buckets = {}
            for logical_id, resource in _resources(s, BUCKET_TYPE):
                buckets[logical_id] = _bucket(s, logical_id, resource)
            for logical_id, resource in _resources(s, BUCKET_TYPE):
                target = ((resource.get("Properties") or {}).get("LoggingConfiguration") or {}).get("DestinationBucketName")
                for _, ref in _refs(target, s, exports):
                    if ref in buckets:
                        buckets[ref].logs_for.append(logical_id)
            view.storage += buckets.values()
            for logical_id, resource in _resources(s, *FILE_SYSTEM_TYPES):
                view.storage.append(_file_system(s, logical_id, resource))
            for logical_id, resource in _resources(s, *ALARM_TYPES):
                view.alarms.append(_alarm(s, logical_id, resource))
            for logical_id, resource in _resources(s, ASG_TYPE, NODEGROUP_TYPE, BATCH_TYPE):
                meta = (resource.get("Metadata") or {}).get("neuronkit") or {}
                stem = s.template_file.removesuffix(".template.json") or s.artifact_id
                pool = by_key.get((stem, str(meta.get("pool")), str(meta.get("role"))))
                if pool is None:
                    continue
                props = resource.get("Properties") or {}
                zones = {
                    NODEGROUP_TYPE: props.get("Subnets"),
                    BATCH_TYPE: (props.get("ComputeResources") or {}).get("Subnets"),
                }.get(str(resource.get("Type")), props.get("VPCZoneIdentifier"))
                nodes = [subnet_nodes[r] for r in _refs(zones, s, exports) if r in subnet_nodes]
                if not nodes and isinstance(zones, list):  # subnets of an imported VPC: literal ids
                    for sid in (z for z in zones if isinstance(z, str)):
                        node = _node(name, "subnet", sid)
                        az_id = existing_az.get(sid) or meta.get("az_id") or "AZ not set"
                        view.subnets.append(Subnet(node=node, label=sid, az_id=str(az_id)))
                        nodes.append(node)
                az = meta.get("az_id")
                view.pools.append(
                    PoolView(
                        stack=s.name,
                        logical_id=logical_id,
                        pool=pool,
                        az_id=az if isinstance(az, str) else None,
                        subnets=nodes,
                        meta=dict(meta),
                    )
                )
    return list(views.values())


def _existing_subnets(parameter: dict[str, Any]) -> dict[str, str]:
    """The network stack of an existing VPC records its subnets by AZ ID (``/neuronkit/ENV/network``, JSON)."""
    import json

    props = parameter.get("Properties") or {}
    name, value = props.get("Name"), props.get("Value")
    if not (isinstance(name, str) and name.startswith("/neuronkit/") and name.endswith("/network") and isinstance(value, str)):
        return {}
    try:
        subnets = json.loads(value).get("subnet_ids") or {}
    except (ValueError, AttributeError):
        return {}
    return {str(sid): str(az) for az, sid in subnets.items()}


# --------------------------------------------------------------------------------------------
# Markdown
# --------------------------------------------------------------------------------------------
def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], align: str = "") -> str:
    def row(cells: Sequence[str]) -> str:
        return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"

    rule = "|" + "|".join("---:" if i < len(align) and align[i] == "r" else "---" for i in range(len(headers))) + "|"
    return "\n".join([row(headers), rule, *(row(r) for r in rows)])


def _facts(instance_type: str) -> catalog.InstanceType | None:
    try:
        return catalog.get(instance_type)
    except KeyError:
        return None


def _per_node(value: int | float | None, nodes: int, unit: str = "") -> str:
    if value is None:
        return "?"
    if not value:
        return "0"
    total = value * nodes
    return f"{value:g}{unit} ({total:g}{unit} at max)"


def _count(stack: StackInfo) -> int:
    """Resources in the template, without CDK's version-reporting one (only the CLI adds it)."""
    return sum(1 for _, r in stack.resources() if r.get("Type") not in NOT_A_RESOURCE)


def _stack_contents(stack: StackInfo, view: EnvironmentView) -> str:
    parts = []
    vpcs = _resources(stack, "AWS::EC2::VPC")
    if vpcs:
        parts += [f"VPC {(v.get('Properties') or {}).get('CidrBlock', '')}".strip() for _, v in vpcs]
    subnets = _resources(stack, "AWS::EC2::Subnet")
    if subnets:
        zones = sorted({str((r.get("Properties") or {}).get("AvailabilityZoneId", "?")) for _, r in subnets})
        parts.append(f"{len(subnets)} subnets in {', '.join(zones)}")
    for kind, label in (("AWS::EC2::NatGateway", "NAT gateway(s)"), ("AWS::EC2::VPCEndpoint", "VPC endpoint(s)")):
        n = len(_resources(stack, kind))
        if n:
            parts.append(f"{n} {label}")
    pools = [p for p in view.pools if p.stack == stack.name]
    if pools:
        parts.append(f"{len(pools)} compute pool(s): {', '.join(p.pool.pool for p in pools)}")
    compiles = _compile_groups(stack)
    if compiles:
        parts.append(f"{len(compiles)} compile group(s), one per compiled-artifact key")
    buckets = [s for s in view.storage if s.stack == stack.name and s.kind == "S3 bucket"]
    if buckets:
        parts.append(f"{len(buckets)} bucket(s)")
    systems = [s for s in view.storage if s.stack == stack.name and s.kind != "S3 bucket"]
    if systems:
        parts.append(f"{len(systems)} file system(s)")
    alarms = [a for a in view.alarms if a.stack == stack.name]
    if alarms:
        parts.append(f"{len(alarms)} alarm(s)")
    for kind, label in (
        ("AWS::EC2::CapacityReservation", "capacity reservation(s)"),
        ("AWS::EC2::PlacementGroup", "placement group(s)"),
    ):
        n = len(_resources(stack, kind))
        if n:
            parts.append(f"{n} {label}")
    return ", ".join(parts) or DASH


def _pool_rows(view: EnvironmentView) -> list[list[str]]:
    by_node = {sn.node: sn.az_id for sn in view.subnets}  # a pool without one AZ ID lists its subnets' AZ IDs
    rows = []
    for v in view.pools:
        p = v.pool
        it = _facts(p.primary_type)
        top = p.max_size
        rows.append(
            [
                v.stack,
                p.pool,
                p.role,
                ", ".join(p.instance_types),
                f"{p.min_size}/{p.desired_size}/{p.max_size}",
                _per_node(it.neuron_devices if it else None, top),
                _per_node(it.neuron_cores if it else None, top),
                _gpus(p, it, top),
                str(it.efa_max_interfaces) if it else "?",
                (f"{it.efa_bandwidth_gbps:g} Gbps" if it.efa_supported else "no EFA") if it else "?",
                p.capacity,
                v.az_id or ", ".join(sorted({by_node[n] for n in v.subnets if n in by_node})) or DASH,
            ]
        )
    return rows


def _gpus(p: Any, it: Any, nodes: int) -> str:
    """The primary type's GPUs, then each GPU fallback type's (what a node has when the pool falls back)."""
    cell = _per_node(it.gpus if it else None, nodes)
    for t in (t for t in p.fallback_types if t != p.primary_type):
        facts = _facts(t)
        if facts is not None and facts.gpus:
            cell += f"; {t} fallback: {_per_node(facts.gpus, nodes)}"
    return cell


def _trainium_rows(view: EnvironmentView) -> list[list[str]]:
    """LNC, UltraServer size and Capacity Block dates of the pools that have any (a PR shows a block moving)."""
    rows = []
    for v in view.pools:
        m = v.meta
        if not any(m.get(k) for k in ("lnc", "ultraserver_size", "block_start")):
            continue
        fee = m.get("block_fee")
        rows.append(
            [
                v.pool.pool,
                str(m.get("lnc") or DASH),
                f"{m['ultraserver_size']} nodes each" if m.get("ultraserver_size") else DASH,
                v.pool.capacity,
                str(m.get("block_start") or DASH),
                str(m.get("block_end") or DASH),
                str(m.get("scale_down_at") or DASH),
                f"${fee:,.0f}" if isinstance(fee, int | float) else DASH,
            ]
        )
    return rows


def _line_rows(view: EnvironmentView) -> list[list[str]]:
    """Per serving Neuron pool, the line each of its types is on (catalog/fit.py line_of, serving.yaml engines)."""
    rows = []
    for p in view.pools:
        if p.pool.role != "inference" or not p.pool.neuron_types:
            continue
        by_line: dict[str, tuple[fit.Line, list[str]]] = {}
        for t in p.pool.neuron_types:
            line = fit.line_of(t)
            if line is not None:
                by_line.setdefault(line.name, (line, []))[1].append(t)
        for line, types in by_line.values():
            status = line.short()[len(line.title) + 2 : -1]
            rows.append([p.pool.pool, ", ".join(types), line.title, status, f"{line.ends} [{line.source}]"])
    return rows


def fixed_charges_in(view: EnvironmentView) -> list[tuple[str, str]]:
    """The fixed charges this synth creates, as (kind, what) with the kinds of neuronkit.reports.cost.FIXED_KINDS: the
    summary's total leaves them out and names them, validate's budget line and `neuronkit cost` add them."""
    count: dict[str, int] = {}
    lbs: list[str] = []
    for stack in view.stacks:
        count["EKS control plane"] = count.get("EKS control plane", 0) + len(_resources(stack, "AWS::EKS::Cluster"))
        system = [r for _, r in _resources(stack, NODEGROUP_TYPE) if METADATA_KEY not in (r.get("Metadata") or {})]
        count["EKS system nodes"] = count.get("EKS system nodes", 0) + len(system)
        count["NAT gateways"] = count.get("NAT gateways", 0) + len(_resources(stack, "AWS::EC2::NatGateway"))
        interface = [
            r for _, r in _resources(stack, "AWS::EC2::VPCEndpoint")
            if (r.get("Properties") or {}).get("VpcEndpointType") == "Interface"
        ]  # fmt: skip
        count["interface endpoints"] = count.get("interface endpoints", 0) + len(interface)
        for _, r in _resources(stack, "AWS::ElasticLoadBalancingV2::LoadBalancer"):
            lbs.append("NLB" if (r.get("Properties") or {}).get("Type") == "network" else "ALB")
        lustre = [
            r for _, r in _resources(stack, "AWS::FSx::FileSystem")
            if (r.get("Properties") or {}).get("FileSystemType") == "LUSTRE"
        ]  # fmt: skip
        count["FSx for Lustre"] = count.get("FSx for Lustre", 0) + len(lustre)
    out: list[tuple[str, str]] = []
    if count.get("EKS control plane"):
        out.append(("EKS control plane", "the EKS control plane"))
    if count.get("EKS system nodes"):
        out.append(("EKS system nodes", "the EKS system node group"))
    if count.get("NAT gateways"):
        out.append(("NAT gateways", f"NAT gateways x{count['NAT gateways']}"))
    if count.get("interface endpoints"):
        out.append(("interface endpoints", f"interface endpoints x{count['interface endpoints']}"))
    if lbs:
        out.append(("load balancers", ", ".join(f"{lbs.count(k)} {k}" for k in sorted(set(lbs)))))
    if count.get("FSx for Lustre"):
        out.append(("FSx for Lustre", f"FSx for Lustre x{count['FSx for Lustre']}"))
    return out


def _cost_section(view: EnvironmentView) -> list[str]:
    """The On-Demand estimate from neuronkit.reports.cost, or nothing when that module cannot price pools."""
    try:
        from neuronkit.reports import cost
    except ImportError:
        return []
    price_pools = getattr(cost, "price_pools", None)
    if price_pools is None or not view.pools:
        return []
    unpriced: tuple[type[Exception], ...] = ()
    try:
        from neuronkit.catalog.pricing import MissingPriceError

        unpriced = (MissingPriceError,)
    except ImportError:  # pragma: no cover - pricing ships with cost
        pass
    usd = getattr(cost, "usd", lambda x: f"${x:,.2f}")
    rate = getattr(cost, "rate", lambda x: f"${x:,.4f}")
    try:
        priced = price_pools([v.pool for v in view.pools])
        rows = [
            [
                c.pool.pool,
                c.instance_type,
                rate(c.hourly_price),
                usd(c.monthly("min")),
                usd(c.monthly("desired")),
                usd(c.monthly("max")),
            ]
            for c in priced
        ]
        totals = [
            "**total**",
            "",
            "",
            *(f"**{usd(sum(c.monthly(level) for c in priced))}**" for level in ("min", "desired", "max")),
        ]
    except unpriced as err:
        return ["#### Cost estimate", "", f"Not priced: {'; '.join(getattr(err, 'problems', [str(err)]))}"]
    except (AttributeError, KeyError, TypeError, ValueError) as err:
        return ["#### Cost estimate", "", f"Not available from neuronkit.reports.cost ({type(err).__name__}: {err})."]
    hours = priced[0].hours_per_month if priced else 730
    return [
        "#### Cost estimate (On-Demand list prices)",
        "",
        _table(
            ["pool", "priced on", "$/hour per node", "$/month at min", "$/month at desired", "$/month at max"],
            [*rows, totals],
            "llrrrr",
        ),
        "",
        f"A month is {hours:g} hours; `neuronkit cost --cdk-out DIR` shows the GPU comparison and the notes.",
        "",
        _fixed_note(view),
    ]


def _fixed_note(view: EnvironmentView) -> str:
    found = fixed_charges_in(view)
    if not found:
        return "The total is the pools alone; this synth creates no fixed charges the kit prices."
    return (
        "The total is the pools alone. It leaves out the fixed charges this synth creates: "
        + "; ".join(what for _, what in found)
        + ". `neuronkit validate` (its budget line) and `neuronkit cost --env NAME` add them at list prices "
        "(catalog/service_prices.yaml), so their total is this one plus those charges."
    )


def mermaid(view: EnvironmentView) -> str:
    """A ``flowchart`` of one environment: VPC and subnets grouped by AZ ID, then pools, then storage."""
    lines = ["flowchart LR"]
    env = _node(view.name)
    by_az: dict[str, list[Subnet]] = {}
    for subnet in view.subnets:
        by_az.setdefault(subnet.az_id, []).append(subnet)
    vpc_node, vpc_label = view.vpcs[0] if view.vpcs else (_node(env, "vpc"), "existing VPC")
    if by_az:
        lines.append(f'  subgraph {vpc_node}["{_label(vpc_label)}"]')
        for az, subnets in sorted(by_az.items()):
            lines.append(f'    subgraph {_node(env, "az", az)}["{_label(az)}"]')
            lines += [f'      {sn.node}["{_label(sn.label)}"]' for sn in subnets]
            lines.append("    end")
        lines.append("  end")
    for p in view.pools:
        node = _node(env, "pool", p.logical_id)
        pool = p.pool
        text = (
            f"{pool.pool}: {pool.role}, {', '.join(pool.instance_types)}, {pool.min_size}-{pool.max_size} nodes, {pool.capacity}"
        )
        lines.append(f'  {node}[["{_label(text)}"]]')
        for subnet_node in p.subnets:
            lines.append(f"  {subnet_node} --> {node}")
        if not p.subnets and p.az_id and p.az_id in by_az:
            lines.append(f"  {_node(env, 'az', p.az_id)} --> {node}")
    if view.storage:
        lines.append(f'  subgraph {_node(env, "storage")}["storage"]')
        for st in view.storage:
            what = st.name if st.kind == "S3 bucket" else st.details
            text = f"{st.kind}: {what}" + (", retained" if st.retained else "")
            lines.append(f'    {_node(env, "st", st.stack, st.logical_id)}[("{_label(text)}")]')
        lines.append("  end")
    log_sinks = {(st.stack, st.logical_id) for st in view.storage if st.logs_for}
    for p in view.pools:
        for st in view.storage:
            if (st.stack, st.logical_id) not in log_sinks:
                lines.append(f"  {_node(env, 'pool', p.logical_id)} --> {_node(env, 'st', st.stack, st.logical_id)}")
    for st in view.storage:
        for source in st.logs_for:
            lines.append(f"  {_node(env, 'st', st.stack, source)} -. access logs .-> {_node(env, 'st', st.stack, st.logical_id)}")
    return "\n".join(lines)


def render(views: Sequence[EnvironmentView]) -> str:
    """The whole Markdown document."""
    stacks = sum(len(v.stacks) for v in views)
    pools = sum(len(v.pools) for v in views)
    buckets = sum(1 for v in views for s in v.storage if s.kind == "S3 bucket")
    systems = sum(1 for v in views for s in v.storage if s.kind != "S3 bucket")
    alarms = sum(len(v.alarms) for v in views)
    out = [
        "## neuronkit summary",
        "",
        f"{len(views)} environment(s), {stacks} stack(s), {pools} compute pool(s), {buckets} bucket(s), "
        f"{systems} file system(s), {alarms} alarm(s). Chips, NeuronCores and GPUs are per node, with the total "
        "at the pool's maximum size; EFA figures are per node.",
    ]
    for v in views:
        out += ["", f"### {v.name}: account {v.account}, {v.region}", "", "```mermaid", mermaid(v), "```", ""]
        out.append(
            _table(
                ["stack", "resources", "holds"],
                [[s.name, str(_count(s)), _stack_contents(s, v)] for s in v.stacks],
                "lrl",
            )
        )
        out += ["", "#### Compute pools", ""]
        if v.pools:
            out.append(
                _table(
                    [
                        "stack",
                        "pool",
                        "role",
                        "instance types",
                        "min/desired/max",
                        "chips",
                        "NeuronCores",
                        "GPUs",
                        "EFA interfaces",
                        "EFA bandwidth",
                        "capacity",
                        "AZ ID",
                    ],
                    _pool_rows(v),
                    "lllllrrrrrll",
                )
            )
        else:
            out.append("None.")
        trainium = _trainium_rows(v)
        if trainium:
            out += ["", "#### Trainium settings and Capacity Blocks", ""]
            out.append(
                _table(
                    ["pool", "LNC", "UltraServer", "capacity", "block start", "block end", "scales to 0 at", "block fee"],
                    trainium,
                    "lrrlllll",
                )
            )
        images = _image_rows(v)
        if images:
            out += ["", "#### Neuron SDK and AMIs", ""]
            out.append(
                _table(
                    ["pool", "in", "stack", "instance types", "Neuron SDK", "workload", "driver", "AMI", "pinned by"],
                    images,
                    "lllllllll",
                )
            )
            for row in images:
                if row[-1] == "floating":
                    out.append(
                        f"\n**Warning:** {row[0]} ({row[1]}) boots a floating AMI re-resolved at every deploy: "
                        "nodes of one pool can run different Neuron drivers."
                    )
        serving = _serving_rows(v)
        if serving:
            out += ["", "#### Serving", ""]
            out.append(
                _table(["fleet", "model", "type", "image (pinned)", "TP", "compiled artifacts", "listener"], serving, "lllllll")
            )
        lines = _line_rows(v)
        if lines:
            out += ["", "#### Serving lines", ""]
            out.append(_table(["pool", "Neuron types", "serving line", "status", "what ends when"], lines, "lllll"))
            for pool, types, title, status, _ in lines:
                if status.split(" ")[0] in fit.ENDING:
                    out.append(
                        f"\n**Warning:** {pool} ({types}) serves on {title}, {status}: plan the move to the forward line "
                        "(`neuronkit validate` names it)."
                    )
        out += ["", "#### Storage", ""]
        if v.storage:
            out.append(
                _table(
                    ["stack", "kind", "name", "details", "on stack deletion"],
                    [
                        [
                            s.stack,
                            s.kind,
                            s.name + (", receives the access logs" if s.logs_for else ""),
                            s.details,
                            "retained" if s.retained else "**deleted**",
                        ]
                        for s in v.storage
                    ],
                )
            )
        else:
            out.append("None.")
        out += ["", "#### Alarms", ""]
        if v.alarms:
            out.append(f"{len(v.alarms)} alarm(s):")
            out.append("")
            out.append(_table(["stack", "alarm", "watches"], [[a.stack, a.name, a.metric] for a in v.alarms]))
        else:
            out.append("None.")
        out += kubernetes_report.markdown(kubernetes_report.clusters(v.stacks))
        cost = _cost_section(v)
        if cost:
            out += ["", *cost]
    return "\n".join(out) + "\n"


def summarize(cdk_out: str | Path) -> str:
    """Markdown for a pull request comment, from a synthesized cdk.out folder."""
    return render(environments(cdk_out))
