"""The Neuron Helm chart (``oci://public.ecr.aws/neuron/neuron-helm-chart``): its pinned version and its values.

The chart is pinned per Neuron release in ``neuronkit/catalog/eks.yaml`` (``charts.neuron.by_release``, keyed by
the release's minor version). Values come from :class:`NeuronChartOptions`: the device plugin (default) or the
DRA driver, never both and never the scheduler extension (a second scheduler); node problem detector with node
recovery **on** (the chart's default is monitor-only). Image tags are the chart's own pins for its release:
the kit sets none, so nothing floats.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from neuronkit import catalog
from neuronkit.catalog.releases import version_key
from neuronkit.kubernetes import pod_security

# The resource names pods ask for. ``aws.amazon.com/neurondevice`` was removed in Neuron 2.20: never used.
NEURON_DEVICE = "aws.amazon.com/neuron"
NEURON_CORE = "aws.amazon.com/neuroncore"
REMOVED_RESOURCE = "aws.amazon.com/neurondevice"

# The tolerations the chart itself ships for its device plugin and DRA driver (values.yaml, chart 1.9.0): a values
# list replaces the chart's, so the kit repeats them and adds one per taint of the Neuron node groups.
_CHART_TOLERATIONS: tuple[dict[str, str], ...] = (
    {"key": "CriticalAddonsOnly", "operator": "Exists"},
    {"key": NEURON_DEVICE, "operator": "Exists", "effect": "NoSchedule"},
)


@dataclass(frozen=True)
class Taint:
    """A node group taint (``key``, optional ``value``, ``effect`` NoSchedule | PreferNoSchedule | NoExecute)."""

    key: str
    effect: str = "NoSchedule"
    value: str | None = None

    def toleration(self) -> dict[str, str]:
        """The toleration a DaemonSet needs to run on nodes with this taint."""
        item = {"key": self.key, "operator": "Equal" if self.value is not None else "Exists", "effect": self.effect}
        if self.value is not None:
            item["value"] = self.value
        return item


@dataclass(frozen=True)
class NeuronChartOptions:
    """How the chart runs: ``dra`` (the DRA driver instead of the device plugin), ``node_recovery`` (default on),
    ``taints`` of the Neuron node groups the DaemonSets must tolerate; ``region`` is given to the node recovery
    container by value (pod identity sets no region and a hop limit of 1 keeps pods from IMDS); the chart's
    Deployments (scheduler, UltraServer operator: off today) select ``system_node_selector`` when given."""

    dra: bool = False
    node_recovery: bool = True
    taints: Sequence[Taint] = ()
    region: str | None = None
    system_node_selector: Mapping[str, str] | None = None


def chart_facts() -> dict[str, Any]:
    facts: dict[str, Any] = catalog.eks_facts()["charts"]["neuron"]
    return facts


def chart_version(neuron_releases: Iterable[str]) -> str:
    """The chart pinned for the newest of ``neuron_releases`` (e.g. ``["2.28.1", "2.31.0"]``): the row of its minor
    version, else of the next newer release the catalog pins (a newer chart serves older drivers; catalog note)."""
    rows = {str(k): str(v) for k, v in chart_facts()["by_release"].items()}
    if not rows:
        raise ValueError("neuronkit/catalog/eks.yaml: charts.neuron.by_release pins no chart")
    releases = sorted(neuron_releases, key=version_key)
    if not releases:
        return rows[max(rows, key=version_key)]
    newest = ".".join(releases[-1].split(".")[:2])
    if newest in rows:
        return rows[newest]
    newer = sorted((k for k in rows if version_key(k) > version_key(newest)), key=version_key)
    return rows[newer[0]] if newer else rows[max(rows, key=version_key)]


def tolerations(taints: Iterable[Taint]) -> list[dict[str, str]]:
    """The chart's own tolerations, then one per distinct taint of the Neuron node groups."""
    out = [dict(t) for t in _CHART_TOLERATIONS]
    for t in taints:
        item = t.toleration()
        if item not in out:
            out.append(item)
    return out


def device_plugin_values(options: NeuronChartOptions) -> dict[str, Any]:
    tol = tolerations(options.taints)
    if options.dra:
        return {"devicePlugin": {"enabled": False}, "draDriver": {"enabled": True, "tolerations": tol}}
    return {"devicePlugin": {"enabled": True, "tolerations": tol}, "draDriver": {"enabled": False}}


def npd_values(options: NeuronChartOptions) -> dict[str, Any]:
    """Node problem detector with node recovery: a node with an uncorrectable Neuron error is marked unhealthy in its
    Auto Scaling group (EC2 replaces it) and NeuronHealthCheck metrics are published, through a pod identity role."""
    npd = catalog.eks_facts()["node_problem_detector"]
    recovery: dict[str, Any] = {"enabled": options.node_recovery}
    if options.region is not None:
        # A values list replaces the chart's: keep its AWS_STS_REGIONAL_ENDPOINTS and add the region by value.
        recovery["extraEnvs"] = [
            *({"name": k, "value": str(v)} for k, v in npd["recovery_env"].items()),
            {"name": "AWS_REGION", "value": options.region},
            {"name": "AWS_DEFAULT_REGION", "value": options.region},
        ]
    return {
        "npd": {
            "enabled": True,
            "serviceAccount": {"create": True, "name": str(npd["service_account"])},
            "nodeRecovery": recovery,
        }
    }


