"""Reports: what a rehearsal deployed and destroyed, read back from moto with boto3, and how it is printed.

The runner hands every function here a ``client(service, account, region)`` factory (boto3 clients on the
embedded server, in that account): :func:`verify` fills an :class:`EnvironmentReport` after
``cdk deploy``; :func:`put_probes` and :func:`check_destroyed` surround ``cdk destroy``;
:func:`render_report` and :func:`render_destroy` print the tables ``neuronkit rehearse`` shows.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from neuronkit import catalog
from neuronkit.rehearsal.assembly import NOT_A_RESOURCE, StackInfo, unmodelled_types
from neuronkit.reports.pools import COMPILE_METADATA_KEY

# A boto3 client on the embedded server, acting in an account: client(service, account, region).
Client = Callable[[str, str, str], Any]

PROBE_KEY = "neuronkit-rehearsal/probe.txt"
COMPLETE = frozenset({"CREATE_COMPLETE", "UPDATE_COMPLETE"})
ASG_TYPE = "AWS::AutoScaling::AutoScalingGroup"
LAUNCH_TEMPLATE_TYPE = "AWS::EC2::LaunchTemplate"
BUCKET_TYPE = "AWS::S3::Bucket"
ALARM_TYPES = ("AWS::CloudWatch::Alarm", "AWS::CloudWatch::CompositeAlarm")
FILE_SYSTEM_TYPES = ("AWS::FSx::FileSystem", "AWS::EFS::FileSystem")


# --------------------------------------------------------------------------------------------
# what a rehearsal found
# --------------------------------------------------------------------------------------------
@dataclass
class StackReport:
    name: str
    status: str
    resources: int  # in the template
    created: int  # resources moto modelled and created
    unmodelled: list[tuple[str, str]]  # (logical id, type) that moto skipped


@dataclass
class PoolReport:
    stack: str
    logical_id: str
    group_name: str
    metadata: dict[str, Any]
    min_size: int | None = None
    desired_size: int | None = None
    max_size: int | None = None
    launch_template_id: str | None = None
    launch_template_version: str | None = None
    launch_template_instance_type: str | None = None
    image_id: str | None = None
    instances: int = 0

    @property
    def pool(self) -> str:
        return str(self.metadata.get("pool", self.logical_id))

    @property
    def primary_type(self) -> str:
        types = self.metadata.get("neuron_types") or self.metadata.get("instance_types") or ["?"]
        return str(types[0])


@dataclass
class BucketReport:
    stack: str
    logical_id: str
    name: str
    exists: bool
    retained: bool


@dataclass
class FileSystemReport:
    stack: str
    logical_id: str
    type: str
    description: str
    retained: bool
    modelled: bool


@dataclass
class AlarmReport:
    stack: str
    logical_id: str
    name: str
    modelled: bool


@dataclass
class EnvironmentReport:
    """What one environment's rehearsal deployed, read back with boto3, and what went wrong."""

    name: str
    account: str
    region: str
    stacks: list[StackReport] = field(default_factory=list)
    pools: list[PoolReport] = field(default_factory=list)
    buckets: list[BucketReport] = field(default_factory=list)
    file_systems: list[FileSystemReport] = field(default_factory=list)
    alarms: list[AlarmReport] = field(default_factory=list)
    eks: list[str] = field(default_factory=list)  # one line per EKS cluster and node group read back from moto
    seeded: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def unmodelled(self) -> dict[str, list[str]]:
        """Resource type -> ``stack/LogicalId`` of every resource moto did not model."""
        out: dict[str, list[str]] = {}
        for s in self.stacks:
            for logical_id, kind in s.unmodelled:
                out.setdefault(kind, []).append(f"{s.name}/{logical_id}")
        return dict(sorted(out.items()))

    @property
    def wall_seconds(self) -> float:
        return sum(self.seconds.values())


@dataclass
class DestroyReport:
    """What ``cdk destroy`` removed and what it kept, per environment."""

    name: str
    stacks_deleted: list[str] = field(default_factory=list)
    buckets_kept: list[str] = field(default_factory=list)  # with the probe object still readable
    compute_removed: list[str] = field(default_factory=list)
    file_systems: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems


