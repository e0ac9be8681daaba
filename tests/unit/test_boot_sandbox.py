"""Boot scripts as programs: the rendered user data of each kind of node, run in the sandbox (tests/sandbox.py).

Each scenario gives the node its devices and driver and makes chosen commands fail, then asserts what
the node told Auto Scaling (the launch hook's CONTINUE or ABANDON) or, for Batch nodes, whether it
powered itself off before the ECS agent could place a job on it.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from neuronkit import catalog
from neuronkit.catalog import releases, serving
from neuronkit.constructs import (
    AmiSpec,
    BatchTrainingCluster,
    FleetNodesSpec,
    InferenceFleet,
    NodePoolSpec,
    ServeSpec,
    TrainingCluster,
)
from neuronkit.constructs.serving_specs import ServingSpec
from neuronkit.constructs.storage import StorageAccess
from neuronkit.userdata.neuron_monitor_publisher import BUSY_MARKER
from tests.conftest import ROOT
from tests.sandbox import CLOCK_START, INSTANCE_ID, Run, Scenario, available, resolve, run_user_data
from tests.templates import SUBNET_ID, bare_stack, imported_vpc, one, resources, template


@pytest.fixture(autouse=True, scope="module")
def _sandbox_runs_here() -> None:
    # Never a skip: a runner that cannot run the sandbox fails here with the reason (tests/sandbox.py).
    reason = available()
    if reason is not None:
        pytest.fail(reason, pytrace=False)


TRN = catalog.get("trn1.32xlarge")
DRIVER = releases.release("2.28.1").driver
_MAJOR, _MINOR, _PATCH, _BUILD = DRIVER.split(".")
NEWER_DRIVER = f"{_MAJOR}.{_MINOR}.{int(_PATCH) + 1}.{_BUILD}"  # one patch above the shipped driver
OLDER_DRIVER = f"{_MAJOR}.{_MINOR}.{int(_PATCH) - 1}.{_BUILD}"
HOOK = catalog.software_facts()["lifecycle"]["hook_name"]
STORAGE = StorageAccess(
    datasets_bucket="team-datasets-123456789012-us-east-1",
    checkpoints_bucket="team-checkpoints-123456789012-us-east-1",
    artifacts_bucket="team-artifacts-123456789012-us-east-1",
    lustre_dns_name="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
    lustre_mount_name="abcdefgh",
)


def _user_data(data: dict[str, Any]) -> str:
    lt = next(
        r for r in resources(data, "AWS::EC2::LaunchTemplate").values() if "UserData" in r["Properties"]["LaunchTemplateData"]
    )
    return resolve(lt["Properties"]["LaunchTemplateData"]["UserData"])


@pytest.fixture(scope="module")
def training_user_data() -> str:
    stack = bare_stack()
    TrainingCluster(
        stack, "Cluster", environment="team", name="pretrain", vpc=imported_vpc(stack),
        nodes=NodePoolSpec("trn1.32xlarge", max_size=4, ami=AmiSpec(root_device_name="/dev/sda1", ami_id="ami-0123456789abcdef0")),
        subnet_id=SUBNET_ID, az_id="use1-az6",
        storage=STORAGE, expected_neuron_driver=DRIVER,
    )  # fmt: skip
    data = template(stack)
    hooks = one(data, "AWS::AutoScaling::AutoScalingGroup")["Properties"]["LifecycleHookSpecificationList"]
    assert [h["LifecycleHookName"] for h in hooks] == [HOOK]
    return _user_data(data)


@pytest.fixture(scope="module")
def batch_user_data() -> str:
    stack = bare_stack()
    BatchTrainingCluster(
        stack, "Jobs", environment="team", name="jobs", vpc=imported_vpc(stack),
        nodes=NodePoolSpec("trn1.32xlarge", max_size=2, ami=AmiSpec(root_device_name="/dev/xvda", ami_id="ami-0123456789abcdef0")),
        subnet_id=SUBNET_ID, storage=STORAGE,
        container_image="public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.28.0-ubuntu24.04",
    )  # fmt: skip
    text = _user_data(template(stack))
    # The launch template carries a MIME archive; cloud-init runs its shell part.
    body = text.split('Content-Type: text/x-shellscript; charset="us-ascii"\n\n', 1)[1]
    return body.rsplit("\n\n--==NEURONKIT-BATCH==--", 1)[0] + "\n"


def healthy(**over: Any) -> Scenario:
    return Scenario(**{"neuron_devices": TRN.neuron_devices, "efa_devices": TRN.efa_max_interfaces, "driver": DRIVER, **over})


def hook_results(run: Run) -> list[str]:
    out = []
    for call in run.called("aws autoscaling complete-lifecycle-action"):
        assert f"--lifecycle-hook-name {HOOK}" in call and f"--instance-id {INSTANCE_ID}" in call
        assert "--auto-scaling-group-name team-pretrain" in call
        out.append(call.rsplit("--lifecycle-action-result ", 1)[1].split()[0])
    return out


def test_a_healthy_node_continues_then_joins_the_ready_set(training_user_data: str, tmp_path: Path) -> None:
    run = run_user_data(training_user_data, healthy(), tmp_path)
    assert hook_results(run) == ["CONTINUE"], run.output[-3000:]
    tags = run.called("aws ec2 create-tags")
    assert any(f"Key=neuronkit:neuron-driver,Value={DRIVER}" in t for t in tags)
    # Ready before CONTINUE, while the hook can still say ABANDON if the tag cannot be written.
    ready = [i for i, c in enumerate(run.calls) if "Key=neuronkit:ready,Value=true" in c]
    cont = [i for i, c in enumerate(run.calls) if "--lifecycle-action-result CONTINUE" in c]
    assert ready and cont and ready[-1] < cont[0]
    assert not any("NeuronDriver" in c for c in run.calls)  # the shipped driver: no driver datapoint
    assert not run.called("aws ec2 delete-tags")
    assert not run.called("aws autoscaling set-instance-health") and not run.called("aws autoscaling suspend-processes")
    # The job environment is one KEY=value file every systemd unit and shell reads; distinct ports, reserved.
    env = run.file("/etc/neuronkit/job.env")
    assert "FI_PROVIDER=efa" in env and "MASTER_PORT=2022" in env and "export " not in env
    assert "2022,46820" in run.file("/etc/sysctl.d/90-neuronkit.conf")
    assert "EnvironmentFile=/etc/neuronkit/job.env" in run.file("/etc/systemd/system/neuronkit-hostfile.service")
    assert "network-online.target" in run.file("/etc/fstab") and "network.service" not in run.file("/etc/fstab")
    # the pool's SSH trust for the collective's MPI launch (kit/neuronkit-ssh-trust), before CONTINUE
    trust = [i for i, c in enumerate(run.calls) if c.startswith("aws ssm put-parameter") and "/ssh-key" in c]
    assert trust and trust[0] < cont[0]
    assert run.file("/root/.ssh/neuronkit_pool.pub").strip() in run.file("/root/.ssh/authorized_keys")
    assert run.returncode in (0, 1)  # observability's agent steps are best effort; the node itself is ready


@pytest.mark.parametrize(
    ("case", "scenario"),
    [
        ("missing Neuron device", healthy(neuron_devices=TRN.neuron_devices - 1)),
        ("missing EFA device", healthy(efa_devices=TRN.efa_max_interfaces - 1)),
        ("Neuron driver older than the release minimum", healthy(driver=OLDER_DRIVER)),
        ("no Neuron driver loaded", healthy(driver=None)),
        ("failed Lustre mount", healthy(fail=["mount /fsx"])),
        ("failed package step", healthy(fail=["modinfo lustre", "apt-get install"])),
        ("failed unexpected step", healthy(fail=["sysctl"])),
    ],
)
def test_a_broken_node_abandons_and_never_joins(training_user_data: str, tmp_path: Path, case: str, scenario: Scenario) -> None:
    run = run_user_data(training_user_data, scenario, tmp_path)
    assert hook_results(run) == ["ABANDON"], f"{case}: {run.output[-3000:]}"
    assert not any("Key=neuronkit:ready,Value=true" in c for c in run.calls), case
    assert run.returncode != 0


def test_the_busy_marker_is_one_path_the_publisher_the_hostfile_and_jobs_share(training_user_data: str, tmp_path: Path) -> None:
    # A job touches the marker its job.env names; the publisher, run with its defaults (no marker option), reports
    # the node busy, then idle once the marker is gone; the hostfile refresher leaves the files alone meanwhile.
    publish = (
        "python3 /opt/neuronkit/neuron_monitor_publisher.py --namespace Neuronkit --region us-east-1 "
        "--environment team --pool pretrain < /opt/stubs/report.jsonl\n"
    )
    job = (
        '. /etc/neuronkit/job.env\nmkdir -p "$(dirname "${NEURONKIT_BUSY_MARKER}")"\ntouch "${NEURONKIT_BUSY_MARKER}"\n'
        + publish
        + "echo stale > /etc/neuronkit/hostfile\nbash /usr/local/bin/neuronkit-hostfile\n"
        + 'rm -f "${NEURONKIT_BUSY_MARKER}"\n'
        + publish
    )
    text = training_user_data.replace('exit "${status}"\n', job + 'exit "${status}"\n')
    report = (ROOT / "tests" / "fixtures" / "neuron-monitor" / "trn1-32xlarge-idle.jsonl").read_text()
    run = run_user_data(text, healthy(stub_files={"report.jsonl": report}), tmp_path)
    assert f"NEURONKIT_BUSY_MARKER={BUSY_MARKER}" in run.file("/etc/neuronkit/job.env")
    assert run.file("/etc/neuronkit/hostfile") == "stale\n"  # frozen while the job runs
    sent = sorted((run.root / "opt" / "stubs").glob("put-metric-data-*.json"), key=lambda p: int(p.stem.rsplit("-", 1)[1]))
    busy = [[d["Value"] for d in json.loads(p.read_text())["MetricData"] if d["MetricName"] == "NodeBusy"] for p in sent]
    busy = [values for values in busy if values]
    assert len(busy) == 2 and set(busy[0]) == {1.0} and set(busy[1]) == {0.0}, busy


def test_a_driver_newer_than_the_shipped_one_continues_without_a_warning_or_a_metric(
    training_user_data: str, tmp_path: Path
) -> None:
    """Issue 36's rule: only a driver between driver_min and driver_shipped joins with the warning. Newer images
    carry newer drivers (every EKS Neuron node would warn otherwise): above the shipped driver is no news."""
    run = run_user_data(training_user_data, healthy(driver=NEWER_DRIVER), tmp_path)
    assert hook_results(run) == ["CONTINUE"], run.output[-3000:]
    assert f"Neuron driver {NEWER_DRIVER} is at or above {DRIVER}, the release's shipped driver" in run.output
    assert "WARNING: Neuron driver" not in run.output
    assert not any("--metric-name NeuronDriver" in c for c in run.called("aws cloudwatch put-metric-data"))


def test_a_driver_older_than_the_minimum_abandons_with_the_reason(training_user_data: str, tmp_path: Path) -> None:
    run = run_user_data(training_user_data, healthy(driver=OLDER_DRIVER), tmp_path)
    assert hook_results(run) == ["ABANDON"]
    assert f"Neuron driver {OLDER_DRIVER} is older than {DRIVER}, the release minimum" in run.output


def test_a_node_that_cannot_tag_itself_ready_abandons_while_the_hook_is_open(training_user_data: str, tmp_path: Path) -> None:
    run = run_user_data(training_user_data, healthy(fail=["aws ec2 create-tags.*neuronkit:ready"]), tmp_path)
    assert hook_results(run) == ["ABANDON"], run.output[-3000:]
    assert len([c for c in run.calls if "neuronkit:ready,Value=true" in c]) == 5  # retried, then given up
    assert "could not tag the node ready" in run.output


def test_a_node_whose_continue_fails_loses_its_ready_tag_and_abandons(training_user_data: str, tmp_path: Path) -> None:
    run = run_user_data(training_user_data, healthy(fail=["aws autoscaling complete-lifecycle-action.*CONTINUE"]), tmp_path)
    assert hook_results(run) == ["CONTINUE"] * 5 + ["ABANDON"], run.output[-3000:]
    untag = run.called("aws ec2 delete-tags")
    assert untag and "Key=neuronkit:ready" in untag[0] and f"--resources {INSTANCE_ID}" in untag[0]
    assert run.calls.index(untag[0]) < run.calls.index(next(c for c in run.calls if "ABANDON" in c))


def test_the_hostfile_lists_ready_nodes_and_the_root_communicator_has_its_own_port(
    training_user_data: str, tmp_path: Path
) -> None:
    # The boot, then one run of the minutely refresher (as its timer would).
    booted_then_refreshed = training_user_data.replace(
        'exit "${status}"\n', '/usr/local/bin/neuronkit-hostfile\nexit "${status}"\n'
    )
    run = run_user_data(booted_then_refreshed, healthy(), tmp_path)
    (query,) = run.called("aws ec2 describe-instances")
    assert "Name=tag:neuronkit:ready,Values=true" in query
    ranks = run.file("/etc/neuronkit/ranks.env")
    assert "NNODES=1" in ranks and "NODE_RANK=0" in ranks and "NEURON_RT_ROOT_COMM_ID=10.0.0.10:46820" in ranks
    info, count = run.called("aws cloudwatch put-metric-data")
    assert "--metric-name NeuronDriverInfo" in info and f"DriverVersion={DRIVER}" in info
    assert "--metric-name NeuronDriverVersions" in count and "--value 1" in count


def _rows(*nodes: tuple[str, str, str]) -> str:
    """describe-instances text rows (LaunchTime, InstanceId, IP, driver, reservation), in the order EC2 answers."""
    return "".join(f"{t}\t{i}\t{ip}\t{DRIVER}\tNone\n" for t, i, ip in nodes)


def test_ranks_follow_launch_order_not_instance_ids_and_stay_when_a_node_joins(training_user_data: str, tmp_path: Path) -> None:
    # Three ready nodes whose instance ids sort opposite to their launch times, answered in neither order; this
    # node (10.0.0.10) launched second. Then a fourth node joins, launched last with the smallest id.
    first = ("2026-11-24T09:00:00Z", "i-0fffffffffffffff1", "10.0.0.21")
    me = ("2026-11-24T09:05:00Z", "i-0ddddddddddddddd2", "10.0.0.10")
    third = ("2026-11-24T09:10:00Z", "i-0bbbbbbbbbbbbbbb3", "10.0.0.33")
    newest = ("2026-11-24T10:30:00Z", "i-0000000000000004", "10.0.0.44")
    refresh = (
        "bash /usr/local/bin/neuronkit-hostfile\ncp /etc/neuronkit/ranks.env /tmp/ranks-3\n"
        "cp /etc/neuronkit/hostfile /tmp/hostfile-3\ncp /opt/stubs/instances-4 /opt/stubs/instances\n"
        "bash /usr/local/bin/neuronkit-hostfile\ncp /tmp/ranks-3 /tmp/hostfile-3 /var/log/\n"
    )
    text = training_user_data.replace('exit "${status}"\n', refresh + 'exit "${status}"\n')
    files = {"instances": _rows(third, first, me), "instances-4": _rows(newest, third, me, first)}
    run = run_user_data(text, healthy(stub_files=files), tmp_path)
    ports = catalog.software_facts()["collectives"]
    before, after = run.file("/var/log/ranks-3"), run.file("/etc/neuronkit/ranks.env")
    assert run.file("/var/log/hostfile-3").split() == [first[2], me[2], third[2]]
    assert run.file("/etc/neuronkit/hostfile").split() == [first[2], me[2], third[2], newest[2]]
    for ranks, nodes in ((before, 3), (after, 4)):
        assert f"NNODES={nodes}" in ranks and "NODE_RANK=1" in ranks and f"MASTER_ADDR={first[2]}" in ranks
        # The runtime's root communicator on rank 0, on its own port (not MASTER_PORT).
        assert f"NEURON_RT_ROOT_COMM_ID={first[2]}:{ports['root_comm_port']}" in ranks
    assert ports["root_comm_port"] != ports["master_port"]


TRN2U = catalog.get("trn2u.48xlarge")


@pytest.fixture(scope="module")
def ultraserver_user_data() -> str:
    """A node of 2 x u-trn2x64 UltraServers on their Capacity Blocks, LNC 2."""
    import datetime as dt

    from neuronkit.constructs import CapacitySpec

    start, end = dt.datetime(2030, 3, 1, 11, 30, tzinfo=dt.UTC), dt.datetime(2030, 3, 15, 11, 30, tzinfo=dt.UTC)
    stack = bare_stack()
    TrainingCluster(
        stack, "Cluster", environment="team", name="pretrain", vpc=imported_vpc(stack),
        nodes=NodePoolSpec("trn2u.48xlarge", max_size=8, ami=AmiSpec(root_device_name="/dev/sda1", ami_id="ami-0123456789abcdef0")),
        subnet_id=SUBNET_ID, az_id="use2-az3",
        storage=STORAGE, expected_neuron_driver=DRIVER, lnc=2, ultraserver_size=4,
        capacity=CapacitySpec(kind="capacity-block", reservation_ids=("cr-0aaaaaaaaaaaaaaaa", "cr-0bbbbbbbbbbbbbbbb"), start=start, end=end),
    )  # fmt: skip
    return _user_data(template(stack))


def test_ultraserver_nodes_rank_each_neuronlink_domain_together(ultraserver_user_data: str, tmp_path: Path) -> None:
    # Eight ready nodes of two UltraServers, launched interleaved; this node (10.0.0.10) is in the second one.
    rows = [
        ("2026-11-24T10:00:01Z", "i-01", "10.0.0.21", "cr-0bbbbbbbbbbbbbbbb"),
        ("2026-11-24T10:00:02Z", "i-02", "10.0.0.11", "cr-0aaaaaaaaaaaaaaaa"),
        ("2026-11-24T10:00:03Z", "i-03", "10.0.0.10", "cr-0bbbbbbbbbbbbbbbb"),
        ("2026-11-24T10:00:04Z", "i-04", "10.0.0.12", "cr-0aaaaaaaaaaaaaaaa"),
        ("2026-11-24T10:00:05Z", "i-05", "10.0.0.23", "cr-0bbbbbbbbbbbbbbbb"),
        ("2026-11-24T10:00:06Z", "i-06", "10.0.0.13", "cr-0aaaaaaaaaaaaaaaa"),
        ("2026-11-24T10:00:07Z", "i-07", "10.0.0.24", "cr-0bbbbbbbbbbbbbbbb"),
        ("2026-11-24T10:00:08Z", "i-08", "10.0.0.14", "cr-0aaaaaaaaaaaaaaaa"),
    ]
    instances = "".join(f"{t}\t{i}\t{ip}\t{DRIVER}\t{cr}\n" for t, i, ip, cr in rows)
    scenario = Scenario(
        neuron_devices=TRN2U.neuron_devices, efa_devices=TRN2U.efa_max_interfaces, driver=DRIVER,
        instance_type="trn2u.48xlarge", stub_files={"instances": instances},
    )  # fmt: skip
    booted_then_refreshed = ultraserver_user_data.replace(
        'exit "${status}"\n', '/usr/local/bin/neuronkit-hostfile\nexit "${status}"\n'
    )
    run = run_user_data(booted_then_refreshed, scenario, tmp_path)
    assert hook_results(run) == ["CONTINUE"], run.output[-3000:]
    assert run.file("/etc/neuronkit/hostfile").split() == [
        "10.0.0.11", "10.0.0.12", "10.0.0.13", "10.0.0.14",  # UltraServer cr-0aaa..., in launch order
        "10.0.0.21", "10.0.0.10", "10.0.0.23", "10.0.0.24",  # UltraServer cr-0bbb...
    ]  # fmt: skip
    ranks = run.file("/etc/neuronkit/ranks.env")
    assert "NNODES=8" in ranks and "NODE_RANK=5" in ranks and "MASTER_ADDR=10.0.0.11" in ranks
    assert "NEURONKIT_ULTRASERVER_SIZE=4" in ranks and "NEURONKIT_ULTRASERVER_INDEX=1" in ranks
    assert "NEURON_LOGICAL_NC_CONFIG=2" in run.file("/etc/neuronkit/job.env")


@pytest.mark.parametrize("job", ["none", "running"])
def test_a_block_node_asks_its_job_to_checkpoint_then_lets_the_group_terminate_it(
    ultraserver_user_data: str, tmp_path: Path, job: str
) -> None:
    hook = catalog.software_facts()["lifecycle"]["drain_hook_name"]
    start_job = "mkdir -p /run/neuronkit && touch /run/neuronkit/job-active\n" if job == "running" else ""
    drained = ultraserver_user_data.replace(
        'exit "${status}"\n', f'{start_job}/usr/local/bin/neuronkit-drain\nexit "${{status}}"\n'
    )
    scenario = Scenario(
        neuron_devices=TRN2U.neuron_devices, efa_devices=TRN2U.efa_max_interfaces, driver=DRIVER,
        instance_type="trn2u.48xlarge", stub_files={"target-state": "Terminated\n", "job-ends-on-sleep": ""},
    )  # fmt: skip
    run = run_user_data(drained, scenario, tmp_path)
    # The drain service is installed and started at boot (a systemd unit reading the job's environment).
    assert run.called("systemctl enable --now neuronkit-drain.service")
    assert "ExecStart=/usr/local/bin/neuronkit-drain" in run.file("/etc/systemd/system/neuronkit-drain.service")
    calls = run.called("aws autoscaling complete-lifecycle-action")
    (drain,) = [c for c in calls if f"--lifecycle-hook-name {hook}" in c]
    assert "--lifecycle-action-result CONTINUE" in drain and f"--instance-id {INSTANCE_ID}" in drain
    assert "the group is terminating this node: asking the job to checkpoint" in run.output
    # With a job running, the node waits for it (one sleep, during which it ends) before answering the hook.
    index = run.calls.index(drain)
    slept = [i for i, c in enumerate(run.calls) if c.startswith("sleep") and i < index]
    assert bool(slept) == (job == "running")
    leaving = {"none": "no job runs; leaving", "running": "the job checkpointed and finished; leaving"}[job]
    assert leaving in run.output and "did not finish" not in run.output


def test_a_job_that_never_ends_holds_the_drain_until_its_deadline_by_the_clock(
    ultraserver_user_data: str, tmp_path: Path
) -> None:
    drain_seconds = int(re.search(r"DRAIN_SECONDS='(\d+)'", ultraserver_user_data).group(1))  # type: ignore[union-attr]
    drained = ultraserver_user_data.replace(
        'exit "${status}"\n',
        'mkdir -p /run/neuronkit && touch /run/neuronkit/job-active\n/usr/local/bin/neuronkit-drain\nexit "${status}"\n',
    )
    scenario = Scenario(
        neuron_devices=TRN2U.neuron_devices, efa_devices=TRN2U.efa_max_interfaces, driver=DRIVER,
        instance_type="trn2u.48xlarge", stub_files={"target-state": "Terminated\n"},
    )  # fmt: skip
    run = run_user_data(drained, scenario, tmp_path)
    waits = [c for c in run.calls if c == "sleep 10"]
    # The drain answers a minute before the group's heartbeat runs out: DRAIN_SECONDS - 60 on the clock.
    assert len(waits) == -(-(drain_seconds - 60) // 10), (len(waits), drain_seconds)
    assert run.elapsed >= drain_seconds - 60
    assert f"the job did not finish within {drain_seconds} s; leaving" in run.output


def test_batch_node_installs_efa_before_its_device_check(batch_user_data: str, tmp_path: Path) -> None:
    run = run_user_data(batch_user_data, healthy(), tmp_path)
    assert "compile failed" not in run.output, run.output[-3000:]
    installer = [i for i, c in enumerate(run.calls) if c.startswith("efa_installer.sh")]
    assert installer and "-y --minimal" in run.calls[installer[0]]
    assert any("aws-efa-installer-" + catalog.software_facts()["efa_installer"]["version"] in c for c in run.called("curl"))
    assert not run.called("systemctl poweroff")


@pytest.mark.parametrize(
    ("case", "scenario"),
    [
        ("missing EFA device", healthy(efa_devices=0)),
        ("missing Neuron device", healthy(neuron_devices=1)),
        ("failed EFA download", healthy(fail=["curl efa-installer"])),
    ],
)
def test_a_broken_batch_node_powers_off_before_the_ecs_agent(
    batch_user_data: str, tmp_path: Path, case: str, scenario: Scenario
) -> None:
    run = run_user_data(batch_user_data, scenario, tmp_path)
    assert run.called("systemctl stop ecs.service") and run.called("systemctl poweroff"), f"{case}: {run.output[-2000:]}"
    assert run.returncode != 0


@pytest.fixture(scope="module")
def inference_user_data() -> str:
    stack = bare_stack()
    vpc = imported_vpc(stack)
    InferenceFleet(
        stack, "Chat", environment="team", name="chat", vpc=vpc, nodes=FleetNodesSpec(
            neuron_types=["inf2.xlarge"], fallback_types=["g5.xlarge"], max_size=2,
            neuron_ami=AmiSpec(root_device_name="/dev/sda1", ami_id="ami-0123456789abcdef0"),
            gpu_ami=AmiSpec(root_device_name="/dev/sda1", ami_id="ami-0123456789abcdef1"),
        ),
        subnet_ids={"use1-az6": SUBNET_ID, "use1-az4": "subnet-0bbbbbbbbbbbbbbb2"},
        artifacts_bucket="team-artifacts-123456789012-us-east-1", model_s3_prefix="models/m/",
        serve=ServeSpec(neuron="serve --port $PORT", gpu="serve --port $PORT"),
    )  # fmt: skip
    data = template(stack)
    lt = next(r for k, r in resources(data, "AWS::EC2::LaunchTemplate").items() if "Neuron" in k)
    return resolve(lt["Properties"]["LaunchTemplateData"]["UserData"])


def fleet_hook_results(run: Run) -> list[str]:
    return [
        c.rsplit("--lifecycle-action-result ", 1)[1].split()[0] for c in run.called("aws autoscaling complete-lifecycle-action")
    ]


def test_a_healthy_inference_node_continues_and_signals_the_rolling_update(inference_user_data: str, tmp_path: Path) -> None:
    run = run_user_data(inference_user_data, Scenario(neuron_devices=1, instance_type="inf2.xlarge"), tmp_path)
    assert fleet_hook_results(run) == ["CONTINUE"], run.output[-3000:]
    (signal,) = run.called("aws cloudformation signal-resource")
    assert "--status SUCCESS" in signal
    assert not run.called("aws autoscaling set-instance-health")


@pytest.mark.parametrize(
    ("case", "scenario"),
    [
        ("missing Neuron device", Scenario(neuron_devices=0, instance_type="inf2.xlarge")),
        ("model download fails", Scenario(neuron_devices=1, instance_type="inf2.xlarge", fail=["aws s3 sync"])),
        (
            "failed unit install",
            Scenario(neuron_devices=1, instance_type="inf2.xlarge", fail=["systemctl enable --now neuronkit-model"]),
        ),
    ],
)
def test_a_broken_inference_node_abandons_and_signals_failure(
    inference_user_data: str, tmp_path: Path, case: str, scenario: Scenario
) -> None:
    run = run_user_data(inference_user_data, scenario, tmp_path)
    assert fleet_hook_results(run) == ["ABANDON"], f"{case}: {run.output[-3000:]}"
    assert any("--status FAILURE" in c for c in run.called("aws cloudformation signal-resource")), case


# --------------------------------------------------------------------------------------------
# serving containers: the pinned image through the cache, the compiled-model cache (kit/neuronkit-serve)
# --------------------------------------------------------------------------------------------
TINY = serving.ModelSpec(id="TinyLlama/TinyLlama-1.1B-Chat-v1.0", s3_prefix="models/tiny/", parameters_billion=1.1)


@pytest.fixture(scope="module")
def container_user_data() -> dict[str, str]:
    """User data per instance type of a fleet served by the kit's containers."""
    stack = bare_stack()
    vpc = imported_vpc(stack)
    InferenceFleet(
        stack, "Chat", environment="team", name="chat", vpc=vpc, nodes=FleetNodesSpec(
            neuron_types=["inf2.xlarge"], fallback_types=["g5.xlarge"], max_size=2,
            neuron_ami=AmiSpec(root_device_name="/dev/sda1", ami_id="ami-0123456789abcdef0"),
            gpu_ami=AmiSpec(root_device_name="/dev/sda1", ami_id="ami-0123456789abcdef1"),
        ),
        subnet_ids={"use1-az6": SUBNET_ID, "use1-az4": "subnet-0bbbbbbbbbbbbbbb2"},
        artifacts_bucket="team-artifacts-123456789012-us-east-1",
        serving=ServingSpec(model=TINY, neuron_release=releases.release("2.28.1")),
    )  # fmt: skip
    data = template(stack)
    out = {}
    for logical_id, lt in resources(data, "AWS::EC2::LaunchTemplate").items():
        d = lt["Properties"]["LaunchTemplateData"]
        # The compile group's template of a Neuron type is keyed "compile <type>".
        out[("compile " if "CompileLaunchTemplate" in logical_id else "") + d["InstanceType"]] = resolve(d["UserData"])
    return out


