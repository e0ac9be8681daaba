"""``neuronkit preflight`` through the Kubernetes API of a cluster the kit did not create (``eks.existing``).

For each component the file marks ``existing`` (``eks.components``) the kit installs nothing and relies on what runs;
this reads, with GETs only:

- the controllers: a Deployment whose container image is the component's (catalog ``existing_components``), and
  whether it has a ready replica;
- the CRDs the kit's objects use, at the version the kit applies among their ``served`` versions
  (TargetGroupBinding v1beta1, JobSet v1alpha2, Kueue v1beta2, KEDA ScaledObject and TriggerAuthentication v1alpha1);
- with ``kueue: existing``, the Kueue manager's Configuration (the ConfigMap its Deployment mounts, key
  ``controller_manager_config.yaml``) against what the kit's pre-job check and requeue behaviour need
  (docs/training-on-eks.md): the JobSet integration and ``waitForPodsReady`` with a timeout that outlasts the pre-job
  check, else each pool that names a ClusterQueue is refused in one line; a requeue by eviction time, a
  ``blockAdmission``, a ``backoffLimitCount`` or a short ``recoveryTimeout`` are WARN lines;
- each ClusterQueue a pool names (``training[].cluster_queue``) exists;
- for each component of ``existing_components`` left at ``install``, that no controller of it runs already (the
  user's would clash with the kit's Helm release; one of the kit's release name and namespace is a WARN: maybe the
  kit's own).

Kueue's defaults depend on the Configuration's ``apiVersion`` (v1beta1 and v1beta2 both load in Kueue v0.19.2): the
catalog's ``existing_components.kueue.configurations``.

The token is made as the spill function makes its own (an STS GetCallerIdentity URL presigned with the caller's
credentials and the ``x-k8s-aws-id`` header: :func:`neuronkit.lambdas.spill.handler.eks_token`, one place for both),
and the client is the spill function's :class:`~neuronkit.lambdas.spill.handler.KubernetesApi`. What cannot be read
(no credentials, the API unreachable from here, a token the cluster refuses, RBAC) is one WARN line saying what was
not checked; nothing here writes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import yaml

from neuronkit import catalog
from neuronkit.account.check import Check
from neuronkit.lambdas.spill.handler import KubernetesApi, KubernetesApiError, eks_token

if TYPE_CHECKING:
    from neuronkit.config import Environment

Get = Callable[[str], dict[str, Any]]


def facts() -> dict[str, Any]:
    """The catalog's ``existing_components`` (images, CRDs and the Kueue configuration's location)."""
    return {k: v for k, v in catalog.eks_facts()["existing_components"].items() if k != "source"}


def _wanted(env: Environment) -> tuple[list[str], list[tuple[int, str, str]], list[str]]:
    """The ``existing`` components preflight can check here, (index, pool, ClusterQueue) per pool naming one, and the
    components the kit installs on the user's cluster (whose controller must not run there already)."""
    if env.eks is None or env.eks.existing is None:
        return [], [], []
    from neuronkit.config.environment import component_needs

    needs = component_needs(env)
    # The device plugins are installed only where the file has pools that need them (docs/eks.md, "Components").
    needed = {"neuron": needs["neuron"], "efa_device_plugin": needs["efa"], "nvidia_device_plugin": needs["gpu"]}
    components = [name for name in facts() if env.eks.component(name) == "existing"]
    queues = [(i, c.name, c.cluster_queue) for i, c in enumerate(env.training) if c.cluster_queue]
    installs = [name for name in facts() if env.eks.component(name) == "install" and needed.get(name, True)]
    return components, queues, installs


def kit_release(component: str) -> tuple[str, str]:
    """The Helm release (name, namespace) the kit installs ``component`` as: each is named after its chart (the
    constructs in neuronkit/constructs/eks/ pass the catalog's ``chart`` as the release)."""
    eks = catalog.eks_facts()
    from neuronkit.kubernetes import nvidia_chart

    # The device plugins' releases are named in neuronkit/constructs/eks/workloads.py (neuron, efa, nvidia_chart's).
    plugins = {"neuron": "neuron", "efa_device_plugin": "efa", "nvidia_device_plugin": nvidia_chart.RELEASE}
    if component in plugins:
        return plugins[component], str(eks["charts"][component]["namespace"])
    section = {
        "load_balancer_controller": eks["load_balancer_controller"],
        "cluster_autoscaler": eks["node_autoscaler"],
        "keda": eks["keda"],
        "jobset": eks["training_jobs"]["jobset"],
        "kueue": eks["training_jobs"]["kueue"],
    }[component]
    return str(section["chart"]), str(section["namespace"])


