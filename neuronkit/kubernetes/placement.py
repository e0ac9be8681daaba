"""Where every workload the kit installs on an EKS cluster runs, read back from a synthesized template.

The kit installs workloads three ways: EKS add-ons (configuration values), Helm charts (values) and Kubernetes
manifests. :func:`workloads` lists the Deployments and DaemonSets each one places, with the nodeSelector and
tolerations the template gives them; :func:`placement_problems` says, one line each, where a Deployment does not
select the system node group or a DaemonSet that need not run on an accelerator tolerates an accelerator's taint
(docs/eks.md, "Where pods run"). Which chart value places which workload is catalog data
(``charts.*.deployments``/``daemonsets``, ``addon_placement``), checked against each chart's values at its pin.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from neuronkit import catalog
from neuronkit.kubernetes import scheduling
from neuronkit.kubernetes.neuron_chart import Taint, get_path

# The DaemonSets that must run on accelerated nodes, and why; any other DaemonSet the kit installs must not tolerate
# the accelerators' taints. The add-ons' node DaemonSets (vpc-cni, kube-proxy, eks-pod-identity-agent, the FSx CSI
# node) run on every node as EKS ships them: node networking, pod credentials and Lustre mounts.
MUST_RUN_ON_ACCELERATORS: Mapping[str, str] = {
    "neuron-device-plugin": "advertises aws.amazon.com/neuron and neuroncore on Neuron nodes",
    "neuron-dra-driver-kubelet-plugin": "publishes Neuron devices to DRA on Neuron nodes",
    "node-problem-detector": "watches the Neuron driver's errors and recovers the node",
    "aws-efa-k8s-device-plugin": "advertises vpc.amazonaws.com/efa on EFA nodes",
    "nvidia-device-plugin": "advertises nvidia.com/gpu on GPU nodes (EKS AL2023 NVIDIA images ship no device plugin)",
    "nvidia-device-plugin-mps-control-daemon": "runs NVIDIA MPS on GPU nodes that share GPUs through MPS (rendered "
    "with the device plugin; it selects nvidia.com/mps.capable=true, which no kit node carries)",
    "nvidia-device-plugin-gpu-feature-discovery": "labels GPU nodes with their GPU's properties (off in the kit)",
}
# Namespaces of workloads that belong on accelerators by design (serving and training pods), not controllers.
WORKLOAD_NAMESPACES = (scheduling.SERVING_NAMESPACE, scheduling.TRAINING_NAMESPACE)
ACCELERATOR_TAINTS = (scheduling.NEURON_TAINT, scheduling.GPU_TAINT)


@dataclass(frozen=True)
class Workload:
    """A Deployment or DaemonSet the kit installs, and where the template places it."""

    kind: Literal["Deployment", "DaemonSet"]
    name: str
    source: str  # "add-on coredns", "chart neuron-helm-chart", "manifest"
    node_selector: Mapping[str, str] | None = None
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    enabled: bool = True
    namespace: str | None = None


def tolerates(toleration: Mapping[str, Any], taint: Taint) -> bool:
    """Kubernetes' rule: an empty key with Exists tolerates every taint; an empty effect matches every effect."""
    key, effect = toleration.get("key"), toleration.get("effect")
    if effect not in (None, "", taint.effect):
        return False
    if toleration.get("operator", "Equal") == "Exists":
        return key in (None, "") or key == taint.key
    return key == taint.key and toleration.get("value") == taint.value


def workloads(template: Mapping[str, Any]) -> list[Workload]:
    """Every Deployment and DaemonSet the template's add-ons, Helm charts and manifests install."""
    out: list[Workload] = []
    for resource in template.get("Resources", {}).values():
        kind, props = resource.get("Type"), resource.get("Properties", {})
        if kind == "AWS::EKS::Addon":
            out += _addon(props)
        elif kind == "Custom::AWSCDK-EKS-HelmChart":
            out += _chart(props)
        elif kind == "Custom::AWSCDK-EKS-KubernetesResource":
            out += _manifests(props.get("Manifest"))
    return out


def placement_problems(template: Mapping[str, Any]) -> list[str]:
    """One line per Deployment off the system group and per needless toleration of an accelerator's taint."""
    problems: list[str] = []
    system = scheduling.system_node_selector()
    for w in workloads(template):
        if not w.enabled or w.namespace in WORKLOAD_NAMESPACES:
            continue
        if w.kind == "Deployment" and dict(w.node_selector or {}) != system:
            problems.append(f"Deployment {w.name} ({w.source}) does not select the system node group ({system})")
        if w.kind == "DaemonSet" and w.name not in MUST_RUN_ON_ACCELERATORS:
            hit = [t for t in ACCELERATOR_TAINTS if any(tolerates(tol, t) for tol in w.tolerations)]
            if hit:
                taints = ", ".join(f"{t.key}:{t.effect}" for t in hit)
                problems.append(f"DaemonSet {w.name} ({w.source}) need not run on accelerators but tolerates {taints}")
    return problems


