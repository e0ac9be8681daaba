"""KEDA: each inference fleet's Neuron Deployment scales on its target group's requests (docs/eks.md, "Scaling on
demand"). The chart is pinned in ``neuronkit/catalog/eks.yaml`` (``keda``); the ScaledObject and
TriggerAuthentication this module renders are checked against the CRD schemas of that chart version, checked in under
``tests/fixtures/crds/``. The trigger is ``aws-cloudwatch`` on a metric the ALB publishes (``alb_metrics.trigger``);
KEDA's operator reads it with its own role (pod identity, ``cloudwatch:GetMetricData`` only).

The spill controller (``neuronkit/lambdas/spill``) splits the demand this decides: KEDA sets the Neuron replicas
wanted; what Neuron cannot place goes to the GPU Deployment.
"""

from __future__ import annotations

from typing import Any

from neuronkit import catalog
from neuronkit.kubernetes.scheduling import SERVING_NAMESPACE, neuron_deployment_name, system_node_selector

API_VERSION = "keda.sh/v1alpha1"


def facts() -> dict[str, Any]:
    data: dict[str, Any] = catalog.eks_facts()["keda"]
    return data


def alb_metrics() -> dict[str, Any]:
    data: dict[str, Any] = catalog.eks_facts()["alb_metrics"]
    return data


def chart_values() -> dict[str, Any]:
    """The operator, metrics server and webhooks on the system node group; the operator's service account is the
    catalog's (its pod identity association names it)."""
    return {
        "nodeSelector": system_node_selector(),
        "serviceAccount": {"operator": {"create": True, "name": str(facts()["service_account"])}},
    }


def authentication_name(fleet: str) -> str:
    return f"{fleet}-cloudwatch"


def trigger_authentication(fleet: str) -> dict[str, Any]:
    """The operator's own AWS identity (pod identity on keda-operator): ``provider: aws``, ``identityOwner: keda``."""
    return {
        "apiVersion": API_VERSION,
        "kind": "TriggerAuthentication",
        "metadata": {"name": authentication_name(fleet), "namespace": SERVING_NAMESPACE, "labels": _labels(fleet)},
        "spec": {"podIdentity": {"provider": "aws", "identityOwner": "keda"}},
    }


def scaled_object(
    *,
    fleet: str,
    region: str,
    load_balancer_full_name: str,
    target_group_full_name: str,
    requests_per_replica_per_minute: int,
    min_replicas: int,
    max_replicas: int,
    cooldown_seconds: int = 600,
) -> dict[str, Any]:
    """The fleet's Neuron Deployment scales to (requests per minute on its target group) / ``requests_per_replica``.

    The metric is the ALB's ``RequestCount`` (Sum over 60 s) with the TargetGroup and LoadBalancer dimensions: all
    requests the fleet served, on Neuron and GPU pods alike, so the demand does not shrink while the fleet spills
    (``RequestCountPerTarget`` averages over the GPU targets too). ``AverageValue``: replicas = metric / target.
    ``minMetricValue`` 0: with no traffic the ALB publishes nothing and the fleet falls to ``min_replicas``.
    """
    if not 1 <= max_replicas or min_replicas > max_replicas or min_replicas < 0:
        raise ValueError(f"replicas: min {min_replicas} and max {max_replicas} must satisfy 0 <= min <= max, max >= 1")
    if requests_per_replica_per_minute < 1:
        raise ValueError(f"requests_per_replica_per_minute: {requests_per_replica_per_minute} must be at least 1")
    trig = alb_metrics()["trigger"]
    period = int(trig["period_seconds"])
    dims = {"TargetGroup": target_group_full_name, "LoadBalancer": load_balancer_full_name}
    return {
        "apiVersion": API_VERSION,
        "kind": "ScaledObject",
        "metadata": {"name": neuron_deployment_name(fleet), "namespace": SERVING_NAMESPACE, "labels": _labels(fleet)},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": neuron_deployment_name(fleet)},
            "minReplicaCount": min_replicas,
            "maxReplicaCount": max_replicas,
            "pollingInterval": period,
            # A model takes minutes to load: scale in slowly.
            "cooldownPeriod": cooldown_seconds,
            "advanced": {
                "horizontalPodAutoscalerConfig": {
                    "behavior": {"scaleDown": {"stabilizationWindowSeconds": cooldown_seconds}},
                }
            },
            "triggers": [
                {
                    "type": "aws-cloudwatch",
                    "metricType": "AverageValue",
                    "authenticationRef": {"name": authentication_name(fleet)},
                    "metadata": {
                        "namespace": str(alb_metrics()["namespace"]),
                        "metricName": str(trig["metric"]),
                        "dimensionName": ";".join(trig["dimensions"]),
                        "dimensionValue": ";".join(dims[d] for d in trig["dimensions"]),
                        "metricStat": str(trig["statistic"]),
                        "metricStatPeriod": str(period),
                        # Complete minutes only (catalog alb_metrics.trigger): the window ends one period back.
                        "metricCollectionTime": str(int(trig["collection_periods"]) * period),
                        "metricEndTimeOffset": str(int(trig["end_time_offset_seconds"])),
                        "targetMetricValue": str(requests_per_replica_per_minute),
                        "minMetricValue": "0",
                        "awsRegion": region,
                    },
                }
            ],
        },
    }


def _labels(fleet: str) -> dict[str, str]:
    return {"app.kubernetes.io/part-of": "neuronkit", "app.kubernetes.io/component": "scaling", "neuronkit.io/fleet": fleet}


__all__ = ["alb_metrics", "chart_values", "facts", "scaled_object", "trigger_authentication"]
