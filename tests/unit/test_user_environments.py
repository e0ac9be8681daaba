"""A user's own files beside the examples (tests/project.py): the user-like files of
tests/fixtures/user_environments/, pinned and unpinned, in other accounts and regions. The environment-wide tests
(contracts, cdk-nag, cfn-lint per region, moto deploys, summary) already run over them through the session's
project; the checks here are about the files as a user meets them: `neuronkit validate`, `neuronkit cost`, the
stand-ins of unpinned lookups. No count is fixed: every expectation comes from the files present."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronkit.cli import main
from neuronkit.config.lookups import image_lookups, unpinned_lookups
from tests.conftest import Synth, cdk_context
from tests.project import LOOKUP_SUFFIX, USER_FIXTURES, environments


def test_the_user_files_and_their_unpinned_variants_are_in_the_project() -> None:
    names = set(environments())
    users = {p.stem for p in USER_FIXTURES.glob("*.yaml")}
    pinned = {u for u in users if environments()[u].platform == "asg"}  # an EKS file looks no image up
    assert users and pinned and users | {f"{u}{LOOKUP_SUFFIX}" for u in pinned} <= names
    assert not {f"{u}{LOOKUP_SUFFIX}" for u in users - pinned} & names
    assert {"dev", "prod"} <= names


def test_every_file_validates_and_unpinned_lookups_are_named_by_pool(
    project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    assert main(["validate"]) == 0
    captured = capsys.readouterr()
    for name, env in environments().items():
        assert f"environments/{name}.yaml: ok: {name} in {env.region}" in captured.out
    context = cdk_context()
    warned = [line for line in captured.err.splitlines() if "is not pinned in cdk.context.json" in line]
    expected = [(name, lookup) for name, env in environments().items() for lookup in unpinned_lookups(env, context)]
    assert expected, "no file has an unpinned lookup: this test would check nothing"
    assert len(warned) == len(expected)  # one line per pool, each once
    for name, lookup in expected:
        assert any(
            line.startswith(f"warning: environments/{name}.yaml: {lookup.key_path}: ") and f"neuronkit pin --env {name}" in line
            for line in warned
        ), (name, lookup.key_path)


def test_a_pinned_file_makes_no_lookup() -> None:
    for path in USER_FIXTURES.glob("*.yaml"):
        env = environments()[path.stem]
        assert image_lookups(env) == [], f"{path.name}: every pool pins its ami_id (or boots EKS's image)"
        if env.platform == "asg":
            assert image_lookups(environments()[f"{path.stem}{LOOKUP_SUFFIX}"])


def test_unpinned_lookups_synthesize_with_stand_ins(synth: Synth) -> None:
    unpinned = {lookup.context_key for env in environments().values() for lookup in unpinned_lookups(env, cdk_context())}
    assert unpinned and set(synth.missing) == unpinned


def test_cost_covers_every_file(project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    assert main(["cost"]) == 0
    out = capsys.readouterr().out
    for name, env in environments().items():
        assert f"{name} ({env.region})" in out
    assert f"Total: {len(environments())} environments" in out
