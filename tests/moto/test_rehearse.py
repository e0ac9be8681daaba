"""`neuronkit rehearse` (`make deploy-local`): the real CDK CLI deploys both example environments into moto.

One rehearsal per module: the fixture synthesizes once with the pinned CLI (as `make deploy-local` does),
bootstraps and deploys dev into 111111111111 and prod into 222222222222, and the destroy fixture runs
`cdk destroy` after the deployment tests (pytest runs a module's tests in file order). The assertions read
moto back with boto3 on their own, independently of the rehearsal's report, and then check the report.
"""

from __future__ import annotations

import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from neuronkit import catalog
from neuronkit.cli import main
from neuronkit.config import load_all
from neuronkit.rehearsal import (
    PROBE_KEY,
    DestroyReport,
    EnvironmentReport,
    Rehearsal,
    RehearsalError,
    RehearsalResult,
    UnsafeEndpointError,
    assert_local_endpoint,
    cli_environment,
    render_report,
    render_verdict,
    safety,
)
from tests.conftest import ROOT
from tests.project import monitoring_stack
from tests.templates import pool_image

# Reading stack resources back makes moto re-parse skipped types, each with a UserWarning the report covers.
pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse .* not supported by moto:UserWarning")
ENVIRONMENTS = {e.name: e for e in load_all(ROOT / "environments")}


class Deployed:
    def __init__(self, rehearsal: Rehearsal, reports: list[EnvironmentReport], lines: list[str]):
        self.rehearsal = rehearsal
        self.reports = {r.name: r for r in reports}
        self.lines = lines

    def client(self, service: str, env: str) -> Any:
        e = ENVIRONMENTS[env]
        return self.rehearsal.client(service, e.account, e.region)


@pytest.fixture(scope="module")
def deployed() -> Iterator[Deployed]:
    lines: list[str] = []
    before = tree_state()
    with Rehearsal(ROOT, progress=lines.append) as r:
        reports = r.deploy()
        yield Deployed(r, reports, lines)
    assert tree_state() == before, "the rehearsal changed the project"


def tree_state() -> tuple[str, bytes]:
    """What a rehearsal must leave as it found it: `git status` of the project and its cdk.context.json, byte for byte."""
    done = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=all"], cwd=ROOT, capture_output=True, text=True, check=False
    )
    status = done.stdout if done.returncode == 0 else "(not a git checkout)"
    return status, (ROOT / "cdk.context.json").read_bytes()


@pytest.fixture(scope="module")
def destroyed(deployed: Deployed) -> dict[str, DestroyReport]:
    return {d.name: d for d in deployed.rehearsal.destroy()}


# --------------------------------------------------------------------------------------------
# deployment
# --------------------------------------------------------------------------------------------
def test_both_environments_were_rehearsed_and_passed(deployed: Deployed) -> None:
    assert set(deployed.reports) == set(ENVIRONMENTS) >= {"dev", "prod"}  # every file present, the examples too
    for report in deployed.reports.values():
        assert report.ok, report.problems


@pytest.mark.parametrize("env", sorted(ENVIRONMENTS))
def test_every_stack_reaches_create_complete_in_its_own_account(deployed: Deployed, env: str) -> None:
    cfn = deployed.client("cloudformation", env)
    stacks = {s["StackName"]: s["StackStatus"] for s in cfn.describe_stacks()["Stacks"]}
    # Bootstrapped and deployed in this environment's account only: stacks of environments in other accounts
    # are not here (a user's files may share an account and region: theirs are).
    e = ENVIRONMENTS[env]
    here = [n for n, o in ENVIRONMENTS.items() if (o.account, o.region) == (e.account, e.region)]
    expected = {s.name: "CREATE_COMPLETE" for n in here for s in deployed.rehearsal.stacks(n)}
    assert {s.name for s in deployed.rehearsal.stacks(env)} >= {f"{env}-network", f"{env}-storage", monitoring_stack(e)}
    assert stacks == {"CDKToolkit": "CREATE_COMPLETE", **expected}
    assert deployed.client("sts", env).get_caller_identity()["Account"] == ENVIRONMENTS[env].account
    assert [s.status for s in deployed.reports[env].stacks] == ["CREATE_COMPLETE"] * len(deployed.rehearsal.stacks(env))