# --------------------------------------------------------------------------------------------
# reading a deployment back
# --------------------------------------------------------------------------------------------
def stack_report(client: Client, stack: StackInfo) -> StackReport:
    cfn = client("cloudformation", stack.account, stack.region)
    try:
        status = cfn.describe_stacks(StackName=stack.name)["Stacks"][0]["StackStatus"]
    except cfn.exceptions.ClientError:
        status = "MISSING"
    types = {k: v.get("Type", "") for k, v in stack.resources()}
    skipped = unmodelled_types(types.values())
    listed = physical_ids(client, stack) if status != "MISSING" else {}
    unmodelled = sorted((k, t) for k, t in types.items() if t in skipped)
    created = sum(1 for k, t in types.items() if t not in skipped and t not in NOT_A_RESOURCE and k in listed)
    real = sum(1 for t in types.values() if t not in NOT_A_RESOURCE)
    return StackReport(name=stack.name, status=status, resources=real, created=created, unmodelled=unmodelled)


def stack_line(s: StackReport) -> str:
    line = f"{s.name}: {s.status}, {s.created} resources created in moto"
    if s.unmodelled:
        kinds = sorted({t.split("::", 1)[1] for _, t in s.unmodelled})
        line += f", {len(s.unmodelled)} not modelled by moto ({', '.join(kinds)})"
    return line


def verify(client: Client, report: EnvironmentReport, stacks: list[StackInfo]) -> None:
    for stack in stacks:
        s = stack_report(client, stack)
        report.stacks.append(s)
        if s.status not in COMPLETE:
            report.problems.append(f"{s.name}: {s.status}, expected CREATE_COMPLETE or UPDATE_COMPLETE")
        physical = physical_ids(client, stack)
        _verify_pools(client, report, stack, physical)
        _verify_buckets(client, report, stack, physical)
        _verify_eks(client, report, stack, physical)
        skipped = {t for _, t in s.unmodelled}
        for logical_id, resource in stack.resources(*FILE_SYSTEM_TYPES):
            report.file_systems.append(
                FileSystemReport(
                    stack=stack.name,
                    logical_id=logical_id,
                    type=resource["Type"],
                    description=_file_system_description(resource),
                    retained=resource.get("DeletionPolicy") in ("Retain", "RetainExceptOnCreate"),
                    modelled=resource["Type"] not in skipped,
                )
            )
        for logical_id, resource in stack.resources(*ALARM_TYPES):
            props = resource.get("Properties") or {}
            report.alarms.append(
                AlarmReport(
                    stack=stack.name,
                    logical_id=logical_id,
                    name=str(props.get("AlarmName") or physical.get(logical_id) or logical_id),
                    modelled=resource["Type"] not in skipped,
                )
            )


def physical_ids(client: Client, stack: StackInfo) -> dict[str, str]:
    cfn = client("cloudformation", stack.account, stack.region)
    try:
        listed = cfn.describe_stack_resources(StackName=stack.name)["StackResources"]
    except cfn.exceptions.ClientError:
        return {}
    # moto lists a skipped (unmodelled) resource without logical or physical id.
    return {r["LogicalResourceId"]: r.get("PhysicalResourceId") or "" for r in listed if r.get("LogicalResourceId")}


def _verify_eks(client: Client, report: EnvironmentReport, stack: StackInfo, physical: dict[str, str]) -> None:
    """Each EKS cluster and node group of the stack, described through moto's EKS API (platform: eks)."""
    clusters = stack.resources("AWS::EKS::Cluster")
    # eks.existing: node groups name a cluster the stack does not create (a literal ClusterName, not a Ref).
    theirs = sorted({str(r["Properties"]["ClusterName"]) for _, r in stack.resources("AWS::EKS::Nodegroup")
                     if isinstance((r.get("Properties") or {}).get("ClusterName"), str)})  # fmt: skip
    if not clusters and not theirs:
        return
    eks = client("eks", stack.account, stack.region)
    for name in theirs:
        try:
            c = eks.describe_cluster(name=name)["cluster"]
        except eks.exceptions.ClientError as err:
            report.problems.append(f"{stack.name}: EKS cluster '{name}' (eks.existing) not found in moto ({err})")
            continue
        report.eks.append(f"cluster {name}: Kubernetes {c.get('version')}, created outside the kit (no AWS::EKS::Cluster "
                          f"in {stack.name}); the kit's node groups on it:")  # fmt: skip
        _node_group_lines(eks, report, name)
    for logical_id, _ in clusters:
        name = physical.get(logical_id, "")
        try:
            c = eks.describe_cluster(name=name)["cluster"]
        except eks.exceptions.ClientError as err:
            report.problems.append(f"{stack.name}/{logical_id}: EKS cluster '{name}' not found in moto ({err})")
            continue
        vpc = c.get("resourcesVpcConfig", {})
        endpoint = "private" if vpc.get("endpointPrivateAccess") and not vpc.get("endpointPublicAccess") else "public"
        keyed = "secrets key" if c.get("encryptionConfig") else "no secrets key"
        report.eks.append(f"cluster {c['name']}: Kubernetes {c.get('version')}, {endpoint} endpoint, {keyed}")
        _node_group_lines(eks, report, c["name"])


