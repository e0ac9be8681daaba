"""The ASG path's hostfile tooling runs the pre-job collective across its ready nodes (`neuronkit-hostfile
--collective`), in the boot sandbox: the real script under bash, a stub nccom-test playing the recorded outputs."""

from __future__ import annotations

from pathlib import Path

import pytest

from neuronkit import job_environment
from tests.conftest import ROOT
from tests.sandbox import Run, Scenario, available, run_user_data

HOSTFILE = ROOT / "neuronkit" / "userdata" / "kit" / "neuronkit-hostfile"
FIX = ROOT / "tests" / "fixtures" / "prejob"
NODES = ["10.0.0.10", "10.0.0.11", "10.0.0.12"]
BUSY = "/run/neuronkit/job-active"


@pytest.fixture(autouse=True, scope="module")
def _sandbox_runs_here() -> None:
    reason = available()
    if reason is not None:
        pytest.fail(reason, pytrace=False)


def _run(tmp_path: Path, recording: str, rc: int, *args: str, busy: bool = False) -> Run:
    port = job_environment.collective_ports().root_comm_port
    script = f"""#!/bin/bash
mkdir -p /etc/neuronkit /usr/local/bin /run/neuronkit
printf 'ROOT_COMM_PORT={port}\\nBUSY_MARKER={BUSY}\\n' > /etc/neuronkit/node.env
printf '%s\\n' {" ".join(NODES)} > /etc/neuronkit/hostfile
{"touch " + BUSY if busy else ":"}
cat > /opt/stubs/nccom-test <<'NCCOM'
#!/bin/bash
echo "nccom-test $* ROOT=${{NEURON_RT_ROOT_COMM_ID}} OMPI=${{OMPI_ALLOW_RUN_AS_ROOT:-}}${{OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-}}" >> /var/log/stub-calls
cat /opt/stubs/recording
exit "$(cat /opt/stubs/rc)"
NCCOM
chmod 0755 /opt/stubs/nccom-test
cat > /usr/local/bin/neuronkit-hostfile <<'KIT_SCRIPT_END'
{HOSTFILE.read_text()}KIT_SCRIPT_END
chmod 0755 /usr/local/bin/neuronkit-hostfile
/usr/local/bin/neuronkit-hostfile --collective {" ".join(args)}
"""
    scenario = Scenario(stub_files={"recording": (FIX / recording).read_text(), "rc": f"{rc}\n"})
    return run_user_data(script, scenario, tmp_path)


def test_a_healthy_collective_runs_across_every_ready_node(tmp_path: Path) -> None:
    run = _run(tmp_path, "nccom-test-healthy.txt", 0, "--cores", "64")
    assert run.returncode == 0, run.output
    (call,) = run.called("nccom-test")
    assert "-r 192 -N 3" in call and "--check all_ones allr" in call and f"--hosts {' '.join(NODES)}" in call
    assert "-b 64MB -e 1GB -f 2" in call and "OMPI=11" in call  # a sweep; Open MPI's consent to run as root
    assert f"ROOT={NODES[0]}:{job_environment.collective_ports().root_comm_port}" in call
    assert f"node {','.join(NODES)}: collective: ok: all-reduce correct, 47.27 GB/s" in run.output


def test_the_floor_is_compared_at_the_sweeps_largest_size(tmp_path: Path) -> None:
    run = _run(tmp_path / "a", "nccom-test-sweep-healthy.txt", 0, "--cores", "64", "--min-busbw-gbps", "45")
    assert run.returncode == 0 and "all-reduce correct, 47.09 GB/s" in run.output  # not the 44.98 average
    run = _run(tmp_path / "b", "nccom-test-sweep-slow.txt", 0, "--cores", "64", "--min-busbw-gbps", "40")
    assert run.returncode == 1 and "bus bandwidth 4.71 GB/s below the floor 40 GB/s" in run.output


def test_a_failed_collective_fails_with_the_nodes_and_the_reason(tmp_path: Path) -> None:
    run = _run(tmp_path, "nccom-test-failed.txt", 1, "--cores", "64")
    assert run.returncode == 1
    assert f"node {','.join(NODES)}: collective: FAILED: all-reduce did not complete (nccom-test exit 1)" in run.output
    assert "mismatch on rank 37" in run.output


def test_a_slow_collective_fails_only_with_a_floor(tmp_path: Path) -> None:
    assert _run(tmp_path / "a", "nccom-test-slow.txt", 0, "--cores", "64").returncode == 0
    run = _run(tmp_path / "b", "nccom-test-slow.txt", 0, "--cores", "64", "--min-busbw-gbps", "40")
    assert run.returncode == 1 and "bus bandwidth 4.73 GB/s below the floor 40 GB/s" in run.output


def test_never_while_a_job_runs_and_cores_are_required(tmp_path: Path) -> None:
    run = _run(tmp_path / "a", "nccom-test-healthy.txt", 0, "--cores", "64", busy=True)
    assert run.returncode == 1 and "a job is running" in run.output and not run.called("nccom-test")
    run = _run(tmp_path / "b", "nccom-test-healthy.txt", 0)
    assert run.returncode == 2 and "--cores N" in run.output
