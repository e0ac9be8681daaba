"""A rehearsal changes nothing it does not own: it synthesizes with a private copy of cdk.context.json, so the
project is byte for byte the same after any rehearsal, passed or failed; an example whose lookups are not pinned
(examples/environments/pilot.yaml) rehearses with stand-in images, each named with the command that pins it.
(A module of its own: tests/moto/test_rehearse.py keeps its rehearsal open for the whole module.)"""

from __future__ import annotations

import pytest

from neuronkit.cli import main
from neuronkit.rehearsal import EnvironmentReport, Rehearsal, RehearsalError
from tests.conftest import ROOT
from tests.moto.test_rehearse import tree_state

pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse .* not supported by moto:UserWarning")

PILOT = ROOT / "examples" / "environments" / "pilot.yaml"


def test_a_failed_rehearsal_leaves_the_project_byte_for_byte(monkeypatch: pytest.MonkeyPatch) -> None:
    """It fails after the synth (the CLI ran, with its lookups): nothing it wrote reaches the project."""
    from neuronkit.rehearsal import rehearse

    def fail(self: Rehearsal, name: str, assembly: object = None) -> EnvironmentReport:
        raise RehearsalError(f"{name}: made to fail after the synth")

    monkeypatch.setattr(Rehearsal, "_deploy_one", fail)
    before = tree_state()
    with pytest.raises(RehearsalError, match="made to fail"):
        rehearse(ROOT, env_file=PILOT)
    assert tree_state() == before
    # Nor in this process: the rehearsal ran without moto's bundled images and put the setting back before its closing
    # reset, so a later mock of this process has them again (tests/moto/test_batch_deploy.py reads one).
    import boto3
    from moto import mock_aws

    assert "MOTO_EC2_LOAD_DEFAULT_AMIS" not in __import__("os").environ
    with mock_aws():
        assert boto3.client("ec2", region_name="us-east-1").describe_images(Owners=["amazon"])["Images"]


def test_an_unpinned_example_rehearses_with_stand_ins_named_per_lookup(capsys: pytest.CaptureFixture[str]) -> None:
    from neuronkit.config import load_environment
    from neuronkit.config.lookups import read_context, unpinned_lookups

    unpinned = unpinned_lookups(load_environment(PILOT), read_context(ROOT))
    assert unpinned, "pilot.yaml pins every image: this test would check nothing"
    before = tree_state()
    assert main(["rehearse", "--file", str(PILOT.relative_to(ROOT))]) == 0
    assert tree_state() == before
    out = capsys.readouterr().out
    verdict = out[out.index("rehearsal OK") :]
    for lookup in unpinned:
        assert f"[pilot] stand-in for unpinned lookup {lookup.key_path} ({lookup.label}): ami-" in verdict
    assert verdict.count("run `neuronkit pin --file examples/environments/pilot.yaml`") == len(unpinned)