def _node_group_lines(eks: Any, report: EnvironmentReport, cluster: str) -> None:
    for group in eks.list_nodegroups(clusterName=cluster).get("nodegroups", []):
        n = eks.describe_nodegroup(clusterName=cluster, nodegroupName=group)["nodegroup"]
        size = n.get("scalingConfig", {})
        report.eks.append(
            f"  node group {group}: {', '.join(n.get('instanceTypes') or [])}, {n.get('amiType')} {n.get('releaseVersion')}, "
            f"{n.get('capacityType')}, {size.get('minSize')}/{size.get('desiredSize')}/{size.get('maxSize')}"
        )


def _verify_pools(client: Client, report: EnvironmentReport, stack: StackInfo, physical: dict[str, str]) -> None:
    autoscaling = client("autoscaling", stack.account, stack.region)
    ec2 = client("ec2", stack.account, stack.region)
    for logical_id, resource in stack.resources(ASG_TYPE):
        meta = (resource.get("Metadata") or {}).get("neuronkit") or {}
        # A fleet's compile group: one node per new compiled-artifact key, which leaves once the key is
        # cached (moto runs no node, so its desired capacity stays 1); shown, not checked against a pool.
        compile_meta = (resource.get("Metadata") or {}).get(COMPILE_METADATA_KEY)
        if not meta and isinstance(compile_meta, dict):
            meta = {
                "pool": f"{compile_meta.get('pool')} compile",
                "role": "compile",
                "instance_types": [compile_meta.get("instance_type")],
            }
        name = physical.get(logical_id, "")
        pool = PoolReport(stack=stack.name, logical_id=logical_id, group_name=name, metadata=meta)
        report.pools.append(pool)
        where = f"{stack.name}/{logical_id}"
        groups = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"] if name else []
        if not groups:
            report.problems.append(f"{where}: Auto Scaling group {name or '(no physical id)'} does not exist")
            continue
        group = groups[0]
        pool.min_size, pool.desired_size, pool.max_size = group["MinSize"], group["DesiredCapacity"], group["MaxSize"]
        pool.instances = len(group.get("Instances") or [])
        expected = (meta.get("min_size"), meta.get("desired_size", meta.get("min_size")), meta.get("max_size"))
        if meta and not compile_meta and (pool.min_size, pool.desired_size, pool.max_size) != expected:
            report.problems.append(
                f"{where}: min/desired/max {pool.min_size}/{pool.desired_size}/{pool.max_size}, "
                f"the Metadata says {expected[0]}/{expected[1]}/{expected[2]}"
            )
        spec = group.get("LaunchTemplate") or (group.get("MixedInstancesPolicy") or {}).get("LaunchTemplate", {}).get(
            "LaunchTemplateSpecification", {}
        )
        pool.launch_template_id = spec.get("LaunchTemplateId")
        pool.launch_template_version = str(spec.get("Version")) if spec.get("Version") is not None else None
        own = {physical.get(k) for k, _ in stack.resources(LAUNCH_TEMPLATE_TYPE)}
        if not pool.launch_template_id or pool.launch_template_id not in own:
            report.problems.append(
                f"{where}: launch template {pool.launch_template_id} is not the stack's own ({sorted(x for x in own if x)})"
            )
            continue
        versions = ec2.describe_launch_template_versions(LaunchTemplateId=pool.launch_template_id)["LaunchTemplateVersions"]
        data = versions[-1]["LaunchTemplateData"] if versions else {}
        pool.launch_template_instance_type = data.get("InstanceType")
        pool.image_id = data.get("ImageId")
        types = meta.get("instance_types") or []
        if pool.launch_template_instance_type and types and pool.launch_template_instance_type not in types:
            report.problems.append(f"{where}: launch template type {pool.launch_template_instance_type} is not in {types}")
        if pool.image_id:
            images = ec2.describe_images(ImageIds=[pool.image_id])["Images"]
            if not images:
                report.problems.append(f"{where}: image {pool.image_id} of the launch template does not exist")