def _node_group(deployed: Deployed, env: str, pool: str) -> dict[str, Any]:
    """On platform: eks a pool is a managed node group: read it back from moto's EKS (cluster named after the file)."""
    from neuronkit.constructs.eks.nodegroup_name import prefix_of

    eks = deployed.client("eks", env)
    # EKS knows the group as ENV-POOL-<digest> (issue 47, fix 5): find it by its stable ENV-POOL.
    (name,) = [g for g in eks.list_nodegroups(clusterName=env)["nodegroups"] if prefix_of(g) == f"{env}-{pool}"]
    group: dict[str, Any] = eks.describe_nodegroup(clusterName=env, nodegroupName=name)["nodegroup"]
    return group


@pytest.mark.parametrize("env", sorted(ENVIRONMENTS))
def test_group_runs_the_stacks_launch_template_with_the_configured_sizes(deployed: Deployed, env: str) -> None:
    if not ENVIRONMENTS[env].training:
        assert f"{env}-training" not in {s.name for s in deployed.rehearsal.stacks(env)}
        return
    cluster = ENVIRONMENTS[env].training[0]
    if ENVIRONMENTS[env].platform == "eks":
        group = _node_group(deployed, env, cluster.name)
        desired = cluster.min_size if cluster.desired_size is None else cluster.desired_size
        scaling = group["scalingConfig"]
        assert (scaling["minSize"], scaling["desiredSize"], scaling["maxSize"]) == (cluster.min_size, desired, cluster.max_size)
        lt = group["launchTemplate"]["id"]
        data = deployed.client("ec2", env).describe_launch_template_versions(LaunchTemplateId=lt)["LaunchTemplateVersions"][-1]
        efa = [n for n in data["LaunchTemplateData"]["NetworkInterfaces"] if n.get("InterfaceType") == "efa-only"]
        assert len(efa) == catalog.get(cluster.instance_type).efa_max_interfaces
        return
    # Other groups run beside it (inference fleets, GPU pools): read the cluster's own by name.
    (group,) = deployed.client("autoscaling", env).describe_auto_scaling_groups(AutoScalingGroupNames=[f"{env}-{cluster.name}"])[
        "AutoScalingGroups"
    ]
    assert group["AutoScalingGroupName"] == f"{env}-{cluster.name}"
    desired = cluster.min_size if cluster.desired_size is None else cluster.desired_size
    assert (group["MinSize"], group["DesiredCapacity"], group["MaxSize"]) == (cluster.min_size, desired, cluster.max_size)
    # The group's launch template is the one the training stack created, not any other.
    resources = deployed.client("cloudformation", env).describe_stack_resources(StackName=f"{env}-training")["StackResources"]
    own = f"Cluster{cluster.name.replace('-', '')}LaunchTemplate"  # dev's Batch cluster has a launch template too
    (template_id,) = [
        r["PhysicalResourceId"]
        for r in resources
        if r.get("ResourceType") == "AWS::EC2::LaunchTemplate" and r["LogicalResourceId"].startswith(own)
    ]
    assert group["LaunchTemplate"]["LaunchTemplateId"] == template_id
    # moto launches the desired capacity from that template, and the report counts it.
    (pool,) = [p for p in deployed.reports[env].pools if p.group_name == group["AutoScalingGroupName"]]
    assert len(group["Instances"]) == desired == pool.instances
    ec2 = deployed.client("ec2", env)
    data = ec2.describe_launch_template_versions(LaunchTemplateId=template_id)["LaunchTemplateVersions"][-1]["LaunchTemplateData"]
    assert data["InstanceType"] == cluster.instance_type
    assert (
        len([n for n in data["NetworkInterfaces"] if n.get("InterfaceType") == "efa-only"])
        == catalog.get(cluster.instance_type).efa_max_interfaces
    )
    # The image is the cluster's pinned ami_id, else the one its lookup has in the rehearsal's context: pinned in
    # cdk.context.json for the cluster's Neuron release or, unpinned, a stand-in; either is registered in the mock.
    assert data["ImageId"] == pool_image(deployed.rehearsal.context, ENVIRONMENTS[env], "training[0].ami")
    (image,) = ec2.describe_images(ImageIds=[data["ImageId"]])["Images"]
    assert image["Name"].startswith(("neuronkit-pinned/", "neuronkit-rehearsal/stand-in/"))


