"""`neuronkit job render | check POOL` on the EKS example: offline manifests, refusals as one line each."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
import yaml

from neuronkit import config
from neuronkit.cli import main
from neuronkit.kubernetes import training_job as tj
from tests.conftest import ROOT

EKS = ROOT / "examples" / "environments" / "eks.yaml"


def _block() -> tuple[str, dt.datetime, int]:
    env = config.load_environment(EKS)
    pool = next(c for c in env.training if getattr(c.capacity, "type", "") == "capacity-block")
    cap = pool.capacity
    lead = tj.lead_minutes("eks-node-group", cap.checkpoint_budget_minutes, kit_drain_minutes=cap.drain_minutes)
    return pool.name, cap.end, lead


@pytest.fixture(autouse=True)
def _inside_the_block(monkeypatch: pytest.MonkeyPatch) -> None:
    """The example's Capacity Block is running (a job before its start is refused: tested below)."""
    from neuronkit.cli import job_cmd

    pool = next(c for c in config.load_environment(EKS).training if c.name == _block()[0])
    monkeypatch.setattr(job_cmd, "_now", lambda: pool.capacity.start + dt.timedelta(hours=1))


def test_render_refuses_a_job_before_its_block_starts_and_holds_it_when_asked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from neuronkit.cli import job_cmd

    pool, _, _ = _block()
    start = next(c for c in config.load_environment(EKS).training if c.name == pool).capacity.start
    monkeypatch.setattr(job_cmd, "_now", lambda: start - dt.timedelta(minutes=1))
    assert main(["job", "render", pool, "--file", str(EKS)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"pool {pool}: its Capacity Block starts {start.isoformat()}" in err[0] and "--hold" in err[0]
    assert main(["job", "render", pool, "--hold", "--file", str(EKS)]) == 0
    out = capsys.readouterr()
    jobset = list(yaml.safe_load_all(out.out))[1]
    assert jobset["spec"]["suspend"] is True and tj.QUEUE_LABEL not in jobset["metadata"]["labels"]
    assert (
        f"kubectl label jobset -n {tj.scheduling.TRAINING_NAMESPACE} {jobset['metadata']['name']} {tj.QUEUE_LABEL}={pool}"
        in out.err
    )


def test_each_render_gets_its_own_name_unless_one_is_given(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """JobSet's webhook refuses to re-apply the name of a finished JobSet: two renders never share a default name."""
    from neuronkit.cli import job_cmd

    pool, _, _ = _block()
    start = next(c for c in config.load_environment(EKS).training if c.name == pool).capacity.start
    names = []
    for seconds in (0, 1):
        monkeypatch.setattr(job_cmd, "_now", lambda s=seconds: start + dt.timedelta(hours=1, seconds=s))
        assert main(["job", "render", pool, "--file", str(EKS)]) == 0
        names.append(list(yaml.safe_load_all(capsys.readouterr().out))[1]["metadata"]["name"])
    assert names[0] != names[1] and all(n.startswith(f"{pool}-") and len(n) <= 40 for n in names)
    assert main(["job", "render", pool, "--name", "llama-1", "--file", str(EKS)]) == 0
    assert list(yaml.safe_load_all(capsys.readouterr().out))[1]["metadata"]["name"] == "llama-1"
    assert job_cmd.default_name("p" * 40, check_only=True, now=start).endswith("-check-" + start.strftime("%m%d-%H%M%S"))
    assert len(job_cmd.default_name("p" * 40, check_only=True, now=start)) == 40


def test_render_prints_the_configmap_and_the_jobset_for_the_pool(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pool, _, _ = _block()
    out = tmp_path / "job.yaml"
    assert (
        main(["job", "render", pool, "--file", str(EKS), "--nodes", "2", "-o", str(out), "--command", "train.py", "--lr", "1e-4"])
        == 0
    )
    docs = list(yaml.safe_load_all(capsys.readouterr().out))
    assert [d["kind"] for d in docs] == ["ConfigMap", "JobSet"] and list(yaml.safe_load_all(out.read_text())) == docs
    assert docs[0]["metadata"]["name"] == f"{docs[1]['metadata']['name']}-prejob"  # the job's own, not the stack's
    jobs = {r["name"]: r for r in docs[1]["spec"]["replicatedJobs"]}
    assert jobs["rank"]["template"]["spec"]["parallelism"] == 2
    assert jobs["rank"]["template"]["spec"]["template"]["spec"]["containers"][0]["args"] == ["train.py", "--lr", "1e-4"]


def test_render_refuses_a_deadline_one_minute_past_e_minus_l(capsys: pytest.CaptureFixture[str]) -> None:
    pool, end, lead = _block()
    cutoff = end - dt.timedelta(minutes=lead)
    late = (cutoff + dt.timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    early = (cutoff - dt.timedelta(minutes=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert main(["job", "render", pool, "--file", str(EKS), "--deadline", late]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--deadline {late[:-1]}+00:00 is after {cutoff.isoformat()}" in err
    assert main(["job", "render", pool, "--file", str(EKS), "--deadline", early]) == 0
    assert f"asked to checkpoint at {cutoff.isoformat()}" in capsys.readouterr().err


def test_check_renders_the_collective_alone_and_prints_cordon_commands(capsys: pytest.CaptureFixture[str]) -> None:
    pool, _, _ = _block()
    assert main(["job", "check", pool, "--file", str(EKS), "--calibrate", "--cordon"]) == 0
    captured = capsys.readouterr()
    jobset = list(yaml.safe_load_all(captured.out))[1]
    assert [r["name"] for r in jobset["spec"]["replicatedJobs"]] == ["check"]
    assert "kubectl cordon" in captured.err and f"jobset-name={pool}-check" in captured.err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["job", "render", "nope"], "no training pool 'nope'"),
        (["job", "render", "pretrain", "--nodes", "999"], "has at most"),
        (["job", "render", "pretrain", "--deadline", "tomorrow"], "not a date and time"),
        (["job", "render", "pretrain", "--image", "me/train:latest"], "never latest"),
    ],
)
def test_bad_input_is_one_line_naming_the_fix(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*argv, "--file", str(EKS)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and err.count("\n") == 1


def test_an_asg_file_is_refused_with_the_fix(capsys: pytest.CaptureFixture[str]) -> None:
    asg = next(f for f in config.environment_files() if config.load_environment(f).platform == "asg")
    pool = config.load_environment(asg).training[0].name if config.load_environment(asg).training else "x"
    assert main(["job", "render", pool, "--file", str(asg)]) == 2
    assert "set platform: eks" in capsys.readouterr().err


def test_a_checkpoint_budget_out_of_range_is_one_line_naming_the_key(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    text = EKS.read_text().replace(
        "      warn_hours_before_end: [24, 2]\n", "      warn_hours_before_end: [24, 2]\n      checkpoint_budget_minutes: 0\n"
    )
    bad = tmp_path / "eks.yaml"
    bad.write_text(text)
    assert main(["validate", str(bad)]) == 1
    err = capsys.readouterr().err
    assert f"{bad}: training[0].capacity.checkpoint_budget_minutes: 0 is out of range; use at least 1" in err


def test_render_warns_after_the_block_ends(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A job applied while the block's pool has no nodes is admitted on the static quota and cycles through evictions."""
    from neuronkit.cli import job_cmd

    pool, end, _ = _block()
    start = next(c for c in config.load_environment(EKS).training if c.name == pool).capacity.start
    for now, expected in (
        (end, f"Capacity Block ended {end.isoformat()}"),
        (start + dt.timedelta(minutes=1), None),
    ):
        monkeypatch.setattr(job_cmd, "_now", lambda now=now: now)
        assert main(["job", "render", pool, "--file", str(EKS)]) == 0
        err = capsys.readouterr().err
        warned = [line for line in err.splitlines() if "WARNING" in line and "Capacity Block" in line]
        if expected is None:
            assert not warned, err
        else:
            assert warned and expected in warned[0], err


def test_render_names_the_container_release_when_it_is_not_the_pools(capsys: pytest.CaptureFixture[str]) -> None:
    from neuronkit.catalog import releases

    pool, _, _ = _block()
    assert main(["job", "check", pool, "--file", str(EKS)]) == 0
    captured = capsys.readouterr()
    image = list(yaml.safe_load_all(captured.out))[1]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"][
        "containers"
    ][0]["image"]
    release = config.pool_releases(config.load_environment(EKS))[pool].release
    assert release is not None
    shown = releases.container_release(image)
    if shown != release.version:
        assert f"is on Neuron {release.version}; its training container is {shown}'s" in captured.err
    else:
        assert "training container is" not in captured.err


def _node_check(out: str) -> list[str]:
    """The argv of the pre-job node check (the init container running prejob.py node) in the rendered JobSet."""
    for doc in yaml.safe_load_all(out):
        if not isinstance(doc, dict) or doc.get("kind") != "JobSet":
            continue
        for job in doc["spec"]["replicatedJobs"]:
            for c in job["template"]["spec"]["template"]["spec"].get("initContainers", []):
                argv = [*c.get("command", []), *c.get("args", [])]
                if "node" in argv and any(str(a).endswith("prejob.py") for a in argv):
                    return [str(a) for a in argv]
    raise AssertionError("no pre-job node check in the JobSet")


def test_render_refuses_a_2_33_0_image_on_a_2_28_1_pool_or_takes_its_window_when_asked(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 46: a container of a newer release than the pool's is refused, as on the Batch path (its runtime may need
    a driver outside the pool's window); --image-release-window takes the image's release window for the node check."""
    from neuronkit.catalog import releases

    pool, _, _ = _block()
    release = config.pool_releases(config.load_environment(EKS))[pool].release
    assert release is not None and release.version == "2.28.1"
    image = "public.ecr.aws/neuron/pytorch-training-neuronx:2.14.0-neuronx-py314-sdk2.33.0-ubuntu26.04"
    assert main(["job", "render", pool, "--file", str(EKS), "--image", image]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "2.33.0" in err[0] and "Neuron 2.28.1" in err[0] and "--image-release-window" in err[0]
    assert main(["job", "render", pool, "--file", str(EKS), "--image", image, "--image-release-window"]) == 0
    argv = _node_check(capsys.readouterr().out)
    window = releases.driver_window("2.33.0")
    assert argv[argv.index("--release") + 1] == "2.33.0"
    assert argv[argv.index("--driver-floor") + 1] == window.low
    # The pool's own release: its window's rule goes to the node check too.
    assert main(["job", "render", pool, "--file", str(EKS)]) == 0
    argv = _node_check(capsys.readouterr().out)
    assert argv[argv.index("--release") + 1] == "2.28.1"
    assert argv[argv.index("--driver-below") + 1] == "2.29.0.0"
    assert "Neuron Driver 2.29 requires Neuron Runtime Library 2.33" in argv[argv.index("--driver-below-rule") + 1]
