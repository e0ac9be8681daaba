"""A user's own environment beside the examples: a third file, in another region (us-west-2), whose AMI lookups
cdk.context.json does not pin yet. The environment-wide checks hold for the three files together: validation,
synthesis with cdk-nag, cfn-lint against each file's region, `neuronkit cost` and `neuronkit summary`.
(Tried as well with the file copied into environments/ and `make test`: the suite parametrizes over the
files present.)"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from neuronkit.cli import main
from neuronkit.config import load_all
from neuronkit.constructs import compliance
from neuronkit.reports.summary import summarize
from neuronkit.stacks import build_environment
from tests.conftest import ROOT, pinned_app

TEAM = ROOT / "tests" / "fixtures" / "third" / "team.yaml"


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("project")
    shutil.copytree(ROOT / "environments", root / "environments")
    shutil.copy(TEAM, root / "environments" / "team.yaml")
    return root


@pytest.fixture(scope="module")
def outdir(project: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("cdk.out")

    def build(app: object) -> None:
        for env in load_all(project / "environments"):
            build_environment(app, env)  # type: ignore[arg-type]
        compliance.apply(app)  # type: ignore[arg-type]

    app, _ = pinned_app(build, out)
    app.synth()  # cdk-nag runs here: a finding fails the synth
    return out


def test_three_files_validate(project: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    assert main(["validate"]) == 0
    out = capsys.readouterr().out
    assert "environments/team.yaml: ok: team in us-west-2" in out


def test_every_stack_of_the_third_file_synthesizes(outdir: Path) -> None:
    stacks = {p.name.removesuffix(".template.json") for p in outdir.glob("*.template.json")}
    assert {f"team-{part}" for part in ("network", "storage", "training", "inference", "monitoring")} <= stacks
    assert {"dev-training", "prod-training"} <= stacks


def test_cfn_lint_is_clean_in_each_files_region(project: Path, outdir: Path) -> None:
    regions = {e.name: e.region for e in load_all(project / "environments")}
    assert regions["team"] == "us-west-2"
    for name, region in regions.items():
        files = sorted(str(p) for p in outdir.glob(f"{name}-*.template.json"))
        done = subprocess.run(
            [str(Path(sys.executable).parent / "cfn-lint"), "--format", "parseable", "--regions", region, "--", *files],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 0 and done.stdout.strip() == "", done.stdout[-3000:]


def test_cost_and_summary_cover_all_three(
    project: Path, outdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(project)
    assert main(["cost"]) == 0
    out = capsys.readouterr().out
    assert "team (us-west-2)" in out and "Total: 3 environments" in out
    text = summarize(outdir)
    assert "team" in text and "us-west-2" in text
