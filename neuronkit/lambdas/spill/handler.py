"""Spill and return on EKS: grows a fleet's GPU Deployment while Neuron capacity is short, and takes it back to zero.

An inference fleet on EKS has two Deployments behind one Service: ``<fleet>-neuron`` (scaled on demand by KEDA) and
``<fleet>-gpu`` (zero replicas until this function spills to it). A Neuron pod cannot run on a GPU node, so nothing in
Kubernetes moves the fleet's work to GPU; this function does, the way the Auto Scaling path's prioritized group and
rebalancer do (docs/inference.md, docs/eks.md "GPU spill and return"). EventBridge invokes :func:`handler` every
minute. Each run:

1. observes the Neuron Deployment (replicas wanted, Ready), its pods that the scheduler cannot place
   (``PodScheduled=False``, reason ``Unschedulable``, since when), the Neuron node groups' launches that failed for
   capacity (Auto Scaling scaling activities), the GPU Deployment's replicas, and what the last run remembered;
2. decides with :func:`decide`, a pure function of that state: GPU = the Neuron shortfall (wanted minus Ready) once
   Neuron pods have stayed unschedulable, or a launch failed for capacity, for ``SPILL_AFTER_MINUTES``; the GPU
   replicas only grow while the shortfall lasts; they come down to the shortfall (zero once every Neuron replica is
   Ready) only after it has stayed lower for ``RETURN_AFTER_MINUTES``, so a flapping fleet does not flap;
3. PATCHes the GPU Deployment's ``scale`` subresource when the decision differs from what runs, remembers its state
   in an SSM parameter of its own, and logs the decision and its metrics as one CloudWatch embedded-metric-format
   record (``GpuReplicas``, ``NeuronShortfall``, ``NeuronReady``; namespace ``NAMESPACE``, dimensions Environment and
   Pool).

A fleet with several GPU fallback types has one GPU Deployment per type (``GPU_DEPLOYMENTS``, in the file's priority
order, each on its node group ``GPU_GROUPS``): :func:`decide` gives the GPU total and :func:`distribute` places it,
filling the types in order: a type whose pods cannot get a node (Cluster Autoscaler declined or gave up the scale-up,
its group's launch failed for capacity: :func:`gpu_blocked`) keeps the pods that have one and hands the rest to the
next type; a return takes the last type down first. A fleet without GPU types runs the same observation for its
alarms (``RolloutStalled``, ``CompileFailed``) and never scales anything.

It talks to the Kubernetes API with a bearer token made as aws-iam-authenticator makes one: an STS
GetCallerIdentity URL presigned with the function's role, carrying the ``x-k8s-aws-id`` header of the cluster
(nothing is sent to STS; the API server's authenticator calls it). The only dependencies are the standard library
and botocore/boto3, which the Lambda runtime provides.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
import os
import ssl
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import asdict, dataclass, replace
from typing import Any

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

METRICS = ("GpuReplicas", "NeuronShortfall", "NeuronReady", "RolloutStalled", "CompileFailed")
TOKEN_PREFIX = "k8s-aws-v1."
CLUSTER_ID_HEADER = "x-k8s-aws-id"
TOKEN_EXPIRES_SECONDS = 60
# Auto Scaling's status message of a launch that failed for EC2 capacity (an On-Demand, Capacity Block or ODCR
# launch); a quota (VcpuLimitExceeded) is not capacity that may come back on its own, but it is short all the same.
CAPACITY_ERRORS = ("InsufficientInstanceCapacity", "InsufficientCapacity", "ReservationCapacityExceeded", "VcpuLimitExceeded")
# A failed launch older than this many minutes no longer counts as a sign that capacity is short now.
CAPACITY_FAILURE_WINDOW_MINUTES = 30
# Cluster Autoscaler's events on a pending pod (cluster-autoscaler core/scaleup status processor,
# EventingScaleUpStatusProcessor: Eventf(pod, Normal, "TriggeredScaleUp", "pod triggered scale-up: %v") and
# Event(pod, Normal, "NotTriggerScaleUp", "pod didn't trigger scale-up ...")).
SCALE_UP_TRIGGERED, SCALE_UP_DECLINED = "TriggeredScaleUp", "NotTriggerScaleUp"
# How long a triggered scale-up is given before an unschedulable pod counts as trouble again: the autoscaler's own
# wait for a node (--max-node-provision-time), after which it gives the node up and backs the group off. The kit sets
# it to 20 minutes (neuronkit/kubernetes/autoscaler.py; cluster-autoscaler's default is 15): a test holds the two equal.
SCALE_UP_BUDGET_MINUTES = 20
# The label of a fleet's further GPU Deployments' pods (neuronkit/kubernetes/scheduling.GPU_TYPE_LABEL; this module
# imports nothing of the kit, a test holds the two equal). The first GPU Deployment's pods never carry it.
GPU_TYPE_LABEL = "neuronkit.io/gpu-type"
# Container waiting reasons of a pod that will not become Ready on its own (kubelet: CrashLoopBackOff after repeated
# exits, the image pull and container-config failures).
BROKEN_REASONS = (
    "CrashLoopBackOff", "ImagePullBackOff", "ErrImagePull", "CreateContainerConfigError", "CreateContainerError",
    "InvalidImageName", "RunContainerError",
)  # fmt: skip


@dataclass(frozen=True)
class Memory:
    """What one run leaves for the next: since when the Neuron side is in trouble (unschedulable pods or a failed
    launch, with a shortfall), since when the shortfall has stayed below the GPU replicas, and the highest shortfall
    seen since then (the GPU replicas come down to it, never below)."""

    trouble_since: str | None = None
    below_since: str | None = None
    below_peak: int = 0

    @classmethod
    def parse(cls, text: str | None) -> Memory:
        """The memory stored as JSON; anything unreadable is a fresh start (the next run observes again)."""
        try:
            data = json.loads(text or "{}")
        except ValueError:
            return cls()
        if not isinstance(data, dict):
            return cls()
        peak = data.get("below_peak", 0)
        return cls(
            trouble_since=data.get("trouble_since") if isinstance(data.get("trouble_since"), str) else None,
            below_since=data.get("below_since") if isinstance(data.get("below_since"), str) else None,
            below_peak=peak if isinstance(peak, int) and peak >= 0 else 0,
        )

    def dumps(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


@dataclass(frozen=True)
class GpuSide:
    """One GPU fallback type's Deployment as observed: ``replicas`` asked for, ``placed`` (its pods bound to a node, not
    being deleted), and ``blocked``: no node can be had for it now (:func:`gpu_blocked`), with the reason."""

    deployment: str
    replicas: int
    placed: int = 0
    blocked: bool = False
    reason: str = ""


@dataclass(frozen=True)
class Observed:
    """One look at the fleet. ``unschedulable_since``: the earliest time one of the Neuron pods that are unschedulable
    now became so (None if none is); ``capacity_failed_at``: the latest failed Neuron launch for capacity (None if
    none in the window); ``gpu_replicas``: what the GPU Deployment asks for now."""

    now: dt.datetime
    neuron_wanted: int
    neuron_ready: int
    gpu_replicas: int
    unschedulable_since: dt.datetime | None = None
    capacity_failed_at: dt.datetime | None = None
    memory: Memory = Memory()
    # A Neuron pod scheduled but broken (crash loop, failed init container, image pull failure): since when (the
    # earliest failure seen on any such pod); None if none is.
    broken_since: dt.datetime | None = None
    # The latest "TriggeredScaleUp" of a pending Neuron pod with no later "NotTriggerScaleUp": the autoscaler is
    # adding a node for it (None: no scale-up under way).
    scale_up_at: dt.datetime | None = None
    # Loud failures (issue 49), reported as metrics and alarmed on, never a reason to spill by themselves: the Neuron
    # Deployment's rollout exceeded its progress deadline; compile Jobs of the fleet that failed.
    rollout_stalled: bool = False
    compile_failed: int = 0
    # With several GPU fallback types: each type's Deployment, in priority order (``gpu_replicas`` is their sum). Empty
    # with one type (its replicas are ``gpu_replicas``) or none.
    gpu: tuple[GpuSide, ...] = ()

    @property
    def shortfall(self) -> int:
        return max(0, self.neuron_wanted - self.neuron_ready)


@dataclass(frozen=True)
class Decision:
    """What to run on GPU, why, and what to remember."""

    gpu_replicas: int
    action: str  # spill | grow | hold | lower | return | wait | none
    reason: str
    memory: Memory


def decide(observed: Observed, *, spill_after_minutes: int, return_after_minutes: int, max_gpu_replicas: int) -> Decision:
    """The GPU replicas for what was observed: a pure function (no clock, no I/O), so recorded states replay exactly.

    - **Spill**: with a shortfall and a sign of short capacity (an unschedulable Neuron pod, a failed launch in the
      window) that has lasted ``spill_after_minutes`` (0: at once, as the Auto Scaling path), GPU = the shortfall,
      at most ``max_gpu_replicas``. A sign that vanishes resets the clock.
    - **Grow** while spilled: a larger shortfall with a sign of short capacity raises the GPU replicas at once.
    - **Return**: the GPU replicas come down only after the shortfall has stayed below them for
      ``return_after_minutes``, and then to the highest shortfall seen in that time: zero once every Neuron replica
      has been Ready that long (the rebalancer's "steady first" rule), so a fleet whose Neuron pods flap between
      Ready and not keeps its GPU replicas instead of flapping with them.
    """
    now = observed.now
    shortfall = observed.shortfall
    current = observed.gpu_replicas
    memory = observed.memory
    window = dt.timedelta(minutes=CAPACITY_FAILURE_WINDOW_MINUTES)
    failed = observed.capacity_failed_at if observed.capacity_failed_at and now - observed.capacity_failed_at <= window else None
    # An unschedulable pod is no sign of short capacity while the autoscaler adds a node it can add (a scale-up it
    # triggered within its provision time, and no launch failed for capacity since): an ordinary scale-up waits.
    scaling_up = (
        observed.scale_up_at is not None
        and now - observed.scale_up_at <= dt.timedelta(minutes=SCALE_UP_BUDGET_MINUTES)
        and (failed is None or failed < observed.scale_up_at)
    )
    unschedulable = None if scaling_up else observed.unschedulable_since
    signs = [t for t in (unschedulable, failed, observed.broken_since) if t is not None]
    troubled = shortfall > 0 and bool(signs)
    trouble_since: dt.datetime | None = None
    if troubled:
        remembered = _time(memory.trouble_since)
        trouble_since = min([*signs, *([remembered] if remembered else [])])
    memory = replace(memory, trouble_since=_text(trouble_since))
    spill_due = trouble_since is not None and now - trouble_since >= dt.timedelta(minutes=spill_after_minutes)
    wanted_up = min(shortfall, max_gpu_replicas)

    if (spill_due or (current > 0 and troubled)) and wanted_up > current:
        memory = replace(memory, below_since=None, below_peak=0)
        action = "spill" if current == 0 else "grow"
        waited = int((now - trouble_since).total_seconds() // 60) if trouble_since else 0
        why = (
            "unschedulable Neuron pods" if unschedulable
            else "a Neuron launch failed for capacity" if failed
            else "broken Neuron pods (crash loop, failed init)"
        )  # fmt: skip
        return Decision(wanted_up, action, f"{why} for {waited} min, shortfall {shortfall}: GPU {current} -> {wanted_up}", memory)
    if current == 0:
        memory = replace(memory, below_since=None, below_peak=0)
        if troubled:
            return Decision(0, "wait", f"Neuron short by {shortfall}, spill after {spill_after_minutes} min of trouble", memory)
        if scaling_up and shortfall > 0:
            return Decision(0, "wait", f"Neuron short by {shortfall} while the autoscaler adds a node", memory)
        return Decision(0, "none", f"Neuron {observed.neuron_ready}/{observed.neuron_wanted} Ready, no GPU replica", memory)
    if shortfall >= current:
        memory = replace(memory, below_since=None, below_peak=0)
        return Decision(current, "hold", f"Neuron short by {shortfall}: keep GPU at {current}", memory)
    # The shortfall is below the GPU replicas: come down only once it has stayed below them for return_after.
    below_since = _time(memory.below_since) or now
    peak = max(memory.below_peak if memory.below_since else 0, shortfall)
    memory = replace(memory, below_since=_text(below_since), below_peak=peak)
    if now - below_since < dt.timedelta(minutes=return_after_minutes):
        return Decision(
            current,
            "hold",
            f"Neuron short by {shortfall} since {_text(below_since)}; GPU {current} held {return_after_minutes} min",
            memory,
        )
    target = min(peak, current)
    memory = replace(memory, below_since=None, below_peak=0, trouble_since=memory.trouble_since if target else None)
    action = "return" if target == 0 else "lower"
    return Decision(
        target, action, f"Neuron short by at most {peak} for {return_after_minutes} min: GPU {current} -> {target}", memory
    )


def distribute(total: int, sides: tuple[GpuSide, ...]) -> tuple[int, ...]:
    """The replicas of each GPU type for a GPU total of ``total``, in the fleet's priority order (a pure function).

    1. **Move on**: a blocked type keeps the replicas that have a node and hands the rest to the next type; the next
       one, blocked too, hands them on (the last keeps what it gets: there is nowhere further). Scaling a blocked
       type down removes its pending pods first (the ReplicaSet controller deletes unscheduled pods before scheduled
       ones: Kubernetes documentation, ReplicaSet, "Scaling a ReplicaSet").
    2. **Spill and grow** into the first type that is not blocked (all blocked: the last).
    3. **Return** in reverse order: the last type comes down first, the first type last.

    Replicas that run stay where they are: a type that is no longer blocked does not take pods back from a later one
    (that would start pods to stop others); the return empties the later types first all the same.
    """
    want = [s.replicas for s in sides]
    for i, side in enumerate(sides[:-1]):
        keep = max(0, side.placed) if side.blocked else want[i]
        if want[i] > keep:
            want[i + 1] += want[i] - keep
            want[i] = keep
    have = sum(want)
    if total > have and sides:
        first_open = next((i for i, side in enumerate(sides) if not side.blocked), len(sides) - 1)
        want[first_open] += total - have
    excess = have - total
    for i in reversed(range(len(sides))):
        if excess <= 0:
            break
        take = min(excess, want[i])
        want[i] -= take
        excess -= take
    return tuple(want)


def gpu_blocked(
    now: dt.datetime,
    pods: list[dict[str, Any]],
    events: list[dict[str, Any]],
    capacity_failed: dt.datetime | None,
    *,
    wait_minutes: int,
) -> tuple[bool, str]:
    """Whether one GPU type can get no node now, and why: its node group's launch failed for capacity in the window;
    or a pod of it is unschedulable and Cluster Autoscaler declined to scale up for it (``NotTriggerScaleUp`` after
    any ``TriggeredScaleUp``: no group can fit it, or the group is at its maximum or backed off); or its scale-up is
    older than the autoscaler's provision time; or, with no autoscaler event at all, it has been unschedulable for
    ``wait_minutes`` (the fleet's spill_after). A pod whose scale-up is under way is not blocked."""
    if capacity_failed is not None and now - capacity_failed <= dt.timedelta(minutes=CAPACITY_FAILURE_WINDOW_MINUTES):
        return True, f"its node group's launch failed for capacity at {_text(capacity_failed)}"
    since = unschedulable_since(pods)
    if since is None:
        return False, ""
    declined = scale_up_declined_at(pods, events)
    if declined is not None:
        return True, f"Cluster Autoscaler declined its scale-up at {_text(declined)}"
    up = scale_up_at(pods, events)
    if up is not None:
        if now - up > dt.timedelta(minutes=SCALE_UP_BUDGET_MINUTES):
            return True, f"its scale-up of {_text(up)} brought no node in {SCALE_UP_BUDGET_MINUTES} min"
        return False, ""
    if now - since >= dt.timedelta(minutes=wait_minutes):
        return True, f"unschedulable since {_text(since)} with no scale-up"
    return False, ""


# ----------------------------------------------------------------------------------------------------------------
# The thin loop: settings, observation, the PATCH, the memory, the record.
# ----------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    """What the construct passes in the function's environment."""

    cluster_name: str
    endpoint: str
    ca_data: str
    region: str
    namespace: str  # Kubernetes namespace of the fleet's Deployments
    neuron_deployment: str
    gpu_deployments: tuple[str, ...]  # the fleet's GPU Deployments in priority order (none: alarms only, no spill)
    environment: str
    pool: str
    metrics_namespace: str
    memory_parameter: str
    spill_after_minutes: int
    return_after_minutes: int
    max_gpu_replicas: int
    neuron_groups: tuple[str, ...] = ()
    gpu_groups: tuple[str, ...] = ()  # the GPU Deployments' node groups' Auto Scaling groups, in the same order

    @property
    def gpu_deployment(self) -> str | None:
        """The first (or only) GPU Deployment."""
        return self.gpu_deployments[0] if self.gpu_deployments else None

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        e = dict(os.environ if env is None else env)
        # GPU_DEPLOYMENTS (comma-separated, priority order); GPU_DEPLOYMENT, one name, as functions deployed before.
        names = e["GPU_DEPLOYMENTS"] if "GPU_DEPLOYMENTS" in e else e.get("GPU_DEPLOYMENT", "")
        return cls(
            cluster_name=e["CLUSTER_NAME"],
            endpoint=e["CLUSTER_ENDPOINT"].rstrip("/"),
            ca_data=e.get("CLUSTER_CA", ""),
            region=e.get("AWS_REGION", e.get("AWS_DEFAULT_REGION", "us-east-1")),
            namespace=e["FLEET_NAMESPACE"],
            neuron_deployment=e["NEURON_DEPLOYMENT"],
            gpu_deployments=_names(names),
            environment=e["ENVIRONMENT"],
            pool=e["POOL"],
            metrics_namespace=e["METRICS_NAMESPACE"],
            memory_parameter=e["MEMORY_PARAMETER"],
            spill_after_minutes=int(e["SPILL_AFTER_MINUTES"]),
            return_after_minutes=int(e["RETURN_AFTER_MINUTES"]),
            max_gpu_replicas=int(e["MAX_GPU_REPLICAS"]),
            neuron_groups=_names(e.get("NEURON_GROUPS", "")),
            gpu_groups=_names(e.get("GPU_GROUPS", "")),
        )


def _names(text: str) -> tuple[str, ...]:
    return tuple(n for n in text.split(",") if n)


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """Entry point for EventBridge's scheduled event (``source: aws.events``, ``detail-type: Scheduled Event``)."""
    if event.get("source") != "aws.events" or event.get("detail-type") != "Scheduled Event":
        LOG.warning("ignoring an event that is not EventBridge's scheduled event: %s", json.dumps(event)[:500])
        return {"action": "ignored", "reason": "not a scheduled event"}
    import boto3  # here, not at the top: the kit imports this module at synth, without boto3's cost

    settings = Settings.from_env()
    session = boto3.session.Session(region_name=settings.region)
    kube = KubernetesApi(settings.endpoint, eks_token(session, settings.cluster_name, settings.region), settings.ca_data)
    record = run(
        settings,
        event_time(event),
        kube=kube,
        ssm=session.client("ssm"),
        autoscaling=session.client("autoscaling") if settings.neuron_groups or settings.gpu_groups else None,
    )
    print(json.dumps(record, sort_keys=True))  # one EMF line: the decision and its metrics
    return record


def run(settings: Settings, now: dt.datetime, *, kube: KubernetesApi, ssm: Any, autoscaling: Any) -> dict[str, Any]:
    """One run: observe, decide, scale the GPU Deployment if the decision differs, remember; the EMF record."""
    observed = observe(settings, now, kube=kube, ssm=ssm, autoscaling=autoscaling)
    decision = decide(
        observed,
        spill_after_minutes=settings.spill_after_minutes,
        return_after_minutes=settings.return_after_minutes,
        max_gpu_replicas=settings.max_gpu_replicas,
    )
    placed: tuple[int, ...] = (decision.gpu_replicas,) if settings.gpu_deployment else ()
    if observed.gpu:
        placed = distribute(decision.gpu_replicas, observed.gpu)
        before = tuple(side.replicas for side in observed.gpu)
        # Growth first, then the decreases: pods moved to the next type start before the pending ones go.
        changes = sorted(zip(settings.gpu_deployments, before, placed, strict=True), key=lambda c: c[2] < c[1])
        for name, old, new in changes:
            if new != old:
                kube.scale(settings.namespace, name, new)
    elif settings.gpu_deployment and decision.gpu_replicas != observed.gpu_replicas:
        kube.scale(settings.namespace, settings.gpu_deployment, decision.gpu_replicas)
    if decision.memory != observed.memory:
        ssm.put_parameter(Name=settings.memory_parameter, Value=decision.memory.dumps(), Type="String", Overwrite=True)
    return emf_record(settings, observed, decision, placed)


def observe(settings: Settings, now: dt.datetime, *, kube: KubernetesApi, ssm: Any, autoscaling: Any) -> Observed:
    """The state :func:`decide` needs, read from the API server, Auto Scaling and the memory parameter."""
    ns = settings.namespace
    neuron = kube.get(f"/apis/apps/v1/namespaces/{ns}/deployments/{settings.neuron_deployment}")
    gpus = [kube.get(f"/apis/apps/v1/namespaces/{ns}/deployments/{name}") for name in settings.gpu_deployments]
    labels = neuron.get("spec", {}).get("selector", {}).get("matchLabels", {})
    if not labels:
        raise RuntimeError(f"deployment {ns}/{settings.neuron_deployment} has no spec.selector.matchLabels")
    pods = kube.get(f"/api/v1/namespaces/{ns}/pods?" + urllib.parse.urlencode({"labelSelector": _selector(labels)}))
    # With several GPU types, each type's pods (where they are placed, whether a node can be had for them).
    several = len(gpus) > 1
    gpu_pods = [_pods_of(kube, ns, d, several) for d in gpus] if several else []
    # Cluster Autoscaler's events on the fleet's pods (only read when a pod is pending).
    pending = any(p.get("status", {}).get("phase") == "Pending" for p in pods.get("items", []) + sum(gpu_pods, []))
    query = urllib.parse.urlencode({"fieldSelector": "involvedObject.kind=Pod"})
    events = kube.get(f"/api/v1/namespaces/{ns}/events?{query}") if pending else {"items": []}
    memory_text = ssm.get_parameter(Name=settings.memory_parameter)["Parameter"]["Value"]
    fleet = labels.get("neuronkit.io/fleet", "")
    jobs_query = urllib.parse.urlencode({"labelSelector": f"neuronkit.io/fleet={fleet},neuronkit.io/role=compile"})
    jobs = kube.get(f"/apis/batch/v1/namespaces/{ns}/jobs?{jobs_query}")
    sides: list[GpuSide] = []
    for i, (name, deployment, its_pods) in enumerate(zip(settings.gpu_deployments, gpus, gpu_pods, strict=False)):
        group = settings.gpu_groups[i : i + 1]
        failed = capacity_failed_at(autoscaling, group) if autoscaling and group else None
        blocked, why = gpu_blocked(now, its_pods, events.get("items", []), failed, wait_minutes=settings.spill_after_minutes)
        sides.append(GpuSide(name, _replicas(deployment), placed=_placed(its_pods), blocked=blocked, reason=why))
    return Observed(
        now=now,
        rollout_stalled=rollout_stalled(neuron),
        compile_failed=compile_failed(jobs.get("items", [])),
        neuron_wanted=int(neuron.get("spec", {}).get("replicas", 0) or 0),
        neuron_ready=int(neuron.get("status", {}).get("readyReplicas", 0) or 0),
        gpu_replicas=sum(_replicas(d) for d in gpus),
        gpu=tuple(sides),
        unschedulable_since=unschedulable_since(pods.get("items", [])),
        capacity_failed_at=capacity_failed_at(autoscaling, settings.neuron_groups) if autoscaling else None,
        memory=Memory.parse(memory_text),
        broken_since=broken_since(pods.get("items", [])),
        scale_up_at=scale_up_at(pods.get("items", []), events.get("items", [])),
    )


def _selector(labels: dict[str, str], *, absent: tuple[str, ...] = ()) -> str:
    return ",".join([*(f"{k}={v}" for k, v in sorted(labels.items())), *(f"!{k}" for k in absent)])


def _replicas(deployment: dict[str, Any]) -> int:
    return int(deployment.get("spec", {}).get("replicas", 0) or 0)


def _pods_of(kube: KubernetesApi, ns: str, deployment: dict[str, Any], several: bool) -> list[dict[str, Any]]:
    """A GPU Deployment's pods by its own selector; the first GPU Deployment's (no type label) without the further
    types' pods, whose labels include its own."""
    labels = deployment.get("spec", {}).get("selector", {}).get("matchLabels", {})
    absent = (GPU_TYPE_LABEL,) if several and GPU_TYPE_LABEL not in labels else ()
    query = urllib.parse.urlencode({"labelSelector": _selector(labels, absent=absent)})
    items: list[dict[str, Any]] = kube.get(f"/api/v1/namespaces/{ns}/pods?{query}").get("items", [])
    return items


def _placed(pods: list[dict[str, Any]]) -> int:
    """Pods bound to a node and not being deleted."""
    return sum(1 for p in pods if _scheduled(p) and not p.get("metadata", {}).get("deletionTimestamp"))


def unschedulable_since(pods: list[dict[str, Any]]) -> dt.datetime | None:
    """The earliest ``lastTransitionTime`` of a pending pod's ``PodScheduled=False`` condition with reason
    ``Unschedulable`` (the scheduler found no node); pods being deleted do not count."""
    times = []
    for pod in pods:
        if pod.get("metadata", {}).get("deletionTimestamp") or pod.get("status", {}).get("phase") != "Pending":
            continue
        for c in pod.get("status", {}).get("conditions", []) or []:
            if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("reason") == "Unschedulable":
                when = _time(c.get("lastTransitionTime"))
                if when is not None:
                    times.append(when)
    return min(times) if times else None


def _ready(pod: dict[str, Any]) -> bool:
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in pod.get("status", {}).get("conditions", []) or [])


def _scheduled(pod: dict[str, Any]) -> bool:
    return any(
        c.get("type") == "PodScheduled" and c.get("status") == "True" for c in pod.get("status", {}).get("conditions", []) or []
    )


def broken_since(pods: list[dict[str, Any]]) -> dt.datetime | None:
    """The earliest failure of a Neuron pod that is scheduled, not Ready and will not become Ready by waiting: a
    container or init container that exited and restarted (``restartCount`` > 0: a crash loop, an init container such
    as ``wait-for-artifacts`` that gave up) or waits for a reason in :data:`BROKEN_REASONS`. A pod that is still
    loading (running, never restarted) is not broken, however long its startup probe allows. The time is the
    container's last termination (``lastState.terminated.finishedAt``), else the pod's ``Ready=False`` transition;
    the memory keeps the earliest across runs while the trouble lasts."""
    times = []
    for pod in pods:
        if pod.get("metadata", {}).get("deletionTimestamp") or not _scheduled(pod) or _ready(pod):
            continue
        status = pod.get("status", {})
        broken: list[dt.datetime | None] = []
        for c in [*(status.get("initContainerStatuses") or []), *(status.get("containerStatuses") or [])]:
            waiting = (c.get("state") or {}).get("waiting") or {}
            failed_exit = (c.get("lastState") or {}).get("terminated") or {}
            if int(c.get("restartCount", 0) or 0) > 0 or waiting.get("reason") in BROKEN_REASONS:
                broken.append(_time(failed_exit.get("finishedAt")) if failed_exit.get("finishedAt") else None)
        if not broken:
            continue
        known = [t for t in broken if t is not None]
        ready = [c for c in status.get("conditions", []) or [] if c.get("type") == "Ready"]
        not_ready_since = _time(ready[0].get("lastTransitionTime")) if ready else None
        # lastState.terminated stays from the last restart for the pod's whole life (core/v1 ContainerStatus): a pod
        # that restarted days ago and is not Ready since a minute is in trouble since that minute (review of issue 49).
        candidates = [t for t in (min(known) if known else None, not_ready_since) if t is not None]
        if candidates:
            times.append(max(candidates))
    return min(times) if times else None


def scale_up_at(pods: list[dict[str, Any]], events: list[dict[str, Any]]) -> dt.datetime | None:
    """The latest Cluster Autoscaler ``TriggeredScaleUp`` event of a pending pod among ``pods`` that no later
    ``NotTriggerScaleUp`` of the same pod contradicts (the pod's events, ``lastTimestamp`` or ``eventTime``)."""
    latest = _autoscaler_events(pods, events)
    up = [
        r[SCALE_UP_TRIGGERED]
        for r in latest.values()
        if SCALE_UP_TRIGGERED in r and (SCALE_UP_DECLINED not in r or r[SCALE_UP_DECLINED] < r[SCALE_UP_TRIGGERED])
    ]
    return max(up) if up else None


def scale_up_declined_at(pods: list[dict[str, Any]], events: list[dict[str, Any]]) -> dt.datetime | None:
    """The latest ``NotTriggerScaleUp`` of a pending pod among ``pods`` with no later ``TriggeredScaleUp`` of the same
    pod: Cluster Autoscaler found no node group that could give it a node (cluster-autoscaler's
    EventingScaleUpStatusProcessor: "pod didn't trigger scale-up ...", e.g. a group at its maximum or backed off
    after failed launches)."""
    latest = _autoscaler_events(pods, events)
    down = [
        r[SCALE_UP_DECLINED]
        for r in latest.values()
        if SCALE_UP_DECLINED in r and (SCALE_UP_TRIGGERED not in r or r[SCALE_UP_TRIGGERED] < r[SCALE_UP_DECLINED])
    ]
    return max(down) if down else None


def _autoscaler_events(pods: list[dict[str, Any]], events: list[dict[str, Any]]) -> dict[str, dict[str, dt.datetime]]:
    """Per pending pod of ``pods``: the latest time of each of Cluster Autoscaler's two scale-up events."""
    pending = {
        p.get("metadata", {}).get("name")
        for p in pods
        if p.get("status", {}).get("phase") == "Pending" and not p.get("metadata", {}).get("deletionTimestamp")
    }
    latest: dict[str, dict[str, dt.datetime]] = {}
    for e in events:
        name = (e.get("involvedObject") or {}).get("name")
        reason = e.get("reason")
        if name not in pending or reason not in (SCALE_UP_TRIGGERED, SCALE_UP_DECLINED):
            continue
        when = _time(e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp"))
        if when is None:
            continue
        seen = latest.setdefault(str(name), {})
        if reason not in seen or when > seen[reason]:
            seen[reason] = when
    return latest


def rollout_stalled(deployment: dict[str, Any]) -> bool:
    """The Deployment controller's verdict: condition ``Progressing`` False with reason ``ProgressDeadlineExceeded``
    (Kubernetes documentation, Deployments, "Failed Deployment": the rollout made no progress for
    ``progressDeadlineSeconds``)."""
    return any(
        c.get("type") == "Progressing" and c.get("status") == "False" and c.get("reason") == "ProgressDeadlineExceeded"
        for c in deployment.get("status", {}).get("conditions", []) or []
    )


def compile_failed(jobs: list[dict[str, Any]]) -> int:
    """Compile Jobs whose ``Failed`` condition is True (backoffLimit or activeDeadlineSeconds reached; Kubernetes
    documentation, Jobs, "Job termination and cleanup")."""
    return sum(
        1
        for j in jobs
        if any(c.get("type") == "Failed" and c.get("status") == "True" for c in j.get("status", {}).get("conditions", []) or [])
    )


def capacity_failed_at(autoscaling: Any, groups: tuple[str, ...]) -> dt.datetime | None:
    """The latest failed launch for capacity among the Neuron node groups' recent scaling activities."""
    latest: dt.datetime | None = None
    for group in groups:
        answer = autoscaling.describe_scaling_activities(AutoScalingGroupName=group, MaxRecords=20)
        for a in answer.get("Activities", []):
            if a.get("StatusCode") != "Failed" or not any(e in str(a.get("StatusMessage", "")) for e in CAPACITY_ERRORS):
                continue
            when = a.get("EndTime") or a.get("StartTime")
            when = _time(when) if isinstance(when, str) else when
            if isinstance(when, dt.datetime):
                when = when if when.tzinfo else when.replace(tzinfo=dt.UTC)
                latest = when if latest is None or when > latest else latest
    return latest


def emf_record(
    settings: Settings, observed: Observed, decision: Decision, placed: tuple[int, ...] | None = None
) -> dict[str, Any]:
    """The run's decision with its metrics in CloudWatch embedded metric format (the log line is the metric); ``gpu``
    names each GPU Deployment's replicas after the run (``placed``, in the order of ``settings.gpu_deployments``) and
    ``blocked`` the types that could get no node, with the reason."""
    if placed is None:
        placed = (decision.gpu_replicas,) if settings.gpu_deployment else ()
    return {
        "_aws": {
            "Timestamp": int(observed.now.timestamp() * 1000),
            "CloudWatchMetrics": [
                {
                    "Namespace": settings.metrics_namespace,
                    "Dimensions": [["Environment", "Pool"]],
                    "Metrics": [{"Name": m, "Unit": "Count"} for m in METRICS],
                }
            ],
        },
        "Environment": settings.environment,
        "Pool": settings.pool,
        "GpuReplicas": decision.gpu_replicas,
        "NeuronShortfall": observed.shortfall,
        "NeuronReady": observed.neuron_ready,
        "RolloutStalled": int(observed.rollout_stalled),
        "CompileFailed": observed.compile_failed,
        "neuron_wanted": observed.neuron_wanted,
        "gpu_before": observed.gpu_replicas,
        "action": decision.action,
        "reason": decision.reason,
        "memory": asdict(decision.memory),
        "gpu": dict(zip(settings.gpu_deployments, placed, strict=False)),
        "blocked": {side.deployment: side.reason for side in observed.gpu if side.blocked},
    }


# ----------------------------------------------------------------------------------------------------------------
# The Kubernetes API: a bearer token from the function's role, JSON over HTTPS with the cluster's CA.
# ----------------------------------------------------------------------------------------------------------------
def eks_token(session: Any, cluster_name: str, region: str) -> str:
    """A token the EKS API server accepts for the caller's IAM identity: ``k8s-aws-v1.`` + the base64url (unpadded)
    of an STS GetCallerIdentity URL presigned for 60 s with the header ``x-k8s-aws-id: <cluster>`` signed in."""
    from botocore.signers import RequestSigner  # the Lambda runtime's botocore

    sts = session.client("sts", region_name=region)
    signer = RequestSigner(sts.meta.service_model.service_id, region, "sts", "v4", session.get_credentials(), session.events)
    url = signer.generate_presigned_url(
        {
            "method": "GET",
            "url": f"https://sts.{region}.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15",
            "body": {},
            "headers": {CLUSTER_ID_HEADER: cluster_name},
            "context": {},
        },
        region_name=region,
        expires_in=TOKEN_EXPIRES_SECONDS,
        operation_name="",
    )
    return TOKEN_PREFIX + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")


class KubernetesApi:
    """GET and the scale PATCH against the API server (also ``neuronkit preflight``'s client for an existing cluster:
    neuronkit/kubernetes/cluster_api.py; this module stays self-contained, the function's code is this folder); ``ca_data`` is the cluster's base64 CA bundle (EKS's
    ``certificateAuthority.data``); an ``http://`` endpoint (the tests' fake API server) needs none."""

    def __init__(self, endpoint: str, token: str, ca_data: str = "", timeout_seconds: float = 10.0) -> None:
        self.endpoint = endpoint.rstrip("/")
        self._token = token
        self._timeout = timeout_seconds
        self._context: ssl.SSLContext | None = None
        if self.endpoint.startswith("https://"):
            self._context = ssl.create_default_context()
            if ca_data:
                with tempfile.NamedTemporaryFile("wb", suffix=".pem", delete=False) as f:
                    f.write(base64.b64decode(ca_data))
                self._context = ssl.create_default_context(cafile=f.name)

    def get(self, path: str) -> dict[str, Any]:
        return self._call("GET", path, None, "application/json")

    def scale(self, namespace: str, deployment: str, replicas: int) -> dict[str, Any]:
        """A JSON merge patch of the Deployment's ``scale`` subresource: only ``spec.replicas`` changes."""
        body = json.dumps({"spec": {"replicas": replicas}}).encode()
        path = f"/apis/apps/v1/namespaces/{namespace}/deployments/{deployment}/scale"
        return self._call("PATCH", path, body, "application/merge-patch+json")

    def _call(self, method: str, path: str, body: bytes | None, content_type: str) -> dict[str, Any]:
        request = urllib.request.Request(self.endpoint + path, data=body, method=method)
        request.add_header("Authorization", f"Bearer {self._token}")
        request.add_header("Accept", "application/json")
        if body is not None:
            request.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(request, timeout=self._timeout, context=self._context) as answer:  # noqa: S310
                data: dict[str, Any] = json.loads(answer.read() or b"{}")
                return data
        except urllib.error.HTTPError as e:
            detail = e.read()[:300].decode(errors="replace")
            raise KubernetesApiError(e.code, f"{method} {path}: HTTP {e.code} {detail}") from None


class KubernetesApiError(RuntimeError):
    """An answer of the API server other than 2xx; ``status`` is its HTTP code (404: no such object)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def event_time(event: dict[str, Any]) -> dt.datetime:
    """The time EventBridge scheduled this run (``time``: ``2026-11-22T00:30:00Z``), else now."""
    when = _time(event.get("time")) if isinstance(event.get("time"), str) else None
    return when or dt.datetime.now(dt.UTC)


def _time(text: str | None) -> dt.datetime | None:
    if not text:
        return None
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def _text(when: dt.datetime | None) -> str | None:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if when else None