def _verify_buckets(client: Client, report: EnvironmentReport, stack: StackInfo, physical: dict[str, str]) -> None:
    s3 = client("s3", stack.account, stack.region)
    for logical_id, resource in stack.resources(BUCKET_TYPE):
        name = physical.get(logical_id) or str((resource.get("Properties") or {}).get("BucketName", ""))
        exists = _bucket_exists(s3, name)
        report.buckets.append(
            BucketReport(
                stack=stack.name,
                logical_id=logical_id,
                name=name,
                exists=exists,
                retained=resource.get("DeletionPolicy") in ("Retain", "RetainExceptOnCreate"),
            )
        )
        if not exists:
            report.problems.append(f"{stack.name}/{logical_id}: bucket {name or '(no name)'} does not exist")


# --------------------------------------------------------------------------------------------
# cdk destroy: what must survive, what must go
# --------------------------------------------------------------------------------------------
def put_probes(client: Client, deployed: EnvironmentReport) -> None:
    """Put an object (:data:`PROBE_KEY`) into every retained bucket before ``cdk destroy``."""
    for b in deployed.buckets:
        if b.retained and b.exists:
            s3 = client("s3", deployed.account, deployed.region)
            s3.put_object(
                Bucket=b.name, Key=PROBE_KEY, Body=f"written by neuronkit rehearse before destroying {deployed.name}".encode()
            )


def check_destroyed(client: Client, deployed: EnvironmentReport, stacks: Sequence[StackInfo], out: DestroyReport) -> None:
    """After ``cdk destroy``: stacks gone, retained buckets and their probe objects kept, compute removed."""
    for stack in stacks:
        cfn = client("cloudformation", stack.account, stack.region)
        try:
            status = cfn.describe_stacks(StackName=stack.name)["Stacks"][0]["StackStatus"]
        except cfn.exceptions.ClientError:
            status = "DELETE_COMPLETE"
        if status == "DELETE_COMPLETE":
            out.stacks_deleted.append(stack.name)
        else:
            out.problems.append(f"{stack.name}: {status} after cdk destroy, expected DELETE_COMPLETE")
    s3 = client("s3", deployed.account, deployed.region)
    for b in deployed.buckets:
        if not b.exists:
            continue
        still = _bucket_exists(s3, b.name)
        if b.retained:
            if not still:
                out.problems.append(f"{b.stack}/{b.logical_id}: retained bucket {b.name} was deleted")
                continue
            try:
                s3.get_object(Bucket=b.name, Key=PROBE_KEY)["Body"].read()
            except s3.exceptions.ClientError:
                out.problems.append(f"{b.stack}/{b.logical_id}: bucket {b.name} kept, but the object {PROBE_KEY} is gone")
                continue
            out.buckets_kept.append(b.name)
        elif still:
            out.problems.append(f"{b.stack}/{b.logical_id}: bucket {b.name} has no DeletionPolicy Retain but still exists")
    autoscaling = client("autoscaling", deployed.account, deployed.region)
    ec2 = client("ec2", deployed.account, deployed.region)
    for p in deployed.pools:
        if p.group_name and autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[p.group_name])["AutoScalingGroups"]:
            out.problems.append(f"{p.stack}/{p.logical_id}: Auto Scaling group {p.group_name} still exists after cdk destroy")
        else:
            out.compute_removed.append(f"Auto Scaling group {p.group_name}")
        if p.launch_template_id:
            try:  # AWS raises NotFound for an unknown id, moto returns an empty list
                found = ec2.describe_launch_templates(LaunchTemplateIds=[p.launch_template_id])["LaunchTemplates"]
            except ec2.exceptions.ClientError:
                found = []
            if found:
                out.problems.append(
                    f"{p.stack}/{p.logical_id}: launch template {p.launch_template_id} still exists after cdk destroy"
                )
            else:
                out.compute_removed.append(f"launch template {p.launch_template_id}")
    for fs in deployed.file_systems:
        where = f"{fs.stack}/{fs.logical_id} ({fs.description})"
        if fs.retained:
            how = "kept: the template's DeletionPolicy Retain makes CloudFormation keep it"
        else:
            how = "DELETED with its data: the template has no DeletionPolicy Retain"
            out.problems.append(f"{where}: file system without DeletionPolicy Retain; cdk destroy deletes its data")
        checked = "" if fs.modelled else " (moto does not model it: the template is the evidence)"
        out.file_systems.append(f"{where}: {how}{checked}")


