"""`neuronkit validate`, `neuronkit schema` and synth on a bad environment file.

User mistakes must come out as the one-line problems of neuronkit.config with exit code 1, never as
a traceback; the published JSON Schema must be what the models say today.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from neuronkit.cli import main
from tests.conftest import FROZEN_NOW

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "environments"
TRAINIUM = "trn1.2xlarge, trn1.32xlarge, trn1n.32xlarge, trn2.3xlarge, trn2.48xlarge, trn2u.48xlarge"


def three_problems(path: str) -> list[str]:
    """The lines every entry point prints for tests/fixtures/environments/three-problems.yaml at ``path``."""
    return [
        f"{path}: storage.lustre.size_gib: 3000 is not valid for SCRATCH_2; use 1200, 2400 or a multiple of 2400 (e.g. 2400 or 4800)",
        f"{path}: cost_centre: unknown key 'cost_centre' at the top level; did you mean 'cost_center'?",
        f"{path}: training[1].instance_type: 'trn1.64xlarge' is not a known instance type; use a Trainium type: {TRAINIUM}",
    ]


def run(*args: str, cwd: Path = ROOT, timeout: int = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)


# --------------------------------------------------------------------------------------------
# validate, as a user runs it
# --------------------------------------------------------------------------------------------
def test_validate_passes_on_the_shipped_examples() -> None:
    # As of the tests' frozen time (tests/conftest.py): prod's Capacity Block is a placeholder in 2027.
    result = run("-m", "neuronkit.cli", "validate", "--now", FROZEN_NOW)
    assert result.returncode == 0, result.stderr
    # Only warnings on stderr: dev's listener is plain HTTP, visibly.
    assert all(line.startswith("warning: ") for line in result.stderr.splitlines()), result.stderr
    assert "warning: environments/dev.yaml: inference[0].tls: the listener is plain HTTP" in result.stderr
    shipped = sorted(p.stem for p in (ROOT / "environments").glob("*.yaml"))
    assert {"dev", "prod"} <= set(shipped)
    lines = result.stdout.splitlines()
    assert len(lines) == len(shipped)
    for line, stem in zip(lines, shipped, strict=True):
        assert line.startswith(f"environments/{stem}.yaml: ok: {stem} in ")


def test_validate_fails_on_a_bad_file_with_the_problem_lines_and_no_traceback() -> None:
    path = "tests/fixtures/environments/three-problems.yaml"
    result = run("-m", "neuronkit.cli", "validate", path)
    assert result.returncode == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.splitlines() == three_problems(path)
    assert result.stdout == ""


# --------------------------------------------------------------------------------------------
# validate in-process (same code path, no interpreter start-up)
# --------------------------------------------------------------------------------------------
def test_validate_checks_every_file_given_and_fails_if_any_is_bad(capsys: pytest.CaptureFixture[str]) -> None:
    good = FIXTURES.relative_to(ROOT) / "good.yaml"
    bad = FIXTURES.relative_to(ROOT) / "renamed.yaml"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        code = main(["validate", str(good), str(bad)])
    out, err = capsys.readouterr()
    assert code == 1
    assert out.splitlines() == [
        f"{good}: ok: good in us-east-1: reserved (trn1.32xlarge x4), block (trn1.32xlarge x8); "
        "Neuron SDK: reserved pytorch-training 2.28.1, block pytorch-training 2.28.1"
    ]
    problems = [line for line in err.splitlines() if not line.startswith("warning: ")]
    assert problems == [f"{bad}: name: 'staging' differs from the file name 'renamed'; rename the file or the key"]
    # good.yaml's account has no pinned images: each pool's lookup is named once, with the command that pins it.
    warned = [line for line in err.splitlines() if "is not pinned in cdk.context.json" in line]
    assert [line.split(": ")[2] for line in warned] == ["training[0].ami", "training[1].ami"]
    assert all(f"run `neuronkit pin --file {good}`" in line for line in warned)


def test_validate_yaml_error_exits_1(capsys: pytest.CaptureFixture[str]) -> None:
    bad = FIXTURES.relative_to(ROOT) / "bad-indent.yaml"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(ROOT)
        code = main(["validate", str(bad)])
    assert code == 1
    assert capsys.readouterr().err.splitlines() == [
        f"{bad}: not valid YAML at line 9, column 11: mapping values are not allowed here; "
        "check the indentation and quoting on that line and the one before"
    ]


def test_validate_without_environment_files_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(tmp_path)
        code = main(["validate"])
    assert code == 1
    assert capsys.readouterr().err == "neuronkit: no environment files found under environments/\n"


# --------------------------------------------------------------------------------------------
# schema
# --------------------------------------------------------------------------------------------
def test_schema_output_equals_the_committed_schema(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["schema"]) == 0
    committed = (ROOT / "schema" / "environment.schema.json").read_text()
    assert capsys.readouterr().out == committed, (
        "schema/environment.schema.json is stale: run `.venv/bin/neuronkit schema > schema/environment.schema.json`"
    )


def test_schema_rejects_unknown_keys_for_editors(capsys: pytest.CaptureFixture[str]) -> None:
    main(["schema"])
    schema = json.loads(capsys.readouterr().out)
    assert schema["additionalProperties"] is False
    assert schema["$defs"]["TrainingCluster"]["additionalProperties"] is False
    assert set(schema["required"]) == {"name", "account", "region", "network"}


# --------------------------------------------------------------------------------------------
# synth (app.py) on a bad file
# --------------------------------------------------------------------------------------------
def test_synth_exits_1_with_the_same_lines_and_no_traceback(tmp_path: Path) -> None:
    shutil.copy(ROOT / "app.py", tmp_path)
    shutil.copy(ROOT / "cdk.json", tmp_path)
    (tmp_path / "environments").mkdir()
    shutil.copy(FIXTURES / "three-problems.yaml", tmp_path / "environments")
    result = run("app.py", cwd=tmp_path, timeout=300)
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    problems = [line for line in result.stderr.splitlines() if line.startswith("environments/")]
    assert problems == three_problems("environments/three-problems.yaml")
    # Nothing was synthesized (the CLI's CDK_OUTDIR may still make an empty folder).
    assert not list(tmp_path.glob("**/*.template.json"))
