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
# PersistentVolumeSpec keys that are not its volume source (core/v1 PersistentVolumeSpec inlines the source: csi, nfs,
# hostPath, local ...). The source is what ValidatePersistentVolumeUpdate freezes.
PV_SPEC_NOT_SOURCE = (
    "capacity",
    "accessModes",
    "claimRef",
    "persistentVolumeReclaimPolicy",
    "storageClassName",
    "mountOptions",
    "volumeMode",
    "nodeAffinity",
    "volumeAttributesClassName",
)


@dataclass(frozen=True)
class Immutable:
    kind: str  # "<group>/<Kind>", "" for the core group
    path: tuple[str, ...]
    source: str
    # Sub-paths of ``path`` an update may change (compared with them left out): "spec other than ...".
    mutable: tuple[tuple[str, ...], ...] = ()
    # The row holds only when the object as applied before has a value at this path (a rule with a condition).
    when: tuple[str, ...] = ()
    # How to make the change instead, when the generic way (a new name, or remove and add back) is not the one;
    # {namespace} and {name} name the object.
    instead: str = ""

    @property
    def field(self) -> str:
        dotted = ".".join(self.path)
        if not self.mutable:
            return dotted
        return f"{dotted} (other than {', '.join('.'.join(m) for m in self.mutable)})"

    def applies(self, before: dict[str, Any]) -> bool:
        return not self.when or _at(before, self.when) is not None


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
    Immutable(
        "elbv2.k8s.aws/TargetGroupBinding",
        ("spec", "ipAddressType"),
        "aws-load-balancer-controller v3.5.0 webhooks/elbv2/targetgroupbinding_validator.go checkImmutableFields",
    ),
    Immutable(
        "elbv2.k8s.aws/TargetGroupBinding",
        ("spec", "vpcId"),
        "aws-load-balancer-controller v3.5.0 webhooks/elbv2/targetgroupbinding_validator.go checkImmutableFields",
    ),
    Immutable(
        "/PersistentVolumeClaim",
        ("spec",),
        'kubernetes pkg/apis/core/validation ValidatePersistentVolumeClaimUpdate ("spec is immutable after creation '
        'except resources.requests and volumeAttributesClassName for bound claims"; volumeName may be set once)',
        (("resources", "requests"), ("volumeAttributesClassName",), ("volumeName",)),
    ),
    Immutable(
        "/PersistentVolume",
        ("spec",),
        'kubernetes pkg/apis/core/validation ValidatePersistentVolumeUpdate ("spec.persistentvolumesource is '
        'immutable after creation": the volume source, e.g. csi.volumeHandle and csi.volumeAttributes)',
        tuple((k,) for k in PV_SPEC_NOT_SOURCE),
    ),
    Immutable(
        "storage.k8s.io/StorageClass",
        ("parameters",),
        'kubernetes pkg/apis/storage/validation ValidateStorageClassUpdate ("updates to parameters are forbidden.")',
    ),
    Immutable(
        "storage.k8s.io/StorageClass",
        ("provisioner",),
        'kubernetes pkg/apis/storage/validation ValidateStorageClassUpdate ("updates to provisioner are forbidden.")',
    ),
    Immutable(
        "storage.k8s.io/StorageClass",
        ("reclaimPolicy",),
        'kubernetes pkg/apis/storage/validation ValidateStorageClassUpdate ("updates to reclaimPolicy are forbidden.")',
    ),
    Immutable(
        "storage.k8s.io/StorageClass",
        ("volumeBindingMode",),
        "kubernetes pkg/apis/storage/validation ValidateStorageClassUpdate (ValidateImmutableField volumeBindingMode)",
    ),
    # Kueue at the pinned version (catalog/eks.yaml training_jobs.kueue: v0.19.2, commit 8eab687, api kueue.x-k8s.io/
    # v1beta2). Kueue refuses these updates in two places: the CRDs' CEL rules (x-kubernetes-validations, which the API
    # server enforces) and its validating webhooks (pkg/webhooks). Only what an update of an applied object refuses:
    # Workloads are Kueue's own (created from a JobSet), never in a manifest, and not listed.
    Immutable(
        "kueue.x-k8s.io/LocalQueue",
        ("spec", "clusterQueue"),
        "kueue v0.19.2 apis/kueue/v1beta2/localqueue_types.go LocalQueueSpec.ClusterQueue "
        '(+kubebuilder:validation:XValidation:rule="self == oldSelf", message="field is immutable"; a CEL rule of the '
        "CRD, the API server refuses the update; there is no LocalQueue webhook at v0.19.2)",
        instead="delete the LocalQueue just before the deploy (kubectl -n {namespace} delete localqueue {name}; the jobs "
        "queued in it are not admitted until it is back), and the deploy's apply creates it pointing at the new "
        "ClusterQueue",
    ),
    Immutable(
        "kueue.x-k8s.io/ClusterQueue",
        ("spec", "concurrentAdmissionPolicy"),
        "kueue v0.19.2 pkg/webhooks/clusterqueue_webhook.go ValidateClusterQueueUpdate "
        "(ValidateImmutableField spec.concurrentAdmissionPolicy; the rest of the spec is validated as on create)",
    ),
    Immutable(
        "kueue.x-k8s.io/ResourceFlavor",
        ("spec", "nodeLabels"),
        'kueue v0.19.2 apis/kueue/v1beta2/resourceflavor_types.go ResourceFlavorSpec (XValidation "nodeLabels are '
        'immutable when topologyName is set"; the webhook, resourceflavor_webhook.go ValidateUpdate, checks the new '
        "object only)",
        when=("spec", "topologyName"),
    ),
    Immutable(
        "kueue.x-k8s.io/ResourceFlavor",
        ("spec", "tolerations"),
        'kueue v0.19.2 apis/kueue/v1beta2/resourceflavor_types.go ResourceFlavorSpec (XValidation "tolerations are '
        'immutable when topologyName is set")',
        when=("spec", "topologyName"),
    ),
    Immutable(
        "kueue.x-k8s.io/ResourceFlavor",
        ("spec", "topologyName"),
        'kueue v0.19.2 apis/kueue/v1beta2/resourceflavor_types.go ResourceFlavorSpec (XValidation "topologyName is '
        'immutable when topologyName is set")',
        when=("spec", "topologyName"),
    ),
    Immutable(
        "kueue.x-k8s.io/Topology",
        ("spec", "levels"),
        'kueue v0.19.2 apis/kueue/v1beta2/topology_types.go TopologySpec.Levels (XValidation rule="self == oldSelf", '
        'message="field is immutable")',
    ),
    Immutable(
        "kueue.x-k8s.io/AdmissionCheck",
        ("spec", "controllerName"),
        "kueue v0.19.2 apis/kueue/v1beta2/admissioncheck_types.go AdmissionCheckSpec.ControllerName (XValidation "
        'rule="self == oldSelf", message="field is immutable")',
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
    instead: str = ""

    @property
    def how_instead(self) -> str:
        """How to make the change instead, in one line: the row's own way, else a new name or two deploys."""
        if self.instead:
            return self.instead.format(namespace=self.namespace or "default", name=self.name)
        return (
            "give the object a new name (the kit derives Job and binding names from their content), or remove it in "
            "one deploy and add it back in the next"
        )

    def line(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return (
            f"{self.stack}: {self.kind} {where}: {self.field} cannot change under the same name ({self.source}); "
            f"instead {self.how_instead}"
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


def _without(value: Any, paths: tuple[tuple[str, ...], ...]) -> Any:
    """``value`` with each sub-path in ``paths`` left out (a deep copy)."""
    out = json.loads(json.dumps(value))
    for path in paths:
        parent = _at(out, path[:-1]) if isinstance(out, dict) else None
        if isinstance(parent, dict):
            parent.pop(path[-1], None)
    return out


def _frozen(doc: dict[str, Any], row: Immutable) -> Any:
    return _without(_at(doc, row.path), row.mutable) if row.mutable else _at(doc, row.path)


def applied_by(template: dict[str, Any]) -> dict[tuple[str, str, str], str]:
    """(group/Kind, namespace, name) -> the logical ID of the manifest resource that applies it."""
    out: dict[tuple[str, str, str], str] = {}
    for lid, r in (template.get("Resources") or {}).items():
        if r.get("Type") == MANIFEST:
            for key in applied_objects({"Resources": {lid: r}}):
                out[key] = lid
    return out


def conflicts(
    stack: str, before: dict[str, Any], after: dict[str, Any], replaced: frozenset[str] = frozenset()
) -> list[Conflict]:
    """Each object both templates apply under one name whose immutable field differs; ``replaced``: logical IDs of the
    stack's resources the update replaces (their references take new values)."""
    old, new = applied_objects(before), applied_objects(after, replaced)
    out = []
    for key in sorted(old.keys() & new.keys()):
        for row in (r for r in IMMUTABLE if r.kind == key[0] and r.applies(old[key])):
            if _frozen(old[key], row) != _frozen(new[key], row):
                out.append(Conflict(stack, key[0].lstrip("/"), key[1], key[2], row.field, row.source, row.instead))
    return out


__all__ = ["IMMUTABLE", "Conflict", "Immutable", "applied_by", "applied_objects", "conflicts"]
