"""The bash programs of a rendered training job, run for real: the launcher with the checkpoint contract's sample
(block-specific sentinel, the preStop hook's stop file, the early-stop exit code) and the collective step across two
simulated pods (one result for all, the private key never on Lustre, the run's directory removed, the deadline).

The programs run as rendered; only absolute paths that need root (``/fsx``, ``/root/.ssh``, ``/usr/sbin/sshd``, the
run directory in ``/tmp``) are pointed into the test's directory, and ``torchrun``, ``hostname`` and ``nccom-test``
are stubs on PATH.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from neuronkit.catalog import releases
from neuronkit.kubernetes import checkpoint_contract as cc
from neuronkit.kubernetes import training_job as tj
from tests import image_env

KIT = Path(tj.__file__).parent
FIX = Path(__file__).parents[1] / "fixtures" / "prejob"
PINNED = sorted({img for v in releases.versions() if (img := releases.release(v).container("training"))})
SPEC = tj.JobSpec(
    name="llama", environment="team", pool="pretrain", instance_type="trn1.32xlarge", nodes=2, release="2.28.1",
    datasets_bucket="d", checkpoints_bucket="c",
)  # fmt: skip


def _stub(bin_dir: Path, name: str, body: str) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    path = bin_dir / name
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(0o755)


def _container_env(container: str) -> dict[str, str]:
    pod = tj.render_jobset(SPEC)["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    found = next(c for c in pod["initContainers"] + pod["containers"] if c["name"] == container)
    return {e["name"]: e["value"] for e in found["env"] if "value" in e}


# --- the launcher, the preStop hook and the checkpoint contract ------------------------------------------------------


@pytest.fixture
def launcher(tmp_path: Path) -> dict[str, Any]:
    """The rendered launcher with a torchrun stub that runs the sample entrypoint as the one rank of one node."""
    run = tmp_path / "run"
    env = {**os.environ, **_container_env(tj.TRAIN_CONTAINER)}
    env.update(
        {
            "JOB_COMPLETION_INDEX": "0",
            "NNODES": "1",
            "MASTER_ADDR": "localhost",
            "NEURON_COMPILE_CACHE_URL": str(tmp_path / "cache"),
            "NEURONKIT_CHECKPOINT_DIR": str(tmp_path / "ckpt"),
            "NEURONKIT_CHECKPOINT_REQUEST": str(tmp_path / "fsx" / "checkpoint" / "pretrain"),
            "NEURONKIT_RUN_DIR": str(run),
            "NEURONKIT_STOP_FILE": env["NEURONKIT_STOP_FILE"].replace(tj.RUN_DIR, str(run)),
            "NEURONKIT_STOPPED_FILE": env["NEURONKIT_STOPPED_FILE"].replace(tj.RUN_DIR, str(run)),
            "PATH": f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}",
        }
    )
    # torchrun's own options dropped; the rest is the training command (the sample), run as the node's one rank
    _stub(tmp_path / "bin", "torchrun", 'while [ "${1#--}" != "$1" ]; do shift; done\nexec python3 "$@"\n')
    return {"env": env, "run": run, "ckpt": tmp_path / "ckpt", "sentinel": Path(env["NEURONKIT_CHECKPOINT_REQUEST"])}


def _start(launcher: dict[str, Any], steps: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        ["bash", "-c", tj.LAUNCHER, "launcher", str(KIT / "checkpoint_contract.py")],
        env={**launcher["env"], "NEURONKIT_SAMPLE_STEPS": str(steps)},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _running(launcher: dict[str, Any], proc: subprocess.Popen[str]) -> None:
    """Wait until torchrun runs and the sample has stepped (its first periodic checkpoint is not needed)."""
    deadline = time.monotonic() + 20
    while not (launcher["run"] / "torchrun.pid").exists() and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()[0]
        time.sleep(0.1)
    time.sleep(1.5)
    assert proc.poll() is None


def test_a_sentinel_of_a_past_block_does_not_stop_a_new_job(launcher: dict[str, Any]) -> None:
    sentinel: Path = launcher["sentinel"]
    sentinel.parent.mkdir(parents=True)
    sentinel.write_text("2027-01-18T10:30:00Z\n")
    past = time.time() - 3600
    os.utime(sentinel, (past, past))
    proc = _start(launcher, steps=5)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    assert cc.latest_checkpoint(launcher["ckpt"]) == launcher["ckpt"] / "step-00000005"  # ran to the end
    assert "checkpointed at step" not in out and not (launcher["run"] / "stopped").exists()


def test_a_sentinel_written_while_the_job_runs_stops_it_with_its_own_exit_code(launcher: dict[str, Any]) -> None:
    proc = _start(launcher, steps=100_000)
    _running(launcher, proc)
    launcher["sentinel"].parent.mkdir(parents=True)
    launcher["sentinel"].write_text("2027-01-18T10:30:00Z\n")
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == tj.EXIT_CHECKPOINTED == 75, out  # not 0: the JobSet must not end Completed
    assert "checkpointed and stopped early: step" in out and "sentinel" in out
    last = cc.latest_checkpoint(launcher["ckpt"])
    assert last is not None and (last / cc.COMPLETE).exists()


def test_the_pre_stop_hook_stops_the_ranks_through_the_file_and_waits_for_them(launcher: dict[str, Any]) -> None:
    """Kubernetes runs preStop, then SIGTERM: the hook must return only after the ranks checkpointed and torchrun
    ended, so the ranks get the pod's grace instead of torchrun's 30 s."""
    proc = _start(launcher, steps=100_000)
    _running(launcher, proc)
    hook = tj.PRE_STOP.replace(tj.RUN_DIR, str(launcher["run"]))
    done = subprocess.run(["bash", "-c", hook], capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 0, done.stderr
    assert proc.poll() is not None  # torchrun (and the launcher) ended before the hook returned
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == tj.EXIT_POD_STOPPED, out  # a drain is a rank failure: restart and resume
    assert "pod stopping" in out
    assert cc.latest_checkpoint(launcher["ckpt"]) is not None


def test_the_pre_stop_hook_waits_at_most_the_checkpoint_budget_for_blocked_ranks(
    launcher: dict[str, Any], tmp_path: Path
) -> None:
    """Ranks blocked in a collective with a dead peer never see the stop file: the hook stops torchrun after the
    checkpoint budget instead of holding the pod for the whole grace."""
    _stub(tmp_path / "bin", "torchrun", "exec sleep 600\n")  # a rank that never checkpoints
    proc = _start(launcher, steps=5)
    deadline = time.monotonic() + 20
    while not (launcher["run"] / "torchrun.pid").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    hook = tj.PRE_STOP.replace(tj.RUN_DIR, str(launcher["run"]))
    start = time.monotonic()
    done = subprocess.run(
        ["bash", "-c", hook], env={**os.environ, "NEURONKIT_STOP_WAIT_SECONDS": "2"}, capture_output=True, text=True,
        timeout=30, check=False,
    )  # fmt: skip
    assert done.returncode == 0 and time.monotonic() - start < 10, done.stdout + done.stderr
    assert "did not stop within 2 s; stopping torchrun" in done.stdout
    out, _ = proc.communicate(timeout=10)
    assert proc.returncode == tj.EXIT_POD_STOPPED, out


def test_the_rendered_wait_is_the_budget_below_the_grace() -> None:
    spec = tj.JobSpec(**{**SPEC.__dict__, "checkpoint_budget_seconds": 300})
    assert _container_env(tj.TRAIN_CONTAINER)["NEURONKIT_STOP_WAIT_SECONDS"] == str(SPEC.stop_wait_seconds)
    assert spec.stop_wait_seconds == 300
    assert SPEC.stop_wait_seconds == SPEC.termination_grace_seconds - int(tj.facts()["defaults"]["stop_margin_seconds"])


def test_sigterm_to_the_launcher_asks_the_ranks_through_the_file_too(launcher: dict[str, Any]) -> None:
    proc = _start(launcher, steps=100_000)
    _running(launcher, proc)
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == tj.EXIT_POD_STOPPED, out
    assert "pod stopping" in out and cc.latest_checkpoint(launcher["ckpt"]) is not None


def test_a_failed_training_keeps_its_exit_code(launcher: dict[str, Any], tmp_path: Path) -> None:
    _stub(tmp_path / "bin", "torchrun", "exit 1\n")
    proc = _start(launcher, steps=5)
    out, _ = proc.communicate(timeout=30)
    assert proc.returncode == 1, out


# --- the collective step across two simulated pods -----------------------------------------------------------


def _image_root(pod: Path, image: str) -> tuple[dict[str, str], Path]:
    """The image's PATH and LD_LIBRARY_PATH exactly (tests/fixtures/images/), with the directories the image adds
    (/opt, /home, /usr/local) moved into the pod's fake root, which holds only the tools the fixture places there;
    the base system's directories are this machine's."""
    fake = image_env.of(image)
    root = pod / "image"

    def moved(d: str) -> str:
        return str(root) + d if d.startswith(("/opt/", "/home/", "/usr/local/")) else d

    env = {k: ":".join(moved(d) if d else d for d in v.split(":")) for k, v in fake.env().items() if k != "HOME"}
    tool = Path(moved(fake.tools["python3"]))
    tool.parent.mkdir(parents=True, exist_ok=True)
    tool.symlink_to(sys.executable)
    return {**env, "HOME": "/root"}, root


def _collective_pod(
    tmp_path: Path, index: int, nccom: str, deadline: int = 60, image: str | None = None
) -> subprocess.Popen[str]:
    pod = tmp_path / f"pod{index}"
    bin_dir = pod / "bin"
    base: dict[str, str] = dict(os.environ)
    if image is not None:  # only the image's environment: its nccom-test where its Dockerfile puts it
        base, root = _image_root(pod, image)
        nccom_at = Path(str(root) + image_env.of(image).tools["nccom-test"])
        _stub(nccom_at.parent, "nccom-test", nccom)
        bin_dir = root / "usr" / "local" / "bin"  # the pod's stand-ins (its address, sshd) on the image's PATH
    else:
        _stub(bin_dir, "nccom-test", nccom)
    _stub(bin_dir, "hostname", f"echo 10.30.4.{17 + index}\n")
    _stub(bin_dir, "sshd", "exit 0\n")
    script = (
        tj.COLLECTIVE.replace("/fsx/", f"{tmp_path}/fsx/")
        .replace("/root/.ssh", f"{pod}/ssh")
        .replace("/usr/sbin/sshd", "sshd")
        .replace("/run/sshd", f"{pod}/run-sshd")
        .replace("ssh-keygen -A", "true")
        .replace("/opt/neuronkit/prejob.py", str(KIT / "prejob.py"))
        .replace("/tmp/neuronkit-hostfile", f"{pod}/hostfile")
        # Time compressed: the pods poll every 2 s; nothing here depends on the interval but the suite's wall time.
        .replace("sleep 2", "sleep 0.1")
    )
    assert "sleep 2" not in script
    env = {**base, **_container_env(tj.COLLECTIVE_CONTAINER)}
    env.update(
        {
            "JOB_COMPLETION_INDEX": str(index),
            "NNODES": "2",
            "NODE_NAME": f"node-{index}",
            "POD_IP": f"10.30.4.{17 + index}",  # the downward API's status.podIP
            "JOBSET_UID": "uid-1",
            "JOBSET_RESTART_ATTEMPT": "0",
            "NEURONKIT_CHECK_DEADLINE_SECONDS": str(deadline),
        }
    )
    if image is None:
        env["PATH"] = f"{bin_dir}{os.pathsep}{os.environ['PATH']}"
    args = tj.collective_args(SPEC)
    return subprocess.Popen(
        ["bash", "-c", script, "collective", *args], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


@pytest.fixture
def needs_ssh_keygen() -> None:
    if shutil.which("ssh-keygen") is None:
        pytest.fail("ssh-keygen (openssh-client) is needed to run the collective step", pytrace=False)


def test_a_healthy_collective_passes_on_every_pod_and_leaves_no_key_on_lustre(tmp_path: Path, needs_ssh_keygen: None) -> None:
    healthy = f"cat {FIX / 'nccom-test-healthy.txt'}\n"
    pods = [_collective_pod(tmp_path, i, healthy) for i in (1, 0)]
    outs = [p.communicate(timeout=60)[0] for p in pods]
    assert [p.returncode for p in pods] == [0, 0], outs
    run_dir = tmp_path / "fsx" / ".neuronkit" / "prejob" / "uid-1" / "attempt-0"
    assert not run_dir.exists()  # removed once both read the result: no keys, no addresses left behind
    assert (tmp_path / "pod0" / "ssh" / "id_ed25519").exists()  # the private key stayed in pod 0
    assert not (tmp_path / "pod1" / "ssh" / "id_ed25519").exists()
    assert (tmp_path / "pod1" / "ssh" / "authorized_keys").read_text() == (
        tmp_path / "pod0" / "ssh" / "id_ed25519.pub"
    ).read_text()
    assert (tmp_path / "pod0" / "hostfile").read_text().split() == ["10.30.4.17", "10.30.4.18"]


@pytest.mark.parametrize("image", PINNED)
def test_the_collective_runs_in_each_pinned_images_environment(tmp_path: Path, image: str, needs_ssh_keygen: None) -> None:
    """The collective step and prejob.py with the image's PATH and LD_LIBRARY_PATH only: every tool they call by name
    is on the image's PATH (nccom-test in /opt/aws/neuron/bin, from the Dockerfile), none from this machine's."""
    healthy = f"cat {FIX / 'nccom-test-sweep-healthy.txt'}\n"
    pods = [_collective_pod(tmp_path, i, healthy, image=image) for i in (1, 0)]
    outs = [p.communicate(timeout=60)[0] for p in pods]
    assert [p.returncode for p in pods] == [0, 0], outs
    assert "collective: ok: all-reduce correct, 47.09 GB/s bus bandwidth" in outs[1]


def test_a_failed_collective_fails_every_pod_with_the_code_the_job_fails_on(tmp_path: Path, needs_ssh_keygen: None) -> None:
    failed = f"cat {FIX / 'nccom-test-failed.txt'}\nexit 1\n"
    pods = [_collective_pod(tmp_path, i, failed) for i in (0, 1)]
    outs = [p.communicate(timeout=60)[0] for p in pods]
    assert [p.returncode for p in pods] == [tj.EXIT_COLLECTIVE_FAILED] * 2, outs
    assert "collective: FAILED" in outs[0]


def test_a_missing_peer_is_waiting_not_a_failed_collective(tmp_path: Path, needs_ssh_keygen: None) -> None:
    """Peers that never arrived (Pending pods: a block's nodes still booting) end pod 0 with the code the JobSet
    restarts on without counting it, not the failed collective's (FailJobSet)."""
    start = time.monotonic()
    pod0 = _collective_pod(tmp_path, 0, "exit 0\n", deadline=3)
    out, _ = pod0.communicate(timeout=30)
    assert pod0.returncode == tj.EXIT_PEERS_MISSING != tj.EXIT_COLLECTIVE_FAILED, out
    assert "collective: WAITING: 1 of 2 pods reported within the deadline" in out and time.monotonic() - start < 20


def test_a_peer_whose_pod_0_never_arrived_waits_too(tmp_path: Path, needs_ssh_keygen: None) -> None:
    pod1 = _collective_pod(tmp_path, 1, "exit 0\n", deadline=3)
    out, _ = pod1.communicate(timeout=30)
    assert pod1.returncode == tj.EXIT_PEERS_MISSING, out
    assert "collective: WAITING: no public key from pod 0 within 3 s" in out


def test_the_collective_reports_to_the_pods_ip_and_uses_the_pods_interface(tmp_path: Path, needs_ssh_keygen: None) -> None:
    """aws-k8s-tester's multi-node nccom-test on EKS: CCOM_SOCKET_IFNAME=eth0 and --data-collector-host $POD_IP."""
    record = f'echo "$* IFNAME=${{CCOM_SOCKET_IFNAME}}" > {tmp_path}/nccom-args\ncat {FIX / "nccom-test-healthy.txt"}\n'
    pods = [_collective_pod(tmp_path, i, record) for i in (0, 1)]
    outs = [p.communicate(timeout=60)[0] for p in pods]
    assert [p.returncode for p in pods] == [0, 0], outs
    args = (tmp_path / "nccom-args").read_text()
    assert "--hosts 10.30.4.17 10.30.4.18 --data-collector-host 10.30.4.17" in args and "IFNAME=eth0" in args


def test_a_collective_cut_by_the_deadline_is_waiting_not_a_failure(tmp_path: Path, needs_ssh_keygen: None) -> None:
    """A peer that arrives just before the deadline leaves the all-reduce too little time: timeout's exit (124) is
    waiting (the JobSet restarts), not the failed collective's FailJobSet (review of issue 48, finding 2)."""
    pods = [_collective_pod(tmp_path, i, "sleep 60\n", deadline=8) for i in (1, 0)]
    outs = [p.communicate(timeout=60)[0] for p in pods]
    assert pods[1].returncode == tj.EXIT_PEERS_MISSING != tj.EXIT_COLLECTIVE_FAILED, outs


def test_a_requeued_job_ignores_what_the_earlier_admission_left(tmp_path: Path, needs_ssh_keygen: None) -> None:
    """Kueue's requeue keeps the JobSet's restart attempt, so the next admission finds the earlier one's directory: an
    old key, old addresses and an old result. The new pods neither take that result nor count those addresses (review
    of issue 48, finding 1): both pass on a healthy all-reduce."""
    stale = tmp_path / "fsx" / ".neuronkit" / "prejob" / "uid-1" / "attempt-0"
    (stale / "hosts").mkdir(parents=True)
    (stale / "ack").mkdir()
    (stale / "key.pub").write_text("ssh-ed25519 AAAAold old@pod0\n")
    (stale / "hosts" / "0").write_text("old-0 10.30.9.1 111\n")
    (stale / "hosts" / "1").write_text("old-1 10.30.9.2 111\n")
    (stale / "result").write_text(f"{tj.EXIT_COLLECTIVE_FAILED}\nold-0\nold-1\n")
    healthy = f"cat {FIX / 'nccom-test-healthy.txt'}\n"
    pods = [_collective_pod(tmp_path, i, healthy) for i in (1, 0)]  # the peer first: it sees only the stale files
    outs = [p.communicate(timeout=90)[0] for p in pods]
    assert [p.returncode for p in pods] == [0, 0], outs
    assert (tmp_path / "pod0" / "hostfile").read_text().split() == ["10.30.4.17", "10.30.4.18"]
