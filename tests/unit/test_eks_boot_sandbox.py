"""The EKS node's boot check as a program (tests/sandbox.py): the user data of a node group, run on its success
and failure paths. A node that passes leaves nodeadm alone (nodeadm-run.service, ordered after cloud-final,
then starts the kubelet and registers it); a node that fails holds nodeadm-run and kubelet back with runtime
drop-ins (ConditionPathExists=!/run/neuronkit/boot-failed) and powers off, so it never registers and the node group's Auto Scaling group replaces it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from neuronkit import catalog
from neuronkit.catalog import releases
from neuronkit.constructs.eks import (
    ClusterSpec,
    NeuronEksCluster,
    NeuronNodeGroup,
    NodeGroupSpec,
    eks_boot_script,
)
from neuronkit.constructs.eks.nodegroup import MIME_BOUNDARY
from neuronkit.constructs.storage import StorageAccess
from tests.sandbox import Run, Scenario, require, resolve, run_user_data
from tests.templates import VPC_ID, bare_stack, resources, template


@pytest.fixture(autouse=True, scope="module")
def _sandbox_runs_here() -> None:
    require()  # never a skip: a runner that cannot run the sandbox fails with the reason


TRN2 = catalog.get("trn2.48xlarge")
DRIVER = releases.release("2.28.1").driver
STORAGE = StorageAccess(
    datasets_bucket="team-datasets-123456789012-us-east-1",
    checkpoints_bucket="team-checkpoints-123456789012-us-east-1",
    artifacts_bucket="team-artifacts-123456789012-us-east-1",
    lustre_dns_name="fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com",
    lustre_mount_name="abcdefgh",
)
JOIN = ("nodeadm-run.service", "kubelet.service")


def _shell_part(user_data: str) -> str:
    body = user_data.split('Content-Type: text/x-shellscript; charset="us-ascii"\n\n', 1)[1]
    return body.rsplit(f"\n\n--{MIME_BOUNDARY}--", 1)[0] + "\n"


def _node_group_user_data(types: list[str], efa: bool, lnc: int | None = None) -> str:
    """The user data of a node group, as its launch template carries it (the kit's MIME archive)."""
    from aws_cdk import aws_ec2 as ec2

    stack = bare_stack()
    vpc = ec2.Vpc.from_vpc_attributes(
        stack, "Vpc", vpc_id=VPC_ID, availability_zones=["us-east-1a", "us-east-1b"],
        private_subnet_ids=["subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2"],
    )  # fmt: skip
    admin = "arn:aws:iam::123456789012:role/admin"
    cluster = NeuronEksCluster(stack, "Eks", spec=ClusterSpec(name="team", admins=[admin]), vpc=vpc, subnets=vpc.private_subnets)
    script = eks_boot_script(
        environment="team", pool="pool", instance_types=types, efa=efa, storage=STORAGE, neuron_driver=DRIVER, lnc=lnc
    )
    NeuronNodeGroup(
        stack, "Nodes", environment="team", cluster=cluster, subnets=vpc.private_subnets[:1], script=script,
        spec=NodeGroupSpec(name="pool", instance_types=types, max_size=2, efa=efa),
    )  # fmt: skip
    # The pool's launch template (the system node group's carries no user data).
    (lt,) = [
        r
        for r in resources(template(stack), "AWS::EC2::LaunchTemplate").values()
        if "UserData" in r["Properties"]["LaunchTemplateData"]
    ]
    return _shell_part(resolve(lt["Properties"]["LaunchTemplateData"]["UserData"]))


@pytest.fixture(scope="module")
def trn2_user_data() -> str:
    return _node_group_user_data(["trn2.48xlarge"], efa=True, lnc=2)


def healthy(**over: Any) -> Scenario:
    base = {"neuron_devices": TRN2.neuron_devices, "efa_devices": TRN2.efa_max_interfaces, "driver": DRIVER}
    return Scenario(**{**base, "instance_type": "trn2.48xlarge", **over})


DROP_IN = "[Unit]\nConditionPathExists=!/run/neuronkit/boot-failed\n"


def _held_back(run: Run) -> bool:
    """Both units carry the runtime drop-in that keeps them from starting while the failure marker exists."""
    for unit in JOIN:
        path = run.root / f"run/systemd/system/{unit}.d/99-neuronkit.conf"
        if not path.is_file() or path.read_text() != DROP_IN:
            return False
    return (run.root / "run/neuronkit/boot-failed").is_file()


def kept_out(run: Run) -> bool:
    """The node wrote the drop-ins and the marker, reloaded systemd, then powered off: it never registers."""
    reloads = [i for i, c in enumerate(run.calls) if c.startswith("systemctl daemon-reload")]
    offs = [i for i, c in enumerate(run.calls) if c.startswith("systemctl poweroff")]
    return _held_back(run) and bool(reloads and offs and reloads[-1] < offs[0]) and not run.called("systemctl mask")


def test_a_healthy_node_leaves_nodeadm_to_join_it(trn2_user_data: str, tmp_path: Path) -> None:
    run = run_user_data(trn2_user_data, healthy(), tmp_path)
    assert run.returncode == 0, run.output[-3000:]
    assert not kept_out(run) and not _held_back(run) and not run.called("systemctl poweroff")
    assert not (run.root / "run/systemd/system").exists()
    assert "node ready; nodeadm joins it to the cluster" in run.output
    assert run.file("/opt/aws/neuron/logical_nc_config").strip() == "NEURON_LOGICAL_NC_CONFIG=2"
    assert run.called("mount /fsx")


def test_a_driver_newer_than_the_shipped_one_joins_quietly(trn2_user_data: str, tmp_path: Path) -> None:
    """The pinned EKS Neuron image carries a newer driver than any release shipped: no warning, no datapoint."""
    major, minor, patch, build = DRIVER.split(".")
    newer = f"{major}.{minor}.{int(patch) + 1}.{build}"
    run = run_user_data(trn2_user_data, healthy(driver=newer), tmp_path)
    assert run.returncode == 0 and not kept_out(run), run.output[-3000:]
    assert f"Neuron driver {newer} is at or above {DRIVER}, the release's shipped driver" in run.output
    assert "WARNING: Neuron driver" not in run.output
    assert not any("--metric-name NeuronDriver" in c for c in run.called("aws cloudwatch put-metric-data"))


@pytest.mark.parametrize(
    ("case", "scenario"),
    [
        (
            "older Neuron driver",
            healthy(driver=".".join(DRIVER.split(".")[:2] + [str(int(DRIVER.split(".")[2]) - 1), DRIVER.split(".")[3]])),
        ),
        ("missing Neuron device", healthy(neuron_devices=TRN2.neuron_devices - 1)),
        ("missing EFA device", healthy(efa_devices=TRN2.efa_max_interfaces - 1)),
        ("no Neuron driver", healthy(driver=None)),
        ("failed Lustre mount", healthy(fail=["mount /fsx"])),
        ("failed unexpected step", healthy(fail=["systemctl daemon-reload"])),
    ],
)
def test_a_node_failing_its_check_never_registers(trn2_user_data: str, tmp_path: Path, case: str, scenario: Scenario) -> None:
    run = run_user_data(trn2_user_data, scenario, tmp_path)
    assert kept_out(run), f"{case}: {run.output[-3000:]}"
    assert run.returncode != 0 and "node ready" not in run.output, case


def test_a_mixed_fleet_node_checks_its_own_types_devices(tmp_path: Path) -> None:
    user_data = _node_group_user_data(["inf2.48xlarge", "inf2.24xlarge"], efa=False)
    small = catalog.get("inf2.24xlarge")
    ok = run_user_data(
        user_data, Scenario(neuron_devices=small.neuron_devices, driver=DRIVER, instance_type=small.name), tmp_path / "ok"
    )
    assert ok.returncode == 0 and not kept_out(ok), ok.output[-3000:]
    short = Scenario(neuron_devices=small.neuron_devices - 1, driver=DRIVER, instance_type=small.name)
    assert kept_out(run_user_data(user_data, short, tmp_path / "short"))


@pytest.fixture(scope="module")
def example_user_data() -> dict[str, str]:
    """The kit's shell part of every pool's user data in examples/environments/eks.yaml, by pool (one per pool)."""
    import json

    import yaml

    from neuronkit.config.loader import parse_environment
    from neuronkit.stacks import build_environment
    from tests.conftest import ROOT, pinned_app

    path = ROOT / "examples" / "environments" / "eks.yaml"
    env = parse_environment(yaml.safe_load(path.read_text()), str(path))
    app, _ = pinned_app(lambda a: build_environment(a, env))
    (eks,) = [s.template for s in app.synth().stacks if s.stack_name.endswith("-eks")]
    out: dict[str, str] = {}
    for r in resources(eks, "AWS::EC2::LaunchTemplate").values():
        data = r["Properties"]["LaunchTemplateData"]
        tags = json.dumps(data.get("TagSpecifications", []))
        pool = next(
            (t["Value"] for spec in data.get("TagSpecifications", []) for t in spec["Tags"] if t["Key"] == "neuronkit:pool"), None
        )
        if "UserData" in data and pool and "neuronkit:pool" in tags:
            out[pool] = _shell_part(resolve(data["UserData"]))
    return out


def test_serving_pools_do_not_mount_lustre_on_the_host(example_user_data: dict[str, str], tmp_path: Path) -> None:
    """Training nodes mount Lustre at boot (a failed mount keeps them out); serving nodes do not: their pods reach
    the file system through the CSI volume if at all, so a Lustre or package-repository hiccup never powers off a
    serving node (review nodes-cluster, finding 8)."""
    from tests.unit.test_node_boot_sandbox import EKS_IMAGE

    assert {"chat", "chat-gpu", "pretrain", "pretrain-gpu"} <= set(example_user_data)
    for pool in ("pretrain", "pretrain-gpu"):
        assert "LUSTRE_DNS=''" not in example_user_data[pool], pool
    for pool in ("chat", "chat-gpu"):
        assert "LUSTRE_DNS=''" in example_user_data[pool], pool
    # A chat node whose Lustre mount would fail joins all the same: it never tries.
    from neuronkit.config import load_environment
    from tests.conftest import EKS_EXAMPLE

    chat_type = next(f for f in load_environment(EKS_EXAMPLE).inference if f.name == "chat").neuron_types[0]
    scenario = Scenario.of(chat_type, driver=EKS_IMAGE.neuron_driver, fail=["mount /fsx", "dnf install -y -q lustre-client"])
    run = run_user_data(example_user_data["chat"], scenario, tmp_path / "chat")
    # (observability.sh's agent steps are best effort and fail in the sandbox: the exit status says nothing here)
    assert not kept_out(run) and not run.called("systemctl poweroff"), run.output[-3000:]
    assert "no Lustre file system in this environment" in run.output and not run.called("mount /fsx")
    assert "node ready; nodeadm joins it to the cluster" in run.output
    # A training node's failed mount still keeps it out.
    trn2 = Scenario.of("trn2.48xlarge", driver=EKS_IMAGE.neuron_driver, fail=["mount /fsx"])
    assert kept_out(run_user_data(example_user_data["pretrain"], trn2, tmp_path / "pretrain"))
