"""A fleet's serving workload on EKS as Kubernetes manifests, from the same serving profile as the Auto Scaling path.

Per fleet (names from :mod:`neuronkit.kubernetes.scheduling`): a ServiceAccount (its pod identity role reads the
weights and the compiled-model cache), a ConfigMap holding ``neuronkit-artifacts`` (the S3 side of a pod), one
Service selecting both Deployments, one TargetGroupBinding (IP targets) into the CloudFormation-owned target group,
the Neuron Deployment ``<fleet>-neuron`` and, with fallback types, the GPU Deployment ``<fleet>-gpu`` at zero
replicas, a PodDisruptionBudget each, and per Neuron compiled-artifact key a compile Job. docs/eks.md ("Serving")
explains the choices; :func:`timing` ties the preStop delay and grace period to the target group's deregistration.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from neuronkit import catalog
from neuronkit.catalog import serving
from neuronkit.kubernetes import autoscaler, load_balancer_controller, pod_security, scheduling
from neuronkit.kubernetes.neuron_chart import NEURON_DEVICE

SCRIPT = Path(__file__).parent / "scripts" / "neuronkit-artifacts"
INSTANCE_TYPE_LABEL = "node.kubernetes.io/instance-type"
ACCELERATOR_LABEL = "neuronkit.io/accelerator"
_SCRIPT_DIR = "/opt/neuronkit"


def eks_facts() -> dict[str, Any]:
    facts: dict[str, Any] = serving.facts()["eks"]
    return facts


@dataclass(frozen=True)
class Timing:
    """How a serving pod leaves: the target group drains it for ``deregistration_delay_seconds``; its preStop hook
    sleeps ``prestop_seconds`` (at least the drain, so the balancer stops sending first); the termination grace
    ``termination_grace_seconds`` covers the preStop and the server's shutdown."""

    deregistration_delay_seconds: int
    prestop_seconds: int
    termination_grace_seconds: int


def timing(deregistration_delay_seconds: int | None = None) -> Timing:
    facts = eks_facts()
    drain = (
        deregistration_delay_seconds if deregistration_delay_seconds is not None else int(facts["deregistration_delay_seconds"])
    )
    prestop = drain + int(facts["prestop_margin_seconds"])
    return Timing(drain, prestop, prestop + int(facts["shutdown_seconds"]))


@dataclass(frozen=True)
class FleetWorkload:
    """What one Deployment of a fleet runs: ``profile`` of ``instance_type`` (whole nodes of that type in node group
    ``pool``), its image and the artifacts helper image as nodes pull them (through the fleet's cache), the artifacts
    bucket, the serving port and health path, the replicas it starts with (None: a scaler owns ``spec.replicas``, so a
    re-applied manifest never resets it; KEDA on the Neuron Deployment, docs/eks.md "Scaling on demand") and the pod
    role's service account. ``seeded``: a controller owns ``spec.replicas`` from the start at ``replicas`` (the GPU
    Deployment, the spill controller's): the Deployment is in no re-applied manifest; :func:`seed_deployment` creates it
    once at ``replicas`` and :func:`template_patch` keeps its template (docs/eks.md, "Day two")."""

    fleet: str
    pool: str
    instance_type: str
    profile: serving.ServingProfile
    model: serving.ModelSpec
    image: str
    artifacts_image: str
    bucket: str
    port: int = 8080
    health_path: str = "/health"
    replicas: int | None = 1
    timing: Timing = timing()
    region: str = ""
    seeded: bool = False
    # A GPU workload's place in the fleet's fallback_types (0: the first) and how many GPU types the fleet has: the
    # first keeps ``<fleet>-gpu`` and its labels, each further one is ``<fleet>-gpu-<type>`` with GPU_TYPE_LABEL.
    gpu_rank: int = 0
    gpu_types: int = 1

    @property
    def accelerator(self) -> Literal["neuron", "gpu"]:
        return self.profile.accelerator

    @property
    def name(self) -> str:
        if self.accelerator == "neuron":
            return scheduling.neuron_deployment_name(self.fleet)
        return scheduling.gpu_deployment_name(self.fleet, self.instance_type if self.gpu_rank else None)


