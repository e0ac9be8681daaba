"""`neuronkit rehearse --base`'s reading of the mock (neuronkit.rehearsal.update.compare) on hand-made stacks and
physical IDs: updated under the same ID, replaced under a new one, added, removed, and what the mock did not carry out.
The mock itself runs in tests/moto/test_rehearse_update.py."""

from __future__ import annotations

import argparse
from typing import Any

import pytest

from neuronkit.rehearsal import RehearsalError, StackInfo, update
from tests.conftest import ROOT


def _stack(resources: dict[str, Any], name: str = "dev-eks") -> StackInfo:
    return StackInfo(name, name, "dev", "111111111111", "us-east-1", {"Resources": resources})


def _r(kind: str, **props: Any) -> dict[str, Any]:
    return {"Type": kind, "Properties": props}


MODELLED = {
    "AWS::EKS::Nodegroup",
    "AWS::ElasticLoadBalancingV2::TargetGroup",
    "AWS::KMS::Key",
    "AWS::AutoScaling::AutoScalingGroup",
}


def test_the_mock_is_read_per_resource_with_what_it_did_not_carry_out() -> None:
    base = _stack({
        "Group": _r("AWS::EKS::Nodegroup", ScalingConfig={"MinSize": 1}),
        "Targets": _r("AWS::ElasticLoadBalancingV2::TargetGroup", Port=8080),
        "Key": _r("AWS::KMS::Key", Description="a"),
        "Manifest": _r("Custom::AWSCDK-EKS-KubernetesResource", Manifest="[]"),
        "Asg": _r("AWS::AutoScaling::AutoScalingGroup", MinSize="1"),
        "Old": _r("AWS::KMS::Key"),
    })  # fmt: skip
    head = _stack({
        "Group": _r("AWS::EKS::Nodegroup", ScalingConfig={"MinSize": 2}),
        "Targets": _r("AWS::ElasticLoadBalancingV2::TargetGroup", Port=9090),
        "Key": _r("AWS::KMS::Key", Description="b"),
        "Manifest": _r("Custom::AWSCDK-EKS-KubernetesResource", Manifest="[{}]"),
        "Asg": _r("AWS::AutoScaling::AutoScalingGroup", MinSize="1"),
        "New": _r("Custom::AWSCDK-EKS-HelmChart"),
    })  # fmt: skip
    before = {"dev-eks": {"Group": "c/dev-chat", "Targets": "arn:tg/1", "Key": "k-1", "Asg": "asg", "Old": "k-0"}}
    after = {"dev-eks": {"Group": "c/dev-chat", "Targets": "arn:tg/2", "Key": "k-1", "Asg": "asg"}}
    (s,) = update.compare(
        [base], [head], before, after,
        updates_in_mock=lambda kind: kind != "AWS::KMS::Key", modelled=lambda kind: kind in MODELLED,
        plan_words={("dev-eks", "Asg"): "updates in place; nodes replaced by a rolling update"},
        status=lambda _: "UPDATE_COMPLETE",
    )  # fmt: skip
    got = {r.logical_id: (r.action, r.mock) for r in s.resources}
    assert got == {
        "Group": (update.UPDATED, ""),
        "Targets": (update.REPLACED, ""),
        "Key": (update.UPDATED, update.NOT_UPDATED),
        "Manifest": (update.UPDATED, update.NOT_RUN),
        "Asg": (update.UPDATED, update.NOT_FOLLOWED),
        "New": (update.ADDED, update.NOT_RUN),
        "Old": (update.REMOVED, ""),
    }
    assert s.summary() == "dev-eks: 4 updated, 1 replaced, 1 added, 1 removed (UPDATE_COMPLETE)"
    report = update.UpdateReport("dev", "HEAD", [s])
    text = update.render(report)
    assert "Targets (AWS::ElasticLoadBalancingV2::TargetGroup) replaced" in text.splitlines()[2]
    assert "4 change(s) the mock did not carry out" in text and report.ok


def test_an_unchanged_stack_and_a_new_stack() -> None:
    same = _stack({"Key": _r("AWS::KMS::Key")})
    extra = _stack({"Key": _r("AWS::KMS::Key")}, "dev-extra")
    kept, added = update.compare([same], [same, extra], {}, {}, updates_in_mock=lambda _: True, modelled=lambda _: True)
    assert kept.summary() == "dev-eks: no changes" and added.change == update.ADDED


def test_a_base_that_is_not_a_commit_refuses_before_anything_starts() -> None:
    with pytest.raises(RehearsalError, match="is not a commit") as err:
        update.rehearse_update(ROOT, "no-such-revision-47")
    assert err.value.code == 2


def test_base_takes_neither_destroy_nor_cdk_out() -> None:
    from neuronkit.cli import rehearse
    from neuronkit.cli.errors import CliError

    args = argparse.Namespace(file=None, env=None, cdk_out=None, destroy=True, verbose=False, base="HEAD")
    with pytest.raises(CliError, match="--base synthesizes both revisions itself"):
        rehearse.run(args)