def _values(raw: Any) -> dict[str, Any]:
    if isinstance(raw, str):
        loaded: dict[str, Any] = json.loads(raw) if raw.strip() else {}
        return loaded
    if isinstance(raw, dict) and "Fn::Join" in raw:  # values with deploy-time tokens (the region): tokens as text
        parts = raw["Fn::Join"][1]
        return dict(json.loads("".join(p if isinstance(p, str) else "TOKEN" for p in parts)))
    return dict(raw or {})


def _addon(props: Mapping[str, Any]) -> list[Workload]:
    name = str(props.get("AddonName"))
    placement = catalog.eks_facts()["addon_placement"].get(name)
    if not isinstance(placement, dict):
        return []
    config = _values(props.get("ConfigurationValues"))
    selector = get_path(config, str(placement["nodeSelector"]))
    return [Workload(kind="Deployment", name=name, source=f"add-on {name}", node_selector=selector)]


def chart_descriptors() -> dict[str, dict[str, Any]]:
    """Every Helm chart the catalog pins, by chart name: the entries of ``charts`` and ``training_jobs``, and the
    top-level entries that name a chart (the load balancer controller, Cluster Autoscaler, KEDA)."""
    facts = catalog.eks_facts()
    found: dict[str, dict[str, Any]] = {}
    for key, entry in facts.items():
        if not isinstance(entry, dict):
            continue
        nested = key in ("charts", "training_jobs")
        for c in [v for v in entry.values() if isinstance(v, dict)] if nested else [entry]:
            if isinstance(c.get("chart"), str) and "repository" in c:
                found[str(c["chart"])] = c
    return found


def _chart(props: Mapping[str, Any]) -> list[Workload]:
    chart = str(props.get("Chart"))
    facts = chart_placement(chart)
    if facts is None:
        # A chart the catalog does not describe: its workloads cannot be checked, which is itself a problem.
        return [Workload(kind="Deployment", name=f"{chart} (undescribed chart)", source=f"chart {chart}")]
    values = _values(props.get("Values"))
    out: list[Workload] = []
    for name, path in (facts.get("deployments") or {}).items():
        out.append(
            Workload(
                kind="Deployment", name=str(name), source=f"chart {chart}", node_selector=get_path(values, str(path)),
                enabled=_enabled(values, str(path)),
            )
        )  # fmt: skip
    for name, entry in (facts.get("daemonsets") or {}).items():
        # A path, or {path, enabled} where the workload's switch is not in the path's section (a chart's GPU feature
        # discovery reads the top-level tolerations but is switched by gfd.enabled).
        path = str(entry["path"] if isinstance(entry, dict) else entry)
        switch = entry.get("enabled") if isinstance(entry, dict) else None
        on = _enabled(values, path) and (switch is None or get_path(values, str(switch)) is not False)
        out.append(
            Workload(
                kind="DaemonSet", name=str(name), source=f"chart {chart}", tolerations=list(get_path(values, path) or []),
                enabled=on,
            )
        )  # fmt: skip
    return out


def chart_placement(chart: str) -> Mapping[str, Any] | None:
    """The catalog entry of ``chart`` that says where its workloads run (``deployments``/``daemonsets``), wherever the
    catalog keeps the chart (``charts.*``, ``training_jobs.*``, or a section of its own such as ``keda``)."""

    def walk(node: Any) -> Mapping[str, Any] | None:
        if isinstance(node, Mapping):
            if node.get("chart") == chart and ("deployments" in node or "daemonsets" in node):
                return node
            for value in node.values():
                found = walk(value)
                if found is not None:
                    return found
        return None

    return walk(catalog.eks_facts())


def _enabled(values: Mapping[str, Any], path: str) -> bool:
    """A chart component is on unless its section (the path's first part) says ``enabled: false``."""
    parts = path.split(".")
    for depth in range(len(parts) - 1, 0, -1):
        flag = get_path(values, ".".join([*parts[:depth], "enabled"]))
        if flag is False:
            return False
    return True


def _manifests(raw: Any) -> list[Workload]:
    if isinstance(raw, dict) and "Fn::Join" in raw:
        raw = "".join(p if isinstance(p, str) else "TOKEN" for p in raw["Fn::Join"][1])
    docs: Iterable[Any] = json.loads(raw) if isinstance(raw, str) else (raw or [])
    out: list[Workload] = []
    for doc in docs:
        if not isinstance(doc, dict) or doc.get("kind") not in ("Deployment", "DaemonSet"):
            continue
        spec = doc.get("spec", {}).get("template", {}).get("spec", {})
        out.append(
            Workload(
                kind=doc["kind"], name=str(doc.get("metadata", {}).get("name")), source="manifest",
                node_selector=spec.get("nodeSelector"), tolerations=list(spec.get("tolerations") or []),
                namespace=doc.get("metadata", {}).get("namespace"),
            )
        )  # fmt: skip
    return out


__all__ = [
    "MUST_RUN_ON_ACCELERATORS", "Workload", "chart_descriptors", "chart_placement", "placement_problems", "tolerates",
    "workloads",
]  # fmt: skip
