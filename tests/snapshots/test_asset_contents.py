"""The second net for what the stack snapshots blank: the contents of every asset the kit ships (the node kit,
the boot scripts, the Lambda functions), one SHA-256 per file. An edit to a node-kit script or a handler shows
here as a one-line snapshot diff, even though the templates only change an asset hash."""

from __future__ import annotations

import hashlib

from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from tests.conftest import ROOT

ASSET_ROOTS = ("neuronkit/userdata", "neuronkit/lambdas")


def asset_digests() -> dict[str, str]:
    out = {}
    for root in ASSET_ROOTS:
        for path in sorted((ROOT / root).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                out[str(path.relative_to(ROOT))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def test_asset_contents(snapshot: SnapshotAssertion) -> None:
    digests = asset_digests()
    assert any(p.startswith("neuronkit/userdata/kit/") for p in digests) and any(
        p.startswith("neuronkit/lambdas/") for p in digests
    )
    assert digests == snapshot.use_extension(JSONSnapshotExtension)