def _bucket_exists(s3: Any, name: str) -> bool:
    if not name:
        return False
    try:
        s3.head_bucket(Bucket=name)
    except s3.exceptions.ClientError:
        return False
    return True


def _file_system_description(resource: dict[str, Any]) -> str:
    props = resource.get("Properties") or {}
    kind = props.get("FileSystemType") or resource.get("Type", "").split("::")[-1]
    lustre = props.get("LustreConfiguration") or {}
    parts = [str(kind)]
    if props.get("FileSystemTypeVersion"):
        parts[0] += f" {props['FileSystemTypeVersion']}"
    if lustre.get("DeploymentType"):
        parts.append(str(lustre["DeploymentType"]))
    if props.get("StorageCapacity") is not None:
        parts.append(f"{props['StorageCapacity']} GiB")
    if lustre.get("PerUnitStorageThroughput"):
        parts.append(f"{lustre['PerUnitStorageThroughput']} MB/s/TiB")
    return ", ".join(parts)


# --------------------------------------------------------------------------------------------
# rendering
# --------------------------------------------------------------------------------------------
def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: str = "") -> list[str]:
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        out = [
            str(c).rjust(w) if str(i) in right else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(out).rstrip()

    return [line(headers), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


def _efa(instance_type: str) -> str:
    try:
        it = catalog.get(instance_type)
    except KeyError:
        return "?"
    if not it.efa_supported:
        return "none"
    return f"{it.efa_max_interfaces} x EFA, {it.efa_bandwidth_gbps:g} Gbps"


def _facts(instance_type: str) -> tuple[int | None, int | None, int | None]:
    try:
        it = catalog.get(instance_type)
    except KeyError:
        return None, None, None
    return it.neuron_devices, it.neuron_cores, it.gpus


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _accelerators(instance_type: str, nodes: int) -> str:
    chips, cores, gpus = _facts(instance_type)
    if chips is None:
        return "?"
    if chips:
        return f"{_plural(chips * nodes, 'chip')}, {_plural((cores or 0) * nodes, 'NeuronCore')}"
    return _plural((gpus or 0) * nodes, "GPU") if gpus else "none"


def _listing(items: Sequence[str], shown: int = 3) -> str:
    more = len(items) - shown
    return ", ".join(items[:shown]) + (f" and {more} more" if more > 0 else "")


def render_report(report: EnvironmentReport) -> str:
    """The per-environment tables ``neuronkit rehearse`` prints."""
    seconds = ", ".join(f"{k} {v:.1f} s" for k, v in report.seconds.items())
    verdict = "OK" if report.ok else f"FAILED ({len(report.problems)} problem(s))"
    lines = [f"== {report.name}: account {report.account}, {report.region}: {verdict} ({seconds})", ""]
    lines += _table(
        ["stack", "status", "resources", "created in moto", "not modelled by moto"],
        [[s.name, s.status, str(s.resources), str(s.created), str(len(s.unmodelled))] for s in report.stacks],
        right="234",
    )
    if report.seeded:
        lines += ["", "held by the mock before the deploy:", *report.seeded]
    if report.eks:
        lines += ["", "EKS (clusters and managed node groups read back from moto's EKS API):", *report.eks]
    lines += ["", "pools (Auto Scaling groups: their neuronkit Metadata, sizes and launch template read back from moto):"]
    if report.pools:
        rows = []
        for p in report.pools:
            top = p.max_size if p.max_size is not None else int(p.metadata.get("max_size", 0))
            rows.append(
                [
                    p.pool,
                    str(p.metadata.get("role", "?")),
                    ", ".join(p.metadata.get("instance_types") or [p.launch_template_instance_type or "?"]),
                    f"{p.min_size}/{p.desired_size}/{p.max_size}",
                    _accelerators(p.primary_type, 1),
                    _accelerators(p.primary_type, top),
                    _efa(p.primary_type),
                    str(p.metadata.get("capacity", "on-demand")),
                    str(p.instances),
                    f"{p.launch_template_id} ({p.image_id})" if p.launch_template_id else "-",
                ]
            )
        lines += _table(
            [
                "pool",
                "role",
                "instance types",
                "min/desired/max",
                "per node",
                "at max",
                "EFA per node",
                "capacity",
                "instances in moto",
                "launch template (image)",
            ],
            rows,
            right="8",
        )
    else:
        lines.append("  none")
    lines += ["", "buckets:"]
    lines += [
        f"  {b.name} ({'retained' if b.retained else 'deleted with the stack'}, {'exists' if b.exists else 'MISSING'})"
        for b in report.buckets
    ] or ["  none"]
    lines += ["", "file systems:"]
    lines += [
        f"  {f.stack}/{f.logical_id}: {f.description}"
        + ("" if f.modelled else " (not modelled by moto: checked only in the template)")
        for f in report.file_systems
    ] or ["  none"]
    lines += ["", "alarms:"]
    lines += [f"  {a.name}" + ("" if a.modelled else " (not modelled by moto)") for a in report.alarms] or ["  none"]
    lines += ["", "not modelled by moto (skipped: nothing created, nothing tested; cover them with template assertions):"]
    lines += [f"  {kind} x{len(where)}: {_listing(where)}" for kind, where in report.unmodelled.items()] or ["  none"]
    if report.problems:
        lines += ["", "PROBLEMS:"] + [f"  {p}" for p in report.problems]
    return "\n".join(lines)


def render_destroy(report: DestroyReport) -> str:
    verdict = "OK" if report.ok else f"FAILED ({len(report.problems)} problem(s))"
    lines = [f"== {report.name}: cdk destroy: {verdict} ({report.seconds:.1f} s)"]
    lines.append(f"  stacks deleted: {', '.join(report.stacks_deleted) or 'none'}")
    lines.append(f"  buckets kept with their objects: {', '.join(report.buckets_kept) or 'none'}")
    lines.append(f"  compute removed: {', '.join(report.compute_removed) or 'none'}")
    for fs in report.file_systems:
        lines.append(f"  file system {fs}")
    if report.problems:
        lines += ["  PROBLEMS:"] + [f"    {p}" for p in report.problems]
    return "\n".join(lines)


@dataclass
class RehearsalResult:
    environments: list[EnvironmentReport]
    destroyed: list[DestroyReport]
    synth_seconds: float
    wall_seconds: float
    stand_ins: list[str] = field(default_factory=list)  # one line per unpinned lookup the rehearsal stood in for

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.environments) and all(d.ok for d in self.destroyed)


def render_verdict(result: RehearsalResult) -> str:
    """The closing lines of ``neuronkit rehearse``: what passed, how long it took, and what the mock could not model."""
    envs = result.environments
    stacks = sum(len(r.stacks) for r in envs)
    skipped = sorted({kind for r in envs for kind in r.unmodelled})
    times = ", ".join(f"{r.name} {r.wall_seconds:.1f} s" for r in envs)
    if result.destroyed:
        times += ", destroy " + ", ".join(f"{d.name} {d.seconds:.1f} s" for d in result.destroyed)
    head = "rehearsal OK" if result.ok else "rehearsal FAILED"
    lines = [
        f"{head}: {len(envs)} environment(s), {stacks} stack(s) in {result.wall_seconds:.1f} s "
        f"(synth {result.synth_seconds:.1f} s, {times})"
    ]
    if skipped:
        lines.append(f"moto did not model (not created, not tested here): {', '.join(skipped)}")
    lines += result.stand_ins
    problems = [p for r in envs for p in r.problems] + [p for d in result.destroyed for p in d.problems]
    lines += [f"problem: {p}" for p in problems]
    return "\n".join(lines)
