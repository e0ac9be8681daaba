"""The sample output in README.md and docs/rehearsal.md is what `neuronkit rehearse` prints today.

One real rehearsal of the example environments (in-process, the embedded moto server); every line of each
sample must be a line of that run, compared after what changes from run to run is masked (durations, moto's
launch template ids) and runs of spaces are collapsed (column widths follow the longest cell). A sample line
ending in ", ..." is a prefix; a line "..." elides. The order of lines is not compared: the CDK CLI deploys
independent stacks in parallel.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from neuronkit.cli import main
from tests.conftest import ROOT

EXAMPLES = ("dev", "prod")
pytestmark = [
    pytest.mark.filterwarnings("ignore:Tried to parse .* not supported by moto:UserWarning"),
    pytest.mark.skipif(
        not all((ROOT / "environments" / f"{e}.yaml").is_file() for e in EXAMPLES),
        reason="the samples show the example environments dev and prod",
    ),
]


def _normal(line: str) -> str:
    line = re.sub(r"\d+\.\d+ s\b", "N s", line)
    line = re.sub(r"\blt-[0-9a-f]{17}\b", "lt-ID", line)
    return " ".join(line.split())


def _sample(doc: Path, marker: str) -> list[str]:
    """The lines of the first fenced block of ``doc`` that contains ``marker``."""
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", doc.read_text(), flags=re.S | re.M)
    (block,) = [b for b in blocks if marker in b][:1]
    return [line for line in block.splitlines() if line.strip() and not line.startswith("$ ")]


@pytest.fixture(scope="module")
def run_output() -> list[str]:
    import contextlib
    import io
    import os

    buffer = io.StringIO()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with contextlib.redirect_stdout(buffer):
            code = main(["rehearse", *(x for e in EXAMPLES for x in ("--env", e))])
    finally:
        os.chdir(cwd)
    assert code == 0, buffer.getvalue()[-3000:]
    return [_normal(line) for line in buffer.getvalue().splitlines()]


@pytest.mark.parametrize(
    ("doc", "marker"),
    [(ROOT / "README.md", "[prod] cdk deploy"), (ROOT / "docs" / "rehearsal.md", "[dev] cdk bootstrap")],
    ids=["README", "rehearsal"],
)
def test_the_sample_is_what_a_run_prints(run_output: list[str], doc: Path, marker: str) -> None:
    sample = _sample(doc, marker)
    assert len([s for s in sample if s.strip() != "..."]) >= 5, "the sample is too short to say anything"
    stale = []
    for line in sample:
        if line.strip() == "...":
            continue
        want = _normal(line)
        if want.endswith(", ..."):
            ok = any(out.startswith(want[: -len("...")]) for out in run_output)
        else:
            ok = want in run_output
        if not ok:
            stale.append(line)
    assert stale == [], f"{doc.name}: lines a real run no longer prints:\n" + "\n".join(stale)
