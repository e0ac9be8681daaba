"""The day-two table (issue 47): ordinary changes to a running environment, each a fixture diff of an example
environment file, with the update plan's expected class per resource asserted (a table, not a snapshot).

Each row edits the EKS example (``examples/environments/eks.yaml``) or prod (``environments/prod.yaml``, the Auto
Scaling path), synthesizes every stack of the environment before and after, and runs
:func:`neuronkit.reports.plan.plan` over the two, as ``neuronkit review`` does. ``EXPECT`` names, per row, resources
by type and a part of their logical ID or name, and the class each must get; any "cannot update" a row does not expect
fails it. Every row was checked only against documentation and source (docs/eks.md, "Day two"): no row claims an
update succeeds on AWS.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from neuronkit.config.loader import parse_environment
from neuronkit.reports import plan as planner
from neuronkit.reports import review
from tests.conftest import ROOT, pinned_app

EKS = ROOT / "examples" / "environments" / "eks.yaml"
PROD = ROOT / "environments" / "prod.yaml"
Data = dict[str, Any]


def _fleet(data: Data, name: str) -> Data:
    fleet: Data = next(f for f in data["inference"] if f["name"] == name)
    return fleet


def _set(path: str, value: Any) -> Callable[[Data], None]:
    """An edit: set a dotted key (``inference.chat.min_size``: a list entry by its name)."""

    def edit(data: Data) -> None:
        node: Any = data
        parts = path.split(".")
        for part in parts[:-1]:
            node = next(x for x in node if x["name"] == part) if isinstance(node, list) else node.setdefault(part, {})
        node[parts[-1]] = value

    return edit


def _add_fleet(data: Data) -> None:
    new = copy.deepcopy(_fleet(data, "chat"))
    new.update(name="chat2", fallback_types=[])
    new.pop("fallback_types")
    data["inference"].append(new)


def _remove(name: str) -> Callable[[Data], None]:
    def edit(data: Data) -> None:
        data["inference"] = [f for f in data["inference"] if f["name"] != name]

    return edit


def _add_training(data: Data) -> None:
    data["training"].append({"name": "finetune", "instance_type": "trn2.48xlarge", "az_id": data["network"]["az_ids"][0],
                             "min_size": 0, "max_size": 2})  # fmt: skip


def _health(fleet: str, path: str) -> Callable[[Data], None]:
    def edit(data: Data) -> None:
        f = _fleet(data, fleet)
        f["health_check"] = {**(f.get("health_check") or {}), "path": path}

    return edit


def _port(fleet: str, port: int) -> Callable[[Data], None]:
    def edit(data: Data) -> None:
        f = _fleet(data, fleet)
        f["port"] = port
        f["health_check"] = {**(f.get("health_check") or {}), "port": port}

    return edit


def _both(*edits: Callable[[Data], None]) -> Callable[[Data], None]:
    def edit(data: Data) -> None:
        for e in edits:
            e(data)

    return edit


# row -> (file, the edit of the file that gives the base, the edit of the base that gives the head)
ROWS: dict[str, tuple[Path, Callable[[Data], None] | None, Callable[[Data], None] | None]] = {
    "eks/neuron_release": (EKS, None, _set("neuron_sdk", "2.29.1")),
    # One node_release_version serves every pool: the row leaves out chat-trn2 (Neuron 2.31.1 needs driver 2.29).
    "eks/node_image": (
        EKS,
        _both(_remove("chat-trn2"), _set("eks.node_release_version", "1.35.6-20260618")),
        _set("eks.node_release_version", "1.35.6-20260625"),
    ),
    "eks/kubernetes_minor": (EKS, _set("eks.kubernetes_version", "1.34"), _set("eks.kubernetes_version", "1.35")),
    "eks/health_path": (EKS, None, _health("chat", "/v1/health")),
    "eks/port": (EKS, None, _port("chat", 9090)),
    "eks/min_max": (EKS, None, _both(_set("inference.chat.min_size", 2), _set("inference.chat.max_size", 10))),
    "eks/add_fleet": (EKS, None, _add_fleet),
    "eks/remove_fleet": (EKS, None, _remove("chat")),
    "eks/add_training_pool": (EKS, None, _add_training),
    "eks/instance_type": (EKS, None, _set("inference.chat.neuron_types", ["inf2.xlarge"])),
    "eks/fallback_types": (EKS, None, _set("inference.chat.fallback_types", ["g6e.4xlarge"])),
    # A chart pin moves with the catalog (charts.neuron.by_release), not the file; no catalog node image serves Neuron
    # 2.32 yet, so the row bumps the pin in the synthesized head (TEMPLATE_EDITS) as a catalog edit would.
    "eks/chart_version": (EKS, None, None),
    "eks/budget": (EKS, None, _set("budget.monthly_usd", 300000)),
    "asg/neuron_release": (PROD, None, _set("neuron_sdk", "2.29.1")),
    "asg/health_path": (PROD, None, _health("chat", "/v1/health")),
    "asg/port": (PROD, None, _port("chat", 9090)),
    "asg/min_max": (PROD, None, _both(_set("inference.chat.min_size", 1), _set("inference.chat.max_size", 14))),
    "asg/fallback_types": (PROD, None, _set("inference.chat.fallback_types", ["g6e.12xlarge"])),
    "asg/budget": (PROD, None, _set("budget.monthly_usd", 500000)),
}


def _chart_bump(templates: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    out = copy.deepcopy(templates)
    for t in out.values():
        for r in t["Resources"].values():
            if r["Type"] == "Custom::AWSCDK-EKS-HelmChart" and r["Properties"]["Chart"] == "neuron-helm-chart":
                assert r["Properties"]["Version"] == "1.9.0"
                r["Properties"]["Version"] = "1.10.0"
    return out


TEMPLATE_EDITS = {"eks/chart_version": _chart_bump}

NODEGROUP, ASG, MANIFEST = "AWS::EKS::Nodegroup", "AWS::AutoScaling::AutoScalingGroup", planner.MANIFEST
TG, BUDGET, HELM = "AWS::ElasticLoadBalancingV2::TargetGroup", "AWS::Budgets::Budget", planner.HELM
IN, REP, CANNOT, ADD, REM = planner.IN_PLACE, planner.REPLACED, planner.CANNOT, planner.ADDED, planner.REMOVED

# row -> [(resource type, a part of its logical ID or of its step's words, expected class, a word its effect says)]
EXPECT: dict[str, list[tuple[str, str, str, str]]] = {
    # The pools' release moves: their node image (another driver) and their containers; nodes roll in place.
    "eks/neuron_release": [
        (NODEGROUP, "(pool chat)", IN, "(pool chat) replaced"),
        (MANIFEST, "Servingchat", IN, "kubectl apply"),
    ],  # fmt: skip
    "eks/node_image": [(NODEGROUP, "(pool chat)", IN, "replaced (ReleaseVersion)")],
    # The control plane first, then every node group's image, the system group's included (it boots an image of the
    # cluster's own minor: system_node_group).
    "eks/kubernetes_minor": [
        ("AWS::EKS::Cluster", "Cluster", IN, "control plane upgrades in place first"),
        (NODEGROUP, "(pool chat)", IN, "replaced (ReleaseVersion)"),
        (NODEGROUP, "(pool pretrain)", IN, "replaced (ReleaseVersion)"),
        (NODEGROUP, "nodes of eks-system-", IN, "replaced (ReleaseVersion)"),
    ],  # fmt: skip
    "eks/health_path": [(MANIFEST, "Servingchat", IN, "kubectl apply"), (TG, "PodTargets", IN, "")],
    "eks/port": [(TG, "PodTargets", REP, "health checks"), (MANIFEST, "Binding", ADD, ""), (MANIFEST, "Binding", REM, "")],
    "eks/min_max": [(NODEGROUP, "(pool chat)", IN, "no node is replaced")],
    "eks/add_fleet": [(NODEGROUP, "(pool chat2)", ADD, "launched"), (TG, "chat2", ADD, "")],
    "eks/remove_fleet": [(NODEGROUP, "(pool chat)", REM, "terminated")],
    "eks/add_training_pool": [(NODEGROUP, "(pool finetune)", ADD, "launched")],
    # InstanceTypes is create-only: the group's name (ENV-POOL-<digest of its create-only properties>) changes with
    # it, so CloudFormation creates the new group before it deletes the old one (issue 47, fix 5).
    "eks/instance_type": [(NODEGROUP, "(pool chat)", REP, "new group created, then the old one's nodes drained/terminated")],
    "eks/fallback_types": [(NODEGROUP, "(pool chat-gpu)", REP, "new group created, then the old one's nodes drained")],
    "eks/chart_version": [(HELM, "NeuronChart", IN, "1.9.0 -> 1.10.0")],
    "eks/budget": [(BUDGET, "Budget", IN, "")],
    # The Auto Scaling path: a new launch template version rolls the group (its rolling update), nothing is replaced.
    "asg/neuron_release": [
        ("AWS::EC2::LaunchTemplate", "Fleetchat", IN, "new launch template version"),
        (ASG, "prod-chat", IN, "rolling update"),
    ],  # fmt: skip
    # On the Auto Scaling path the health path is in the nodes' user data: the group rolls.
    "asg/health_path": [(TG, "Fleetchat", IN, ""), (ASG, "prod-chat ", IN, "rolling update")],
    "asg/port": [(TG, "Fleetchat", REP, "health checks")],
    "asg/min_max": [(ASG, "prod-chat", IN, "no node is replaced")],
    "asg/fallback_types": [(ASG, "prod-chat", IN, "rolling update")],
    "asg/budget": [(BUDGET, "Budget", IN, "")],
}


def _templates(file: Path, edit: Callable[[Data], None] | None, tmp: Path) -> dict[str, dict[str, Any]]:
    from neuronkit.stacks import build_environment

    data = yaml.safe_load(file.read_text())
    if edit is not None:
        edit(data)
    env = parse_environment(data, str(file.relative_to(ROOT)))
    app, _ = pinned_app(lambda a: build_environment(a, env), tmp)
    return {s.stack_name: s.template for s in app.synth().stacks}


@pytest.fixture(scope="module")
def bases(tmp_path_factory: pytest.TempPathFactory) -> dict[Path, dict[str, dict[str, Any]]]:
    """The untouched example files, synthesized once: the base of most rows."""
    return {file: _templates(file, None, tmp_path_factory.mktemp("base")) for file in (EKS, PROD)}


@pytest.fixture(scope="module")
def plans(
    bases: dict[Path, dict[str, dict[str, Any]]], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, list[planner.Step] | str]:
    """Each row's plan."""
    from neuronkit.config import ConfigError
    from neuronkit.reports.review import compare_templates

    out: dict[str, list[planner.Step] | str] = {}
    for row, (file, base_edit, head_edit) in ROWS.items():
        tmp = tmp_path_factory.mktemp(row.replace("/", "-"))
        try:
            if base_edit is None:
                old = bases[file]
            else:
                old = _templates(file, base_edit, tmp / "base")
            edits = [e for e in (base_edit, head_edit) if e is not None]
            new = _templates(file, _both(*edits), tmp / "head") if head_edit is not None else old
        except ConfigError as err:  # the row's file does not load: that row fails, the others run
            out[row] = f"{row}: {err}"
            continue
        new = TEMPLATE_EDITS[row](new) if row in TEMPLATE_EDITS else new
        region = yaml.safe_load(file.read_text())["region"]
        out[row] = planner.plan(old, new, compare_templates(old, new, {s: region for s in new}))
    return out