def check_cluster_api(env: Environment, session: Any, *, endpoint: str | None = None) -> list[Check]:
    """The checks above against the cluster of ``env`` (``endpoint`` replaces the file's, for tests)."""
    components, queues, installs = _wanted(env)
    if not components and not queues and not installs:
        return []
    assert env.eks is not None and env.eks.existing is not None
    ex = env.eks.existing
    name = f"EKS cluster {ex.cluster_name} Kubernetes API"
    unchecked = ", ".join(components + [f"ClusterQueue {q}" for _, _, q in queues])
    if installs:
        what = f"whether {', '.join(installs)} (install) already run"
        unchecked = f"{unchecked} and {what}" if unchecked else what
    try:
        if session.get_credentials() is None:
            raise LookupError("no AWS credentials")
        token = eks_token(session, ex.cluster_name, env.region)
    except Exception as err:  # noqa: BLE001 - one WARN line: nothing could be read
        return [Check("WARN", name, f"no token ({err}): {unchecked} not checked", "run preflight with credentials")]
    api = KubernetesApi(endpoint or ex.endpoint, token, "" if endpoint else ex.certificate_authority)
    try:
        return api_checks(env, api.get)
    except KubernetesApiError as err:
        if err.status in (401, 403):
            return [Check("WARN", name, f"the API refused the caller (HTTP {err.status}): {unchecked} not checked",
                          "give the caller's IAM identity an access entry with read access (e.g. AmazonEKSViewPolicy)")]  # fmt: skip
        return [Check("WARN", name, f"{err}: {unchecked} not checked", "")]
    except OSError as err:  # URLError, timeouts, refused connections, TLS
        return [Check("WARN", name, f"unreachable from here ({getattr(err, 'reason', err)}): {unchecked} not checked",
                      "run preflight where the endpoint is reachable (inside the VPC for a private endpoint)")]  # fmt: skip


def api_checks(env: Environment, get: Get) -> list[Check]:
    """The checks, on any ``get(path) -> dict`` that raises :class:`KubernetesApiError` for non-2xx answers."""
    components, queues, installs = _wanted(env)
    assert env.eks is not None and env.eks.existing is not None
    cluster = env.eks.existing.cluster_name
    pins = facts()
    out: list[Check] = []
    wanted = components + installs
    kinds = {c: str(pins[c].get("kind") or "Deployment") for c in wanted}
    workloads: dict[str, list[dict[str, Any]]] = {
        kind: get(f"/apis/apps/v1/{kind.lower()}s").get("items") or []
        for kind in sorted(set(kinds.values()), key=lambda k: (k != "Deployment", k))
    }
    found: dict[str, list[dict[str, Any]]] = {}
    for component in wanted:
        images = set(pins[component]["images"])
        found[component] = [d for d in workloads[kinds[component]] if images & set(map(_image_name, _images(d)))]
    for component in components:
        out.append(_controller(cluster, component, found[component], set(pins[component]["images"])))
        for crd, version in pins[component]["crds"].items():
            out.append(_crd(cluster, component, crd, str(version), get))
    for component in installs:
        out.append(_not_running(cluster, component, found[component], set(pins[component]["images"])))
    if "kueue" in components:
        out += _kueue_config(env, cluster, found["kueue"], queues, pins["kueue"], get)
    for i, pool, queue in queues:
        out.append(_cluster_queue(cluster, i, pool, queue, get))
    return out


def _images(deployment: dict[str, Any]) -> list[str]:
    spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    return [str(c.get("image") or "") for c in (spec.get("containers") or [])]


def _image_name(image: str) -> str:
    """The repository's last path part: registry.k8s.io/kueue/kueue:v0.19.2 -> kueue."""
    return image.split("@", 1)[0].rsplit("/", 1)[-1].split(":", 1)[0]


