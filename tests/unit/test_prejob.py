"""The pre-job checks (issue 41) on recorded tool outputs, and the checkpoint contract's sample entrypoint."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from neuronkit import catalog
from neuronkit.catalog import releases
from neuronkit.kubernetes import checkpoint_contract as cc
from neuronkit.kubernetes import prejob

FIX = Path(__file__).parents[1] / "fixtures" / "prejob"
TRN2 = catalog.get("trn2.48xlarge")
NODE = "ip-10-30-4-17.us-east-2.compute.internal"
FLOOR = releases.release("2.28.1").driver


def read(name: str) -> str:
    return (FIX / name).read_text()


def test_a_healthy_trn2_node_passes_every_check() -> None:
    outcomes = [
        prejob.check_devices(NODE, read("neuron-ls-trn2-healthy.json"), TRN2.neuron_devices),
        prejob.check_driver(NODE, FLOOR, FLOOR),
        prejob.check_efa(NODE, read("fi_info-efa-trn2-healthy.txt"), TRN2.efa_max_interfaces),
        prejob.check_lustre(NODE, "fs@tcp:/abc /fsx lustre rw 0 0\n", "/fsx"),
    ]
    assert all(o.ok for o in outcomes), outcomes
    assert prejob.report(outcomes, environment="team", pool="pretrain", termination_log="/nonexistent/x") == 0


def test_a_missing_device_names_the_node_and_the_device(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    o = prejob.check_devices(NODE, read("neuron-ls-trn2-missing-device.json"), TRN2.neuron_devices)
    assert not o.ok and o.reason == "15 Neuron devices, expected 16 (missing neuron_device 11)"
    log = tmp_path / "termination-log"
    assert prejob.report([o], environment="team", pool="pretrain", termination_log=str(log)) == 1
    assert log.read_text().startswith(f"node {NODE}: devices: FAILED: 15 Neuron devices")
    emf = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert emf["PreJobCheckFailed"] == 1 and emf["Node"] == NODE and emf["Check"] == "devices"
    assert emf["_aws"]["CloudWatchMetrics"][0]["Dimensions"] == [["Environment", "Pool", "Check"]]


def test_a_missing_efa_interface_fails() -> None:
    o = prejob.check_efa(NODE, read("fi_info-efa-trn2-missing-interface.txt"), TRN2.efa_max_interfaces)
    assert (
        not o.ok
        and o.reason == f"{TRN2.efa_max_interfaces - 1} EFA interfaces answer fi_info -p efa, expected {TRN2.efa_max_interfaces}"
    )
    none = prejob.check_efa(NODE, "", TRN2.efa_max_interfaces, returncode=61)
    assert not none.ok and "no EFA provider answers" in none.reason


def test_an_old_or_absent_driver_and_no_lustre_fail() -> None:
    major, minor, patch, build = FLOOR.split(".")
    older = f"{major}.{minor}.{int(patch) - 1}.{build}"
    assert not prejob.check_driver(NODE, older, FLOOR).ok
    assert "absent" in prejob.check_driver(NODE, "", FLOOR).reason
    assert not prejob.check_lustre(NODE, "tmpfs /fsx tmpfs rw 0 0\n", "/fsx").ok


def test_the_driver_rule_is_the_boot_checks_fail_below_the_minimum_warn_below_the_shipped() -> None:
    """A node the boot check admitted (driver between driver_min and driver_shipped) must not fail every job on it."""
    rel = releases.release("2.28.1")
    below_min = prejob.check_driver(NODE, "2.0.0.0", rel.driver_min, rel.driver)
    assert not below_min.ok and f"minimum {rel.driver_min}" in below_min.reason
    at_min = prejob.check_driver(NODE, rel.driver_min, rel.driver_min, rel.driver)
    assert at_min.ok
    if rel.driver_min != rel.driver:
        assert at_min.reason.startswith("WARNING:") and rel.driver in at_min.reason
    shipped = prejob.check_driver(NODE, rel.driver, rel.driver_min, rel.driver)
    assert shipped.ok and "WARNING" not in shipped.reason
    # a warning is a pass: the report returns 0 and writes no termination message
    assert prejob.report([at_min], environment="team", pool="pretrain", termination_log="/nonexistent/x") == 0


def test_a_release_whose_minimum_is_below_its_shipped_driver_exists_to_warn_on() -> None:
    """The warning path is reachable with the catalog's releases (2.28.1: 2.26.5.0 minimum, 2.26.10.0 shipped)."""
    rel = releases.release("2.28.1")
    assert prejob._version_key(rel.driver_min) < prejob._version_key(rel.driver)


