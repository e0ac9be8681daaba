"""Node provisioning on demand: Cluster Autoscaler on the kit's managed node groups (docs/eks.md, "Scaling on demand").

Pinned in ``neuronkit/catalog/eks.yaml`` (``node_autoscaler``): one chart and image per Kubernetes minor, the image's
minor equal to the cluster's (:func:`version_problems`). It runs on the system node group, discovers the node groups
by the tags EKS puts on their Auto Scaling groups, and never removes a node under a serving or loading pod
(:func:`serving_pod_annotations`, which serving Deployments put on their pod template).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from neuronkit import catalog
from neuronkit.kubernetes.neuron_chart import NEURON_DEVICE
from neuronkit.kubernetes.scheduling import GPU_DEVICE, system_node_selector


def facts() -> dict[str, Any]:
    data: dict[str, Any] = catalog.eks_facts()["node_autoscaler"]
    return data


def _minor(version: str) -> str:
    return ".".join(version.lstrip("v").split(".")[:2])


def pin(kubernetes_version: str) -> Mapping[str, str]:
    """The chart version and image tag for a cluster of this Kubernetes minor (KeyError if the catalog has none)."""
    row: Mapping[str, str] = facts()["by_kubernetes"][_minor(kubernetes_version)]
    return row


def version_problems(kubernetes_version: str) -> list[str]:
    """Why the catalog's Cluster Autoscaler cannot run a cluster of this version (empty when it can): a row for the
    minor must exist and its image's minor must equal it (the autoscaler's README recommends the matching minor)."""
    rows = facts()["by_kubernetes"]
    minor = _minor(kubernetes_version)
    if minor not in rows:
        return [f"the catalog pins no Cluster Autoscaler for Kubernetes {minor} (pinned: {', '.join(sorted(rows))})"]
    tag = str(rows[minor]["image_tag"])
    if _minor(tag) != minor:
        return [f"the catalog's Cluster Autoscaler {tag} for Kubernetes {minor} is not of minor {minor}"]
    return []


def drives_dra() -> bool:
    """Whether the autoscaler can add nodes for pods that claim Neuron devices through DRA (it cannot: catalog)."""
    return bool(facts()["drives_dra"])


def serving_pod_annotations() -> dict[str, str]:
    """The pod annotations that keep Cluster Autoscaler from removing a node under a loading or serving pod (FAQ:
    "Pods that have the following annotation set: cluster-autoscaler.kubernetes.io/safe-to-evict: false")."""
    return {str(k): str(v) for k, v in facts()["do_not_evict_annotation"].items()}


def node_group_template_tags(*, neuron_devices: int = 0, gpus: int = 0) -> dict[str, str]:
    """Tags for a managed node group that may sit at zero nodes: Cluster Autoscaler reads them (DescribeNodegroup) to
    know that a node of the group would offer ``aws.amazon.com/neuron`` (the AWS provider knows GPUs from the
    instance type, never Neuron devices); without them a pending Neuron pod never scales an empty group up."""
    prefix = str(facts()["template_resource_tag_prefix"])
    tags = {}
    if neuron_devices:
        tags[prefix + NEURON_DEVICE] = str(neuron_devices)
    if gpus:
        tags[prefix + GPU_DEVICE] = str(gpus)
    return tags


def accelerator_labels(instance_type: str) -> dict[str, str]:
    """The node labels Cluster Autoscaler needs to tell an initialising accelerator node from ready capacity: on a GPU
    type its AWS provider's GPU label (catalog ``node_autoscaler.gpu_label``), valued ``nvidia-<model>`` as its
    metrics name GPUs (``nvidia-l40s``); nothing on a Neuron type (the autoscaler knows no Neuron resource, so the label
    would keep the node unready for good) or a CPU type."""
    facts_ = catalog.get(instance_type)
    if facts_.is_neuron or not facts_.gpus:
        return {}
    model = re.sub(r"[^a-z0-9]+", "-", str(facts_.gpu_model or "gpu").lower()).strip("-") or "gpu"
    return {str(facts()["gpu_label"]): f"nvidia-{model}"[:63].rstrip("-")}


def values(
    *, cluster_name: str, region: str, kubernetes_version: str, groups: Sequence[tuple[str, int, int]] = ()
) -> dict[str, Any]:
    """The chart's values: the pinned image, the system node group, the service account of the pod identity
    association, and which Auto Scaling groups it scales: ``groups`` (name, min, max) only (the chart's
    ``autoscalingGroups``, ``--nodes=min:max:name``), or without them every group EKS tags for this cluster
    (auto-discovery)."""
    f = facts()
    scope: dict[str, Any] = (
        {"autoscalingGroups": [{"name": n, "minSize": lo, "maxSize": hi} for n, lo, hi in groups]}
        if groups
        else {"autoDiscovery": {"clusterName": cluster_name}}
    )
    return {
        "cloudProvider": "aws",
        "awsRegion": region,
        **scope,
        "image": {"repository": str(f["image"]), "tag": str(pin(kubernetes_version)["image_tag"])},
        "rbac": {"serviceAccount": {"create": True, "name": str(f["service_account"])}},
        "nodeSelector": system_node_selector(),
        "extraArgs": {
            # Prefer the node group whose pods waste least (Neuron groups are whole-node pods).
            "expander": "least-waste",
            "balance-similar-node-groups": True,
            "skip-nodes-with-system-pods": False,
            # A Neuron node boots, loads the driver and passes its boot checks before it is Ready.
            "max-node-provision-time": "20m0s",
        },
    }


__all__ = [
    "drives_dra", "facts", "node_group_template_tags", "pin", "serving_pod_annotations", "values", "version_problems",
]  # fmt: skip