def service_account_name(fleet: str) -> str:
    return f"{fleet}-serving"


def labels(w: FleetWorkload) -> dict[str, str]:
    """The pods' labels (and the Deployment's selector): the fleet's, the accelerator, and for a further GPU type its
    type (scheduling.GPU_TYPE_LABEL); the first GPU type's stay as they were, its selector being immutable."""
    further = {scheduling.GPU_TYPE_LABEL: scheduling.type_slug(w.instance_type)} if w.accelerator == "gpu" and w.gpu_rank else {}
    return {**scheduling.fleet_labels(w.fleet), ACCELERATOR_LABEL: w.accelerator, **further}


def selector(w: FleetWorkload) -> dict[str, Any]:
    """A label selector of exactly this workload's pods. The first GPU Deployment's labels are a subset of a further
    GPU type's, so with several GPU types its selector for a PodDisruptionBudget also says the type label is absent:
    a pod that two budgets select cannot be evicted at all (the eviction subresource answers 500, "This pod has more
    than one PodDisruptionBudget, which the eviction subresource does not support.", kubernetes
    pkg/registry/core/pod/storage/eviction.go)."""
    out: dict[str, Any] = {"matchLabels": labels(w)}
    if w.accelerator == "gpu" and w.gpu_rank == 0 and w.gpu_types > 1:
        out["matchExpressions"] = [{"key": scheduling.GPU_TYPE_LABEL, "operator": "DoesNotExist"}]
    return out


# Pod Security level of the serving namespace: every serving and compile pod passes "baseline" (no host namespace,
# no hostPath, no added capability); tests/contracts/test_eks_contracts.py checks each pod the templates apply.
POD_SECURITY_LEVEL: pod_security.Level = "baseline"


def namespace() -> dict[str, Any]:
    """The serving namespace, labelled so the controller injects target-health readiness gates into its pods, and with
    the Pod Security level its pods need (:data:`POD_SECURITY_LEVEL`, enforced)."""
    labels = {**load_balancer_controller.readiness_gate_labels(), **pod_security.labels(POD_SECURITY_LEVEL)}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": scheduling.SERVING_NAMESPACE, "labels": labels}}


def service_account(fleet: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": service_account_name(fleet), "namespace": scheduling.SERVING_NAMESPACE,
                     "labels": scheduling.fleet_labels(fleet)},
    }  # fmt: skip


def script_config_map(fleet: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": f"{fleet}-artifacts", "namespace": scheduling.SERVING_NAMESPACE,
                     "labels": scheduling.fleet_labels(fleet)},
        "data": {SCRIPT.name: SCRIPT.read_text()},
    }  # fmt: skip