def test_dev_batch_queue_and_job_definition_are_deployed(deployed: Deployed) -> None:
    # dev's scheduler: batch cluster, deployed by the real CDK CLI: compute environment, queue, job definition.
    (cluster,) = [c for c in ENVIRONMENTS["dev"].training if c.scheduler == "batch"]
    batch = deployed.client("batch", "dev")
    (queue,) = batch.describe_job_queues()["jobQueues"]
    assert queue["jobQueueName"] == f"dev-{cluster.name}" and queue["state"] == "ENABLED"
    (environment,) = batch.describe_compute_environments()["computeEnvironments"]
    assert queue["computeEnvironmentOrder"][0]["computeEnvironment"] == environment["computeEnvironmentArn"]
    assert environment["type"] == "MANAGED" and environment["computeResources"]["instanceTypes"] == [cluster.instance_type]
    (definition,) = batch.describe_job_definitions(jobDefinitionName=f"dev-{cluster.name}")["jobDefinitions"]
    assert definition["type"] == "multinode" and definition["nodeProperties"]["numNodes"] == cluster.max_size


@pytest.mark.parametrize("env", sorted(ENVIRONMENTS))
def test_named_buckets_exist(deployed: Deployed, env: str) -> None:
    e = ENVIRONMENTS[env]
    names = {b["Name"] for b in deployed.client("s3", env).list_buckets()["Buckets"]}
    for purpose in ("datasets", "checkpoints", "artifacts"):
        assert f"{env}-{purpose}-{e.account}-{e.region}" in names
    assert {b.name for b in deployed.reports[env].buckets if b.exists} <= names


@pytest.mark.parametrize("env", sorted(ENVIRONMENTS))
def test_types_moto_skips_are_reported_and_really_absent(deployed: Deployed, env: str) -> None:
    report = deployed.reports[env]
    assert "AWS::CDK::Metadata" not in report.unmodelled  # creates nothing in an account
    assert deployed.client("fsx", env).describe_file_systems()["FileSystems"] == []
    if ENVIRONMENTS[env].storage.lustre is None:  # a file without Lustre: no file system to skip
        assert "AWS::FSx::FileSystem" not in report.unmodelled and not report.file_systems
        return
    assert report.unmodelled["AWS::FSx::FileSystem"] == [f"{env}-storage/StorageLustre6434AAB0"]
    # What else is skipped follows the templates, not the examples: a file whose only cluster runs on a Capacity
    # Block has no placement group (EC2 places a block's instances), and an ODCR is created only where a file asks.
    stacks = deployed.rehearsal.stacks(env)
    groups = sorted(f"{s.name}/{logical}" for s in stacks for logical, _ in s.resources("AWS::EC2::PlacementGroup"))
    assert sorted(report.unmodelled.get("AWS::EC2::PlacementGroup", [])) == groups  # moto's CloudFormation has none
    if not any(s.resources("AWS::EC2::CapacityReservation") for s in stacks):
        assert "AWS::EC2::CapacityReservation" not in report.unmodelled
    assert "AWS::CDK::Metadata" not in report.unmodelled  # creates nothing in an account
    # Reported as skipped because it was: moto's FSx holds no file system.
    assert deployed.client("fsx", env).describe_file_systems()["FileSystems"] == []
    (fs,) = report.file_systems
    assert not fs.modelled and fs.retained
    text = render_report(report)
    assert "not modelled by moto" in text and "AWS::FSx::FileSystem x1" in text