def test_a_cache_hit_pulls_the_pinned_image_downloads_the_artifacts_and_serves(
    container_user_data: dict[str, str], tmp_path: Path
) -> None:
    run = run_user_data(
        container_user_data["inf2.xlarge"],
        Scenario(neuron_devices=1, instance_type="inf2.xlarge", stub_files={"cache-complete-after": "0"}),
        tmp_path,
    )
    assert fleet_hook_results(run) == ["CONTINUE"], run.output[-3000:]
    image = releases.release("2.28.1").container("vllm-serving")
    assert image is not None
    (pull,) = run.called("docker pull")
    assert pull.endswith("/team-chat/" + image.removeprefix("public.ecr.aws/")) and ".dkr.ecr.us-east-1.amazonaws.com/" in pull
    assert run.called("docker login --username AWS --password-stdin 123456789012.dkr.ecr.us-east-1.amazonaws.com")
    # The artifacts of its key came down; nothing was compiled or published, no lock was taken.
    assert any("/opt/neuronkit/compiled" in c and c.startswith("aws s3 sync") for c in run.calls)
    assert not run.called("aws s3api put-object") and not any("_COMPLETE" in c for c in run.called("aws s3 cp"))
    # The unit runs the container through the kit's script; serve.env tells it the model directory.
    assert "neuronkit-serve run" in run.file("/etc/neuronkit/serve.command")
    assert "MODEL_DIR=/opt/neuronkit/model" in run.file("/etc/neuronkit/serve.env")


