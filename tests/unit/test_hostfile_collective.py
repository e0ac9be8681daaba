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


# --- across two sandboxed nodes: the pool's SSH trust (kit/neuronkit-ssh-trust), then the collective -----------

SSH_TRUST = ROOT / "neuronkit" / "userdata" / "kit" / "neuronkit-ssh-trust"
KEY_PARAM = "_neuronkit_team_pretrain_ssh-key"  # /neuronkit/team/pretrain/ssh-key in the stub's store
PAIR = ["10.0.0.10", "10.0.0.11"]


def _boot_node(tmp_path: Path, *, key: str | None = None, tail: str = ":", files: dict[str, str] | None = None) -> Run:
    """One node of the pool: the kit's node.env and scripts, the pool's SSH trust as at boot, then ``tail``. ``key``:
    the parameter another node already stored."""
    port = job_environment.collective_ports().root_comm_port
    seed = f"mkdir -p /opt/stubs/ssm && cp /opt/stubs/seed-key /opt/stubs/ssm/{KEY_PARAM}" if key else ":"
    script = f"""#!/bin/bash
set -euo pipefail
mkdir -p /etc/neuronkit /usr/local/bin /run/neuronkit
printf 'ENVIRONMENT=team\\nPOOL=pretrain\\nREGION=us-east-1\\nROOT_COMM_PORT={port}\\nBUSY_MARKER={BUSY}\\n' > /etc/neuronkit/node.env
{seed}
cat > /usr/local/bin/neuronkit-ssh-trust <<'KIT_SCRIPT_END'
{SSH_TRUST.read_text()}KIT_SCRIPT_END
cat > /usr/local/bin/neuronkit-hostfile <<'KIT_SCRIPT_END'
{HOSTFILE.read_text()}KIT_SCRIPT_END
chmod 0755 /usr/local/bin/neuronkit-ssh-trust /usr/local/bin/neuronkit-hostfile
/usr/local/bin/neuronkit-ssh-trust
{tail}
"""
    stub_files = {**(files or {}), **({"seed-key": key} if key else {})}
    return run_user_data(script, Scenario(stub_files=stub_files), tmp_path)


# nccom-test's MPI launch reduced to what needs trust: an SSH login to every other host of --hosts. The ssh stub
# plays the network: it admits the login when the key this node's ssh config names is in the peer's authorized_keys.
_SSH = r"""#!/bin/bash
host=""; for a in "$@"; do case "${a}" in -*|BatchMode=*|true) ;; *) host="${a}" ;; esac; done
identity=$(awk '$1 == "IdentityFile" {print $2; exit}' /root/.ssh/config)
if grep -qxF "$(ssh-keygen -y -f "${identity}")" "/opt/stubs/peer-${host}-authorized_keys" 2>/dev/null; then
  echo "ssh ${host}: ok" >> /var/log/stub-calls; exit 0
fi
echo "ssh ${host}: Permission denied (publickey)" >&2; exit 255
"""
_NCCOM_OVER_SSH = r"""#!/bin/bash
echo "nccom-test $* OMPI=${OMPI_ALLOW_RUN_AS_ROOT:-}${OMPI_ALLOW_RUN_AS_ROOT_CONFIRM:-}" >> /var/log/stub-calls
hosts=$(printf '%s\n' "$@" | sed -n '/^--hosts$/,$p' | sed '1d;/^--/,$d')
for h in $(printf '%s\n' ${hosts} | tail -n +2); do
  /opt/stubs/ssh -o BatchMode=yes "${h}" true || { echo "error: mpirun could not start ranks on ${h}"; exit 1; }
done
cat /opt/stubs/recording
"""


def _collective_tail() -> str:
    return (
        f"printf '%s\\n' {' '.join(PAIR)} > /etc/neuronkit/hostfile\n"
        f"cat > /opt/stubs/ssh <<'STUB'\n{_SSH}STUB\n"
        f"cat > /opt/stubs/nccom-test <<'STUB'\n{_NCCOM_OVER_SSH}STUB\n"
        "chmod 0755 /opt/stubs/ssh /opt/stubs/nccom-test\n"
        "/usr/local/bin/neuronkit-hostfile --collective --cores 64\n"
    )


def test_the_collective_runs_across_two_sandboxed_nodes_that_trust_the_pools_key(tmp_path: Path) -> None:
    first = _boot_node(tmp_path / "a-boot")
    assert first.returncode == 0, first.output
    assert first.called("aws ssm get-parameter") and first.called("aws ssm put-parameter")  # first node: makes it
    key = (first.root / "opt" / "stubs" / "ssm" / KEY_PARAM).read_text()
    assert "PRIVATE KEY" in key
    second = _boot_node(tmp_path / "b-boot", key=key)
    assert second.returncode == 0, second.output
    assert not second.called("aws ssm put-parameter")  # a later node reads the pool's key, never replaces it
    assert second.file("/root/.ssh/neuronkit_pool") == key
    trusted_by_b = second.file("/root/.ssh/authorized_keys")
    recording = (FIX / "nccom-test-sweep-healthy.txt").read_text()
    run = _boot_node(
        tmp_path / "a-collective", key=key, tail=_collective_tail(),
        files={"recording": recording, f"peer-{PAIR[1]}-authorized_keys": trusted_by_b},
    )  # fmt: skip
    assert run.returncode == 0, run.output
    assert f"ssh {PAIR[1]}: ok" in run.calls
    (call,) = run.called("nccom-test")
    assert "-r 128 -N 2" in call and f"--hosts {' '.join(PAIR)}" in call and "OMPI=11" in call
    assert f"node {','.join(PAIR)}: collective: ok: all-reduce correct, 47.09 GB/s" in run.output


def test_a_peer_without_the_pools_key_fails_the_collective_naming_it(tmp_path: Path) -> None:
    first = _boot_node(tmp_path / "a-boot")
    key = (first.root / "opt" / "stubs" / "ssm" / KEY_PARAM).read_text()
    stranger = _boot_node(tmp_path / "stranger")  # another pool's store: a key of its own
    run = _boot_node(
        tmp_path / "a-collective", key=key, tail=_collective_tail(),
        files={"recording": (FIX / "nccom-test-sweep-healthy.txt").read_text(),
               f"peer-{PAIR[1]}-authorized_keys": stranger.file("/root/.ssh/authorized_keys")},
    )  # fmt: skip
    assert run.returncode == 1
    assert (
        f"collective: FAILED: all-reduce did not complete (nccom-test exit 1): error: mpirun could not start ranks on {PAIR[1]}"
        in run.output
    )
