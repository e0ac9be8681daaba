"""One syrupy JSON snapshot per stack of each example environment, volatile values normalised."""

from __future__ import annotations

import re
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from tests.conftest import Synth

STACKS = [f"{env}-{part}" for env in ("dev", "prod") for part in ("network", "storage", "training", "inference", "monitoring")]
_HASH = re.compile(r"\b[0-9a-f]{64}\b")


def normalise(value: Any) -> Any:
    """Asset hashes change with unrelated edits; replace them so a diff shows real changes only."""
    if isinstance(value, dict):
        return {k: normalise(v) for k, v in value.items()}
    if isinstance(value, list):
        return [normalise(v) for v in value]
    if isinstance(value, str):
        return _HASH.sub("<asset-hash>", value)
    return value


@pytest.fixture
def snapshot_json(snapshot: SnapshotAssertion) -> SnapshotAssertion:
    return snapshot.use_extension(JSONSnapshotExtension)


@pytest.mark.parametrize("stack", STACKS)
def test_stack_snapshot(synth: Synth, snapshot_json: SnapshotAssertion, stack: str) -> None:
    assert normalise(synth.template(stack)) == snapshot_json