@pytest.mark.parametrize("env", sorted(ENVIRONMENTS))
def test_inference_fleet_and_its_rebalancer_deploy_through_the_cli(deployed: Deployed, env: str) -> None:
    if not ENVIRONMENTS[env].inference:
        assert f"{env}-inference" not in {s.name for s in deployed.rehearsal.stacks(env)}
        return
    fleet = ENVIRONMENTS[env].inference[0]
    name = f"{env}-{fleet.name}"
    if ENVIRONMENTS[env].platform == "eks":  # a node group of the fleet's Neuron types (no server nor rebalancer yet)
        from neuronkit.kubernetes.serving import headroom_nodes

        group = _node_group(deployed, env, fleet.name)
        # A served fleet's node group keeps room for a compile Job and a surge pod above its maximum (issue 49).
        most = fleet.max_size + (headroom_nodes("neuron") if fleet.model is not None else 0)
        assert group["instanceTypes"] == fleet.neuron_types and group["scalingConfig"]["maxSize"] == most
        return
    (group,) = deployed.client("autoscaling", env).describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"]
    overrides = group["MixedInstancesPolicy"]["LaunchTemplate"]["Overrides"]
    assert [o["InstanceType"] for o in overrides] == fleet.neuron_types + fleet.fallback_types
    desired = fleet.min_size if fleet.desired_size is None else fleet.desired_size
    (pool,) = [p for p in deployed.reports[env].pools if p.pool == fleet.name]
    assert pool.metadata["role"] == "inference" and len(group["Instances"]) == desired == pool.instances
    # The CLI published the rebalancer's code to the bootstrap bucket; moto created the function from it.
    resources = deployed.client("cloudformation", env).describe_stack_resources(StackName=f"{env}-inference")["StackResources"]
    (function,) = [r["PhysicalResourceId"] for r in resources if r.get("ResourceType") == "AWS::Lambda::Function"]
    config = deployed.client("lambda", env).get_function_configuration(FunctionName=function)
    assert config["Environment"]["Variables"]["GROUP_NAME"] == name and config["Handler"] == "handler.handler"
    assert config["CodeSize"] > 0


def test_report_shows_pools_with_chips_cores_and_efa(deployed: Deployed) -> None:
    text = render_report(deployed.reports["prod"])
    row = next(line for line in text.splitlines() if line.startswith("pretrain"))
    it = catalog.get("trn2.48xlarge")
    # Empty until its Capacity Block starts: the block's schedule scales it to 16.
    assert "trn2.48xlarge" in row and "0/0/16" in row and "capacity-block" in row
    assert f"{it.neuron_devices} chips, {it.neuron_cores} NeuronCores" in row
    assert f"{it.neuron_devices * 16} chips, {it.neuron_cores * 16} NeuronCores" in row
    assert f"{it.efa_max_interfaces} x EFA, {it.efa_bandwidth_gbps:g} Gbps" in row
    dev_row = next(line for line in render_report(deployed.reports["dev"]).splitlines() if line.startswith("dev "))
    assert "trn1.2xlarge" in dev_row and "0/0/1" in dev_row and "1 chip, 2 NeuronCores" in dev_row
    assert "none" in dev_row  # trn1.2xlarge has no EFA


def test_progress_names_each_stack_as_it_completes(deployed: Deployed) -> None:
    for env in ENVIRONMENTS:
        for stack in deployed.rehearsal.stacks(env):  # every stack the file makes (a file without fleets has fewer)
            assert any(line.startswith(f"[{env}] {stack.name}: CREATE_COMPLETE") for line in deployed.lines), stack.name
    assert any("cdk bootstrap aws://222222222222/us-east-2" in line for line in deployed.lines)


# --------------------------------------------------------------------------------------------
# cdk destroy (runs after the deployment tests: file order)
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("env", sorted(ENVIRONMENTS))
def test_destroy_keeps_retained_buckets_and_their_objects(
    destroyed: dict[str, DestroyReport], deployed: Deployed, env: str
) -> None:
    report = destroyed[env]
    assert report.ok, report.problems
    assert sorted(report.stacks_deleted) == sorted(s.name for s in deployed.rehearsal.stacks(env))
    s3 = deployed.client("s3", env)
    for bucket in deployed.reports[env].buckets:
        body = s3.get_object(Bucket=bucket.name, Key=PROBE_KEY)["Body"].read()
        assert env.encode() in body
    assert len(report.buckets_kept) == len(deployed.reports[env].buckets) == 4