def service(fleet: str, port: int) -> dict[str, Any]:
    """One Service over both Deployments' pods: one TargetGroupBinding registers them all (two bindings on one target
    group deregister each other's pods, aws-load-balancer-controller#2757)."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": scheduling.service_name(fleet), "namespace": scheduling.SERVING_NAMESPACE,
                     "labels": scheduling.fleet_labels(fleet)},
        "spec": {"type": "ClusterIP", "selector": scheduling.fleet_labels(fleet),
                 "ports": [{"name": "http", "port": port, "targetPort": port, "protocol": "TCP"}]},
    }  # fmt: skip


def target_group_binding_name(fleet: str, target_group: object) -> str:
    """``<service>-<digest>``: the digest of what identifies the CloudFormation target group the binding points at
    (its logical ID and create-only properties, as the construct resolves them), so a replaced target group comes with
    a new binding. The load balancer controller refuses any update of a binding's ``spec.targetGroupARN``
    (kubernetes-sigs/aws-load-balancer-controller v3.5.0 ``webhooks/elbv2/targetgroupbinding_validator.go``,
    ``checkImmutableFields``: "TargetGroupBinding update may not change these fields: spec.targetGroupARN"), and on
    create refuses a second binding of one target group (``checkExistingTargetGroups``: "TargetGroup ... is already
    bound"): so the name changes exactly when the target group is replaced, never otherwise (issue 47, fix 2). The
    binding is applied by a manifest resource of its own whose construct id carries the same digest, so CloudFormation
    creates the new binding and deletes the old one (``kubectl delete``): ``kubectl apply --prune`` without an allowlist
    prunes only built-in kinds, never a custom resource (kubectl ``pkg/util/prune/prune.go``; review of issue 47)."""
    text = _TOKEN.sub("${Token}", json.dumps(target_group, sort_keys=True, default=str))
    return f"{scheduling.service_name(fleet)}-{hashlib.sha256(text.encode()).hexdigest()[:10]}"


def target_group_binding(fleet: str, target_group_arn: str, port: int, name: str | None = None) -> dict[str, Any]:
    """The fleet's binding into its target group, named ``name`` (:func:`target_group_binding_name`; default the
    Service's name)."""
    return {
        "apiVersion": "elbv2.k8s.aws/v1beta1",
        "kind": "TargetGroupBinding",
        "metadata": {"name": name or scheduling.service_name(fleet), "namespace": scheduling.SERVING_NAMESPACE,
                     "labels": scheduling.fleet_labels(fleet)},
        "spec": {"serviceRef": {"name": scheduling.service_name(fleet), "port": port}, "targetGroupARN": target_group_arn,
                 "targetType": "ip"},
    }  # fmt: skip


def device_limits(w: FleetWorkload) -> dict[str, str]:
    """Whole-node pods: every Neuron device (or GPU) of the type, so one pod holds one node."""
    it = catalog.get(w.instance_type)
    if w.accelerator == "neuron":
        return {NEURON_DEVICE: str(it.neuron_devices)}
    return {scheduling.GPU_DEVICE: str(it.gpus)}


def surge() -> int:
    """Pods a rollout adds above the replicas (RollingUpdate ``maxSurge``; catalog ``eks.headroom_nodes.surge``)."""
    return int(eks_facts()["headroom_nodes"]["surge"])


def headroom_nodes(accelerator: Literal["neuron", "gpu"]) -> int:
    """Whole nodes a served fleet's node group keeps above the serving maximum: one compile Job (Neuron keys only) and
    one surge pod (catalog ``eks.headroom_nodes``; docs/eks.md, "Serving")."""
    room = eks_facts()["headroom_nodes"]
    return surge() + (int(room["compile"]) if accelerator == "neuron" else 0)


def startup_failures(w: FleetWorkload) -> int:
    """The startup probe's failure threshold: the profile's boot budget (image pull, weights, load) in probe periods."""
    return int(math.ceil(w.profile.boot_seconds / int(eks_facts()["probe_period_seconds"])))


def _env(w: FleetWorkload, extra: dict[str, str] | None = None) -> list[dict[str, str]]:
    env = {
        "ARTIFACTS_BUCKET": w.bucket,
        "MODEL_PREFIX": w.model.s3_prefix,
        "CACHE_PREFIX": w.profile.cache_key or "",
        "WAIT_SECONDS": str(serving.compile_budget_seconds()),
        "POLL_SECONDS": str(serving.facts()["compiled_cache"]["wait_poll_seconds"]),
        **({"AWS_REGION": w.region} if w.region else {}),
        **(extra or {}),
    }
    return [{"name": k, "value": v} for k, v in sorted(env.items())]


def _helper(w: FleetWorkload, name: str, command: str) -> dict[str, Any]:
    """A container of the artifacts helper image running ``neuronkit-artifacts <command>`` (``command`` may be a shell
    line using it)."""
    return {
        "name": name,
        "image": w.artifacts_image,
        "command": ["/bin/sh", "-c", command],
        "env": _env(w),
        "volumeMounts": _mounts(w, script=True),
    }


def _mounts(w: FleetWorkload, *, script: bool = False) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"name": "model", "mountPath": "/model"}]
    if w.accelerator == "neuron":
        out.append({"name": "compiled", "mountPath": "/compiled"})
    if script:
        out.append({"name": "scripts", "mountPath": _SCRIPT_DIR, "readOnly": True})
    else:
        out.append({"name": "shm", "mountPath": "/dev/shm"})
    return out


