"""Nodes of the catalog's instance types boot as the catalog describes them (tests/sandbox.py ``Scenario.of``):
absences included (no EFA: no /dev/infiniband; a GPU node: no /dev/neuron*), the driver of the image the node
really boots (the Neuron DLAMI of the pool's release on the Auto Scaling path, the pinned EKS node image on EKS).
Then the driver rule (below ``driver_min`` fails, between it and ``driver_shipped`` joins with a warning and a
metric), failures that speak (NodeBootFailures with its reason before the node goes) and the one boot deadline (a
``dnf`` that never returns fails the node with reason ``deadline``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import aws_ec2 as ec2

from neuronkit import catalog
from neuronkit.catalog import eks_images, releases
from neuronkit.constructs import AmiSpec, FleetNodesSpec, InferenceFleet, NodePoolSpec, ServeSpec, TrainingCluster
from neuronkit.constructs.eks import ClusterSpec, NeuronEksCluster, NeuronNodeGroup, NodeGroupSpec, eks_boot_script
from neuronkit.constructs.eks.nodegroup import MIME_BOUNDARY
from neuronkit.constructs.observability import ObservabilitySpec
from tests.sandbox import Run, Scenario, available, resolve, run_user_data
from tests.templates import SUBNET_ID, VPC_ID, bare_stack, imported_vpc, resources, template

RELEASE = releases.release("2.28.1")  # the examples' and dev's release: driver_min below driver_shipped
# The image a 2.28.1 node group boots: the newest whose driver lies in the release's window (issue 46).
EKS_IMAGE = eks_images.for_release(str(catalog.eks_facts()["kubernetes"]["version"]), RELEASE.version)
assert EKS_IMAGE is not None
TYPES = ("trn1.2xlarge", "inf2.xlarge", "g6e.2xlarge")  # none has EFA: no /dev/infiniband on any of them
HOOK = catalog.software_facts()["lifecycle"]["hook_name"]
AMI = AmiSpec(root_device_name="/dev/sda1", ami_id="ami-0123456789abcdef0")


@pytest.fixture(autouse=True, scope="module")
def _sandbox_runs_here() -> None:
    reason = available()
    if reason is not None:
        pytest.fail(reason, pytrace=False)


def _lt_user_data(data: dict[str, Any], pick: Callable[[str], bool] = lambda _: True) -> str:
    lt = next(
        r
        for k, r in resources(data, "AWS::EC2::LaunchTemplate").items()
        if pick(k) and "UserData" in r["Properties"]["LaunchTemplateData"]
    )
    return resolve(lt["Properties"]["LaunchTemplateData"]["UserData"])


def asg_user_data(instance_type: str) -> str:
    """The Auto Scaling path: a training cluster of a Trainium type, an inference fleet's launch template otherwise."""
    stack = bare_stack()
    facts = catalog.get(instance_type)
    if facts.is_neuron and instance_type.startswith("trn"):
        TrainingCluster(
            stack, "Cluster", environment="team", name="pool", vpc=imported_vpc(stack),
            nodes=NodePoolSpec(instance_type, max_size=2, ami=AMI), subnet_id=SUBNET_ID, az_id="use1-az6",
            expected_neuron_driver=RELEASE.driver_min, shipped_neuron_driver=RELEASE.driver_shipped,
            neuron_release=RELEASE.version,
        )  # fmt: skip
        return _lt_user_data(template(stack))
    InferenceFleet(
        stack, "Fleet", environment="team", name="pool", vpc=imported_vpc(stack), nodes=FleetNodesSpec(
            neuron_types=[instance_type] if facts.is_neuron else ["inf2.xlarge"],
            fallback_types=[] if facts.is_neuron else [instance_type], max_size=2, neuron_ami=AMI,
            gpu_ami=AmiSpec(root_device_name="/dev/sda1", ami_id="ami-0123456789abcdef1"),
        ),
        subnet_ids={"use1-az6": SUBNET_ID, "use1-az4": "subnet-0bbbbbbbbbbbbbbb2"},
        artifacts_bucket="team-artifacts-123456789012-us-east-1", model_s3_prefix="models/m/",
        serve=ServeSpec(neuron="serve --port $PORT", gpu="serve --port $PORT"),
    )  # fmt: skip
    return _lt_user_data(template(stack), lambda k: ("Neuron" in k) == facts.is_neuron)