def test_the_first_node_of_a_new_key_compiles_once_and_publishes(container_user_data: dict[str, str], tmp_path: Path) -> None:
    run = run_user_data(container_user_data["inf2.xlarge"], Scenario(neuron_devices=1, instance_type="inf2.xlarge"), tmp_path)
    assert fleet_hook_results(run) == ["CONTINUE"], run.output[-3000:]
    (lock,) = run.called("aws s3api put-object")
    assert "_LOCK" in lock and "--if-none-match *" in lock
    # Published after the server answered: the artifacts, then _COMPLETE, then the lock released.
    order = [c for c in run.calls if "_COMPLETE" in c or "delete-object" in c or "/opt/neuronkit/compiled s3://" in c]
    assert [("sync" in c, "_COMPLETE" in c, "delete-object" in c) for c in order if "head-object" not in c] == [
        (True, False, False),
        (False, True, False),
        (False, False, True),
    ]
    assert run.calls.index(next(c for c in run.calls if c.startswith("curl -fsS -o /dev/null"))) < run.calls.index(order[-1])


def test_other_nodes_wait_for_the_compiling_one_with_heartbeats(container_user_data: dict[str, str], tmp_path: Path) -> None:
    run = run_user_data(
        container_user_data["inf2.xlarge"],
        Scenario(neuron_devices=1, instance_type="inf2.xlarge", stub_files={"cache-complete-after": "2", "lock-held": ""}),
        tmp_path,
    )
    assert fleet_hook_results(run) == ["CONTINUE"], run.output[-3000:]
    poll = serving.facts()["compiled_cache"]["wait_poll_seconds"]
    # The marker appears at the third look: two polls, two heartbeats, two poll intervals on the clock.
    assert len(run.called("aws autoscaling record-lifecycle-action-heartbeat")) == 2
    assert run.elapsed == 2 * poll
    assert not any(c.startswith("aws s3 sync") and "/opt/neuronkit/compiled s3://" in c for c in run.calls)  # never published