def _volumes(w: FleetWorkload) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [
        {"name": "model", "emptyDir": {}},
        {"name": "shm", "emptyDir": {"medium": "Memory"}},
        # Executable: the containers run the script by its path (a ConfigMap volume's files default to mode 0644).
        {"name": "scripts", "configMap": {"name": f"{w.fleet}-artifacts", "defaultMode": 0o555}},
    ]
    if w.accelerator == "neuron":
        out.append({"name": "compiled", "emptyDir": {}})
    return out


def _server(w: FleetWorkload, *, probes: bool) -> dict[str, Any]:
    """The server container: the profile's command line and environment, the type's devices, probes and preStop."""
    line = serving.server_command(w.profile, w.model, w.port)
    # A command starting with an option continues the image's entrypoint (the GPU image): pass it as args.
    start = {"args": line} if line[0].startswith("-") else {"command": line}
    container: dict[str, Any] = {
        "name": "server",
        "image": w.image,
        **start,
        "env": [{"name": k, "value": v} for k, v in sorted(w.profile.env.items())],
        "ports": [{"name": "http", "containerPort": w.port, "protocol": "TCP"}],
        "resources": {"limits": device_limits(w), "requests": {**scheduling.node_share(w.instance_type), **device_limits(w)}},
        "volumeMounts": _mounts(w),
    }
    # No added capability on Kubernetes: the device plugin gives the container its /dev/neuron* devices (catalog
    # eks.neuron_capabilities, empty, with its sources); Pod Security "baseline" refuses SYS_ADMIN and IPC_LOCK.
    caps = list(eks_facts()["neuron_capabilities"] if w.accelerator == "neuron" else [])
    if caps:
        container["securityContext"] = {"capabilities": {"add": caps}}
    if probes:
        facts = eks_facts()
        period = int(facts["probe_period_seconds"])
        check = {"httpGet": {"path": w.health_path, "port": w.port}, "periodSeconds": period}
        container["startupProbe"] = {**check, "failureThreshold": startup_failures(w)}
        container["readinessProbe"] = {**check, "failureThreshold": int(facts["readiness_failures"])}
        container["livenessProbe"] = {**check, "failureThreshold": int(facts["liveness_failures"])}
        container["lifecycle"] = {"preStop": {"sleep": {"seconds": w.timing.prestop_seconds}}}
    return container


def _pod_spec(w: FleetWorkload) -> dict[str, Any]:
    return {
        "serviceAccountName": service_account_name(w.fleet),
        "nodeSelector": {**scheduling.pool_node_selector(w.pool), INSTANCE_TYPE_LABEL: w.instance_type},
        "tolerations": scheduling.accelerator_tolerations(w.accelerator),
        "volumes": _volumes(w),
    }


def deployment(w: FleetWorkload) -> dict[str, Any]:
    """The fleet's Deployment of one accelerator: whole-node pods that wait for the compiled-artifact key (Neuron),
    fetch weights and artifacts, then serve; ``maxUnavailable: 0`` keeps old pods serving until new ones are Ready."""
    init = [_helper(w, "wait-for-artifacts", f"{_SCRIPT_DIR}/{SCRIPT.name} wait")] if w.profile.cache_key else []
    init.append(_helper(w, "fetch", f"{_SCRIPT_DIR}/{SCRIPT.name} fetch"))
    replicas = {} if w.replicas is None else {"replicas": w.replicas}
    # A rollout may wait for its key's compile and then boot: only past that is it stalled (the Deployment controller
    # sets Progressing=False/ProgressDeadlineExceeded, the spill function's rollout-stalled alarm reads it).
    deadline = w.profile.boot_seconds + (serving.compile_budget_seconds() if w.profile.cache_key else 0)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": w.name, "namespace": scheduling.SERVING_NAMESPACE, "labels": labels(w)},
        "spec": {
            **replicas,
            "progressDeadlineSeconds": max(600, int(deadline)),
            "selector": {"matchLabels": labels(w)},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": surge()}},
            "template": {
                # Cluster Autoscaler never removes a node under a loading or serving pod (docs/eks.md).
                "metadata": {"labels": labels(w), "annotations": autoscaler.serving_pod_annotations()},
                "spec": {
                    **_pod_spec(w),
                    "terminationGracePeriodSeconds": w.timing.termination_grace_seconds,
                    "initContainers": init,
                    "containers": [_server(w, probes=True)],
                },
            },
        },
    }