def npd_namespace(*, release: str, release_namespace: str) -> dict[str, Any]:
    """The node problem detector's namespace (catalog ``node_problem_detector.namespace``), applied before the chart.

    Chart 1.9.0 renders no Namespace for it (its npd templates are the config, DaemonSet and RBAC; Helm's
    create-namespace makes only the release namespace), so the kit creates it. It carries Helm's ownership metadata
    for the chart's release, so that a chart version that does render it adopts it instead of failing on a namespace
    that exists (Helm 3.2+ adopts a resource labelled ``app.kubernetes.io/managed-by: Helm`` with
    ``meta.helm.sh/release-name`` and ``meta.helm.sh/release-namespace``)."""
    npd = catalog.eks_facts()["node_problem_detector"]
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": str(npd["namespace"]),
            # Pod Security "privileged": the chart's node problem detector DaemonSet is a node agent the kit does not
            # render; upstream node-problem-detector reads the host's /dev/kmsg through a hostPath volume, which
            # "baseline" refuses (kubernetes.io, Pod Security Standards). Unverified at chart 1.9.0: no chart template
            # is checked in, only its values.
            "labels": {
                "app.kubernetes.io/managed-by": "Helm",
                "app.kubernetes.io/part-of": "neuronkit",
                **pod_security.labels("privileged"),
            },
            "annotations": {"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": release_namespace},
        },
    }


def controller_values(options: NeuronChartOptions) -> dict[str, Any]:
    """Every Deployment of the chart (catalog ``charts.neuron.deployments``) selects the system node group, so that
    turning one on later never puts a controller on an accelerator."""
    if options.system_node_selector is None:
        return {}
    out: dict[str, Any] = {}
    for path in chart_facts()["deployments"].values():
        set_path(out, str(path), dict(options.system_node_selector))
    return out


def set_path(doc: dict[str, Any], path: str, value: Any) -> None:
    """Set ``a.b.c`` in a nested mapping, creating the levels on the way."""
    *parents, last = path.split(".")
    for key in parents:
        doc = doc.setdefault(key, {})
    doc[last] = value


def get_path(doc: Mapping[str, Any], path: str) -> Any:
    """``a.b.c`` of a nested mapping, or None."""
    node: Any = doc
    for key in path.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def merge(base: dict[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    """``extra`` merged into ``base`` (nested mappings merged, anything else replaced)."""
    for key, value in extra.items():
        if isinstance(value, Mapping) and isinstance(base.get(key), dict):
            merge(base[key], value)
        else:
            base[key] = value
    return base


def values(options: NeuronChartOptions) -> dict[str, Any]:
    """The values document of the Neuron chart: device plugin or DRA, no scheduler extension, NPD with recovery."""
    base = {
        **device_plugin_values(options),
        "scheduler": {"enabled": False},
        "ultraserverOperator": {"enabled": False},
        **npd_values(options),
    }
    return merge(base, controller_values(options))


def dra_problems(
    *,
    kubernetes_version: str,
    node_release_version: str,
    neuron_releases: Iterable[str] = (),
    device_plugin: bool = False,
    scheduler_extension: bool = False,
    auto_mode: bool = False,
    bottlerocket: bool = False,
    karpenter: bool = False,
) -> list[str]:
    """Why the Neuron DRA driver cannot work here, one line each (empty: it can)."""
    dra = catalog.eks_facts()["dra"]
    out: list[str] = []
    if version_key(kubernetes_version) < version_key(str(dra["min_kubernetes"])):
        out.append(f"needs Kubernetes {dra['min_kubernetes']} or later (the cluster runs {kubernetes_version})")
    node = node_release_version.split("-", 1)[0]
    if version_key(node) < version_key(str(dra["min_node_release"])):
        out.append(f"needs EKS node images {dra['min_node_release']} or later (the node groups run {node_release_version})")
    since = version_key(str(dra["since_neuron"]))
    for release in sorted(set(neuron_releases), key=version_key):
        if version_key(release)[:2] < since:
            out.append(f"needs Neuron {dra['since_neuron']} or later (a pool runs {release})")
    reasons: Mapping[str, bool] = {
        "cannot run beside the Neuron device plugin (the chart refuses both); turn the device plugin off": device_plugin,
        "cannot run beside the Neuron scheduler extension; remove it": scheduler_extension,
        "is not available on EKS Auto Mode nodes": auto_mode,
        "is not available on Bottlerocket nodes (EKS AL2023 images only)": bottlerocket,
        "is not supported with Karpenter node pools": karpenter,
    }
    out += [why for why, hit in reasons.items() if hit]
    return out


__all__ = [
    "NEURON_CORE", "NEURON_DEVICE", "REMOVED_RESOURCE", "NeuronChartOptions", "Taint", "chart_facts", "chart_version",
    "controller_values", "dra_problems", "get_path", "merge", "npd_namespace", "npd_values", "set_path", "tolerations", "values",
]  # fmt: skip
