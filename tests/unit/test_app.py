"""app.py turns a construct's refusal into one line naming the environment file, not a traceback."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from neuronkit import config
from tests.conftest import FROZEN_NOW, ROOT


def test_construct_refusal_is_one_line_without_traceback(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = importlib.util.spec_from_file_location("neuronkit_app", ROOT / "app.py")
    assert spec and spec.loader
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)

    def refuse(_app: Any, env: Any) -> None:
        raise ValueError("training[0].root_volume_gib: 100 GiB is below the 512 GiB a trainium node needs")

    monkeypatch.setattr(app, "build_environment", refuse)
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "argv", ["app.py"])
    with pytest.raises(SystemExit) as exit_:
        app.main()
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    # Warnings (dev's plain-HTTP listener) come first, one line each; then the refusal.
    # (A long test session's jsii process may print Node's MaxListeners warning: not the app's output.)
    problems = [line for line in err.splitlines() if not line.startswith(("warning: ", "(node:", "(Use `node"))]
    # The refusal names the first file app.py builds (sorted; a user's own file may come before dev.yaml).
    first = config.environment_files(ROOT / "environments")[0].name
    assert problems[0] == f"environments/{first}: training[0].root_volume_gib: 100 GiB is below the 512 GiB a trainium node needs"
    assert "Traceback" not in err


def test_a_file_given_with_c_file_is_the_one_synthesized(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = importlib.util.spec_from_file_location("neuronkit_app_file", ROOT / "app.py")
    assert spec and spec.loader
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    built: list[str] = []

    def refuse(_app: Any, env: Any) -> None:
        built.append(env.name)
        raise ValueError("stop here")

    monkeypatch.setattr(app, "build_environment", refuse)
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(sys, "argv", ["app.py"])
    # What `cdk synth -c file=...` hands the app (through the Node process's environment, which a test cannot set).
    real_app = app.App
    monkeypatch.setattr(
        app, "App", lambda context, **kw: real_app(context={**context, "file": "examples/environments/pilot.yaml"}, **kw)
    )
    with pytest.raises(SystemExit):
        app.main()
    assert built == ["pilot"]
    assert "examples/environments/pilot.yaml: stop here" in capsys.readouterr().err


def test_the_optimized_app_cdk_json_runs_synthesizes_the_same_templates(tmp_path: Path) -> None:
    """cdk.json runs app.py with ``python3 -O`` (no jsii type checks, no asserts): the templates must be the ones
    the same app writes without it."""
    command = json.loads((ROOT / "cdk.json").read_text())["app"].split()
    assert command[:2] == ["python3", "-O"], "cdk.json's app runs python3 -O (docs/performance.md)"
    example = "examples/environments/eks.yaml"
    outputs = {}
    for flags in ([], ["-O"]):
        out = tmp_path / ("optimized" if flags else "plain")
        run = _run_app(tmp_path, flags, file=example, outdir=out)
        assert run.returncode == 0, run.stderr
        outputs[out.name] = {p.name: p.read_bytes() for p in sorted(out.glob("*.template.json"))}
    assert outputs["plain"], "the app wrote no template"
    assert outputs["optimized"] == outputs["plain"]


def _run_app(tmp_path: Path, flags: list[str], *, file: str, outdir: Path) -> subprocess.CompletedProcess[str]:
    """app.py as the CDK CLI runs it, with a private TMPDIR that must be empty again when the app has exited
    (the app skips Python's teardown: jsii's exit handler must still stop Node and remove its files)."""
    tmp = tmp_path / f"tmp-{outdir.name}"
    tmp.mkdir()
    env = {
        **os.environ,
        "CDK_OUTDIR": str(outdir),
        "CDK_CONTEXT_JSON": json.dumps({"file": file, "neuronkit:now": FROZEN_NOW}),
        "TMPDIR": str(tmp),
    }
    run = subprocess.run([sys.executable, *flags, "app.py"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert list(tmp.iterdir()) == [], "the app left files in TMPDIR"
    return run


def test_the_app_exits_with_its_status_and_one_line_per_problem(tmp_path: Path) -> None:
    """A wrong file: exit status 1, one line naming the file and key, no traceback (the app's last exit handler
    keeps main's status)."""
    bad = tmp_path / "bad.yaml"
    bad.write_text((ROOT / "examples" / "environments" / "eks.yaml").read_text().replace("region: ", "region: mars-", 1))
    run = _run_app(tmp_path, ["-O"], file=str(bad), outdir=tmp_path / "out")
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    problems = [line for line in run.stderr.splitlines() if line.strip()]
    assert problems and all(line.startswith(str(bad)) for line in problems), run.stderr
    assert any("region" in line for line in problems), run.stderr


def test_the_modules_the_app_imports_beside_jsii_make_no_kernel_call() -> None:
    """app.py imports PURE_PYTHON_MODULES in a second thread while the main thread talks to the jsii kernel: they must
    not call the kernel themselves (a kernel has one pipe, and one caller at a time)."""
    spec = importlib.util.spec_from_file_location("neuronkit_app_modules", ROOT / "app.py")
    assert spec and spec.loader
    app = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(app)
    code = (
        "import importlib, sys\n"
        "import aws_cdk, cdk_nag\n"
        "import jsii._kernel.providers.process as p\n"
        "calls = []\n"
        "send = p._NodeProcess.send\n"
        "p._NodeProcess.send = lambda self, request, response: calls.append(type(request).__name__) or send(self, request, response)\n"
        f"modules = {list(app.PURE_PYTHON_MODULES)!r}\n"
        "assert not [m for m in modules if m in sys.modules]\n"
        "for m in modules:\n"
        "    importlib.import_module(m)\n"
        "print(calls)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr


def test_a_wrong_file_under_environments_is_one_line_per_problem(tmp_path: Path) -> None:
    """The app loads environments/ in a second thread: its problems still end the synth with exit status 1 and one
    line per problem, no traceback."""
    for name in ("app.py", "cdk.json", "cdk.context.json"):
        (tmp_path / name).write_bytes((ROOT / name).read_bytes())
    (tmp_path / "environments").mkdir()
    text = (ROOT / "examples" / "environments" / "eks.yaml").read_text().replace("region: ", "region: mars-", 1)
    (tmp_path / "environments" / "team.yaml").write_text(text)
    env = {**os.environ, "CDK_OUTDIR": str(tmp_path / "out"), "PYTHONPATH": str(ROOT)}
    env.pop("CDK_CONTEXT_JSON", None)
    run = subprocess.run([sys.executable, "-O", "app.py"], cwd=tmp_path, env=env, capture_output=True, text=True)
    assert run.returncode == 1
    assert "Traceback" not in run.stderr
    problems = [line for line in run.stderr.splitlines() if line.strip()]
    assert problems and all(line.startswith("environments/team.yaml: ") for line in problems), run.stderr
