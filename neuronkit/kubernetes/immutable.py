"""Kubernetes fields an update cannot change, and the applied objects of two templates that would change one (issue 47).

aws-cdk-lib's kubectl handler re-applies a changed manifest with ``kubectl apply``: an object that keeps its name but
changes an immutable field is refused by the API server (or a controller's webhook) and the stack rolls back. Each row
of :data:`IMMUTABLE` names its source. :func:`conflicts` compares the objects two synthesized templates apply (by kind,
namespace and name) and returns each such change: ``neuronkit review`` prints them as "cannot update".
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"


@dataclass(frozen=True)
class Immutable:
    kind: str  # "<group>/<Kind>", "" for the core group
    path: tuple[str, ...]
    source: str


IMMUTABLE: tuple[Immutable, ...] = (
    Immutable(
        "batch/Job",
        ("spec", "template"),
        "kubernetes pkg/apis/batch/validation ValidateJobSpecUpdate (ValidateImmutableField spec.template)",
    ),
    Immutable(
        "batch/Job",
        ("spec", "selector"),
        "kubernetes pkg/apis/batch/validation ValidateJobSpecUpdate (ValidateImmutableField spec.selector)",
    ),
    Immutable(
        "apps/Deployment",
        ("spec", "selector"),
        "Kubernetes documentation, Deployments: \"In API version apps/v1, a Deployment's label selector is "
        'immutable after it gets created"',
    ),
    Immutable(
        "apps/StatefulSet",
        ("spec", "selector"),
        "kubernetes pkg/apis/apps/validation ValidateStatefulSetUpdate (updates may only change replicas, "
        "template, updateStrategy, persistentVolumeClaimRetentionPolicy, minReadySeconds, ordinals)",
    ),
    Immutable(
        "/Service",
        ("spec", "clusterIP"),
        'Kubernetes API reference, ServiceSpec.clusterIP: "may not be changed through updates unless the type '
        'field is also changed to ExternalName"',
    ),
    Immutable(
        "elbv2.k8s.aws/TargetGroupBinding",
        ("spec", "targetGroupARN"),
        "aws-load-balancer-controller v3.5.0 webhooks/elbv2/targetgroupbinding_validator.go checkImmutableFields",
    ),
    Immutable(
        "elbv2.k8s.aws/TargetGroupBinding",
        ("spec", "targetType"),
        "aws-load-balancer-controller v3.5.0 webhooks/elbv2/targetgroupbinding_validator.go checkImmutableFields",
    ),
)


@dataclass(frozen=True)
class Conflict:
    """An object applied under the same name with an immutable field changed: the update cannot succeed."""

    stack: str
    kind: str
    namespace: str
    name: str
    field: str
    source: str

    def line(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return (
            f"{self.stack}: {self.kind} {where}: {self.field} cannot change under the same name ({self.source}); "
            "instead give the object a new name (the kit derives Job and binding names from their content), or remove "
            "it in one deploy and add it back in the next"
        )


def _targets(intrinsic: Any) -> set[str]:
    """Logical IDs an intrinsic reads (Ref, Fn::GetAtt), at any depth."""
    if isinstance(intrinsic, list):
        return set().union(*(_targets(v) for v in intrinsic)) if intrinsic else set()
    if not isinstance(intrinsic, dict):
        return set()
    out = {str(intrinsic["Ref"])} if "Ref" in intrinsic else set()
    if "Fn::GetAtt" in intrinsic:
        att = intrinsic["Fn::GetAtt"]
        out.add(str(att[0] if isinstance(att, list) else str(att).split(".")[0]))
    return out.union(*(_targets(v) for k, v in intrinsic.items() if k not in ("Ref", "Fn::GetAtt")))


def _placeholder(intrinsic: Any, replaced: frozenset[str]) -> str:
    """A deploy-time part as a string that differs per intrinsic (two templates' same reference reads the same), and
    differs again when it reads a resource the update replaces (a replaced target group has a new ARN)."""
    digest = hashlib.sha256(json.dumps(intrinsic, sort_keys=True).encode()).hexdigest()[:12]
    return f"deploy-time-{digest}" + ("-replaced" if _targets(intrinsic) & replaced else "")


def applied_objects(
    template: dict[str, Any], replaced: frozenset[str] = frozenset()
) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(group/Kind, namespace, name) -> object, for every object the template's kubectl manifests apply; deploy-time
    values read from a ``replaced`` resource (logical IDs) are marked as new."""
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for r in (template.get("Resources") or {}).values():
        if r.get("Type") != MANIFEST:
            continue
        text = (r.get("Properties") or {}).get("Manifest")
        if isinstance(text, dict) and "Fn::Join" in text:
            sep, parts = text["Fn::Join"]
            text = sep.join(p if isinstance(p, str) else _placeholder(p, replaced) for p in parts)
        try:
            docs = json.loads(text) if isinstance(text, str) else []
        except json.JSONDecodeError:
            continue
        for d in docs if isinstance(docs, list) else []:
            if not isinstance(d, dict) or "kind" not in d:
                continue
            group = str(d.get("apiVersion", "")).rpartition("/")[0]
            meta = d.get("metadata") or {}
            out[(f"{group}/{d['kind']}", str(meta.get("namespace", "")), str(meta.get("name", "")))] = d
    return out


def _at(doc: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = doc
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def conflicts(
    stack: str, before: dict[str, Any], after: dict[str, Any], replaced: frozenset[str] = frozenset()
) -> list[Conflict]:
    """Each object both templates apply under one name whose immutable field differs; ``replaced``: logical IDs of the
    stack's resources the update replaces (their references take new values)."""
    old, new = applied_objects(before), applied_objects(after, replaced)
    out = []
    for key in sorted(old.keys() & new.keys()):
        for row in (r for r in IMMUTABLE if r.kind == key[0]):
            if _at(old[key], row.path) != _at(new[key], row.path):
                out.append(Conflict(stack, key[0].lstrip("/"), key[1], key[2], ".".join(row.path), row.source))
    return out


__all__ = ["IMMUTABLE", "Conflict", "Immutable", "applied_objects", "conflicts"]