NODES = ["10.30.4.17", "10.30.4.18"]


def test_a_healthy_collective_passes_with_and_without_a_threshold() -> None:
    result = prejob.parse_nccom(read("nccom-test-healthy.txt"), 0)
    assert result.completed and result.correct and result.busbw_gbps == pytest.approx(47.27)
    assert prejob.check_collective(NODES, result, None).ok
    assert prejob.check_collective(NODES, result, 40.0).ok


def test_a_failed_collective_fails_with_its_error() -> None:
    result = prejob.parse_nccom(read("nccom-test-failed.txt"), 1)
    o = prejob.check_collective(NODES, result, None)
    assert not o.ok and o.node == ",".join(NODES) and "mismatch on rank 37" in o.reason


def test_a_slow_collective_fails_only_with_a_threshold() -> None:
    result = prejob.parse_nccom(read("nccom-test-slow.txt"), 0)
    assert prejob.check_collective(NODES, result, None).ok  # unset by default: completion and correctness only
    o = prejob.check_collective(NODES, result, 40.0)
    assert not o.ok and o.reason == "all-reduce bus bandwidth 4.73 GB/s below the floor 40 GB/s"


def test_the_floor_is_compared_at_the_largest_size_of_the_sweep_not_the_average() -> None:
    """nccom-test's guide: small sizes measure latency (1.45 GB/s at 1 MB, 47.09 GB/s at 1 GB on two trn1)."""
    healthy = prejob.parse_nccom(read("nccom-test-sweep-healthy.txt"), 0)
    assert healthy.busbw_gbps == pytest.approx(47.09)  # the 1 GB row; the average line says 44.98
    assert prejob.check_collective(NODES, healthy, 45.0).ok
    slow = prejob.parse_nccom(read("nccom-test-sweep-slow.txt"), 0)
    assert not prejob.check_collective(NODES, slow, 40.0).ok


def test_the_collective_sweeps_to_a_size_that_measures_bandwidth() -> None:
    cmd = prejob.nccom_command(ranks=64, nodes=2, hosts=NODES, size=prejob.SWEEP, collector_host="10.30.4.17")
    assert cmd[cmd.index("-b") + 1] == "64MB" and cmd[cmd.index("-e") + 1] == "1GB" and cmd[cmd.index("-f") + 1] == "2"
    assert cmd[-2:] == ["--data-collector-host", "10.30.4.17"]


def test_nccom_command_is_a_small_checked_all_reduce_across_the_hosts() -> None:
    cmd = prejob.nccom_command(ranks=128, nodes=2, hosts=NODES, size="1MB")
    assert cmd[:3] == ["nccom-test", "-r", "128"] and cmd[cmd.index("-N") + 1] == "2"
    assert "--check" in cmd and "allr" in cmd and cmd[-2:] == NODES
    assert "--hosts" not in prejob.nccom_command(ranks=64, nodes=1, hosts=[], size="1kb")