def eks_user_data(instance_type: str) -> str:
    """The EKS path: a node group of the type with the environment's observability, as stacks/eks.py builds it."""
    stack = bare_stack()
    vpc = ec2.Vpc.from_vpc_attributes(
        stack, "Vpc", vpc_id=VPC_ID, availability_zones=["us-east-1a", "us-east-1b"],
        private_subnet_ids=["subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2"],
    )  # fmt: skip
    cluster = NeuronEksCluster(
        stack, "Eks", spec=ClusterSpec(name="team", admins=["arn:aws:iam::123456789012:role/admin"]), vpc=vpc,
        subnets=vpc.private_subnets,
    )  # fmt: skip
    spec = NodeGroupSpec(name="pool", instance_types=[instance_type], max_size=2)

    def script(values: Any) -> str:
        return eks_boot_script(
            environment="team", pool="pool", instance_types=[instance_type], efa=spec.uses_efa, observability=values,
            neuron_driver=RELEASE.driver_min, neuron_driver_shipped=RELEASE.driver_shipped, neuron_release=RELEASE.version,
        )  # fmt: skip

    NeuronNodeGroup(
        stack, "Nodes", environment="team", cluster=cluster, subnets=vpc.private_subnets[:1], script=script, spec=spec,
        observability=ObservabilitySpec(),
    )  # fmt: skip
    # The pool's launch template (the cluster has its system node group's too).
    (lt,) = [v for k, v in resources(template(stack), "AWS::EC2::LaunchTemplate").items() if k.startswith("Nodes")]
    body = resolve(lt["Properties"]["LaunchTemplateData"]["UserData"])
    body = body.split('Content-Type: text/x-shellscript; charset="us-ascii"\n\n', 1)[1]
    return body.rsplit(f"\n\n--{MIME_BOUNDARY}--", 1)[0] + "\n"


PATHS: dict[str, Callable[[str], str]] = {"asg": asg_user_data, "eks": eks_user_data}
DRIVER_ON = {"asg": RELEASE.driver_shipped, "eks": EKS_IMAGE.neuron_driver}  # the DLAMI's, the pinned EKS image's


def joined(path: str, run: Run) -> bool:
    if path == "eks":
        return "nodeadm joins it to the cluster" in run.output and not run.called("systemctl poweroff")
    results = [
        c.rsplit("--lifecycle-action-result ", 1)[1].split()[0] for c in run.called("aws autoscaling complete-lifecycle-action")
    ]
    return results == ["CONTINUE"]


def went(path: str, run: Run) -> int:
    """The call index at which the node went: powered off (EKS) or completed its hook with ABANDON (Auto Scaling)."""
    marker = "systemctl poweroff" if path == "eks" else "--lifecycle-action-result ABANDON"
    found = [i for i, c in enumerate(run.calls) if marker in c]
    assert found, run.output[-3000:]
    return found[0]


def failure_published(run: Run, reason: str) -> int:
    """The call index of the NodeBootFailures datapoint with its reason (fails when there is none)."""
    found = [
        i
        for i, c in enumerate(run.calls)
        if c.startswith("aws cloudwatch put-metric-data") and "--metric-name NodeBootFailures" in c
        and f"Reason={reason}" in c and "Environment=team,Pool=pool" in c and "--region us-east-1" in c
    ]  # fmt: skip
    assert found, run.output[-3000:]
    return found[0]


@pytest.fixture(scope="module")
def user_data() -> dict[tuple[str, str], str]:
    return {(path, t): build(t) for path, build in PATHS.items() for t in TYPES}


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize("instance_type", TYPES)
def test_nodes_without_efa_join_on_both_paths(
    user_data: dict[tuple[str, str], str], tmp_path: Path, path: str, instance_type: str
) -> None:
    facts = catalog.get(instance_type)
    assert not facts.efa_supported, f"{instance_type} has EFA in the catalog: pick a type without it"
    scenario = Scenario.of(instance_type, driver=DRIVER_ON[path])
    assert scenario.efa_devices == 0 and (scenario.neuron_devices or scenario.gpus)
    run = run_user_data(user_data[(path, instance_type)], scenario, tmp_path)
    assert joined(path, run), run.output[-3000:]
    assert "node failed" not in run.output and not run.called(
        "aws cloudwatch put-metric-data --region us-east-1 --namespace Neuronkit --metric-name NodeBootFailures"
    )


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_driver_below_the_release_minimum_fails_and_says_so_before_the_node_goes(
    user_data: dict[tuple[str, str], str], tmp_path: Path, path: str
) -> None:
    major, minor, patch, build = RELEASE.driver_min.split(".")
    older = f"{major}.{minor}.{int(patch) - 1}.{build}"
    run = run_user_data(user_data[(path, "trn1.2xlarge")], Scenario.of("trn1.2xlarge", driver=older), tmp_path)
    assert not joined(path, run)
    assert f"Neuron driver {older} is older than {RELEASE.driver_min}, the release minimum" in run.output
    assert failure_published(run, "driver") < went(path, run)


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_2_28_1_node_with_driver_2_29_fails_with_the_rule_in_its_reason(
    user_data: dict[tuple[str, str], str], tmp_path: Path, path: str
) -> None:
    """Issue 46: driver 2.29 "requires Neuron Runtime Library 2.33 or later"; 2.28.1 runs runtime 2.30. The node is
    outside its release's window (releases.driver_fit) and fails naming driver, release and rule, on both paths."""
    fit = releases.driver_fit("2.29.0.0", RELEASE.version)
    assert not fit.ok
    run = run_user_data(user_data[(path, "trn1.2xlarge")], Scenario.of("trn1.2xlarge", driver="2.29.0.0"), tmp_path)
    assert not joined(path, run)
    assert f"Neuron driver 2.29.0.0 does not suit Neuron {RELEASE.version}" in run.output
    assert "Neuron Driver 2.29 requires Neuron Runtime Library 2.33 or later" in run.output
    assert failure_published(run, "driver") < went(path, run)


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_driver_newer_than_any_the_catalog_has_read_fails_the_boot_check(
    user_data: dict[tuple[str, str], str], tmp_path: Path, path: str
) -> None:
    read = releases.driver_read()
    major, minor, patch, build = read.driver.split(".")
    newer = f"{major}.{minor}.{int(patch) + 1}.{build}"
    assert releases.driver_fit(newer, RELEASE.version).rule == "driver_read"
    run = run_user_data(user_data[(path, "trn1.2xlarge")], Scenario.of("trn1.2xlarge", driver=newer), tmp_path)
    assert not joined(path, run)
    assert f"Neuron driver {newer} does not suit Neuron {RELEASE.version}" in run.output
    assert failure_published(run, "driver") < went(path, run)


