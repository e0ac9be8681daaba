"""Offline validation of any manifest the kit applies: core kinds against the pinned Kubernetes version's schema
(kubernetes-validate, strict), custom resources against the schemas checked in with their version and source:

- ``elbv2.k8s.aws`` TargetGroupBinding: neuronkit/kubernetes/crds/ (aws-load-balancer-controller, the chart's app);
- ``jobset.x-k8s.io`` and ``kueue.x-k8s.io``: neuronkit/kubernetes/crds/*.json (JobSet and Kueue at their pins);
- ``keda.sh``: tests/fixtures/crds/keda-<version>/ (KEDA at its pin).

A kind of an API group not listed here fails: a new custom resource comes with its schema.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate

from neuronkit import catalog
from neuronkit.kubernetes import load_balancer_controller as lbc

ROOT = Path(__file__).parents[1]
KUBERNETES = str(catalog.eks_facts()["kubernetes"]["version"])
_KIT_CRDS = ROOT / "neuronkit" / "kubernetes" / "crds"


def strict(schema: Any) -> Any:
    """A CRD's structural schema with unknown fields refused (the API server would prune them silently)."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [strict(v) for v in schema]
    return schema


def _keda(kind: str) -> dict[str, Any]:
    facts = catalog.eks_facts()["keda"]
    name = {"ScaledObject": "scaledobjects", "TriggerAuthentication": "triggerauthentications"}[kind]
    data: dict[str, Any] = json.loads((ROOT / str(facts["crds"]["schemas"]) / f"{name}.json").read_text())
    assert data["chart_version"] == facts["version"], "the KEDA schemas are of the pinned chart"
    return dict(data["schema"])


def validate(doc: dict[str, Any]) -> None:
    """Raise when ``doc`` does not validate against its kind's pinned schema."""
    group = doc["apiVersion"].split("/")[0] if "/" in doc["apiVersion"] else ""
    if group == "elbv2.k8s.aws":
        jsonschema.validate(doc, lbc.target_group_binding_schema(doc["apiVersion"].split("/")[1]))
    elif group in ("jobset.x-k8s.io", "kueue.x-k8s.io"):
        version = doc["apiVersion"].split("/")[1]
        crd = json.loads((_KIT_CRDS / f"{group}_{doc['kind'].lower()}_{version}.json").read_text())
        jsonschema.Draft7Validator(strict(crd["openAPIV3Schema"])).validate(doc)
    elif group == "keda.sh":
        jsonschema.validate(doc, _keda(doc["kind"]))
    elif "." in group and not group.endswith(".k8s.io"):
        raise AssertionError(f"{doc['apiVersion']} {doc['kind']}: no checked-in schema for this custom resource")
    else:
        kubernetes_validate.validate(doc, KUBERNETES, strict=True)