def _where(d: dict[str, Any]) -> str:
    meta = d.get("metadata") or {}
    return f"{meta.get('namespace')}/{meta.get('name')}"


def _controller(cluster: str, component: str, deployments: list[dict[str, Any]], images: set[str]) -> Check:
    name = f"EKS cluster {cluster} {component} controller"
    if not deployments:
        return Check("FAIL", name, f"no workload runs the {'/'.join(sorted(images))} image (eks.components.{component}: "
                     "existing)", f"install it, or set eks.components.{component}: install")  # fmt: skip
    # A Deployment's readyReplicas, a DaemonSet's numberReady.
    ready = [
        d
        for d in deployments
        if int((d.get("status") or {}).get("readyReplicas") or (d.get("status") or {}).get("numberReady") or 0) > 0
    ]
    if not ready:
        return Check("WARN", name, f"{', '.join(map(_where, deployments))}: no ready replica", "see why its pods are not Ready")
    return Check("PASS", name, f"{', '.join(map(_where, ready))} is ready")


def _not_running(cluster: str, component: str, deployments: list[dict[str, Any]], images: set[str]) -> Check:
    """A component the kit installs must not run already: the kit's Helm release would clash with the user's (CRDs,
    webhooks, ClusterRoles of one name) or, named alike, adopt it. Helm marks what it installs with the annotations
    meta.helm.sh/release-name and release-namespace; a Deployment of the kit's release name and namespace is the kit's
    own from an earlier deploy or a default install of the user's, which the cluster alone cannot tell apart: a WARN."""
    name = f"EKS cluster {cluster} {component} controller"
    release, namespace = kit_release(component)
    fix = f"set eks.components.{component}: existing"
    theirs = [d for d in deployments if _release(d) != (release, namespace)]
    if theirs:
        return Check("FAIL", name, f"{', '.join(map(_where, theirs))} already runs the {'/'.join(sorted(images))} image "
                     f"and eks.components.{component} is install: the kit's Helm release {namespace}/{release} would "
                     "clash with it", fix)  # fmt: skip
    if deployments:
        return Check("WARN", name, f"{', '.join(map(_where, deployments))} is Helm release {namespace}/{release}, the kit's: "
                     "the kit's own from an earlier deploy, or yours, which the kit's release would then adopt and "
                     "upgrade", f"if you installed it, {fix}")  # fmt: skip
    return Check("PASS", name, f"no workload runs the {'/'.join(sorted(images))} image: the kit installs it")


def _release(d: dict[str, Any]) -> tuple[str, str]:
    annotations = (d.get("metadata") or {}).get("annotations") or {}
    return str(annotations.get("meta.helm.sh/release-name") or ""), str(annotations.get("meta.helm.sh/release-namespace") or "")


def _crd(cluster: str, component: str, crd: str, version: str, get: Get) -> Check:
    name = f"EKS cluster {cluster} CRD {crd}"
    try:
        found = get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}")
    except KubernetesApiError as err:
        if err.status != 404:
            raise
        return Check("FAIL", name, f"not installed; the kit applies {version} (eks.components.{component}: existing)",
                     f"install {component} with its CRDs, or set eks.components.{component}: install")  # fmt: skip
    served = [str(v.get("name")) for v in (found.get("spec") or {}).get("versions") or [] if v.get("served")]
    if version in served:
        return Check("PASS", name, f"serves {version}")
    return Check("FAIL", name, f"serves {', '.join(served) or 'no version'}, not {version}, which the kit applies",
                 f"upgrade {component} to a release that serves {version}")  # fmt: skip


