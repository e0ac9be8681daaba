"""A synth prints nothing the user cannot act on: no CDK warnings, no unconfigured feature flags.

The CDK CLI prints every warning-level annotation of the cloud assembly, and since CLI 2.1020 the number
of feature flags that are unset and whose unset behaviour differs from the recommended value (read from
the assembly's feature-flag report; a flag without unset behaviour counts as false, as in the CLI).
cdk.json sets every such flag; docs/constructs.md says how they were chosen.
"""

from __future__ import annotations

import json
from typing import Any

from tests.conftest import Synth
from tests.project import environment_of


def _manifest(synth: Synth) -> dict[str, Any]:
    manifest: dict[str, Any] = json.loads((synth.outdir / "manifest.json").read_text())
    return manifest


def _metadata(synth: Synth) -> dict[str, list[dict[str, Any]]]:
    """Every construct path's metadata entries, inline in the manifest or in a stack's metadata file."""
    out: dict[str, list[dict[str, Any]]] = {}
    for artifact in _manifest(synth)["artifacts"].values():
        out.update(artifact.get("metadata") or {})
        if "additionalMetadataFile" in artifact:
            out.update(json.loads((synth.outdir / artifact["additionalMetadataFile"]).read_text()))
    return out


def test_no_stack_carries_a_warning(synth: Synth) -> None:
    metadata = _metadata(synth)
    assert any(e["type"] == "aws:cdk:logicalId" for entries in metadata.values() for e in entries), "read nothing"
    warnings = [f"{path}: {e['data']}" for path, entries in metadata.items() for e in entries if e["type"] == "aws:cdk:warning"]
    assert warnings == []


def test_every_feature_flag_is_configured(synth: Synth) -> None:
    reports = [a for a in _manifest(synth)["artifacts"].values() if a["type"] == "cdk:feature-flag-report"]
    assert reports, "aws-cdk-lib writes a feature-flag report; without it this test would check nothing"
    unconfigured = [
        name
        for report in reports
        for name, flag in report["properties"]["flags"].items()
        if "userValue" not in flag and flag.get("unconfiguredBehavesLike", {}).get("v2", False) != flag.get("recommendedValue")
    ]
    assert unconfigured == []


def test_every_stack_carries_its_environment_tags_as_stack_tags(synth: Synth) -> None:
    # With @aws-cdk/core:explicitStackTags, Tags.of() no longer reaches the stack's own tags; the stacks
    # pass them explicitly. CloudFormation applies stack tags to every resource it creates.
    stacks = {k: a for k, a in _manifest(synth)["artifacts"].items() if a["type"] == "aws:cloudformation:stack"}
    assert stacks
    for name, artifact in stacks.items():
        tags = artifact["properties"].get("tags") or {}
        assert tags.get("neuronkit:environment") == environment_of(name) and "cost-center" in tags, name
