"""AWS Batch for multi-node training (``training.scheduler: batch``): validation, construct, wiring.

One in-process environment is synthesized once for the module (with the cdk-nag plugin, as app.py does):
a batch cluster of trn1.32xlarge (EFA) with a batch GPU pool of p5.48xlarge, a batch cluster of
trn1.2xlarge (no EFA) with the compile cache in S3, and a plain Auto Scaling cluster beside them. The
example environment's batch cluster (environments/dev.yaml) is checked through the session synth.
"""

from __future__ import annotations

import copy
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import Environment as CdkEnvironment
from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2

from neuronkit import catalog, userdata
from neuronkit.config import ConfigError, Environment, parse_environment
from neuronkit.constructs import compliance
from neuronkit.constructs.batch import (
    JOB_MEMORY_SHARE,
    BatchTrainingCluster,
    batch_addresses_per_node,
    device_paths,
    mime_multipart,
)
from neuronkit.constructs.node_pool import NodePoolSpec
from neuronkit.stacks import build_environment
from neuronkit.stacks.network import addresses_per_az
from neuronkit.userdata import SHELLCHECK_ARGS
from tests.conftest import Synth, new_app, pinned_app, stand_in_ami

FILE = "environments/batch.yaml"
IMAGE = "public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.28.0-ubuntu24.04"
CUDA_IMAGE = "nvcr.io/nvidia/pytorch:25.01-py3"
TRN = catalog.get("trn1.32xlarge")
SMALL = catalog.get("trn1.2xlarge")
P5 = catalog.get("p5.48xlarge")
ECS_NEURON_NAME = catalog.ami_families()["ecs-neuron-al2023"].lookup_name
ECS_GPU_NAME = catalog.ami_families()["ecs-gpu-al2023"].lookup_name

BASE: dict[str, Any] = {
    "name": "batch",
    "account": "123456789012",
    "region": "us-east-1",
    "network": {"az_ids": ["use1-az6", "use1-az4"]},
    "storage": {"lustre": {"deployment_type": "PERSISTENT_2", "size_gib": 2400, "throughput_mbps_per_tib": 125}},
    "training": [
        {
            "name": "jobs",
            "instance_type": "trn1.32xlarge",
            "az_id": "use1-az6",
            "max_size": 4,
            "scheduler": "batch",
            "container_image": IMAGE,
            "gpu_pool": {"instance_type": "p5.48xlarge", "max_size": 2, "container_image": CUDA_IMAGE},
        },
        {
            "name": "small",
            "instance_type": "trn1.2xlarge",
            "az_id": "use1-az6",
            "min_size": 1,
            "max_size": 2,
            "scheduler": "batch",
            "container_image": IMAGE,
            "compile_cache": "s3",
        },
        {"name": "plain", "instance_type": "trn1.32xlarge", "az_id": "use1-az6", "max_size": 2},
    ],
    "monitoring": {"log_retention_days": 14},
}


def env_with(edits: dict[str, Any]) -> dict[str, Any]:
    """BASE with each dotted path ("training.0.max_size") set to its value, or removed for None."""
    data = copy.deepcopy(BASE)
    for path, value in edits.items():
        *parents, last = path.split(".")
        node: Any = data
        for key in parents:
            node = node[int(key)] if isinstance(node, list) else node[key]
        index: Any = int(last) if isinstance(node, list) else last
        if value is None:
            del node[index]
        else:
            node[index] = value
    return data


