"""Where the kit's Kubernetes workloads run: the system node group, the accelerated groups' taints, and names.

One place for the labels, taints and names every manifest the kit renders uses, so that a serving Deployment, a
training job, a controller chart and the node groups agree (docs/eks.md, "Scheduling"):

- the **system node group** (on-demand, two AZs) carries ``neuronkit.io/pool: system``; every Deployment the kit
  installs (add-ons, chart controllers, the kit's own controllers) selects it with :func:`system_node_selector`;
- **Neuron node groups** are tainted ``aws.amazon.com/neuron:NoSchedule`` and **GPU node groups**
  ``nvidia.com/gpu:NoSchedule``; only pods that must run on accelerators (device plugins, node problem detector,
  serving and training pods) tolerate them (:func:`accelerator_tolerations`);
- every pool's node group is labelled ``neuronkit.io/pool: NAME`` (:func:`pool_node_selector`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Literal

from neuronkit import catalog
from neuronkit.kubernetes.neuron_chart import NEURON_DEVICE, Taint

POOL_LABEL = "neuronkit.io/pool"
SYSTEM_POOL = "system"
GPU_DEVICE = "nvidia.com/gpu"

NEURON_TAINT = Taint(key=NEURON_DEVICE, effect="NoSchedule")
GPU_TAINT = Taint(key=GPU_DEVICE, effect="NoSchedule")

SERVING_NAMESPACE = "neuronkit-serving"
TRAINING_NAMESPACE = "neuronkit-training"
CONTROLLERS_NAMESPACE = "neuronkit-system"


def taint_of(accelerator: Literal["neuron", "gpu"]) -> Taint:
    """The taint of a node group of this accelerator."""
    return NEURON_TAINT if accelerator == "neuron" else GPU_TAINT


def accelerated_type(instance_type: str) -> bool:
    """Whether the catalog knows ``instance_type`` as a Neuron or GPU type (never a system node)."""
    from neuronkit import catalog

    try:
        facts = catalog.get(instance_type)
    except (KeyError, ValueError):
        return False
    return bool(facts.is_neuron or facts.gpus)


def system_node_selector() -> dict[str, str]:
    """The nodeSelector of every Deployment the kit installs that need not run on an accelerator."""
    return {POOL_LABEL: SYSTEM_POOL}


def pool_node_selector(pool: str) -> dict[str, str]:
    """The nodeSelector of pods that belong on one pool's nodes (its node group is labelled with its name)."""
    return {POOL_LABEL: pool}


def accelerator_tolerations(accelerator: Literal["neuron", "gpu"]) -> list[dict[str, str]]:
    """The tolerations a pod needs to run on a node group of this accelerator (and only those)."""
    return [taint_of(accelerator).toleration()]


def neuron_deployment_name(fleet: str) -> str:
    """The serving Deployment of a fleet on its Neuron node group."""
    return f"{fleet}-neuron"


# The label that tells a fleet's further GPU Deployments apart (the second fallback type on); the first GPU
# Deployment's pods never carry it, so its selector, immutable once created, stays what it was (docs/eks.md, "Serving").
GPU_TYPE_LABEL = "neuronkit.io/gpu-type"


def type_slug(instance_type: str) -> str:
    """An instance type as a DNS-1123 label part: ``g5.2xlarge`` -> ``g5-2xlarge``."""
    return instance_type.replace(".", "-")


def gpu_deployment_name(fleet: str, instance_type: str | None = None) -> str:
    """The serving Deployment of a fleet on a GPU fallback node group (starts at zero replicas): ``<fleet>-gpu`` for
    the fleet's first fallback type (None), ``<fleet>-gpu-<type>`` (e.g. ``chat-gpu-g5-2xlarge``) for each further
    type, so adding a type never renames the first one's Deployment."""
    return f"{fleet}-gpu" if instance_type is None else f"{fleet}-gpu-{type_slug(instance_type)}"


def gpu_deployment_names(fleet: str, instance_types: Sequence[str]) -> list[str]:
    """The GPU Deployments of a fleet's fallback types, in the file's (priority) order."""
    return [gpu_deployment_name(fleet, None if i == 0 else t) for i, t in enumerate(instance_types)]


def service_name(fleet: str) -> str:
    """The one Service (and TargetGroupBinding) selecting both Deployments of a fleet."""
    return fleet


def fleet_labels(fleet: str) -> dict[str, str]:
    """The labels both Deployments' pods carry, which the fleet's Service selects."""
    return {"app.kubernetes.io/name": fleet, "app.kubernetes.io/part-of": "neuronkit", "neuronkit.io/fleet": fleet}


def kube_reserved(vcpus: int, max_pods: int) -> tuple[int, int]:
    """nodeadm's kube-reserved on an AL2023 node: (CPU millicores, memory MiB) (catalog ``training_jobs.node_reserve``)."""
    r = catalog.eks_facts()["training_jobs"]["node_reserve"]
    total = vcpus * 1000
    cpu = 0.0
    for start, end, percent in r["kube_reserved_cpu_percent_ranges"]:
        top = total if end is None else min(total, int(end))
        cpu += max(0, top - int(start)) * float(percent) / 100
    memory = int(r["kube_reserved_memory_mib_per_pod"]) * max_pods + int(r["kube_reserved_memory_mib_base"])
    return int(cpu), memory


def allocatable(instance_type: str, max_pods: int | None = None) -> tuple[int, int]:
    """What kubelet leaves allocatable on a node of the type: (CPU millicores, memory MiB): capacity (memory: EC2's
    figure less the kernel's share) less kube-reserved and the hard eviction threshold."""
    it = catalog.get(instance_type)
    r = catalog.eks_facts()["training_jobs"]["node_reserve"]
    pods = max_pods if max_pods is not None else int(catalog.eks_facts()["pods"]["max_pods_per_node"])
    cpu_reserved, mem_reserved = kube_reserved(it.vcpus, pods)
    capacity_mib = math.floor(it.memory_mib * (1 - float(r["kernel_memory_fraction"])))
    return it.vcpus * 1000 - cpu_reserved, capacity_mib - mem_reserved - int(r["eviction_hard_memory_mib"])


def node_share(instance_type: str) -> dict[str, str]:
    """The CPU and memory a whole-node pod requests: what kubelet leaves allocatable (:func:`allocatable`) less the
    DaemonSets' requests, whole cores and GiB, so the pod is not BestEffort (evicted first under memory pressure),
    fits the node beside its DaemonSets, and Cluster Autoscaler sees the node as used."""
    cpu_m, mem_mib = allocatable(instance_type)
    ds = catalog.eks_facts()["training_jobs"]["node_reserve"]["daemonsets"]
    cpu = math.floor((cpu_m - int(ds["cpu_millicores"])) / 1000)
    memory_gib = math.floor((mem_mib - int(ds["memory_mib"])) / 1024)
    return {"cpu": str(cpu), "memory": f"{memory_gib}Gi"}