@pytest.mark.parametrize("path", sorted(PATHS))
def test_a_driver_between_the_minimum_and_the_shipped_one_joins_with_a_warning_and_a_metric(
    user_data: dict[tuple[str, str], str], tmp_path: Path, path: str
) -> None:
    assert releases.version_key(RELEASE.driver_min) < releases.version_key(RELEASE.driver_shipped)
    between = RELEASE.driver_min
    run = run_user_data(user_data[(path, "trn1.2xlarge")], Scenario.of("trn1.2xlarge", driver=between), tmp_path)
    assert joined(path, run), run.output[-3000:]
    assert f"WARNING: Neuron driver {between} is below {RELEASE.driver_shipped}, the release's shipped driver" in run.output
    assert any(
        "--metric-name NeuronDriverBelowShipped" in c and f"DriverVersion={between}" in c and "Pool=pool" in c
        for c in run.called("aws cloudwatch put-metric-data")
    )


@pytest.mark.parametrize("path", sorted(PATHS))
def test_the_driver_of_the_pinned_image_joins_without_a_warning(
    user_data: dict[tuple[str, str], str], tmp_path: Path, path: str
) -> None:
    """The drivers the nodes really carry (the DLAMI's: the release's shipped one; the pinned EKS image's: newer)
    are at or above driver_shipped: only a driver between driver_min and driver_shipped warns (issue 36)."""
    assert releases.version_key(DRIVER_ON[path]) >= releases.version_key(RELEASE.driver_shipped)
    run = run_user_data(user_data[(path, "trn1.2xlarge")], Scenario.of("trn1.2xlarge", driver=DRIVER_ON[path]), tmp_path)
    assert joined(path, run), run.output[-3000:]
    assert "WARNING: Neuron driver" not in run.output
    assert not any("--metric-name NeuronDriver" in c for c in run.called("aws cloudwatch put-metric-data"))


@pytest.mark.parametrize("path", sorted(PATHS))
@pytest.mark.parametrize(
    ("hang", "called"),
    [
        ("dnf .", "dnf install"),  # observability.sh's agent install, the first step of the user data
        ("modprobe efa", "modprobe efa"),  # the node check itself, under the watchdog
    ],
)
def test_a_hung_step_fails_the_node_at_the_boot_deadline(
    user_data: dict[tuple[str, str], str], tmp_path: Path, path: str, hang: str, called: str
) -> None:
    deadline = 5  # seconds of real time, injected through node.env (the catalog's 1500 s otherwise)
    text = user_data[(path, "trn1.2xlarge")]
    pinned = f"BOOT_DEADLINE_SECONDS='{catalog.software_facts()['lifecycle']['boot_deadline_seconds']}'"
    assert pinned in text
    text = text.replace(pinned, f"BOOT_DEADLINE_SECONDS='{deadline}'")
    started = time.monotonic()
    run = run_user_data(text, Scenario.of("trn1.2xlarge", driver=DRIVER_ON[path], hang=[hang]), tmp_path, timeout=60)
    assert time.monotonic() - started < 40, "the node did not fail at its deadline"
    assert run.called(called), "the scenario's step ran and hung"
    assert not joined(path, run)
    assert f"boot deadline of {deadline} s passed" in run.output
    assert failure_published(run, "deadline") < went(path, run)


@pytest.mark.parametrize("path", sorted(PATHS))
def test_the_device_count_waits_for_the_driver_and_gives_up_bounded(
    user_data: dict[tuple[str, str], str], tmp_path: Path, path: str
) -> None:
    text = user_data[(path, "trn1.2xlarge")]
    late = run_user_data(text, Scenario.of("trn1.2xlarge", driver=DRIVER_ON[path], devices_after_sleeps=3), tmp_path / "late")
    assert joined(path, late), late.output[-3000:]
    assert "waiting for the driver" in late.output
    wait = int(catalog.software_facts()["lifecycle"]["device_wait_seconds"])
    never = run_user_data(text, Scenario.of("trn1.2xlarge", driver=DRIVER_ON[path], neuron_devices=0), tmp_path / "never")
    assert not joined(path, never) and failure_published(never, "devices") < went(path, never)
    assert wait <= never.elapsed < wait + 600, never.elapsed  # waited the bounded time (fake clock), not forever
