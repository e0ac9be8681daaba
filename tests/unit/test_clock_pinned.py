"""Every synthesis and every command of the suite runs at the frozen time (issue 45, item 3).

The example environments hold Capacity Blocks in 2027; validate refuses an ended block (by design), so a suite that read
the wall clock anywhere would go red on the day the blocks end. The suite sets ``NEURONKIT_NOW`` (tests/conftest.py),
which ``neuronkit.clock`` reads and every program the tests start inherits; these tests check that the variable reaches
subprocesses and that no code the kit runs at synth or in its CLI reads the wall clock any other way.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from neuronkit import clock
from tests.conftest import FROZEN_NOW, ROOT

PACKAGE = ROOT / "neuronkit"

# Code that runs on nodes, in pods or in Lambda functions, never at synth or in the CLI: it reads the real time there.
RUNTIME_MODULES = {
    "neuronkit/clock.py": "the one reader, behind NEURONKIT_NOW",
    "neuronkit/lambdas": "Lambda handlers run in AWS",
    "neuronkit/userdata": "node programs (neuron-monitor publisher) run on the nodes",
    "neuronkit/kubernetes/prejob.py": "the pre-job check runs inside the job's pods",
    "neuronkit/kubernetes/checkpoint_contract.py": "runs inside the training pods",
    "neuronkit/adoption/pilot_metrics.py": "a training script's step reporter, inside the job",
}

WALL_CLOCK_CALLS = {("datetime", "now"), ("datetime", "utcnow"), ("datetime", "today"), ("date", "today"), ("time", "time")}


def _wall_clock_reads(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            owner = node.func.value
            owner_name = owner.attr if isinstance(owner, ast.Attribute) else owner.id if isinstance(owner, ast.Name) else ""
            if (owner_name, node.func.attr) in WALL_CLOCK_CALLS:
                found.append(
                    f"{path.relative_to(ROOT) if path.is_relative_to(ROOT) else path}:{node.lineno}: {owner_name}.{node.func.attr}()"
                )
    return found


def _is_runtime(path: Path) -> bool:
    rel = path.relative_to(ROOT).as_posix()
    return any(rel == key or rel.startswith(key + "/") for key in RUNTIME_MODULES)


def test_no_synth_or_cli_code_reads_the_wall_clock_past_neuronkit_clock() -> None:
    checked = [p for p in PACKAGE.rglob("*.py") if not _is_runtime(p)]
    assert len(checked) > 50, "the walk found too few modules"
    reads = [read for path in checked for read in _wall_clock_reads(path)]
    assert reads == [], "read the time through neuronkit.clock.utc_now() instead:\n" + "\n".join(reads)


def test_the_walk_finds_a_wall_clock_read(tmp_path: Path) -> None:
    """The walk above can fail: it finds the forms the kit used before routing them through the clock."""
    sample = tmp_path / "sample.py"
    sample.write_text("import datetime as dt\nimport time\nx = dt.datetime.now(dt.UTC)\ny = time.time()\n")
    assert len(_wall_clock_reads(sample)) == 2


def test_the_suite_pins_the_time_for_every_program_it_starts() -> None:
    assert os.environ["NEURONKIT_NOW"] == FROZEN_NOW
    assert "CDK_OUTDIR" not in os.environ
    code = "from neuronkit import clock; print(clock.utc_now().isoformat())"
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert clock.parse(done.stdout.strip()) == clock.parse(FROZEN_NOW)


def test_neuronkit_now_is_read_and_a_bad_value_is_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NEURONKIT_NOW", "2027-02-01T00:00:00Z")
    assert clock.utc_now() == clock.parse("2027-02-01T00:00:00Z")
    monkeypatch.setenv("NEURONKIT_NOW", "soon")
    with pytest.raises(ValueError, match="environment variable NEURONKIT_NOW: 'soon' is not an ISO 8601 time"):
        clock.utc_now()
    monkeypatch.delenv("NEURONKIT_NOW")
    assert abs((clock.utc_now() - clock.parse(clock.utc_now())).total_seconds()) < 1  # the system clock, aware UTC


def test_validate_in_a_subprocess_reads_the_pinned_time(tmp_path: Path) -> None:
    """The pin reaches the CLI: the example with a Capacity Block validates at the frozen time and is refused (ended
    block) at a time after the block, with nothing else changed."""
    example = ROOT / "tests" / "fixtures" / "capacity-block.yaml"  # a block in March 2030
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    ok = subprocess.run(
        [sys.executable, "-m", "neuronkit.cli", "validate", "--file", str(example)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stdout + ok.stderr
    late = subprocess.run(
        [sys.executable, "-m", "neuronkit.cli", "validate", "--file", str(example)],
        cwd=ROOT,
        env={**env, "NEURONKIT_NOW": "2031-01-01T00:00:00Z"},
        capture_output=True,
        text=True,
    )
    assert late.returncode != 0 and "Traceback" not in late.stderr, late.stdout + late.stderr
    assert "capacity.end: the Capacity Block cr-0123456789abcdef0 is over" in late.stdout + late.stderr


def test_the_bench_synthesizes_at_the_suites_frozen_time() -> None:
    from tests import bench

    assert bench.FROZEN_NOW == FROZEN_NOW