@pytest.mark.parametrize("env", sorted(ENVIRONMENTS))
def test_destroy_removes_compute_and_the_network(destroyed: dict[str, DestroyReport], deployed: Deployed, env: str) -> None:
    assert deployed.client("autoscaling", env).describe_auto_scaling_groups()["AutoScalingGroups"] == []
    assert deployed.client("ec2", env).describe_launch_templates()["LaunchTemplates"] == []
    vpcs = deployed.client("ec2", env).describe_vpcs()["Vpcs"]
    assert [v for v in vpcs if not v["IsDefault"]] == []
    stacks = {s["StackName"] for s in deployed.client("cloudformation", env).describe_stacks()["Stacks"]}
    assert stacks == {"CDKToolkit"}
    if ENVIRONMENTS[env].platform == "eks":
        assert deployed.client("eks", env).list_clusters()["clusters"] == []
    if ENVIRONMENTS[env].storage.lustre is None:
        assert not destroyed[env].file_systems
        return
    (fs,) = destroyed[env].file_systems
    assert "DeletionPolicy Retain" in fs and "moto does not model it" in fs


# --------------------------------------------------------------------------------------------
# never a real account
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "url",
    [
        "https://ec2.us-east-1.amazonaws.com",
        "http://10.0.0.5:5000",
        "http://192.168.1.20:4566",
        "http://localhost.example.com:5000",
        "http://0.0.0.0:5000",
        "ftp://localhost:21",
        "localhost:5000",
    ],
)
def test_endpoint_guard_refuses_anything_but_loopback(url: str) -> None:
    with pytest.raises(UnsafeEndpointError) as err:
        assert_local_endpoint(url)
    assert err.value.code == 2


@pytest.mark.parametrize("url", ["http://localhost:5000", "http://127.0.0.1:5000", "http://127.8.9.10", "http://[::1]:5000"])
def test_endpoint_guard_accepts_loopback(url: str) -> None:
    assert assert_local_endpoint(url) == url


def test_cli_environment_keeps_no_aws_setting_of_the_caller(tmp_path: Any) -> None:
    blank = tmp_path / "blank"
    base = {
        "PATH": "/usr/bin",
        "HOME": "/home/someone",
        "AWS_PROFILE": "production",
        "AWS_SESSION_TOKEN": "real-token",
        "AWS_ACCESS_KEY_ID": "AKIAREALKEY",
        "AWS_SECRET_ACCESS_KEY": "real-secret",
        "AWS_ENDPOINT_URL_S3": "https://s3.us-east-1.amazonaws.com",
        "AWS_ENDPOINT_URL_CLOUDFORMATION": "https://cloudformation.us-east-1.amazonaws.com",
        "AWS_ROLE_ARN": "arn:aws:iam::999999999999:role/deployer",
        "AWS_WEB_IDENTITY_TOKEN_FILE": "/var/run/token",
        "CDK_DEFAULT_ACCOUNT": "999999999999",
    }
    env = cli_environment(
        "http://localhost:5000",
        access_key_id="AKIAMOTO",
        secret_access_key="moto",
        region="us-east-1",
        blank_file=blank,
        cdk_home=tmp_path,
        base=base,
    )
    aws = {k: v for k, v in env.items() if k.startswith("AWS_")}
    assert aws["AWS_ENDPOINT_URL"] == "http://localhost:5000"
    assert (aws["AWS_ACCESS_KEY_ID"], aws["AWS_SECRET_ACCESS_KEY"]) == ("AKIAMOTO", "moto")
    assert aws["AWS_CONFIG_FILE"] == aws["AWS_SHARED_CREDENTIALS_FILE"] == str(blank)
    for gone in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL_CLOUDFORMATION", "AWS_ROLE_ARN"):
        assert gone not in env
    assert "CDK_DEFAULT_ACCOUNT" not in env and env["HOME"] == "/home/someone"
    with pytest.raises(UnsafeEndpointError):
        cli_environment(
            "https://cloudformation.us-east-1.amazonaws.com",
            access_key_id="x",
            secret_access_key="x",
            region="us-east-1",
            blank_file=blank,
            cdk_home=tmp_path,
            base=base,
        )


