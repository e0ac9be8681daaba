"""The EFA device plugin chart (eks-charts ``aws-efa-k8s-device-plugin``): pods ask for ``vpc.amazonaws.com/efa``.

Pinned in ``neuronkit/catalog/eks.yaml`` (``charts.efa_device_plugin``). The chart runs only on the EFA instance
types of its own list (``supportedInstanceLabels``) and not on Auto Mode nodes; the kit adds the tolerations of
its EFA node groups' taints and sets no image tag (the chart's appVersion is its pin).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from neuronkit import catalog
from neuronkit.kubernetes.neuron_chart import Taint

EFA_RESOURCE = "vpc.amazonaws.com/efa"


def chart_facts() -> dict[str, Any]:
    facts: dict[str, Any] = catalog.eks_facts()["charts"]["efa_device_plugin"]
    return facts


def values(taints: Iterable[Taint] = ()) -> dict[str, Any]:
    """Tolerations for the EFA node groups' taints (the chart always tolerates CriticalAddonsOnly itself)."""
    tol: list[dict[str, str]] = []
    for t in taints:
        item = t.toleration()
        if item not in tol:
            tol.append(item)
    return {"tolerations": tol}


__all__ = ["EFA_RESOURCE", "chart_facts", "values"]
