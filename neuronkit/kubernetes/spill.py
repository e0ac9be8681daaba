"""The Kubernetes rights of a fleet's GPU spill controller (``neuronkit/lambdas/spill/handler.py``), as manifests.

An EKS access entry cannot carry a custom access policy (the managed ``AmazonEKS*Policy`` policies are cluster- or
namespace-wide); the controller's entry names a Kubernetes group instead, and this Role and RoleBinding give that
group exactly what the handler does (docs/eks.md, "GPU spill and return"):

- ``get`` the fleet's Deployments (by name: the Neuron one and each GPU fallback type's) and ``list`` pods in the
  serving namespace (``list`` cannot be limited by name; the handler lists each Deployment's own selector);
- ``patch`` the ``deployments/scale`` subresource of the fleet's GPU Deployments only (by name): it changes the
  replica count and nothing else of a Deployment; a fleet without GPU fallback types gets no ``patch`` at all (its
  function only reports the rollout and compile state);
- ``list`` events in the serving namespace: Cluster Autoscaler's ``TriggeredScaleUp``/``NotTriggerScaleUp`` on the
  fleet's pending pods (an ordinary scale-up does not spill);
- ``list`` Jobs in the serving namespace (the handler lists the fleet's compile Jobs, for the compile-failed alarm);
- nothing cluster-scoped (no ClusterRole): it reads no node, nothing in another namespace.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from neuronkit.kubernetes.scheduling import SERVING_NAMESPACE, gpu_deployment_name, neuron_deployment_name

RBAC_API = "rbac.authorization.k8s.io/v1"


def kubernetes_group(fleet: str) -> str:
    """The Kubernetes group of the fleet controller's access entry (never ``system:``-prefixed: EKS refuses those)."""
    return f"neuronkit:spill:{fleet}"


def role_name(fleet: str) -> str:
    return f"{fleet}-spill"


def role(fleet: str, gpu_deployments: Sequence[str] | None = None) -> dict[str, Any]:
    """The least rights of one fleet's controller in the serving namespace; ``gpu_deployments`` the fleet's GPU
    Deployments (None: the one of a single fallback type, ``<fleet>-gpu``; empty: no GPU fallback)."""
    gpu = [gpu_deployment_name(fleet)] if gpu_deployments is None else list(gpu_deployments)
    scale = [{"apiGroups": ["apps"], "resources": ["deployments/scale"], "resourceNames": gpu, "verbs": ["patch"]}]
    return {
        "apiVersion": RBAC_API,
        "kind": "Role",
        "metadata": {"name": role_name(fleet), "namespace": SERVING_NAMESPACE, "labels": _labels(fleet)},
        "rules": [
            {
                "apiGroups": ["apps"],
                "resources": ["deployments"],
                "resourceNames": [neuron_deployment_name(fleet), *gpu],
                "verbs": ["get"],
            },
            *(scale if gpu else []),
            {"apiGroups": [""], "resources": ["pods"], "verbs": ["list"]},
            # Cluster Autoscaler's TriggeredScaleUp / NotTriggerScaleUp events on the pending pods (issue 49).
            {"apiGroups": [""], "resources": ["events"], "verbs": ["list"]},
            # The fleet's compile Jobs, for the compile-failed alarm (issue 49).
            {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["list"]},
        ],
    }


def role_binding(fleet: str) -> dict[str, Any]:
    """Binds the Role to the access entry's group."""
    return {
        "apiVersion": RBAC_API,
        "kind": "RoleBinding",
        "metadata": {"name": role_name(fleet), "namespace": SERVING_NAMESPACE, "labels": _labels(fleet)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role_name(fleet)},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": kubernetes_group(fleet)}],
    }


def manifests(fleet: str, gpu_deployments: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The Role and its RoleBinding (the serving namespace itself belongs to the serving Deployments' manifests)."""
    return [role(fleet, gpu_deployments), role_binding(fleet)]


def _labels(fleet: str) -> dict[str, str]:
    return {"app.kubernetes.io/part-of": "neuronkit", "app.kubernetes.io/component": "spill", "neuronkit.io/fleet": fleet}
