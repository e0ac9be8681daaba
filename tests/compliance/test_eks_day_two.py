"""Day two on the EKS example (issue 47): ordinary changes to a running environment, each synthesized on top of the
example and compared with it. Every test here names the update failure it guards against; none is a snapshot.

The kit's manifests are re-applied whole on every update by aws-cdk-lib's kubectl handler (``kubectl apply``, with
``--prune``), so what matters is what each change does to the names and fields of the objects re-applied."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from neuronkit.config.loader import parse_environment
from neuronkit.constructs.eks.nodegroup_name import prefix_of
from tests.conftest import ROOT, pinned_app
from tests.templates import group_name

FILE = ROOT / "examples" / "environments" / "eks.yaml"
STACK = "eks-eks"


def _synth(tmp: Path, **chat: Any) -> dict[str, Any]:
    """The example's EKS stack template, with the chat fleet's keys changed as given."""
    from neuronkit.stacks import build_environment

    data = yaml.safe_load(FILE.read_text())
    fleet = next(f for f in data["inference"] if f["name"] == "chat")
    fleet.update(chat)
    env = parse_environment(data, "examples/environments/eks.yaml")
    app, _ = pinned_app(lambda a: build_environment(a, env), tmp)
    template: dict[str, Any] = next(s.template for s in app.synth().stacks if s.stack_name == STACK)
    return template


@pytest.fixture(scope="module")
def synths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """The example and the example after one ordinary change each."""
    data = yaml.safe_load(FILE.read_text())
    chat = next(f for f in data["inference"] if f["name"] == "chat")
    health = dict(chat.get("health_check") or {})
    changes: dict[str, dict[str, Any]] = {
        "base": {},
        "again": {},
        "health_path": {"health_check": {**health, "path": "/v1/health"}},
        "port": {"port": 9090, "health_check": {**health, "port": 9090}},
        "min_size": {"min_size": int(chat["min_size"]) + 1},
    }
    return {name: _synth(tmp_path_factory.mktemp(name), **change) for name, change in changes.items()}


def _placeholder(intrinsic: dict[str, Any]) -> str:
    """A deploy-time part of a manifest (a reference, an attribute) as a string that differs per intrinsic."""
    return "deploy-time-" + hashlib.sha256(json.dumps(intrinsic, sort_keys=True).encode()).hexdigest()[:12]


def _documents(template: dict[str, Any]) -> list[dict[str, Any]]:
    """Every manifest document the stack applies through the kubectl handler, deploy-time parts as placeholders."""
    docs: list[dict[str, Any]] = []
    for r in template["Resources"].values():
        if r["Type"] != "Custom::AWSCDK-EKS-KubernetesResource":
            continue
        m = r["Properties"]["Manifest"]
        if isinstance(m, dict):
            m = "".join(p if isinstance(p, str) else _placeholder(p) for p in m["Fn::Join"][1])
        docs.extend(json.loads(m))
    return docs


def _names(template: dict[str, Any], kind: str) -> list[str]:
    """The names of ``kind`` objects of the fleet ``chat`` (the one the changes above touch; chat-trn2 beside it)."""
    return sorted(
        d["metadata"]["name"]
        for d in _documents(template)
        if d["kind"] == kind and d["metadata"]["name"].startswith("chat-") and not d["metadata"]["name"].startswith("chat-trn2")
    )


# --- fix 1: the compile Job's identity covers its pod template --------------------------------------------------------
def test_a_health_path_change_names_a_new_compile_job(synths: dict[str, dict[str, Any]]) -> None:
    """A Job's spec.template is immutable; the same name with a new health path would be refused on apply."""
    base, again, moved = (_names(synths[k], "Job") for k in ("base", "again", "health_path"))
    assert base and base == again
    assert set(moved).isdisjoint(base)


