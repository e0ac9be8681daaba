"""`neuronkit rehearse --base BASE` (issue 47): BASE deployed into the mock, the working tree over it with the real CDK
CLI, per stack what was updated, replaced, added, removed.

BASE is HEAD of a clone of this repository (its committed state, as `neuronkit review`'s own tests take it); the change
is written into the clone's working tree, uncommitted, as a user would. One smoke case runs in `make test` (a health
path change); the others are marked ``slow`` (outside the default run: `pytest -m slow tests/moto/test_rehearse_update.py`,
docs/testing.md)."""

from __future__ import annotations

import argparse
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from neuronkit.rehearsal import update
from tests.conftest import ROOT

pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse .* not supported by moto:UserWarning")
EXAMPLE = Path("examples") / "environments" / "eks.yaml"


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A clone of the repository's committed state with the pinned CDK CLI beside it (node_modules is not in git)."""
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs git and the project's repository")
    path = tmp_path / "repo"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(path)], check=True)
    (path / "node_modules").symlink_to(ROOT / "node_modules", target_is_directory=True)
    return path


def _edit(clone: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """The EKS example of the clone with ``change`` applied to its data, left uncommitted."""
    path = clone / EXAMPLE
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def _fleet(data: dict[str, Any]) -> dict[str, Any]:
    """The example's first served fleet (the one with a GPU fallback)."""
    return next(f for f in data["inference"] if f.get("model") and f.get("fallback_types"))


def _run(clone: Path, path: Path) -> update.UpdateReport:
    (report,) = update.rehearse_update(clone, "HEAD", env_file=path)
    return report


def test_a_health_path_change_updates_eks_in_place_over_head(clone: Path) -> None:
    """The Done-when case: `neuronkit rehearse --base HEAD` of a health path change passes; the serving stack updates
    (the target group's health check in the mock, the manifests named as not run), and no node group is replaced."""

    def health(data: dict[str, Any]) -> None:
        fleet = _fleet(data)
        fleet["health_check"] = {**(fleet.get("health_check") or {}), "path": "/v1/rehearsed"}

    path = _edit(clone, health)
    report = _run(clone, path)
    assert report.ok, report.problems
    changed = [s for s in report.stacks if s.resources]
    assert [s.name for s in changed] == ["eks-eks"] and changed[0].status == "UPDATE_COMPLETE"
    (group,) = report.resources(update.UPDATED, "AWS::ElasticLoadBalancingV2::TargetGroup")
    assert group.mock == "" and "updates in place" in group.plan
    manifests = report.resources(type_="Custom::AWSCDK-EKS-KubernetesResource")
    assert manifests and all(m.mock == update.NOT_RUN for m in manifests)
    assert not report.resources(update.REPLACED) and not report.resources(type_="AWS::EKS::Nodegroup")
    # What the mock does not apply is listed as review lists it: the new compile Job in, the old one out.
    assert sorted(c.action for c in report.kubernetes if c.kind == "Job") == ["added", "removed"]
    text = update.render(report)
    assert "== eks: update over HEAD: OK" in text and "eks-eks: " in text and "What the mock cannot show" in text
    assert "Kubernetes objects the update would apply (the mock applies none):" in text


@pytest.mark.slow
def test_the_cli_reads_a_port_change_as_a_replaced_target_group_and_a_new_binding(
    clone: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A port change replaces the target group (Port is create-only; a new physical ID in the mock) and names a new
    TargetGroupBinding (its manifest resource added, the old one removed); the node groups stay."""
    from neuronkit.cli import rehearse

    def port(data: dict[str, Any]) -> None:
        fleet = _fleet(data)
        fleet["port"] = 9090
        fleet["health_check"] = {**(fleet.get("health_check") or {}), "port": 9090}

    path = _edit(clone, port)
    monkeypatch.chdir(clone)
    code = rehearse.run(argparse.Namespace(file=[path], env=None, cdk_out=None, destroy=False, verbose=False, base="HEAD"))
    out = capsys.readouterr().out
    assert code == 0, out
    assert "(AWS::ElasticLoadBalancingV2::TargetGroup) replaced" in out
    assert "(Custom::AWSCDK-EKS-KubernetesResource) added [not run by the mock]" in out
    assert "(Custom::AWSCDK-EKS-KubernetesResource) removed [not run by the mock]" in out
    assert "AWS::EKS::Nodegroup) replaced" not in out and "update rehearsal OK over HEAD" in out


@pytest.mark.slow
def test_a_min_size_change_updates_the_node_group_in_place(clone: Path) -> None:
    def bigger(data: dict[str, Any]) -> None:
        fleet = _fleet(data)
        fleet["min_size"] = int(fleet["min_size"]) + 1
        fleet["max_size"] = max(int(fleet["max_size"]), fleet["min_size"])

    report = _run(clone, _edit(clone, bigger))
    assert report.ok, report.problems
    groups = report.resources(type_="AWS::EKS::Nodegroup")
    assert groups and all(g.action == update.UPDATED and g.mock == "" for g in groups)
    assert "no node is replaced" in " ".join(g.plan for g in groups)


@pytest.mark.slow
def test_an_instance_type_change_replaces_the_node_group_under_a_new_name(clone: Path) -> None:
    """InstanceTypes is create-only on AWS::EKS::Nodegroup; the group's name is the digest of its create-only
    properties (issue 47, fix 5), so the change renames it and CloudFormation replaces it: the update passes and the
    report shows the GPU group replaced, as the plan says."""

    def other_type(data: dict[str, Any]) -> None:
        _fleet(data)["fallback_types"] = ["g6e.4xlarge"]

    report = _run(clone, _edit(clone, other_type))
    assert report.ok, report.problems
    groups = [g for g in report.resources(type_="AWS::EKS::Nodegroup") if "gpu" in g.logical_id.lower()]
    assert groups, report.resources(type_="AWS::EKS::Nodegroup")
    assert all(g.action == update.REPLACED for g in groups), [(g.logical_id, g.action) for g in groups]
    assert all("replaced (new group created" in g.plan for g in groups)


@pytest.mark.slow
def test_the_auto_scaling_path_updates_its_launch_template_and_group_in_place(clone: Path) -> None:
    """The Auto Scaling path (the dev example's first fleet, `--env dev`): a health path change is in the nodes' user
    data, so the launch template takes a new version in the mock; the group reading its latest version is updated by
    CloudFormation through that reference, which the mock does not follow (named so), and the plan says it rolls;
    nothing is replaced."""
    path = clone / "environments" / "dev.yaml"
    data = yaml.safe_load(path.read_text())
    fleet = data["inference"][0]
    fleet["health_check"] = {**(fleet.get("health_check") or {}), "path": "/v1/rehearsed"}
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    (report,) = update.rehearse_update(clone, "HEAD", environments=["dev"])
    assert report.ok, report.problems
    templates = report.resources(update.UPDATED, "AWS::EC2::LaunchTemplate")
    groups = report.resources(update.UPDATED, "AWS::AutoScaling::AutoScalingGroup")
    assert templates and all(r.mock == "" for r in templates)
    assert groups and all(g.mock == update.NOT_FOLLOWED for g in groups), groups
    assert any("rolling update" in g.plan for g in groups), [g.plan for g in groups]
    assert not report.resources(update.REPLACED)
