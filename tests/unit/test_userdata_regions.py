"""Every AWS CLI call of every boot role names its region: the DLAMI's CLI has no default region, so a call
without ``--region`` fails (or hangs a node until its lifecycle heartbeat runs out). A static check over
neuronkit/userdata/** that needs no root; the sandbox asserts the same of every call a scenario makes
(tests/sandbox.py ``run_user_data``)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT

USERDATA = ROOT / "neuronkit" / "userdata"
# `aws SERVICE OPERATION`, at the start of a command (after a pipe, `$(`, `&&`, `||`, `;`, `!` or spaces).
_CALL = re.compile(r"(?:^|[\s|;&(`!])aws\s+([a-z0-9-]+)\s+([a-z0-9-]+)")


def aws_calls(text: str) -> list[tuple[int, str]]:
    """(line, command) of every AWS CLI call in a shell text, continuation lines joined, comments skipped."""
    calls = []
    logical, start = "", 0
    for number, line in enumerate(text.splitlines(), 1):
        if not logical:
            start = number
        logical += line.rstrip("\\") + " " if line.endswith("\\") else line
        if line.endswith("\\"):
            continue
        if not logical.lstrip().startswith("#") and _CALL.search(logical):
            calls.append((start, logical.strip()))
        logical = ""
    return calls


def _scripts() -> list[Path]:
    return sorted(
        p
        for p in USERDATA.rglob("*")
        if p.is_file() and (p.suffix == ".sh" or (p.parent.name == "kit" and p.suffix == "" and p.read_text().startswith("#!")))
    )


def test_every_aws_call_in_the_boot_scripts_names_its_region() -> None:
    missing, found = [], 0
    for path in _scripts():
        for line, command in aws_calls(path.read_text()):
            found += 1
            if "--region" not in command:
                missing.append(f"{path.relative_to(ROOT)}:{line}: {command[:120]}")
    assert found >= 20, found  # the scripts make AWS calls: the scan sees them
    assert not missing, missing


def test_the_publishers_cli_sink_names_its_region() -> None:
    text = (USERDATA / "neuron_monitor_publisher.py").read_text()
    assert '"--region"' in text


def test_the_scan_finds_a_call_without_a_region() -> None:
    script = (
        "x=$(aws ec2 describe-instances \\\n  --filters a)\naws s3 cp --region us-east-1 a b\n# aws sts get-caller-identity\n"
    )
    calls = aws_calls(script)
    assert [c.split() for _, c in calls if "--region" not in c] == [["x=$(aws", "ec2", "describe-instances", "--filters", "a)"]]
    assert len(calls) == 2


def test_the_busy_marker_has_one_definition_the_kit_and_docs_share() -> None:
    from neuronkit.userdata.neuron_monitor_publisher import BUSY_MARKER

    literal = [p for p in _scripts() if BUSY_MARKER in p.read_text()]
    assert literal == [], "kit scripts read ${BUSY_MARKER} from node.env"
    assert all("${BUSY_MARKER}" in (USERDATA / "kit" / name).read_text() for name in ("neuronkit-hostfile", "neuronkit-drain"))
    assert BUSY_MARKER in (ROOT / "docs" / "node-lifecycle.md").read_text()
    assert BUSY_MARKER in (ROOT / "docs" / "testing.md").read_text()