def test_rehearse_command_refuses_a_foreign_endpoint_before_starting(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(safety, "ENDPOINT_HOST", "ec2.us-east-1.amazonaws.com")
    started: list[object] = []
    monkeypatch.setattr(Rehearsal, "start", lambda self: started.append(self))
    assert main(["rehearse", "--env", "dev"]) == 2
    assert started == []
    err = capsys.readouterr().err
    assert "refusing to rehearse" in err and "not a loopback address" in err


def test_a_second_rehearsal_in_the_same_process_is_refused(deployed: Deployed) -> None:
    # moto's backends are process-wide: a second server would reset the running rehearsal's accounts.
    with pytest.raises(RehearsalError) as err, Rehearsal(ROOT):
        pass
    assert err.value.code == 2 and "another rehearsal is running" in err.value.message
    assert deployed.client("s3", "dev").list_buckets()["Buckets"]  # the running one is untouched


def test_rehearse_command_names_the_known_environments(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["rehearse", "--env", "staging"]) == 2  # a usage error (README: exit codes)
    assert f"known environments: {', '.join(sorted(ENVIRONMENTS))}" in capsys.readouterr().err


# --------------------------------------------------------------------------------------------
# failures (last: redeploys dev into the same server after the destroy tests)
# --------------------------------------------------------------------------------------------
def test_redeploy_after_destroy_fails_on_the_retained_buckets_with_the_clis_last_lines(
    destroyed: dict[str, DestroyReport], deployed: Deployed
) -> None:
    # As on AWS: the retained buckets outlive the stack, so creating the storage stack again fails.
    with pytest.raises(RehearsalError) as err:
        deployed.rehearsal.deploy(["dev"])
    assert err.value.code == 1
    assert "`cdk deploy" in err.value.message and "failed for dev" in err.value.message
    assert any("dev-storage failed to deploy" in line for line in err.value.tail), "\n".join(err.value.tail)
    assert any("BucketAlreadyExists" in line for line in err.value.tail)
    assert "BucketAlreadyExists" in str(err.value)  # `neuronkit rehearse` prints str(): message and tail


# --------------------------------------------------------------------------------------------
# the samples in README and docs/rehearsal.md (the rehearsal above, not a second one: they used to run their own)
# --------------------------------------------------------------------------------------------
def _normal(line: str) -> str:
    line = re.sub(r"\d+\.\d+ s\b", "N s", line)
    line = re.sub(r"\blt-[0-9a-f]{17}\b", "lt-ID", line)
    return " ".join(line.split())


def _sample(doc: Path, marker: str) -> list[str]:
    """The lines of the first fenced block of ``doc`` that contains ``marker``."""
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", doc.read_text(), flags=re.S | re.M)
    (block,) = [b for b in blocks if marker in b][:1]
    return [line for line in block.splitlines() if line.strip() and not line.startswith("$ ")]


@pytest.mark.parametrize(
    ("doc", "marker"),
    [(ROOT / "README.md", "[prod] cdk deploy"), (ROOT / "docs" / "rehearsal.md", "[dev] cdk bootstrap")],
    ids=["README", "rehearsal"],
)
def test_the_docs_sample_is_what_a_run_prints(deployed: Deployed, doc: Path, marker: str) -> None:
    """What `neuronkit rehearse` prints: the progress lines, then each environment's report (the CLI's order)."""
    if not {"dev", "prod"} <= set(deployed.reports):
        pytest.skip("the samples show the example environments dev and prod")
    reports = [deployed.reports[name] for name in ("dev", "prod")]
    verdict = RehearsalResult(reports, [], deployed.rehearsal.synth_seconds, sum(r.wall_seconds for r in reports))
    printed = [
        *deployed.lines,
        *(line for report in reports for line in render_report(report).splitlines()),
        *render_verdict(verdict).splitlines(),
    ]
    run_output = [_normal(line) for line in printed]
    sample = _sample(doc, marker)
    assert len([s for s in sample if s.strip() != "..."]) >= 5, "the sample is too short to say anything"
    stale = []
    for line in sample:
        if line.strip() == "...":
            continue
        want = _normal(line)
        ok = any(out.startswith(want[: -len("...")]) for out in run_output) if want.endswith(", ...") else want in run_output
        if not ok:
            stale.append(line)
    assert stale == [], f"{doc.name}: lines a real run no longer prints:\n" + "\n".join(stale)
