"""`neuronkit review`'s Kubernetes object list (issue 47), on hand-made template pairs: per object the change adds,
alters or removes, its images, added capabilities, RBAC rules and subjects, and replicas (before -> after); printed
after the update plan. The EKS example's case is in tests/compliance/test_eks_day_two.py."""

from __future__ import annotations

import copy
import json
from typing import Any

from neuronkit.kubernetes.report import MANIFEST, PATCH, ObjectChange, object_changes
from neuronkit.reports import review

STACK = "dev-eks"


def _template(
    *docs: dict[str, Any], patches: dict[str, Any] | None = None, charts: dict[str, str] | None = None
) -> dict[str, Any]:
    resources: dict[str, Any] = {"M": {"Type": MANIFEST, "Properties": {"Manifest": json.dumps(list(docs))}}}
    for name, template in (patches or {}).items():
        resources[f"P{name}"] = {"Type": PATCH, "Properties": {
            "ResourceName": f"deployment/{name}", "ResourceNamespace": "apps",
            "ApplyPatchJson": json.dumps([{"op": "add", "path": "/spec/template", "value": template}])}}  # fmt: skip
    for chart, version in (charts or {}).items():
        resources[f"C{chart}"] = {"Type": "Custom::AWSCDK-EKS-HelmChart", "Properties": {
            "Chart": chart, "Release": chart, "Version": version, "Namespace": "kube-system", "Repository": "oci://r"}}  # fmt: skip
    return {"Resources": resources}


def _deployment(image: str = "repo/server:1", replicas: int | None = 2, caps: list[str] | None = None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "server", "image": image}
    if caps:
        container["securityContext"] = {"capabilities": {"add": caps}}
    spec: dict[str, Any] = {"selector": {"matchLabels": {"app": "a"}},
                            "template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": [container]}}}  # fmt: skip
    if replicas is not None:
        spec["replicas"] = replicas
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "api", "namespace": "apps"}, "spec": spec}


def _role(*rules: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", "metadata": {"name": "r", "namespace": "apps"},
            "rules": list(rules)}  # fmt: skip


def _binding(*users: str) -> dict[str, Any]:
    return {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding", "metadata": {"name": "b", "namespace": "apps"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "r"},
            "subjects": [{"kind": "User", "name": u} for u in users]}  # fmt: skip


READ = {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]}
EXEC = {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create"]}


def _changes(before: dict[str, Any], after: dict[str, Any]) -> list[ObjectChange]:
    return object_changes({STACK: before}, {STACK: after}, [STACK])


def test_an_image_change_a_capability_and_replicas_are_named_before_and_after() -> None:
    (c,) = _changes(_template(_deployment()), _template(_deployment("repo/server:2", 3, ["NET_ADMIN"])))
    assert (c.kind, c.namespace, c.name, c.action) == ("Deployment", "apps", "api", "changed")
    assert c.details == (
        "image server: repo/server:1 -> repo/server:2",
        "capabilities added to server: NET_ADMIN",
        "replicas 2 -> 3",
    )


def test_replicas_left_to_a_controller_read_as_unset() -> None:
    (c,) = _changes(_template(_deployment(replicas=0)), _template(_deployment(replicas=None)))
    assert c.details == ("replicas 0 -> unset (kept by its controller)",)


def test_an_rbac_rule_and_a_subject_added_are_listed_and_an_unchanged_object_is_not() -> None:
    changes = _changes(_template(_role(READ), _binding("alice"), _deployment()),
                       _template(_role(READ, EXEC), _binding("alice", "bob"), _deployment()))  # fmt: skip
    by_kind = {c.kind: c for c in changes}
    assert sorted(by_kind) == ["Role", "RoleBinding"]
    assert by_kind["Role"].details == ('rule added: create on pods/exec ("")',)
    assert by_kind["RoleBinding"].details == ("subject added: User bob",)


def test_added_and_removed_objects_and_a_chart_bump() -> None:
    changes = _changes(_template(_role(READ), charts={"kueue": "0.19.1"}), _template(_deployment(), charts={"kueue": "0.19.2"}))
    lines = {c.kind: c.line() for c in changes}
    assert lines["Deployment"] == "Deployment apps/api added: image server: repo/server:1; replicas 2"
    assert lines["Role"] == "Role apps/r removed"
    assert lines["Helm chart"] == "Helm chart kube-system/kueue changed: chart kueue 0.19.1 -> 0.19.2"


def test_a_patched_template_is_what_the_deployment_runs() -> None:
    """A Deployment a controller scales is seeded once with a stand-in and kept by a patch: its image is the patch's."""
    seed = _deployment("registry.k8s.io/pause:3.10", 0)
    running = _deployment("repo/gpu:1")["spec"]["template"]
    bumped = copy.deepcopy(running)
    bumped["spec"]["containers"][0]["image"] = "repo/gpu:2"
    (c,) = _changes(_template(seed, patches={"api": running}), _template(seed, patches={"api": bumped}))
    assert c.details == ("image server: repo/gpu:1 -> repo/gpu:2",)


def test_review_prints_the_objects_after_the_plan() -> None:
    changes = _changes(_template(_deployment()), _template(_deployment("repo/server:2")))
    from neuronkit.reports import plan

    step = plan.Step(STACK, "M", MANIFEST, plan.IN_PLACE, "kubectl apply")
    result = review.Review(base="HEAD", environment_of={STACK: "dev"}, kubernetes=changes, plan=[step],
                           environments=[review.EnvChanges("dev")])  # fmt: skip
    text = review.render(result)
    heads = [line for line in text.splitlines() if line.startswith("###")]
    assert heads[:5] == ["### Update plan", "#### dev", "### Kubernetes objects", "#### dev", "### What changes"]
    assert "- dev-eks: Deployment apps/api changed: image server: repo/server:1 -> repo/server:2" in text
