"""cdk-nag 3 AwsSolutions over the whole app: zero findings that are not acknowledged with a reason."""

from __future__ import annotations

import pytest
from aws_cdk import Stack, Validations
from aws_cdk import aws_s3 as s3
from cdk_nag import AwsSolutionsChecks

from tests.conftest import Synth, new_app


def test_whole_app_passes_aws_solutions_checks(synth: Synth) -> None:
    # The session fixture synthesizes with the plugin: an unacknowledged finding fails synth itself.
    assert len(synth.templates) >= 6
    assert (
        not (synth.outdir / "validation-report.json").exists()
        or "failure" not in (synth.outdir / "validation-report.json").read_text()
    )


def test_every_acknowledgement_carries_a_reason(synth: Synth) -> None:
    acks = []
    for construct in synth.app.node.find_all():
        for entry in construct.node.metadata:
            if entry.type == Validations.ACKNOWLEDGED_RULES_METADATA_KEY:
                acks.extend(entry.data if isinstance(entry.data, list) else [entry.data])
    reasons = {rule: reason for ack in acks for rule, reason in ack.items()}
    assert any(rule.startswith("AwsSolutions::AwsSolutions-IAM5") for rule in reasons)
    assert any(rule.startswith("AwsSolutions::AwsSolutions-IAM4") for rule in reasons)
    for rule, reason in reasons.items():
        if rule.startswith("CloudFormation-Validate::"):
            continue  # acknowledged by CDK itself (ec2.MachineImage.lookup), not by the kit
        assert rule.startswith("AwsSolutions::"), rule
        assert len(reason) >= 20, rule


def test_the_gate_can_fail() -> None:
    """An unencrypted, unlogged bucket must stop synthesis."""
    app = new_app()
    stack = Stack(app, "Bad")
    s3.Bucket(stack, "Plain")
    Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(RuntimeError, match="AwsSolutions-S1"):
        app.synth()