# --- fix 2: a replaced target group comes with a new binding -----------------------------------------------------------
def test_a_port_change_replaces_the_target_group_and_names_a_new_binding(synths: dict[str, dict[str, Any]]) -> None:
    """The load balancer controller refuses a change of a binding's spec.targetGroupARN: a port change replaces the
    target group (Port is create-only), so the binding must be a new object; a health path change replaces nothing
    and must keep the binding (a second binding on the same group is refused on create)."""
    base, again, port, health = (_names(synths[k], "TargetGroupBinding") for k in ("base", "again", "port", "health_path"))
    assert len(base) == 1 and base == again == health
    assert len(port) == 1 and port != base


# --- fix 4: a min_size change never resizes an autoscaled node group ---------------------------------------------------
def _desired(template: dict[str, Any]) -> dict[str, Any]:
    return {
        group_name(r): r["Properties"]["ScalingConfig"].get("DesiredSize")
        for r in template["Resources"].values()
        if r["Type"] == "AWS::EKS::Nodegroup"
    }


def test_a_min_size_change_changes_no_desired_size_in_any_template(synths: dict[str, dict[str, Any]]) -> None:
    """aws-cdk-lib writes DesiredSize = min_size: raising min_size resized a group Cluster Autoscaler had scaled out
    and terminated serving nodes. The autoscaled groups' DesiredSize is the deploy-time answer of the kit's size
    function (clamp(current, min, max)), the same text whatever min_size is."""
    base, raised = synths["base"], synths["min_size"]
    assert _desired(base) == _desired(raised)
    assert isinstance(_desired(base)["eks-chat"], dict) and "Fn::GetAtt" in _desired(base)["eks-chat"]
    mins = {group_name(r): r["Properties"]["ScalingConfig"]["MinSize"]
            for r in raised["Resources"].values() if r["Type"] == "AWS::EKS::Nodegroup"}  # fmt: skip
    assert mins["eks-chat"] == _min_of(base, "eks-chat") + 1  # the change is really there
    sizes = [r["Properties"] for r in raised["Resources"].values() if r["Type"] == "Custom::NeuronkitNodegroupDesiredSize"]
    assert {prefix_of(s["NodegroupName"]) for s in sizes} >= {"eks-chat", "eks-chat-gpu"}
    assert next(s for s in sizes if prefix_of(s["NodegroupName"]) == "eks-chat")["MinSize"] == mins["eks-chat"]


def _min_of(template: dict[str, Any], group: str) -> int:
    return int(next(r["Properties"]["ScalingConfig"]["MinSize"] for r in template["Resources"].values()
                    if r["Type"] == "AWS::EKS::Nodegroup" and group_name(r) == group))  # fmt: skip


# --- fix 3: what a controller owns is in no re-applied manifest --------------------------------------------------------
def _owned(template: dict[str, Any]) -> set[str]:
    """Deployments a controller scales: KEDA ScaledObjects' targets and the spill functions' GPU Deployments."""
    owned = {d["spec"]["scaleTargetRef"]["name"] for d in _documents(template) if d["kind"] == "ScaledObject"}
    for r in template["Resources"].values():
        env = r["Properties"].get("Environment", {}).get("Variables", {}) if r["Type"] == "AWS::Lambda::Function" else {}
        if "GPU_DEPLOYMENTS" in env:  # every GPU fallback type's Deployment (issue 49)
            owned.update(n for n in str(env["GPU_DEPLOYMENTS"]).split(",") if n)
    return owned


