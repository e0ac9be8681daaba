"""The AWS Load Balancer Controller chart (eks-charts ``aws-load-balancer-controller``): values, policy and CRD schema.

Pinned in ``neuronkit/catalog/eks.yaml`` (``load_balancer_controller``). The kit uses the controller for one thing:
a TargetGroupBinding that registers a fleet's pods (IP targets) in the CloudFormation-owned target group, and the
pod readiness gates it injects in namespaces labelled for them. It creates no load balancer, so its Service mutator
webhook (which would make it the default for every ``type: LoadBalancer`` Service) is off. Its role is the
controller's documented IAM policy, checked in unchanged with its version and source (``iam/``); the
TargetGroupBinding CRD of its appVersion is checked in under ``crds/`` and validates the kit's bindings offline.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from neuronkit import catalog
from neuronkit.kubernetes import scheduling

_HERE = Path(__file__).parent


def chart_facts() -> dict[str, Any]:
    facts: dict[str, Any] = catalog.eks_facts()["load_balancer_controller"]
    return facts


@cache
def iam_policy_document() -> dict[str, Any]:
    """The controller's documented IAM policy of the pinned appVersion (``{"version", "source", "policy"}``)."""
    data: dict[str, Any] = json.loads((_HERE / "iam" / str(chart_facts()["iam_policy"])).read_text())
    return data


@cache
def target_group_binding_crd() -> dict[str, Any]:
    """The TargetGroupBinding CRD of the pinned appVersion, as checked in."""
    data: dict[str, Any] = yaml.safe_load((_HERE / "crds" / str(chart_facts()["crd"])).read_text())
    return data


def target_group_binding_schema(version: str = "v1beta1") -> dict[str, Any]:
    """The openAPIV3Schema of one served version of the TargetGroupBinding CRD."""
    for v in target_group_binding_crd()["spec"]["versions"]:
        if v["name"] == version:
            schema: dict[str, Any] = v["schema"]["openAPIV3Schema"]
            return schema
    raise KeyError(version)


def readiness_gate_labels() -> dict[str, str]:
    """The namespace label that turns the controller's pod readiness gate injection on."""
    return {str(chart_facts()["readiness_gate_label"]): "enabled"}


def values(*, cluster_name: str, region: str, vpc_id: str) -> dict[str, Any]:
    """Chart values: the cluster, region and VPC given (no instance metadata lookups), the pod identity service account,
    the system node group, and no Service mutator webhook (the kit binds target groups, it creates no balancers)."""
    return {
        "clusterName": cluster_name,
        "region": region,
        "vpcId": vpc_id,
        "serviceAccount": {"create": True, "name": str(chart_facts()["service_account"])},
        "nodeSelector": scheduling.system_node_selector(),
        "enableServiceMutatorWebhook": False,
        "enablePodReadinessGateInject": True,
    }


__all__ = [
    "chart_facts", "iam_policy_document", "readiness_gate_labels", "target_group_binding_crd",
    "target_group_binding_schema", "values",
]  # fmt: skip