def _iso(epoch: int) -> str:
    import datetime as dt

    return dt.datetime.fromtimestamp(epoch, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_a_stale_compile_lock_is_taken_over_once_older_than_the_timeout(
    container_user_data: dict[str, str], tmp_path: Path
) -> None:
    facts = serving.facts()["compiled_cache"]
    timeout, poll = facts["lock_timeout_seconds"], facts["wait_poll_seconds"]
    # Another node took the lock timeout - 2.5 polls ago: this node waits three polls, then the lock is too old.
    modified = CLOCK_START - (timeout - int(2.5 * poll))
    run = run_user_data(
        container_user_data["inf2.xlarge"],
        Scenario(neuron_devices=1, instance_type="inf2.xlarge", stub_files={"lock-held": "", "lock-modified": _iso(modified)}),
        tmp_path,
    )
    assert run.elapsed == 3 * poll, run.output[-3000:]
    assert len(run.called("aws autoscaling record-lifecycle-action-heartbeat")) == 3
    assert f"(over {timeout} s): taking it over" in run.output
    deletes = [c for c in run.called("aws s3api delete-object") if "_LOCK" in c]
    assert deletes and "this node compiles them" in run.output


def test_a_lock_never_released_is_abandoned_after_the_timeout_by_the_clock(
    container_user_data: dict[str, str], tmp_path: Path
) -> None:
    facts = serving.facts()["compiled_cache"]
    timeout, poll = facts["lock_timeout_seconds"], facts["wait_poll_seconds"]
    # The lock is renewed (always fresh) and the artifacts never appear: the node gives up after the timeout.
    run = run_user_data(
        container_user_data["inf2.xlarge"],
        Scenario(neuron_devices=1, instance_type="inf2.xlarge", stub_files={"lock-held": ""}),
        tmp_path,
        timeout=300,
    )
    assert run.elapsed == timeout and "gave up waiting for" in run.output
    assert len(run.called("aws autoscaling record-lifecycle-action-heartbeat")) == timeout // poll
    assert fleet_hook_results(run) == ["ABANDON"]


def test_the_gpu_fallback_runs_the_catalogs_image_with_its_gpus(container_user_data: dict[str, str], tmp_path: Path) -> None:
    run = run_user_data(container_user_data["g5.xlarge"], Scenario(instance_type="g5.xlarge"), tmp_path)
    assert fleet_hook_results(run) == ["CONTINUE"], run.output[-3000:]
    (pull,) = run.called("docker pull")
    assert pull.endswith(serving.facts()["gpu_image"].removeprefix("public.ecr.aws/"))
    assert not run.called("aws s3api put-object")  # GPU nodes compile nothing


@pytest.mark.parametrize(
    ("case", "scenario"),
    [
        ("image pull fails", Scenario(neuron_devices=1, instance_type="inf2.xlarge", fail=["docker pull"])),
        ("registry login fails", Scenario(neuron_devices=1, instance_type="inf2.xlarge", fail=["docker login"])),
        (
            "publishing the compiled artifacts fails",
            Scenario(neuron_devices=1, instance_type="inf2.xlarge", fail=[r"aws s3 sync .*/opt/neuronkit/compiled s3://"]),
        ),
    ],
)
def test_a_container_node_that_cannot_serve_abandons(
    container_user_data: dict[str, str], tmp_path: Path, case: str, scenario: Scenario
) -> None:
    run = run_user_data(container_user_data["inf2.xlarge"], scenario, tmp_path)
    assert fleet_hook_results(run) == ["ABANDON"], f"{case}: {run.output[-3000:]}"


def test_the_container_command_passes_devices_capabilities_and_the_profile(
    container_user_data: dict[str, str], tmp_path: Path
) -> None:
    # Run the unit's command itself after a healthy boot: the docker stub records the container's arguments.
    head, tail = container_user_data["inf2.xlarge"].rsplit('exit "${status}"', 1)
    text = head + 'bash /opt/neuronkit/kit/neuronkit-serve run || status=$?\nexit "${status}"' + tail
    run = run_user_data(
        text, Scenario(neuron_devices=2, instance_type="inf2.xlarge", stub_files={"cache-complete-after": "0"}), tmp_path
    )
    (docker_run,) = run.called("docker run")
    assert "--device /dev/neuron0 --device /dev/neuron1" in docker_run
    assert "--cap-add SYS_ADMIN --cap-add IPC_LOCK" in docker_run
    assert (
        "-e NEURON_COMPILED_ARTIFACTS=/compiled" in docker_run
        and "-e VLLM_NEURON_FRAMEWORK=neuronx-distributed-inference" in docker_run
    )
    assert "-v /opt/neuronkit/model:/model:ro" in docker_run and "-v /opt/neuronkit/compiled:/compiled" in docker_run
    tp = catalog.get("inf2.xlarge").neuron_cores
    assert (
        f"--tensor-parallel-size {tp} " in docker_run and "--served-model-name TinyLlama/TinyLlama-1.1B-Chat-v1.0" in docker_run
    )


# --------------------------------------------------------------------------------------------
# compile nodes: the one node of a compile group (InferenceFleet._compile_groups, docs/serving.md)
# --------------------------------------------------------------------------------------------
def _compile_signals(run: Run) -> list[str]:
    calls = run.called("aws cloudformation signal-resource")
    assert all("--logical-resource-id ChatCompileinf2xlarge" in c for c in calls), calls
    return [c.rsplit("--status ", 1)[1].split()[0] for c in calls]


def _compile_node(container_user_data: dict[str, str], tmp_path: Path, **stub_files: str) -> Run:
    """A compile node of inf2.xlarge with its Neuron device; ``stub_files`` set up the cache (tests/sandbox.py)."""
    scenario = Scenario(neuron_devices=1, instance_type="inf2.xlarge", stub_files=stub_files)
    return run_user_data(container_user_data["compile inf2.xlarge"], scenario, tmp_path)


def _left_group(run: Run) -> bool:
    (leave,) = run.called("aws autoscaling terminate-instance-in-auto-scaling-group")
    return f"--instance-id {INSTANCE_ID}" in leave and "--should-decrement-desired-capacity" in leave


def test_a_compile_node_of_a_new_key_compiles_publishes_signals_then_leaves(
    container_user_data: dict[str, str], tmp_path: Path
) -> None:
    run = _compile_node(container_user_data, tmp_path)
    assert "compile failed" not in run.output, run.output[-3000:]
    assert _compile_signals(run) == ["SUCCESS"] and _left_group(run)
    # Lock, compile by starting the server, publish, and only then signal; it never serves: no launch hook.
    (lock,) = run.called("aws s3api put-object")
    assert "_LOCK" in lock
    published = run.calls.index(next(c for c in run.calls if c.startswith("aws s3 cp") and "_COMPLETE" in c))
    signalled = run.calls.index(run.called("aws cloudformation signal-resource")[0])
    left = run.calls.index(run.called("aws autoscaling terminate-instance-in-auto-scaling-group")[0])
    assert published < signalled < left
    assert not run.called("aws autoscaling complete-lifecycle-action")
    assert not run.called("aws autoscaling record-lifecycle-action-heartbeat")
    assert run.called("systemctl disable --now neuronkit-model-server.service")
    # Every AWS call names the region: the AMI's CLI has no configured default.
    assert [c for c in run.called("aws ") if "--region us-east-1" not in c] == []


def test_a_compile_node_finding_its_key_signals_at_once_without_pulling(
    container_user_data: dict[str, str], tmp_path: Path
) -> None:
    run = _compile_node(container_user_data, tmp_path, **{"cache-complete-after": "0"})
    assert "compile failed" not in run.output, run.output[-3000:]
    assert _compile_signals(run) == ["SUCCESS"] and _left_group(run)
    assert not run.called("docker pull") and not run.called("aws s3 sync") and not run.called("aws s3api put-object")


def test_a_compile_node_waits_for_another_compiling_node_without_a_hook(
    container_user_data: dict[str, str], tmp_path: Path
) -> None:
    run = _compile_node(container_user_data, tmp_path, **{"cache-complete-after": "2", "lock-held": ""})
    assert "compile failed" not in run.output, run.output[-3000:]
    assert _compile_signals(run) == ["SUCCESS"] and _left_group(run)
    assert not run.called("aws autoscaling record-lifecycle-action-heartbeat")  # the group has no hook to keep alive
    assert not any(c.startswith("aws s3 sync") and "/opt/neuronkit/compiled s3://" in c for c in run.calls)


@pytest.mark.parametrize(
    ("case", "scenario"),
    [
        ("image pull fails", Scenario(neuron_devices=1, instance_type="inf2.xlarge", fail=["docker pull"])),
        (
            "model download fails",
            Scenario(neuron_devices=1, instance_type="inf2.xlarge", fail=[r"aws s3 sync .*s3://[^ ]*/models/tiny/ "]),
        ),
        (
            "publishing fails",
            Scenario(neuron_devices=1, instance_type="inf2.xlarge", fail=[r"aws s3 sync .*/opt/neuronkit/compiled s3://"]),
        ),
        ("missing Neuron device", Scenario(neuron_devices=0, instance_type="inf2.xlarge")),
    ],
)
def test_a_failed_compile_signals_failure_and_still_leaves(
    container_user_data: dict[str, str], tmp_path: Path, case: str, scenario: Scenario
) -> None:
    run = run_user_data(container_user_data["compile inf2.xlarge"], scenario, tmp_path)
    assert "compile failed" in run.output, case
    assert _compile_signals(run) == ["FAILURE"], f"{case}: {run.output[-3000:]}"
    assert _left_group(run), case
    assert not run.called("aws autoscaling complete-lifecycle-action"), case


# --------------------------------------------------------------------------------------------
# Trainium2 serving: tensor parallelism counts logical NeuronCores (LNC=2 on Trn2 by default)
# --------------------------------------------------------------------------------------------
LLAMA_70B = serving.ModelSpec(
    id="meta-llama/Llama-3.1-70B-Instruct", s3_prefix="models/llama-3.1-70b/", parameters_billion=70.6, max_model_len=8192
)


@pytest.fixture(scope="module")
def trn2_user_data() -> str:
    stack = bare_stack()
    fleet = InferenceFleet(
        stack, "Chat", environment="team", name="chat", vpc=imported_vpc(stack), nodes=FleetNodesSpec(
            neuron_types=["trn2.48xlarge"], max_size=2,
            neuron_ami=AmiSpec(root_device_name="/dev/sda1", ami_id="ami-0123456789abcdef0"),
        ),
        subnet_ids={"use2-az3": SUBNET_ID, "use2-az1": "subnet-0bbbbbbbbbbbbbbb2"},
        artifacts_bucket="team-artifacts-123456789012-us-east-2",
        serving=ServingSpec(model=LLAMA_70B, neuron_release=releases.release("2.29.1")),
    )  # fmt: skip
    profile = fleet.profiles["trn2.48xlarge"]
    assert profile.tensor_parallel == 64 and profile.lnc == 2 and "-lnc2-" in (profile.cache_key or "")
    data = template(stack)
    (lt,) = [r for lid, r in resources(data, "AWS::EC2::LaunchTemplate").items() if "Compile" not in lid]
    return resolve(lt["Properties"]["LaunchTemplateData"]["UserData"])


def test_llama_3_1_70b_serves_on_trn2_48xlarge_with_the_logical_cores_of_lnc_2(trn2_user_data: str, tmp_path: Path) -> None:
    head, tail = trn2_user_data.rsplit('exit "${status}"', 1)
    text = head + 'bash /opt/neuronkit/kit/neuronkit-serve run || status=$?\nexit "${status}"' + tail
    trn2 = catalog.get("trn2.48xlarge")
    run = run_user_data(
        text,
        Scenario(neuron_devices=trn2.neuron_devices, instance_type="trn2.48xlarge", stub_files={"cache-complete-after": "0"}),
        tmp_path,
    )
    (docker_run,) = run.called("docker run")
    # 128 physical NeuronCores at LNC=2 are the 64 the server sees: --tensor-parallel-size 128 never becomes healthy.
    assert "--tensor-parallel-size 64 " in docker_run and "--tensor-parallel-size 128" not in docker_run
    assert "-e NEURON_LOGICAL_NC_CONFIG=2" in docker_run
    assert all(f"--device /dev/neuron{i}" in docker_run for i in range(trn2.neuron_devices))
    assert "--served-model-name meta-llama/Llama-3.1-70B-Instruct" in docker_run
    assert "NEURON_LOGICAL_NC_CONFIG=2" in run.file(catalog.trainium_facts()["lnc_file"])
    # The server keeps connections open longer than the ALB's idle timeout (600 s by default).
    keep_alive = serving.facts()["load_balancer"]["keep_alive_env"]
    assert f"-e {keep_alive}=615" in docker_run