def test_no_reapplied_manifest_holds_the_replicas_of_a_deployment_a_controller_owns(
    synths: dict[str, dict[str, Any]],
) -> None:
    """aws-cdk-lib's kubectl handler re-applies a manifest whenever it changes: one holding ``replicas`` of a
    Deployment KEDA or the spill controller scales resets it on every deploy (a deploy during a spill took the GPU
    pods to 0). A manifest may hold them only if it is created once and never re-applied: ``kubectl create``
    (Overwrite false) and the same text after every change of the table."""
    base = synths["base"]
    owned = _owned(base)
    assert {"chat-neuron", "chat-gpu"} <= owned
    seen = 0
    for logical, r in base["Resources"].items():
        if r["Type"] != "Custom::AWSCDK-EKS-KubernetesResource":
            continue
        docs = json.loads(r["Properties"]["Manifest"]) if isinstance(r["Properties"]["Manifest"], str) else None
        text = json.dumps(r["Properties"]["Manifest"])
        holding = [d for d in (docs or _documents({"Resources": {logical: r}}))
                   if d["kind"] == "Deployment" and d["metadata"]["name"] in owned]  # fmt: skip
        if not holding:
            continue
        seen += len(holding)
        if all("replicas" not in d["spec"] for d in holding):
            continue
        assert r["Properties"].get("Overwrite") is False, f"{logical}: applies owned replicas"
        for name, other in synths.items():
            assert json.dumps(other["Resources"][logical]["Properties"]["Manifest"]) == text, f"{logical} changes ({name})"
    assert seen >= 2
    for r in base["Resources"].values():
        if r["Type"] == "Custom::AWSCDK-EKS-KubernetesPatch":
            assert "replicas" not in json.dumps(r["Properties"]["ApplyPatchJson"])


# --- the update plan's Kubernetes part: immutable fields under an unchanged name ---------------------------------------
def _with_manifest_text(template: dict[str, Any], old: str, new: str) -> dict[str, Any]:
    """``template`` with ``old`` replaced by ``new`` in the text of its kubectl manifests."""
    out = json.loads(json.dumps(template))
    for r in out["Resources"].values():
        if r["Type"] == "Custom::AWSCDK-EKS-KubernetesResource":
            r["Properties"]["Manifest"] = json.loads(json.dumps(r["Properties"]["Manifest"]).replace(old, new))
    return out


def test_the_kits_own_changes_leave_no_object_that_cannot_update(synths: dict[str, dict[str, Any]]) -> None:
    from neuronkit.kubernetes import immutable

    base = synths["base"]
    assert len([k for k in immutable.applied_objects(base) if k[0] == "batch/Job"]) >= 1
    from neuronkit.reports.review import compare_templates

    for name in ("again", "health_path", "port", "min_size"):
        changes = compare_templates({STACK: base}, {STACK: synths[name]})
        replaced = frozenset(c.logical_id for c in changes if c.action == "replaced")
        assert immutable.conflicts(STACK, base, synths[name], replaced) == [], name


def test_an_injected_template_change_under_the_same_job_name_cannot_update(synths: dict[str, dict[str, Any]]) -> None:
    """As if fix 1 were reverted: the health path changes inside the compile Job, its name does not. And as if fix 2
    were: the port's new target group under the old binding name. Each is "cannot update", naming field and source."""
    from neuronkit.kubernetes import immutable
    from neuronkit.reports.review import Review, render

    base = synths["base"]
    (job,) = _names(base, "Job")
    injected = _with_manifest_text(base, "/health 2>", "/v1/health 2>")
    found = [c for c in immutable.conflicts(STACK, base, injected) if c.name.startswith("chat-") and "trn2" not in c.name]
    assert [(c.kind, c.name, c.field) for c in found] == [("batch/Job", job, "spec.template")]
    assert "ValidateJobSpecUpdate" in found[0].line() and "new name" in found[0].line()
    (old_binding,), (new_binding,) = _names(base, "TargetGroupBinding"), _names(synths["port"], "TargetGroupBinding")
    same_name = _with_manifest_text(synths["port"], new_binding, old_binding)
    from neuronkit.reports.review import compare_templates

    replaced = frozenset(c.logical_id for c in compare_templates({STACK: base}, {STACK: same_name}) if c.action == "replaced")
    assert any("PodTargets" in r for r in replaced)  # Port is create-only: the target group is replaced
    bound = immutable.conflicts(STACK, base, same_name, replaced)
    assert ("elbv2.k8s.aws/TargetGroupBinding", old_binding, "spec.targetGroupARN") in [(c.kind, c.name, c.field) for c in bound]
    assert any("targetgroupbinding_validator.go" in c.source for c in bound)
    text = render(Review(base="HEAD", cannot_update=[c.line() for c in found]))
    assert text.splitlines()[2] == "### Cannot update" and job in text


