"""The NVIDIA device plugin chart (``https://nvidia.github.io/k8s-device-plugin``, chart ``nvidia-device-plugin``):
pods ask for ``nvidia.com/gpu``.

The EKS AL2023 NVIDIA node images carry the driver and the container toolkit but no device plugin, so without this
chart no GPU node advertises ``nvidia.com/gpu`` and no GPU pod schedules. Pinned in ``neuronkit/catalog/eks.yaml``
(``charts.nvidia_device_plugin``); the kit sets no image tag (the chart's appVersion is its pin).

Placement: the chart's default affinity requires Node Feature Discovery labels, which the kit does not install; the
kit replaces it with the GPU node groups' pool labels (``neuronkit.io/pool In [...]``), so the DaemonSet lands on
those groups only, never on Neuron or system nodes, and tolerates exactly the GPU groups' taints (the GPU taint).
GPU feature discovery and its NFD dependency (Deployments among them) stay off, NFD's Deployments on the system node
group should they be turned on.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from neuronkit import catalog
from neuronkit.kubernetes import scheduling
from neuronkit.kubernetes.neuron_chart import Taint

GPU_RESOURCE = scheduling.GPU_DEVICE
RELEASE = "nvidia-device-plugin"  # the release name: the chart then names its DaemonSet nvidia-device-plugin


def chart_facts() -> dict[str, Any]:
    facts: dict[str, Any] = catalog.eks_facts()["charts"]["nvidia_device_plugin"]
    return facts


def node_affinity(pools: Sequence[str]) -> dict[str, Any]:
    """A required node affinity on the pools' ``neuronkit.io/pool`` labels (the GPU node groups)."""
    if not pools:
        raise ValueError("pools: give the GPU node groups' pool names (the chart is installed only with a GPU group)")
    term = {"matchExpressions": [{"key": scheduling.POOL_LABEL, "operator": "In", "values": sorted(set(pools))}]}
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}}


def values(pools: Sequence[str], taints: Iterable[Taint] = (scheduling.GPU_TAINT,)) -> dict[str, Any]:
    """The device plugin on the ``pools`` (GPU node groups) only, tolerating ``taints`` (each once) and nothing else.

    Helm replaces lists given in values: ``nodeSelectorTerms`` replaces the chart's NFD terms and ``tolerations``
    the chart's (CriticalAddonsOnly and nvidia.com/gpu)."""
    tol: list[dict[str, str]] = []
    for t in taints:
        item = t.toleration()
        if item not in tol:
            tol.append(item)
    return {
        "devicePlugin": {"enabled": True},
        "affinity": node_affinity(pools),
        "tolerations": tol,
        # GPU feature discovery needs NFD (master and gc Deployments, a worker DaemonSet): both off; Chart.yaml's
        # condition "nfd.enabled,gfd.enabled" reads nfd.enabled first. NFD's Deployments select the system node group
        # all the same, so that turning NFD on keeps them off the accelerators.
        "gfd": {"enabled": False},
        "nfd": {
            "enabled": False,
            "master": {"nodeSelector": scheduling.system_node_selector()},
            "gc": {"nodeSelector": scheduling.system_node_selector()},
        },
    }


__all__ = ["GPU_RESOURCE", "RELEASE", "chart_facts", "node_affinity", "values"]