def _kueue_config(
    env: Environment, cluster: str, deployments: list[dict[str, Any]], queues: list[tuple[int, str, str]],
    pin: dict[str, Any], get: Get,
) -> list[Check]:  # fmt: skip
    """Kueue's Configuration against the pre-job check and requeue behaviour (docs/training-on-eks.md, "Kueue")."""
    name = f"EKS cluster {cluster} Kueue configuration"
    if not deployments:
        return [Check("WARN", name, "not checked: no Kueue Deployment found", "")]
    deployment = deployments[0]
    namespace = (deployment.get("metadata") or {}).get("namespace") or "kueue-system"
    volumes = (((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}).get("volumes") or []
    mounted = [str(v["configMap"]["name"]) for v in volumes if (v.get("configMap") or {}).get("name")]
    config_map = mounted[0] if mounted else str(pin["config_map"])
    try:
        data = (get(f"/api/v1/namespaces/{namespace}/configmaps/{config_map}").get("data") or {}).get(pin["config_key"])
        config = yaml.safe_load(data) if data else None
    except KubernetesApiError as err:
        if err.status != 404:
            raise
        config = None
    except yaml.YAMLError:
        config = None
    if not isinstance(config, dict):
        return [Check("WARN", name, f"not checked: no {pin['config_key']} in ConfigMap {namespace}/{config_map}",
                      "check waitForPodsReady and the JobSet integration by hand (docs/training-on-eks.md)")]  # fmt: skip
    where = f"ConfigMap {namespace}/{config_map}"
    api_version = str(config.get("apiVersion") or "")
    defaults = (pin["configurations"] or {}).get(api_version)
    if defaults is None:
        return [Check("WARN", name, f"not checked: {where} has apiVersion {api_version or '(none)'}, not one of "
                      f"{', '.join(pin['configurations'])} (Kueue {catalog.eks_facts()['training_jobs']['kueue']['version']})",
                      "check waitForPodsReady and the JobSet integration by hand (docs/training-on-eks.md)")]  # fmt: skip
    lacks, warns, timeout = _kueue_settings(config, defaults, pin)
    gate = str(pin["disabling_feature_gate"])
    if gate_enabled(deployment, gate):
        lacks.insert(0, f"the Kueue manager runs with --feature-gates {gate}=true: waitForPodsReady is off whatever "
                        f"{where} says (without it an admitted job would hold its pool with some pods not ready)")  # fmt: skip
    out: list[Check] = []
    if lacks:
        fix = f"set them in {where} (docs/training-on-eks.md, 'Kueue')"
        if queues:
            out += [
                Check("FAIL", f"training[{i}] {pool} (ClusterQueue {queue})", f"Kueue's configuration ({where}): "
                      + "; ".join(lacks), fix)
                for i, pool, queue in queues
            ]  # fmt: skip
        else:
            out.append(Check("FAIL", name, f"{where}: " + "; ".join(lacks), fix))
    else:
        out.append(Check("PASS", name, f"{where} ({api_version}): JobSet integration, waitForPodsReady {timeout}"))
    out += [Check("WARN", name, w, f"see docs/training-on-eks.md, 'Kueue' ({where})") for w in warns]
    return out


def gate_enabled(deployment: dict[str, Any], gate: str) -> bool:
    """Whether any container of ``deployment`` runs with ``--feature-gates=...GATE=true...`` (one flag or several)."""
    spec = ((deployment.get("spec") or {}).get("template") or {}).get("spec") or {}
    for container in spec.get("containers") or []:
        words = [str(w) for w in (container.get("args") or []) + (container.get("command") or [])]
        for i, word in enumerate(words):
            value = word.split("=", 1)[1] if word.startswith("--feature-gates=") else None
            if word == "--feature-gates" and i + 1 < len(words):
                value = words[i + 1]
            if value is None:
                continue
            gates = dict(part.split("=", 1) for part in value.split(",") if "=" in part)
            if gates.get(gate, "").strip().lower() == "true":
                return True
    return False


def _kueue_settings(config: dict[str, Any], defaults: dict[str, Any], pin: dict[str, Any]) -> tuple[list[str], list[str], str]:
    """What the configuration lacks (FAIL), what it risks (WARN), and its effective waitForPodsReady timeout, with the
    defaults of its apiVersion (catalog ``existing_components.kueue.configurations``)."""
    kit = catalog.eks_facts()["training_jobs"]
    deadline_s = int(kit["defaults"]["check_deadline_seconds"])
    ready_pin = kit["kueue"]["wait_for_pods_ready"]
    kit_timeout_s = duration_seconds(str(ready_pin["timeout"])) or 0
    lacks: list[str] = []
    warns: list[str] = []
    frameworks = [str(f) for f in ((config.get("integrations") or {}).get("frameworks") or [])]
    if pin["jobset_framework"] not in frameworks:
        lacks.append(f"integrations.frameworks has no {pin['jobset_framework']} (Kueue would not admit the JobSets)")
    ready = config.get("waitForPodsReady")
    if defaults["wait_for_pods_ready"] == "always":  # v1beta2: on whether or not the section is there
        ready = ready if isinstance(ready, dict) else {}
    elif not isinstance(ready, dict) or ready.get("enable") is not True:  # v1beta1: off unless enable: true
        lacks.append(f"waitForPodsReady is not enabled ({config.get('apiVersion')} needs waitForPodsReady.enable: true; "
                     "without it an admitted job would hold its pool with some pods not ready)")  # fmt: skip
        return lacks, warns, ""
    timeout = str(ready.get("timeout") or f"{defaults['default_timeout']} (default)")
    timeout_s = duration_seconds(str(ready.get("timeout") or defaults["default_timeout"]))
    if timeout_s is None or timeout_s <= deadline_s:
        lacks.append(f"waitForPodsReady.timeout {timeout} does not outlast the pre-job check's {deadline_s // 60} "
                     "minutes (Kueue would evict every job during its checks)")  # fmt: skip
    elif timeout_s < kit_timeout_s:
        warns.append(f"waitForPodsReady.timeout {timeout} is below the kit's {ready_pin['timeout']} "
                     "(image pulls and the checks); big images may be evicted and requeued")  # fmt: skip
    block = ready.get("blockAdmission")
    if (defaults["default_block_admission"] if block is None else block) is True:
        warns.append(f"waitForPodsReady.blockAdmission is {'true' if block else 'true (default)'}: in Kueue it is "
                     "cluster-wide, so one job waiting for its nodes (a Capacity Block not started) stops admission in "
                     "every ClusterQueue")  # fmt: skip
    strategy = ready.get("requeuingStrategy") or {}
    if str(strategy.get("timestamp") or pin["default_requeuing_timestamp"]) != str(ready_pin["requeuing_timestamp"]):
        warns.append(f"requeuingStrategy.timestamp {strategy.get('timestamp') or pin['default_requeuing_timestamp'] + ' (default)'}: an evicted job "
                     "goes behind every job queued meanwhile (the kit requeues by Creation)")  # fmt: skip
    if strategy.get("backoffLimitCount") is not None:
        warns.append(f"requeuingStrategy.backoffLimitCount {strategy['backoffLimitCount']}: a job whose nodes are "
                     "late is deactivated after that many requeues")  # fmt: skip
    # Unset, it is the timeout (checked above); "0s" disables it (configuration_types.go: "Setting to "0s" disables
    # recovery timeout checking"), so a restart is never evicted for it.
    recovery = ready.get("recoveryTimeout")
    recovery_s = duration_seconds(str(recovery)) if recovery is not None else None
    if recovery is not None and recovery_s != 0 and (recovery_s is None or recovery_s <= deadline_s):
        warns.append(f"waitForPodsReady.recoveryTimeout {recovery}: a restart (node replaced, checks again) is "
                     f"evicted before the pre-job check's {deadline_s // 60} minutes end")  # fmt: skip
    return lacks, warns, timeout


def _cluster_queue(cluster: str, i: int, pool: str, queue: str, get: Get) -> Check:
    name = f"training[{i}] {pool} ClusterQueue {queue}"
    version = str(catalog.eks_facts()["training_jobs"]["kueue"]["api_version"])
    try:
        get(f"/apis/{version}/clusterqueues/{queue}")
    except KubernetesApiError as err:
        if err.status != 404:
            raise
        return Check("FAIL", name, f"no ClusterQueue {queue} on cluster {cluster}",
                     f"create it (the stack prints the stanza to add), or fix training[{i}].cluster_queue")  # fmt: skip
    return Check("PASS", name, f"exists on cluster {cluster}")


_UNITS = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}


def duration_seconds(text: str) -> float | None:
    """A Go duration (metav1.Duration: ``60m``, ``1h30m``, ``300s``, ``0s``) in seconds; None when it is not one."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(h|ms|us|µs|ns|m|s)", text.strip())
    if not parts or "".join(n + u for n, u in parts) != text.strip():
        return None
    return sum(float(n) * _UNITS[u] for n, u in parts)


__all__ = ["api_checks", "check_cluster_api", "duration_seconds", "facts", "kit_release"]