def problems(edits: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_environment(env_with(edits), FILE)
    return err.value.problems


# --------------------------------------------------------------------------------------------
# validation: every message, exactly
# --------------------------------------------------------------------------------------------
def test_the_module_environment_is_valid() -> None:
    env = parse_environment(copy.deepcopy(BASE), FILE)
    assert [(c.name, c.scheduler) for c in env.training] == [("jobs", "batch"), ("small", "batch"), ("plain", "none")]


CASES = [
    (
        "container-image-missing-and-none-in-the-matrix",
        # 2.33.0's JAX container is not in the sources the catalog read (2.28.1 to 2.32.0 are: dlc-readme-2.32.0)
        {"training.0.container_image": None, "training.0.neuron_sdk": "2.33.0", "training.0.workload": "jax"},
        [
            "training[0].container_image: the release matrix has no JAX container for Neuron 2.33.0; name one built for "
            "2.33.0 or older (public.ecr.aws/neuron/...-sdk2.33.0-...)"
        ],
    ),
    (
        "container-image-newer-than-the-host-release",
        {
            "training.0.container_image": "public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.31.1-ubuntu24.04"
        },
        [
            "training[0].container_image: built for Neuron 2.31.1, newer than the pool's Neuron 2.28.1 (driver 2.26.10.0); "
            "use public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.28.0-ubuntu24.04, or set neuron_sdk: 2.31.1"
        ],
    ),
    (
        "container-image-without-batch",
        {"training.2.container_image": IMAGE},
        ["training[2].container_image: only used with scheduler: batch; remove it or set scheduler: batch"],
    ),
    (
        "gpu-pool-image-without-batch",
        {"training.2.gpu_pool": {"instance_type": "p5.48xlarge", "container_image": CUDA_IMAGE}},
        ["training[2].gpu_pool.container_image: only used with scheduler: batch; remove it or set scheduler: batch"],
    ),
    (
        "gpu-pool-image-missing",
        {"training.0.gpu_pool.container_image": None},
        [
            "training[0].gpu_pool.container_image: required with scheduler: batch "
            "(the CUDA training image of the GPU job definition)"
        ],
    ),
    (
        "odcr-with-batch",
        {"training.0.capacity": {"type": "odcr", "instance_count": 4}},
        [
            "training[0].capacity.type: odcr is not available with scheduler: batch (AWS Batch runs multi-node jobs "
            "on on-demand capacity only); remove capacity or use scheduler: none"
        ],
    ),
    (
        "capacity-block-with-batch",
        {
            "training.0.capacity": {
                "type": "capacity-block",
                "reservation_id": "cr-0123456789abcdef0",
                "instance_type": "trn1.32xlarge",
                "az_id": "use1-az6",
                "instance_count": 4,
                "start": "2026-12-01T11:30:00Z",
                "end": "2026-12-15T11:30:00Z",
            }
        },
        [
            "training[0].capacity.type: capacity-block is not available with scheduler: batch (AWS Batch runs "
            "multi-node jobs on on-demand capacity only); remove capacity or use scheduler: none"
        ],
    ),
    (
        "desired-size-with-batch",
        {"training.0.desired_size": 2},
        [
            "training[0].desired_size: AWS Batch sizes the compute environment from the jobs in its queue; "
            "remove it (min_size keeps nodes running)"
        ],
    ),
    (
        "gpu-pool-desired-size-with-batch",
        {"training.0.gpu_pool.desired_size": 1},
        [
            "training[0].gpu_pool.desired_size: AWS Batch sizes the compute environment from the jobs in its queue; "
            "remove it (min_size keeps nodes running)"
        ],
    ),
    (
        "idle-scale-down-with-batch",
        {"training.0.idle_scale_down": True},
        ["training[0].idle_scale_down: AWS Batch scales an idle compute environment down to min_size by itself; remove it"],
    ),
    (
        "dlami-family-with-batch",
        {"training.0.ami": {"family": "neuron-multi-framework-ubuntu-24.04"}},
        [
            "training[0].ami.family: 'neuron-multi-framework-ubuntu-24.04' is not an ECS-optimized AMI family "
            "(AWS Batch nodes run the ECS agent); use one of ecs-neuron-al2023"
        ],
    ),
    (
        "unknown-family-with-batch",
        {"training.0.ami": {"family": "ecs-neuron"}},
        ["training[0].ami.family: 'ecs-neuron' is not a known AMI family; use one of ecs-neuron-al2023"],
    ),
    (
        "gpu-dlami-family-for-a-batch-gpu-pool",
        {"training.0.gpu_pool.ami": {"family": "gpu-base-oss-ubuntu-22.04"}},
        [
            "training[0].gpu_pool.ami.family: 'gpu-base-oss-ubuntu-22.04' is not an ECS-optimized AMI family "
            "(AWS Batch nodes run the ECS agent); use one of ecs-gpu-al2023"
        ],
    ),
    (
        "ecs-family-without-batch",
        {"training.2.ami": {"family": "ecs-neuron-al2023"}},
        [
            "training[2].ami.family: 'ecs-neuron-al2023' is not a Neuron DLAMI family (ecs-neuron); use one of "
            "neuron-multi-framework-ubuntu-24.04, neuron-base-ubuntu-24.04, neuron-base-al2023, neuron-pytorch-2.9-ubuntu-24.04"
        ],
    ),
]


@pytest.mark.parametrize(("edits", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_batch_problem_is_one_exact_line(edits: dict[str, Any], expected: list[str]) -> None:
    assert problems(edits) == [f"{FILE}: {line}" for line in expected]


def test_a_pinned_ecs_image_is_accepted_with_batch() -> None:
    env = parse_environment(
        env_with({"training.0.ami": {"ami_id": "ami-0123456789abcdef0", "root_device_name": "/dev/xvda"}}), FILE
    )
    assert env.training[0].ami.ami_id == "ami-0123456789abcdef0"


# --------------------------------------------------------------------------------------------
# synthesized resources (one synth for the module)
# --------------------------------------------------------------------------------------------
class Built:
    def __init__(
        self, env: Environment, stacks: Any, templates: dict[str, dict[str, Any]], outdir: Path, app_context: dict[str, Any]
    ):
        self.env = env
        self.app_context = app_context
        self.stacks = stacks
        self.templates = templates
        self.outdir = outdir
        self.training = templates["batch-training"]

    def of_type(self, type_: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.training["Resources"].items() if v["Type"] == type_}

    def one(self, type_: str, pool: str) -> tuple[str, dict[str, Any]]:
        """The resource of ``type_`` built for ``pool`` (its logical ID starts with Batch<pool>)."""
        prefix = "Batch" + pool.replace("-", "")
        (found,) = [(k, v) for k, v in self.of_type(type_).items() if k.startswith(prefix) and _pool_of(k) == pool]
        return found

    def props(self, type_: str, pool: str) -> dict[str, Any]:
        return self.one(type_, pool)[1]["Properties"]


def _pool_of(logical_id: str) -> str:
    for pool in ("jobs-gpu", "jobs", "small"):
        if logical_id.startswith("Batch" + pool.replace("-", "")):
            return pool
    return ""


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    env = parse_environment(copy.deepcopy(BASE), FILE)
    outdir = tmp_path_factory.mktemp("batch-cdk.out")
    app, stacks = pinned_app(lambda a: build_environment(a, env), outdir)  # the AMI lookups, as the CLI does them
    compliance.apply(app)  # a cdk-nag finding fails the synth
    assembly = app.synth()
    # The app's context holds the lookups pinned_app filled in (as the CLI would in cdk.context.json).
    return Built(env, stacks, {s.stack_name: s.template for s in assembly.stacks}, outdir, app.node.get_all_context())


def _lookup_key(built: Built, name: str) -> str:
    """The CDK context key of the AMI lookup by ``name`` for the module's account and region."""
    prefix = f"ami:account={built.env.account}:"
    (key,) = [k for k in built.app_context if k.startswith(prefix) and f"filters.name.0={name}:" in k]
    return key


def test_scheduler_batch_builds_compute_environments_not_auto_scaling_groups(built: Built) -> None:
    training = built.stacks.training
    assert set(training.clusters) == {"plain"}  # scheduler: none keeps its Auto Scaling group
    assert set(training.batch_clusters) == {"jobs", "jobs-gpu", "small"}
    groups = built.of_type("AWS::AutoScaling::AutoScalingGroup")
    assert [g["Properties"]["AutoScalingGroupName"] for g in groups.values()] == ["batch-plain"]
    assert len(built.of_type("AWS::Batch::ComputeEnvironment")) == 3
    assert len(built.of_type("AWS::Batch::JobQueue")) == 3
    assert len(built.of_type("AWS::Batch::JobDefinition")) == 3
    # No custom service role: Batch acts through AWSServiceRoleForBatch, the only role it performs
    # infrastructure updates with (Batch User Guide, "Updating compute environments").
    assert all("ServiceRole" not in ce["Properties"] for ce in built.of_type("AWS::Batch::ComputeEnvironment").values())
    assert not [r for r in built.of_type("AWS::IAM::Role").values() if "batch.amazonaws.com" in json.dumps(r)]


def test_compute_environment_carries_capacity_and_placement(built: Built) -> None:
    ce = built.props("AWS::Batch::ComputeEnvironment", "jobs")
    res = ce["ComputeResources"]
    assert (ce["Type"], ce["State"], res["Type"]) == ("MANAGED", "ENABLED", "EC2")  # On-Demand only
    assert "ServiceRole" not in ce and ce["ReplaceComputeEnvironment"] is False
    assert ce["UpdatePolicy"] == {"TerminateJobsOnUpdate": False}
    assert res["AllocationStrategy"] == "BEST_FIT_PROGRESSIVE"
    assert res["InstanceTypes"] == ["trn1.32xlarge"]
    assert (res["MinvCpus"], res["MaxvCpus"]) == (0, 4 * TRN.vcpus)
    assert len(res["Subnets"]) == 1
    # The cluster placement group and instance profile are set here: Batch ignores them in launch templates.
    pg_id, pg = built.one("AWS::EC2::PlacementGroup", "jobs")
    assert pg["Properties"]["Strategy"] == "cluster" and res["PlacementGroup"] == {"Ref": pg_id}
    profile_id, _ = built.one("AWS::IAM::InstanceProfile", "jobs")
    assert res["InstanceRole"] == {"Fn::GetAtt": [profile_id, "Arn"]}
    (image,) = res["Ec2Configuration"]
    assert image["ImageType"] == "ECS_AL2023"
    # Pinned: the ECS Neuron AMI found by its name at the first synth, never a `recommended` parameter.
    assert image["ImageIdOverride"] == stand_in_ami(_lookup_key(built, ECS_NEURON_NAME))
    assert res["Tags"]["neuronkit:pool"] == "jobs" and res["Tags"]["neuronkit:environment"] == "batch"
    # With EFA interfaces in the launch template, Batch refuses security groups on the compute environment.
    assert "SecurityGroupIds" not in res
    lt_id, _ = built.one("AWS::EC2::LaunchTemplate", "jobs")
    assert res["LaunchTemplate"] == {
        "LaunchTemplateId": {"Ref": lt_id},
        "Version": {"Fn::GetAtt": [lt_id, "LatestVersionNumber"]},
    }


def test_launch_template_has_the_catalogs_efa_interfaces_and_nothing_batch_ignores(built: Built) -> None:
    data = built.props("AWS::EC2::LaunchTemplate", "jobs")["LaunchTemplateData"]
    for ignored in ("InstanceType", "IamInstanceProfile", "InstanceMarketOptions", "ImageId", "SecurityGroupIds"):
        assert ignored not in data, ignored
    nics = data["NetworkInterfaces"]
    assert [n["InterfaceType"] for n in nics].count("efa-only") == TRN.efa_max_interfaces
    assert (nics[0]["InterfaceType"], nics[0]["NetworkCardIndex"], nics[0]["DeviceIndex"]) == ("interface", 0, 0)
    assert all("SubnetId" not in n for n in nics)  # Batch uses the compute environment's subnet
    sg_id, _ = built.one("AWS::EC2::SecurityGroup", "jobs")
    for nic in nics:
        groups = nic["Groups"]
        assert {"Fn::GetAtt": [sg_id, "GroupId"]} in groups
        assert any("LustreClientSecurityGroup" in json.dumps(g) for g in groups)
    root = data["BlockDeviceMappings"][0]
    assert root["DeviceName"] == catalog.ami_families()["ecs-neuron-al2023"].root_device_name
    assert root["Ebs"]["VolumeSize"] == catalog.capacity_facts()["min_root_volume_gib"]["trainium"]
    assert root["Ebs"]["Encrypted"] is True and data["MetadataOptions"]["HttpTokens"] == "required"


def _user_data(built: Built, pool: str) -> str:
    data = built.props("AWS::EC2::LaunchTemplate", pool)["LaunchTemplateData"]["UserData"]["Fn::Base64"]
    if isinstance(data, str):
        return data
    return "".join(p if isinstance(p, str) else "<token>" for p in data["Fn::Join"][1])


def test_user_data_is_a_mime_multipart_archive(built: Built) -> None:
    text = _user_data(built, "jobs")
    head, _, rest = text.partition("\n\n")
    assert head.splitlines() == ["MIME-Version: 1.0", 'Content-Type: multipart/mixed; boundary="==NEURONKIT-BATCH=="']
    assert rest.startswith('--==NEURONKIT-BATCH==\nContent-Type: text/x-shellscript; charset="us-ascii"\n\n#!/bin/bash\n')
    assert text.endswith("\n--==NEURONKIT-BATCH==--\n")
    assert f"EXPECTED_ACCELERATORS='{TRN.neuron_devices}'" in text and f"EXPECTED_EFA='{TRN.efa_max_interfaces}'" in text
    assert "LUSTRE_DNS='<token>'" in text and "mount_lustre" in text


def test_mime_multipart_refuses_a_script_holding_the_boundary() -> None:
    assert mime_multipart("echo hi").count("--==NEURONKIT-BATCH==") == 2
    with pytest.raises(ValueError, match="contains the MIME boundary"):
        mime_multipart("echo --==NEURONKIT-BATCH==")


def _container(built: Built, pool: str) -> dict[str, Any]:
    jd = built.props("AWS::Batch::JobDefinition", pool)
    (node_range,) = jd["NodeProperties"]["NodeRangeProperties"]
    assert node_range["TargetNodes"] == "0:"
    container: dict[str, Any] = node_range["Container"]
    return container


def _env(container: dict[str, Any]) -> dict[str, str]:
    return {e["Name"]: e["Value"] for e in container["Environment"]}


def test_job_definition_is_a_multi_node_template_with_every_device(built: Built) -> None:
    jd = built.props("AWS::Batch::JobDefinition", "jobs")
    assert (jd["Type"], jd["JobDefinitionName"], jd["PlatformCapabilities"]) == ("multinode", "batch-jobs", ["EC2"])
    assert (jd["NodeProperties"]["NumNodes"], jd["NodeProperties"]["MainNode"]) == (4, 0)
    assert jd["RetryStrategy"]["EvaluateOnExit"][0] == {"OnStatusReason": "Host EC2*", "Action": "RETRY"}
    c = _container(built, "jobs")
    assert c["Image"] == IMAGE
    devices = c["LinuxParameters"]["Devices"]
    expected = [f"/dev/neuron{i}" for i in range(TRN.neuron_devices)] + [
        f"/dev/infiniband/uverbs{i}" for i in range(TRN.efa_max_interfaces)
    ]
    assert [d["HostPath"] for d in devices] == expected == device_paths(TRN)
    assert all(d["ContainerPath"] == d["HostPath"] and d["Permissions"] == ["READ", "WRITE", "MKNOD"] for d in devices)
    assert c["Ulimits"] == [{"Name": "memlock", "SoftLimit": -1, "HardLimit": -1}]
    requirements = {r["Type"]: int(r["Value"]) for r in c["ResourceRequirements"]}
    assert requirements == {"VCPU": TRN.vcpus, "MEMORY": int(TRN.memory_mib * JOB_MEMORY_SHARE)}
    assert {v["Name"]: v["Host"]["SourcePath"] for v in c["Volumes"]} == {"local": "/local", "fsx": "/fsx"}
    assert {m["ContainerPath"] for m in c["MountPoints"]} == {"/local", "/fsx"}
    env = _env(c)
    assert env["NEURONKIT_DATASETS"] == "s3://batch-datasets-123456789012-us-east-1/"
    assert env["NEURONKIT_CHECKPOINTS"] == "s3://batch-checkpoints-123456789012-us-east-1/jobs/"
    assert env["NEURONKIT_CHECKPOINT_DIR"] == "/fsx/checkpoints/jobs/"  # auto-exported to the bucket above
    assert env["NEURON_COMPILE_CACHE_URL"] == "/local/neuron-compile-cache"
    assert env["FI_PROVIDER"] == "efa"
    (job_role,) = [k for k in built.of_type("AWS::IAM::Role") if k.startswith("BatchjobsJobRole")]
    assert c["JobRoleArn"] == {"Fn::GetAtt": [job_role, "Arn"]}
    logs = c["LogConfiguration"]
    assert logs["LogDriver"] == "awslogs" and logs["Options"]["awslogs-stream-prefix"] == "jobs"


def test_default_command_maps_batch_variables_for_torchrun_and_the_neuron_runtime(built: Built) -> None:
    command = _container(built, "jobs")["Command"]
    assert command[:2] == ["bash", "-c"]
    script = command[2]
    for line in (
        'export NNODES="${AWS_BATCH_JOB_NUM_NODES:-1}"',
        'export NODE_RANK="${AWS_BATCH_JOB_NODE_INDEX:-0}"',
        'export MASTER_PORT="${MASTER_PORT:-2022}"',
        # The runtime's root communicator has a port of its own, never torchrun's MASTER_PORT.
        'export NEURON_RT_ROOT_COMM_ID="${MASTER_ADDR}:${NEURON_RT_ROOT_COMM_PORT:-46820}"',
        'exec bash -c "${NEURONKIT_TRAIN_COMMAND}"',
    ):
        assert line in script.splitlines()
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    result = subprocess.run([shellcheck, "-s", "bash", "-"], input=script, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_queue_holds_one_compute_environment_and_cancels_stuck_jobs(built: Built) -> None:
    queue = built.props("AWS::Batch::JobQueue", "jobs")
    ce_id, _ = built.one("AWS::Batch::ComputeEnvironment", "jobs")
    assert queue["JobQueueName"] == "batch-jobs"
    assert queue["ComputeEnvironmentOrder"] == [{"ComputeEnvironment": {"Ref": ce_id}, "Order": 1}]
    actions = {a["Reason"]: (a["Action"], a["State"], a["MaxTimeSeconds"]) for a in queue["JobStateTimeLimitActions"]}
    assert actions == {
        "CAPACITY:INSUFFICIENT_INSTANCE_CAPACITY": ("CANCEL", "RUNNABLE", 4 * 3600),
        "MISCONFIGURATION:COMPUTE_ENVIRONMENT_MAX_RESOURCE": ("CANCEL", "RUNNABLE", 600),
        "MISCONFIGURATION:JOB_RESOURCE_REQUIREMENT": ("CANCEL", "RUNNABLE", 600),
    }


def test_gpu_pool_gets_its_own_compute_environment_queue_and_job_definition(built: Built) -> None:
    ce_id, ce = built.one("AWS::Batch::ComputeEnvironment", "jobs-gpu")
    res = ce["Properties"]["ComputeResources"]
    assert res["InstanceTypes"] == ["p5.48xlarge"] and res["MaxvCpus"] == 2 * P5.vcpus
    (image,) = res["Ec2Configuration"]
    assert image["ImageType"] == "ECS_AL2023_NVIDIA"
    assert image["ImageIdOverride"] == stand_in_ami(_lookup_key(built, ECS_GPU_NAME))
    # Its own placement group (GPU and Trainium nodes never share collectives) and its own queue.
    assert res["PlacementGroup"] != built.props("AWS::Batch::ComputeEnvironment", "jobs")["ComputeResources"]["PlacementGroup"]
    queue = built.props("AWS::Batch::JobQueue", "jobs-gpu")
    assert queue["JobQueueName"] == "batch-jobs-gpu"
    assert queue["ComputeEnvironmentOrder"] == [{"ComputeEnvironment": {"Ref": ce_id}, "Order": 1}]
    c = _container(built, "jobs-gpu")
    assert c["Image"] == CUDA_IMAGE
    requirements = {r["Type"]: int(r["Value"]) for r in c["ResourceRequirements"]}
    assert requirements["GPU"] == P5.gpus
    paths = [d["HostPath"] for d in c["LinuxParameters"]["Devices"]]
    assert paths == [f"/dev/infiniband/uverbs{i}" for i in range(P5.efa_max_interfaces)]
    assert "NEURON_COMPILE_CACHE_URL" not in _env(c)
    nics = built.props("AWS::EC2::LaunchTemplate", "jobs-gpu")["LaunchTemplateData"]["NetworkInterfaces"]
    assert [n["InterfaceType"] for n in nics].count("efa-only") == P5.efa_max_interfaces
    assert "ACCELERATOR='gpu'" in _user_data(built, "jobs-gpu")


def test_type_without_efa_puts_its_security_groups_on_the_compute_environment(built: Built) -> None:
    res = built.props("AWS::Batch::ComputeEnvironment", "small")["ComputeResources"]
    sg_id, _ = built.one("AWS::EC2::SecurityGroup", "small")
    assert res["SecurityGroupIds"][0] == {"Fn::GetAtt": [sg_id, "GroupId"]}
    assert any("LustreClientSecurityGroup" in json.dumps(g) for g in res["SecurityGroupIds"])
    assert (res["MinvCpus"], res["MaxvCpus"]) == (SMALL.vcpus, 2 * SMALL.vcpus)  # min_size 1 keeps a node
    assert "NetworkInterfaces" not in built.props("AWS::EC2::LaunchTemplate", "small")["LaunchTemplateData"]
    c = _container(built, "small")
    assert [d["HostPath"] for d in c["LinuxParameters"]["Devices"]] == [f"/dev/neuron{i}" for i in range(SMALL.neuron_devices)]
    env = _env(c)
    assert "FI_PROVIDER" not in env
    assert env["NEURON_COMPILE_CACHE_URL"] == "s3://batch-artifacts-123456789012-us-east-1/neuron-compile-cache/small/"


def test_job_role_reads_data_writes_checkpoints_and_its_compile_cache(built: Built) -> None:
    policies = [p for k, p in built.of_type("AWS::IAM::Policy").items() if k.startswith("BatchsmallJobRole")]
    (policy,) = policies
    statements = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    assert {"ListBuckets", "ReadData", "Checkpoints", "WriteOwnCheckpoints", "CompileCache"} <= set(statements)
    write = statements["WriteOwnCheckpoints"]
    assert "s3:PutObject" in write["Action"] and "s3:DeleteObject" in write["Action"]
    # Every pool may read any checkpoint but write and delete only under its own prefix.
    assert str(write["Resource"]).endswith("batch-checkpoints-123456789012-us-east-1/small/*") or "/small/*" in str(
        write["Resource"]
    )
    assert "s3:DeleteObject" not in str(statements["Checkpoints"]["Action"])
    (role_id,) = [k for k in built.of_type("AWS::IAM::Role") if k.startswith("BatchsmallJobRole")]
    trust = built.training["Resources"][role_id]["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]
    assert trust["Principal"] == {"Service": "ecs-tasks.amazonaws.com"}


def test_job_logs_go_to_a_named_group_with_the_environments_retention(built: Built) -> None:
    group = built.props("AWS::Logs::LogGroup", "jobs")
    assert (group["LogGroupName"], group["RetentionInDays"]) == ("/neuronkit/batch/batch/jobs", 14)


def test_batch_templates_are_cfn_lint_clean(built: Built) -> None:
    files = sorted(str(p) for p in built.outdir.glob("*.template.json"))
    result = subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), "--format", "parseable", *files], capture_output=True, text=True
    )
    assert result.returncode == 0 and result.stdout.strip() == "", result.stdout + result.stderr


def test_subnets_count_the_job_task_interface_of_each_batch_node(built: Built) -> None:
    need = addresses_per_az(built.env)
    plain = 2 * 1
    batch_nodes = 4 * batch_addresses_per_node(TRN) + 2 * batch_addresses_per_node(P5) + 2 * batch_addresses_per_node(SMALL)
    assert batch_addresses_per_node(TRN) == 2
    assert need["use1-az6"] - need["use1-az4"] == plain + batch_nodes


# --------------------------------------------------------------------------------------------
# the example environment (environments/dev.yaml) and the boot script
# --------------------------------------------------------------------------------------------
def test_dev_has_a_batch_queue_beside_its_plain_cluster(synth: Synth) -> None:
    queues = synth.resources("dev-training", "AWS::Batch::JobQueue")
    assert [q["Properties"]["JobQueueName"] for q in queues.values()] == ["dev-batch"]
    (jd,) = synth.resources("dev-training", "AWS::Batch::JobDefinition").values()
    assert jd["Properties"]["JobDefinitionName"] == "dev-batch" and jd["Properties"]["NodeProperties"]["NumNodes"] == 2
    (ce,) = synth.resources("dev-training", "AWS::Batch::ComputeEnvironment").values()
    assert ce["Properties"]["ComputeResources"]["MinvCpus"] == 0  # nothing runs while the queue is empty
    groups = synth.resources("dev-training", "AWS::AutoScaling::AutoScalingGroup")
    assert "dev-dev" in [g["Properties"]["AutoScalingGroupName"] for g in groups.values()]


def test_batch_boot_script_is_shellcheck_clean_after_rendering(tmp_path: Path) -> None:
    values = {
        "ENVIRONMENT": "dev",
        "POOL": "batch",
        "ACCELERATOR": "neuron",
        "EXPECTED_ACCELERATORS": 16,
        "EXPECTED_EFA": 8,
        "LUSTRE_DNS": "fs-0123.fsx.us-east-1.amazonaws.com",
        "LUSTRE_MOUNT": "abcdefgh",
        **userdata.boot_values(),
        "EFA_INSTALLER_URL": "https://efa-installer.amazonaws.com/aws-efa-installer-1.47.0.tar.gz",
    }
    # The shell part of the archive, as cloud-init hands it to bash.
    part = mime_multipart(userdata.render("batch-node.sh", values)).split("\n\n", 2)[2]
    script = tmp_path / "batch-node.sh"
    script.write_text(part.rsplit("\n--==NEURONKIT-BATCH==--", 1)[0])
    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    result = subprocess.run([shellcheck, *SHELLCHECK_ARGS, str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
    with pytest.raises(ValueError, match="missing values for EXPECTED_EFA"):
        userdata.render("batch-node.sh", {k: v for k, v in values.items() if k != "EXPECTED_EFA"})


# --------------------------------------------------------------------------------------------
# construct arguments
# --------------------------------------------------------------------------------------------
def _construct(**over: Any) -> BatchTrainingCluster:
    app = new_app()
    stack = Stack(app, "S", env=CdkEnvironment(account="123456789012", region="us-east-1"))  # the AMI lookup needs both
    vpc = ec2.Vpc.from_vpc_attributes(stack, "Vpc", vpc_id="vpc-0123456789abcdef0", availability_zones=["us-east-1a"])
    pool: dict[str, Any] = {"instance_type": "trn1.32xlarge", "max_size": 2}
    pool.update({k: over.pop(k) for k in ("min_size", "desired_size", "root_volume_gib", "ami") if k in over})
    args: dict[str, Any] = {
        "environment": "t",
        "name": "jobs",
        "nodes": NodePoolSpec(**pool),
        "vpc": vpc,
        "subnet_id": "subnet-0123456789abcdef0",
        "container_image": IMAGE,
    }
    return BatchTrainingCluster(stack, "Jobs", **(args | over))


@pytest.mark.parametrize(
    ("over", "message"),
    [
        # Sizes and volume are the NodePoolSpec's checks, made when the spec is (without the pool's name).
        ({"min_size": 3}, "min_size 3 is greater than max_size 2"),
        ({"root_volume_gib": 100}, "root_volume_gib 100 GiB is below the 512 GiB a trainium node needs"),
        ({"desired_size": 1}, "jobs: desired_size does not apply to Batch"),
        ({"container_image": " "}, "jobs: container_image is required"),
        ({"capacity_wait_minutes": 5}, "jobs: capacity_wait_minutes 5 must lie between 10 and 1440"),
    ],
)
def test_construct_refuses_bad_arguments(over: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        _construct(**over)


def test_construct_defaults_without_storage() -> None:
    cluster = _construct()
    assert cluster.queue_name == cluster.job_definition_name == "t-jobs"
    assert cluster.placement_group is not None and cluster.instance_type.name == "trn1.32xlarge"
    template = Stack.of(cluster).resolve(cluster.job_definition.node_properties)
    env = {e["name"]: e["value"] for e in template["nodeRangeProperties"][0]["container"]["environment"]}
    assert "NEURONKIT_CHECKPOINTS" not in env and env["NEURON_COMPILE_CACHE_URL"] == "/local/neuron-compile-cache"


def test_batch_nodes_reach_aws_apis_and_registries_over_https(built: Built) -> None:
    """A Batch node pulls its container from ECR, reports to ECS and Batch and reads S3 over HTTPS: the security groups
    on its primary interface must allow TCP 443 out to anywhere (the VPC has no endpoints for all of them)."""
    res = built.training["Resources"]
    environments = built.of_type("AWS::Batch::ComputeEnvironment")
    assert environments
    for lid, ce in environments.items():
        lt_ref = ce["Properties"]["ComputeResources"]["LaunchTemplate"]["LaunchTemplateId"]["Ref"]
        data = res[lt_ref]["Properties"]["LaunchTemplateData"]
        primary = [
            i for i in data.get("NetworkInterfaces", []) if i.get("DeviceIndex") == 0 and i.get("NetworkCardIndex", 0) == 0
        ]
        groups = primary[0]["Groups"] if primary else ce["Properties"]["ComputeResources"]["SecurityGroupIds"]
        egress = []
        for group in groups:
            if isinstance(group, dict) and "Fn::GetAtt" in group:
                sg = res[group["Fn::GetAtt"][0]]
                egress += sg["Properties"].get("SecurityGroupEgress", [])
                egress += [
                    r["Properties"] for r in built.of_type("AWS::EC2::SecurityGroupEgress").values()
                    if r["Properties"]["GroupId"] == group
                ]  # fmt: skip
        https = [
            e for e in egress
            if e.get("CidrIp") == "0.0.0.0/0" and e.get("IpProtocol") == "tcp" and e.get("FromPort") == 443 and e.get("ToPort") == 443
        ]  # fmt: skip
        assert https, f"{lid}: no HTTPS egress on the nodes' security groups"