def test_review_exits_non_zero_when_an_object_cannot_update(monkeypatch: pytest.MonkeyPatch, capsys: Any) -> None:
    """`neuronkit review` prints "Cannot update" first and fails the command, as it does for a lost stateful resource."""
    import argparse

    from neuronkit.cli import review_cmd
    from neuronkit.reports import review

    line = "eks-eks: batch/Job neuronkit-serving/chat-compile-0: spec.template cannot change under the same name (...)"
    monkeypatch.setattr(review, "review", lambda base, repo, envs=None: review.Review(base=base, cannot_update=[line]))
    args = argparse.Namespace(base="HEAD", env=None, output=None)
    assert review_cmd.run(args) == 1
    assert "### Cannot update" in capsys.readouterr().out
    monkeypatch.setattr(review, "review", lambda base, repo, envs=None: review.Review(base=base))
    assert review_cmd.run(args) == 0


def _binding_resources(template: dict[str, Any]) -> dict[str, list[str]]:
    """Logical id -> the kinds of each manifest resource that holds a TargetGroupBinding."""
    out = {}
    for lid, r in template["Resources"].items():
        if r["Type"] != "Custom::AWSCDK-EKS-KubernetesResource":
            continue
        m = r["Properties"]["Manifest"]
        text = m if isinstance(m, str) else "".join(p if isinstance(p, str) else _placeholder(p) for p in m["Fn::Join"][1])
        kinds = [d["kind"] for d in json.loads(text)]
        if "TargetGroupBinding" in kinds:
            out[lid] = kinds
    return out


def test_a_replaced_target_group_deletes_the_old_binding_through_cloudformation(synths: dict[str, dict[str, Any]]) -> None:
    """`kubectl apply --prune` without an allowlist prunes built-in kinds only, so the old binding would stay bound to a
    deleted target group (review of issue 47): each binding is a manifest resource of its own whose logical id changes
    with the binding's name, so CloudFormation deletes the old one."""
    base, again, port = (_binding_resources(synths[k]) for k in ("base", "again", "port"))
    assert base and all(kinds == ["TargetGroupBinding"] for kinds in base.values())
    assert set(base) == set(again)
    chat = {lid for lid in base if "Servingchat" in lid and "trn2" not in lid}
    moved = {lid for lid in port if "Servingchat" in lid and "trn2" not in lid}
    assert len(chat) == len(moved) == 1 and chat != moved


def test_review_lists_the_kubernetes_objects_a_change_of_the_example_adds_alters_and_removes(
    synths: dict[str, dict[str, Any]],
) -> None:
    """`neuronkit review`'s object list on the example (issue 47): the same file lists nothing; a health path change
    adds a compile Job (with its images) and removes the old one, and changes the Neuron Deployment's pod template (the
    probe, not the image) and the GPU Deployment's through its patch; a port change adds a binding and removes one."""
    from neuronkit.kubernetes.report import object_changes

    def of(name: str) -> dict[tuple[str, str, str], Any]:
        changes = object_changes({STACK: synths["base"]}, {STACK: synths[name]}, [STACK])
        return {(c.kind, c.action, c.name): c for c in changes}

    assert of("again") == {}
    health = of("health_path")
    jobs = {(a, n): c for (k, a, n), c in health.items() if k == "Job"}
    assert sorted(a for a, _ in jobs) == ["added", "removed"]
    (added,) = [c for (a, _), c in jobs.items() if a == "added"]
    assert added.namespace == "neuronkit-serving" and any(d.startswith("image ") for d in added.details)
    changed = {n: c for (k, a, n), c in health.items() if k == "Deployment" and a == "changed"}
    assert {"chat-neuron", "chat-gpu"} <= set(changed)
    assert all("spec.template changed" in c.details for n, c in changed.items() if n in ("chat-neuron", "chat-gpu"))
    port = of("port")
    assert sorted(a for (k, a, _) in port if k == "TargetGroupBinding") == ["added", "removed"]
    assert not [c for (k, _, _), c in port.items() if k in ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")]