# The seeded Deployment's stand-in container: it never runs (zero replicas until template_patch replaces the whole
# template). Deliberately a constant and not a catalog fact: the seed must never change, since a changed seed is
# re-applied and a re-applied seed resets the replicas the spill controller set.
SEED_IMAGE = "registry.k8s.io/pause:3.10"


def seed_deployment(w: FleetWorkload) -> dict[str, Any]:
    """The seeded Deployment as created once (``kubectl create``, CDK's KubernetesManifest on Create): ``replicas``,
    its name, labels and selector (immutable: the rendered Deployment's), a stand-in template. Nothing in it depends on
    anything but the fleet and the accelerator, so CloudFormation never updates it and nothing re-applies it; the
    controller that owns ``spec.replicas`` keeps what it set. Why not leave ``replicas`` out of a re-applied manifest:
    a new Deployment without it starts at 1 (a GPU node on every idle environment), and removing it from a manifest
    applied before with it makes ``kubectl apply`` delete the field, which falls back to 1 (Kubernetes documentation,
    "Horizontal Pod Autoscaling", "Migrating Deployments and StatefulSets to horizontal autoscaling")."""
    assert w.seeded and w.replicas is not None, f"{w.name}: only a seeded Deployment with initial replicas has a seed"
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": w.name, "namespace": scheduling.SERVING_NAMESPACE, "labels": labels(w)},
        "spec": {
            "replicas": w.replicas,
            "selector": {"matchLabels": labels(w)},
            "template": {
                "metadata": {"labels": labels(w)},
                "spec": {"containers": [{"name": "server", "image": SEED_IMAGE}]},
            },
        },
    }


def template_patch(w: FleetWorkload) -> list[dict[str, Any]]:
    """A JSON patch (RFC 6902) that makes the seeded Deployment the rendered one, except ``spec.replicas``: the whole
    strategy and template, so a field removed from the template is removed (a merge patch would keep it). ``add``, not
    ``replace``: on an object member that exists it replaces the value, and it needs no member to exist (RFC 6902,
    4.1 and 4.3: replace's "target location MUST exist"). ``kubectl patch`` leaves the last-applied-configuration
    annotation alone, so no later ``kubectl apply`` deletes what the patch set."""
    spec = deployment(w)["spec"]
    return [
        {"op": "add", "path": "/spec/strategy", "value": spec["strategy"]},
        {"op": "add", "path": "/spec/template", "value": spec["template"]},
    ]


def pod_disruption_budget(w: FleetWorkload) -> dict[str, Any]:
    """Node drains take one serving pod of the Deployment at a time."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": w.name, "namespace": scheduling.SERVING_NAMESPACE, "labels": labels(w)},
        "spec": {"maxUnavailable": 1, "selector": selector(w)},
    }


# A deploy-time value rendered into a manifest (``${Token[AWS.AccountId.7]}``): its number depends on the order tokens
# were created in, not on the value, so identities hash the text with every token written the same way.
_TOKEN = re.compile(r"\$\{Token\[[^\]]*\]\}")


def compile_job_name(w: FleetWorkload) -> str:
    """``<fleet>-compile-<digest>``, the digest of the Job's whole rendered body (labels, spec and its pod template).

    A Job's ``spec.template`` is immutable (kubernetes ``pkg/apis/batch/validation/validation.go``,
    ``ValidateJobSpecUpdate``: ``ValidateImmutableField(spec.Template, oldSpec.Template, ...)``, "field is immutable";
    newer releases relax it only for suspended Jobs, Kubernetes blog 2026-04-27 "Mutable Pod Resources for Suspended
    Jobs"), and aws-cdk-lib's kubectl handler ``kubectl apply``-s the whole manifest on every update. So anything in the template (the health path, the helper image, the compile
    budget, the node share, the key, the image) names a new Job: the old one is pruned and the new one, finding its
    key complete, exits at once; an unchanged Job keeps its name and is left alone (issue 47, fix 1).
    Deploy-time tokens (the pull-through URI's account and region) are hashed as one placeholder, so the name is
    stable from synth to synth."""
    body = {"labels": _compile_job_labels(w), "spec": _compile_job_spec(w)}
    text = _TOKEN.sub("${Token}", json.dumps(body, sort_keys=True))
    return f"{w.fleet}-compile-{hashlib.sha256(text.encode()).hexdigest()[:10]}"


def _compile_job_labels(w: FleetWorkload) -> dict[str, str]:
    return {**scheduling.fleet_labels(w.fleet), "neuronkit.io/role": "compile"}


def compile_job(w: FleetWorkload) -> dict[str, Any]:
    """The Job that writes a new compiled-artifact key: skip when the key is complete; else fetch the weights, start the
    server until it answers its health check (vLLM compiles into /compiled on start), then publish and mark complete."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": compile_job_name(w), "namespace": scheduling.SERVING_NAMESPACE,
                     "labels": _compile_job_labels(w)},
        "spec": _compile_job_spec(w),
    }  # fmt: skip