def test_the_program_fails_the_pod_with_a_termination_message(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``prejob.py collective`` end to end with a stub nccom-test that prints the failed recording and exits 1."""
    stub = tmp_path / "bin" / "nccom-test"
    stub.parent.mkdir()
    stub.write_text(f"#!/bin/sh\ncat {FIX / 'nccom-test-failed.txt'}\nexit 1\n")
    stub.chmod(0o755)
    hosts = tmp_path / "hosts"
    hosts.write_text("\n".join(NODES) + "\n")
    monkeypatch.setenv("PATH", f"{stub.parent}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(prejob, "TERMINATION_LOG", str(tmp_path / "term"))
    rc = prejob.main(["--environment", "team", "--pool", "pretrain", "collective", "--hosts-file", str(hosts), "--cores", "64"])
    assert rc == 1
    assert "collective: FAILED: all-reduce did not complete" in (tmp_path / "term").read_text()


def test_calibrate_records_a_healthy_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stub = tmp_path / "bin" / "nccom-test"
    stub.parent.mkdir()
    stub.write_text(f"#!/bin/sh\ncat {FIX / 'nccom-test-healthy.txt'}\n")
    stub.chmod(0o755)
    hosts = tmp_path / "hosts"
    hosts.write_text("\n".join(NODES) + "\n")
    monkeypatch.setenv("PATH", f"{stub.parent}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "cal" / "pretrain.json"
    rc = prejob.main(["collective", "--hosts-file", str(hosts), "--cores", "64", "--calibrate", str(out)])
    assert rc == 0 and json.loads(out.read_text())["busbw_gbps"] == pytest.approx(47.27)


# --- the checkpoint contract ---------------------------------------------------------------------------------


def test_the_sample_checkpoints_on_the_sentinel_and_resumes_from_the_latest(tmp_path: Path) -> None:
    sentinel = tmp_path / "fsx" / "checkpoint" / "pretrain"
    contract = cc.Contract(str(sentinel), install=False)
    ckpt = tmp_path / "ckpt"

    class Stop(cc.Contract):
        def should_stop(self) -> bool:  # the sentinel appears at step 250
            if self_steps.append(1) or len(self_steps) == 250:
                sentinel.parent.mkdir(parents=True, exist_ok=True)
                sentinel.write_text("now")
            return contract.should_stop()

    self_steps: list[int] = []
    last = cc.train(checkpoint_dir=ckpt, steps=1000, contract=Stop(str(sentinel), install=False), save_every=100)
    assert last == 250 and contract.reason.startswith("sentinel")
    assert cc.latest_checkpoint(ckpt) == ckpt / "step-00000250"
    # an incomplete checkpoint (SIGKILL mid-write) is never resumed from
    (ckpt / "step-00000260").mkdir()
    sentinel.unlink()
    assert cc.train(checkpoint_dir=ckpt, steps=300, contract=cc.Contract(str(sentinel), install=False)) == 300
    state = json.loads((ckpt / "step-00000300" / "state.json").read_text())
    assert state["total"] == sum(range(1, 301))  # resumed at 250, not restarted from 0


def test_a_sentinel_older_than_the_pod_never_stops_it_a_newer_one_does(tmp_path: Path) -> None:
    """The sentinel of a past Capacity Block stays on Lustre: a job started after it must run; one written after the
    pod started (the CronJob at E - L of the current block) stops it."""
    sentinel = tmp_path / "checkpoint" / "pretrain"
    sentinel.parent.mkdir()
    sentinel.write_text("2027-01-18T10:30:00Z\n")
    os.utime(sentinel, (1_000, 1_000))
    contract = cc.Contract(str(sentinel), stop_file=str(tmp_path / "stop"), started=2_000, install=False)
    assert not contract.should_stop()
    assert cc.train(checkpoint_dir=tmp_path / "c", steps=20, contract=contract) == 20  # ran to the end
    os.utime(sentinel, (2_000, 2_000))
    assert contract.should_stop() and contract.reason.startswith("sentinel")
    contract.mark_stopped(20)
    assert contract.stopped_file.read_text().startswith("step 20: sentinel")


def test_the_pod_local_stop_file_stops_the_ranks_without_marking_an_early_stop(tmp_path: Path) -> None:
    stop, stopped = tmp_path / "run" / "stop", tmp_path / "run" / "stopped"
    contract = cc.Contract(str(tmp_path / "none"), stop_file=str(stop), stopped_file=str(stopped), install=False)
    assert not contract.should_stop()
    stop.parent.mkdir()
    stop.touch()
    assert cc.train(checkpoint_dir=tmp_path / "c", steps=10, contract=contract) == 1
    assert contract.reason.startswith("pod stopping") and cc.latest_checkpoint(tmp_path / "c") is not None
    assert not stopped.exists()  # a drain restarts the job: only the sentinel's stop is final


def test_sigterm_asks_the_sample_to_checkpoint(tmp_path: Path) -> None:
    contract = cc.Contract(str(tmp_path / "none"))
    try:
        os.kill(os.getpid(), signal.SIGTERM)
        assert contract.should_stop() and contract.reason == "SIGTERM"
        assert cc.train(checkpoint_dir=tmp_path / "c", steps=10, contract=contract) == 1
        assert cc.latest_checkpoint(tmp_path / "c") == tmp_path / "c" / "step-00000001"
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


def test_only_global_rank_0_writes_the_samples_checkpoints(tmp_path: Path) -> None:
    """torchrun starts one process per logical core on every node: one writer, not 1,024, per checkpoint directory."""
    contract = cc.Contract(str(tmp_path / "none"), stop_file=str(tmp_path / "stop"), install=False)
    assert cc.train(checkpoint_dir=tmp_path / "c", steps=250, contract=contract, rank=5) == 250
    assert not (tmp_path / "c").exists()
    assert cc.train(checkpoint_dir=tmp_path / "c", steps=250, contract=contract, rank=0) == 250
    assert cc.latest_checkpoint(tmp_path / "c") == tmp_path / "c" / "step-00000250"