def _words(step: planner.Step) -> str:
    return f"{step.logical_id} {step.why} {step.effect} {step.instead} "


@pytest.mark.parametrize("row", sorted(ROWS))
def test_each_day_two_change_gets_its_expected_classes(row: str, plans: dict[str, list[planner.Step] | str]) -> None:
    steps = plans[row]
    assert not isinstance(steps, str), steps
    assert steps, f"{row}: the change changes nothing"
    for kind, part, verdict, says in EXPECT[row]:
        hits = [s for s in steps if s.type == kind and part in _words(s) and s.verdict == verdict]
        assert hits, f"{row}: no {kind} matching {part!r} is {verdict!r}:\n" + "\n".join(s.line() for s in steps)
        assert any(says in _words(s) for s in hits), f"{row}: {kind} {part!r} does not say {says!r}: {hits[0].line()}"
    expected_cannot = {(k, p) for k, p, v, _ in EXPECT[row] if v == CANNOT}
    unexpected = [s.line() for s in planner.cannot_update(steps)
                  if not any(s.type == k and p in _words(s) for k, p in expected_cannot)]  # fmt: skip
    assert unexpected == [], f"{row}: unexpected cannot update"


def test_every_row_has_expectations() -> None:
    assert set(EXPECT) == set(ROWS)


def test_every_create_only_name_the_kit_synthesizes_is_a_fixed_name_or_a_reference(
    bases: dict[Path, dict[str, dict[str, Any]]],
) -> None:
    """A type the kit emits with a create-only "...Name" property must say whether that names the resource (a
    replacement under it cannot happen) or another one: a new type with a name is classified before it ships."""
    seen: set[tuple[str, str]] = set()
    for template in (t for templates in bases.values() for t in templates.values()):
        for r in template["Resources"].values():
            for pointer in review.create_only(r["Type"]):
                parts = pointer.split("/")[2:]
                if parts[-1].endswith("Name") and parts[0] in (r.get("Properties") or {}):
                    seen.add((r["Type"], "/".join(parts)))
    assert ("AWS::EKS::Nodegroup", "NodegroupName") in seen
    fixed = {(k, "/".join(v[0])) for k, v in planner.FIXED_NAMES.items()}
    unclassified = sorted(s for s in seen if s not in fixed and s not in planner.NAME_REFERENCES)
    assert unclassified == []