def _compile_job_spec(w: FleetWorkload) -> dict[str, Any]:
    assert w.profile.cache_key, "GPU profiles compile nothing"
    script = f"{_SCRIPT_DIR}/{SCRIPT.name}"
    line = " ".join(_quote(a) for a in serving.server_command(w.profile, w.model, w.port))
    health = f"http://127.0.0.1:{w.port}{w.health_path}"
    compile_line = (
        "test -f /compiled/.neuronkit-skip && exit 0; "
        f"{line} & pid=$!; "
        f"until python3 -c 'import urllib.request,sys; urllib.request.urlopen(sys.argv[1], timeout=5)' {health} 2>/dev/null; "
        'do kill -0 "$pid" || exit 1; sleep 10; done; kill "$pid"; wait "$pid" || true'
    )
    compiler = {**_server(w, probes=False), "name": "compile", "command": ["/bin/sh", "-c", compile_line]}
    compiler.pop("args", None)
    compiler.pop("ports", None)
    deadline = w.profile.boot_seconds + serving.compile_budget_seconds()
    return {
        "backoffLimit": 1,
        "activeDeadlineSeconds": deadline,
        "template": {
            # A compile in progress is never evicted by a scale-down (as the serving pods).
            "metadata": {
                "labels": {"neuronkit.io/fleet": w.fleet, "neuronkit.io/role": "compile"},
                "annotations": autoscaler.serving_pod_annotations(),
            },
            "spec": {
                **_pod_spec(w),
                "restartPolicy": "Never",
                "initContainers": [
                    _helper(w, "fetch", f"if {script} compiled; then touch /compiled/.neuronkit-skip; else {script} fetch; fi"),
                    compiler,
                ],
                "containers": [_helper(w, "publish", f"{script} publish")],
            },
        },
    }


def _quote(arg: str) -> str:
    return arg if all(c.isalnum() or c in "-_./:=" for c in arg) else "'" + arg.replace("'", "'\\''") + "'"


def fleet_manifests(
    *, fleet: str, port: int, target_group_arn: str, workloads: list[FleetWorkload], binding_name: str | None = None
) -> list[dict[str, Any]]:
    """Every re-applied manifest of one fleet, in apply order (a seeded Deployment is not one of them): the Service and
    its binding (named ``binding_name``) exist before the pods (the controller injects readiness gates only into pods created after both,
    docs/deploy/pod_readiness_gate.md)."""
    out = [service_account(fleet), script_config_map(fleet), service(fleet, port),
           target_group_binding(fleet, target_group_arn, port, binding_name)]  # fmt: skip
    for w in workloads:
        if w.profile.cache_key:
            out.append(compile_job(w))
        # A seeded Deployment is created and kept outside the re-applied manifest (seed_deployment, template_patch).
        out.extend([pod_disruption_budget(w)] if w.seeded else [deployment(w), pod_disruption_budget(w)])
    return out


__all__ = [
    "FleetWorkload", "Timing", "compile_job", "compile_job_name", "deployment", "device_limits", "fleet_manifests",
    "headroom_nodes", "surge",
    "namespace", "pod_disruption_budget", "seed_deployment", "selector", "service", "service_account", "service_account_name",
    "startup_failures", "template_patch",
    "target_group_binding", "target_group_binding_name", "timing",
]  # fmt: skip
