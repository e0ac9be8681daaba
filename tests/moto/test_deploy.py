"""Deploy every synthesized stack into moto's CloudFormation and read the result back with boto3.

moto skips resource types it does not model (and still reports CREATE_COMPLETE). The test records
which types were skipped and requires each of them to be covered by an assertion test instead
(SKIPPED_COVERED_BY names the test that checks it).
"""

from __future__ import annotations

import io
import json
import warnings
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from neuronkit import catalog
from neuronkit.config import CapacityBlock
from neuronkit.constructs.day_night import daily_cron
from neuronkit.rehearsal import moto_workarounds
from neuronkit.rehearsal.assembly import pinned_image_ids
from neuronkit.rehearsal.moto_workarounds import seed_pinned_images, seed_public_parameter
from neuronkit.reports.pools import gpu_pool_name
from tests.conftest import Synth
from tests.moto.buckets import ensure_bucket
from tests.project import environment_of, on_platform

# Resource types moto's CloudFormation skips, and the assertion test that covers each one.
SKIPPED_COVERED_BY = {
    "Custom::RestrictDefaultSecurityGroup": "tests/contracts/test_aws_contracts.py::test_every_vpc_the_kit_creates_has_its_default_security_group_emptied",
    "AWS::ECR::PullThroughCacheRule": "tests/unit/test_inference_fleet.py::test_images_come_through_the_fleets_pull_through_cache",
    "AWS::FSx::FileSystem": "tests/unit/test_storage.py::test_prod_lustre_is_persistent_2_15_with_throughput_and_kms",
    "AWS::FSx::DataRepositoryAssociation": "tests/unit/test_storage.py::test_data_repository_associations",
    "AWS::EC2::PlacementGroup": "tests/unit/test_training_cluster.py::test_prod_cluster_uses_a_cluster_placement_group",
    "AWS::EC2::CapacityReservation": "tests/unit/test_training_cluster.py::test_prod_odcr_is_created_in_the_placement_group_and_targeted",
    "AWS::S3::BucketPolicy": "tests/unit/test_storage.py::test_buckets_encrypted_private_tls_only",
    "AWS::EC2::SecurityGroupEgress": "tests/unit/test_network.py::test_efa_security_group_allows_all_traffic_to_and_from_itself",
    "AWS::SNS::TopicPolicy": "tests/compliance/test_cdk_nag.py::test_whole_app_passes_aws_solutions_checks",
    "AWS::EC2::FlowLog": "tests/unit/test_network.py::test_nat_gateways_and_flow_logs",
    "AWS::EC2::VPCEndpoint": "tests/unit/test_network.py::test_s3_gateway_and_interface_endpoints",
    "AWS::CloudWatch::Alarm": "tests/unit/test_monitoring.py::test_every_expected_alarm_exists_and_notifies_the_topic",
    "AWS::Budgets::Budget": "tests/unit/test_monitoring.py::test_budget_filters_on_the_environment_tag_and_notifies_at_80_and_100_percent",
    "AWS::Lambda::EventInvokeConfig": "tests/unit/test_monitoring.py::test_prod_idle_alarms_trigger_the_scale_down_function",
    "AWS::SNS::Subscription": "tests/unit/test_monitoring.py::test_email_subscriptions_come_from_the_file",
    # The inference stack is deployed too (the monitoring stack imports its load balancers' names).
    "AWS::AutoScaling::ScalingPolicy": "tests/unit/test_inference_fleet.py::test_target_tracking_on_alb_requests_per_target",
}
# Deployed in this order (each stack imports exports of the ones before it).
PARTS = ("network", "storage", "training", "inference", "monitoring")
# The Auto Scaling path's stacks; the project's platform: eks files deploy in tests/moto/test_eks_deploy.py.
ENVIRONMENTS = on_platform("asg")


class Deployment:
    def __init__(self, session: boto3.Session, skipped: set[str], stacks: list[str]):
        self.session = session
        self.skipped = skipped
        self.stacks = stacks


@pytest.fixture(scope="module", params=sorted(ENVIRONMENTS))
def deployed(
    request: pytest.FixtureRequest, synth: Synth, aws_credentials: None, monkeypatch_module: Any
) -> Iterator[Deployment]:
    env = ENVIRONMENTS[request.param]
    monkeypatch_module.setenv("MOTO_ACCOUNT_ID", env.account)
    moto_workarounds.apply()
    with mock_aws():
        session = boto3.Session(region_name=env.region)
        ec2 = session.client("ec2")
        image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        for stack in synth.templates:
            seed_pinned_images(env.account, env.region, pinned_image_ids(synth.template(stack)))
            for param in synth.template(stack).get("Parameters", {}).values():
                if param["Type"].startswith("AWS::SSM::Parameter::Value") and param["Default"].startswith("/aws/"):
                    seed_public_parameter(env.account, env.region, param["Default"], image)
        session.client("ssm").put_parameter(Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String")
        cfn = session.client("cloudformation")
        names = [f"{env.name}-{part}" for part in PARTS if f"{env.name}-{part}" in synth.templates]
        for name in names:
            publish_assets(session, synth.outdir, name)
        skipped: set[str] = set()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for name in names:
                cfn.create_stack(
                    StackName=name,
                    TemplateBody=json.dumps(synth.template(name)),
                    Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"],
                )
        for w in caught:
            text = str(w.message)
            if text.startswith("Tried to parse "):
                skipped.add(text.split()[3])
        yield Deployment(session, skipped, names)


def publish_assets(session: boto3.Session, outdir: Path, stack: str) -> None:
    """Upload a stack's file assets (Lambda code, the node kit) to the bootstrap bucket, as `cdk deploy` does:
    moto's Lambda reads the code object when CloudFormation creates the function."""
    manifest = json.loads((outdir / f"{stack}.assets.json").read_text())
    s3 = session.client("s3")
    for asset in manifest["files"].values():
        source = outdir / asset["source"]["path"]
        if asset["source"]["packaging"] == "zip":
            buffer = io.BytesIO()
            with zipfile.ZipFile(buffer, "w") as archive:
                for path in sorted(p for p in source.rglob("*") if p.is_file()):
                    archive.write(path, path.relative_to(source).as_posix())
            body = buffer.getvalue()
        else:
            body = source.read_bytes()
        for destination in asset["destinations"].values():
            bucket = destination["bucketName"]
            ensure_bucket(s3, bucket)
            s3.put_object(Bucket=bucket, Key=destination["objectKey"], Body=body)


def test_every_stack_reaches_create_complete(deployed: Deployment) -> None:
    cfn = deployed.session.client("cloudformation")
    for name in deployed.stacks:
        assert cfn.describe_stacks(StackName=name)["Stacks"][0]["StackStatus"] == "CREATE_COMPLETE"


def test_skipped_types_are_covered_elsewhere(deployed: Deployment) -> None:
    assert deployed.skipped, "moto skipped nothing: the list below is stale"
    uncovered = deployed.skipped - set(SKIPPED_COVERED_BY)
    assert not uncovered, f"moto did not create {sorted(uncovered)}: cover them with assertion tests"


def test_group_and_launch_template_read_back(deployed: Deployment) -> None:
    env = ENVIRONMENTS[environment_of(deployed.stacks[0])]
    cluster = env.training[0]
    (group,) = deployed.session.client("autoscaling").describe_auto_scaling_groups(
        AutoScalingGroupNames=[f"{env.name}-{cluster.name}"]
    )["AutoScalingGroups"]
    assert group["AutoScalingGroupName"] == f"{env.name}-{cluster.name}"
    assert (group["MinSize"], group["MaxSize"]) == (cluster.min_size, cluster.max_size)
    ec2 = deployed.session.client("ec2")
    version = ec2.describe_launch_template_versions(LaunchTemplateId=group["LaunchTemplate"]["LaunchTemplateId"])
    data = version["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    assert data["InstanceType"] == cluster.instance_type
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    efa = [n for n in data["NetworkInterfaces"] if n.get("InterfaceType") == "efa-only"]
    assert len(efa) == catalog.get(cluster.instance_type).efa_max_interfaces
    # The AMI is the image pinned in cdk.context.json, a literal id in the template.
    images = {i["ImageId"] for i in ec2.describe_images(Owners=["amazon"])["Images"]}
    assert data["ImageId"] in images
    # moto launches the desired capacity from the group: each node boots that AMI and type.
    instances = [
        i
        for r in ec2.describe_instances(
            Filters=[{"Name": "tag:aws:autoscaling:groupName", "Values": [group["AutoScalingGroupName"]]}]
        )["Reservations"]
        for i in r["Instances"]
    ]
    assert len(instances) == (cluster.desired_size or cluster.min_size)
    assert all(i["InstanceType"] == cluster.instance_type and i["ImageId"] == data["ImageId"] for i in instances)


def test_buckets_exist_with_their_names(deployed: Deployment) -> None:
    env = ENVIRONMENTS[environment_of(deployed.stacks[0])]
    names = {b["Name"] for b in deployed.session.client("s3").list_buckets()["Buckets"]}
    for purpose in ("datasets", "checkpoints", "artifacts"):
        assert f"{env.name}-{purpose}-{env.account}-{env.region}" in names
    # moto's CloudFormation creates the buckets but not their versioning (checked in test_storage.py).


def test_node_role_exists_with_its_policy(deployed: Deployment) -> None:
    iam = deployed.session.client("iam")
    env = ENVIRONMENTS[environment_of(deployed.stacks[0])]
    cluster = env.training[0]
    roles = [
        r for r in iam.list_roles()["Roles"] if "NodeRole" in r["RoleName"] and f"Cluster{cluster.name}Node" in r["RoleName"]
    ]
    assert len(roles) == 1
    trust = roles[0]["AssumeRolePolicyDocument"]
    assert trust["Statement"][0]["Principal"] == {"Service": "ec2.amazonaws.com"}
    # moto records the inline policy but not managed-policy attachments (checked by cdk-nag's IAM4 acks).
    (policy_name,) = iam.list_role_policies(RoleName=roles[0]["RoleName"])["PolicyNames"]
    document = iam.get_role_policy(RoleName=roles[0]["RoleName"], PolicyName=policy_name)["PolicyDocument"]
    sids = {s.get("Sid") for s in document["Statement"]}
    assert {"OwnGroup", "DiscoverPeers", "ListBuckets", "ReadData", "Checkpoints"} <= sids


def test_monitoring_stack_creates_its_topic_rules_and_scale_down_function(deployed: Deployment) -> None:
    env = ENVIRONMENTS[environment_of(deployed.stacks[0])]
    assert f"{env.name}-monitoring" in deployed.stacks
    sns = deployed.session.client("sns")
    topics = [t["TopicArn"] for t in sns.list_topics()["Topics"]]
    # The alarms topic exists (moto skips its email subscriptions: test_monitoring.py checks them).
    assert [t for t in topics if "monitoring" in t and "Alarms" in t]
    events = deployed.session.client("events")
    rules = {r["Name"]: r for r in events.list_rules()["Rules"] if "monitoring" in r["Name"]}
    patterns = [json.loads(r["EventPattern"]) for r in rules.values() if "EventPattern" in r]
    assert any(p.get("detail-type") == ["EC2 Instance Launch Unsuccessful"] for p in patterns)
    functions = [
        f for f in deployed.session.client("lambda").list_functions()["Functions"] if "IdleScaleDown" in f["FunctionName"]
    ]
    scale_down = [c.name for c in env.training if c.idle_scale_down]
    assert len(functions) == (1 if scale_down else 0)
    for f in functions:
        groups = json.loads(f["Environment"]["Variables"]["GROUPS"])
        assert set(groups.values()) >= {f"{env.name}-{name}" for name in scale_down}
    dashboards = {d["DashboardName"] for d in deployed.session.client("cloudwatch").list_dashboards()["DashboardEntries"]}
    assert f"neuronkit-{env.name}" in dashboards
    # Day/night: the scheduled actions exist on the groups the other stacks created.
    autoscaling = deployed.session.client("autoscaling")
    actions = autoscaling.describe_scheduled_actions()["ScheduledUpdateGroupActions"]
    shift = env.monitoring.day_night
    blocks = [c for c in env.training if isinstance(c.capacity, CapacityBlock)]
    for cluster in blocks:
        # A Capacity Block cluster follows its block: one-time actions at its start and before its end.
        once = {
            a["StartTime"].strftime("%Y-%m-%dT%H:%M")
            for a in actions
            if a["AutoScalingGroupName"] == f"{env.name}-{cluster.name}"
        }
        assert cluster.capacity.start.strftime("%Y-%m-%dT%H:%M") in once, cluster.name
    if shift is None:
        assert all("Recurrence" not in a for a in actions)  # no shift: nothing recurs
        assert len(actions) >= 2 * len(blocks)
    else:
        by_group = {(a["AutoScalingGroupName"], a["Recurrence"]): a for a in actions if "Recurrence" in a}
        fleet = f"{env.name}-{env.inference[0].name}"
        day, night = daily_cron(shift.day_starts), daily_cron(shift.night_starts)
        assert by_group[(fleet, day)]["DesiredCapacity"] == shift.inference_day_desired
        cluster = env.training[0]
        if isinstance(cluster.capacity, CapacityBlock):
            # A Capacity Block cluster follows its block (one-time actions at its start and before its end), not the shift.
            once = {
                a["StartTime"].strftime("%Y-%m-%dT%H:%M")
                for a in actions
                if a["AutoScalingGroupName"] == f"{env.name}-{cluster.name}"
            }
            assert (
                cluster.capacity.start.strftime("%Y-%m-%dT%H:%M") in once
                and (f"{env.name}-{cluster.name}", night) not in by_group
            )
        else:
            assert by_group[(f"{env.name}-{cluster.name}", night)]["DesiredCapacity"] == shift.training_night_desired
        assert {a["TimeZone"] for a in actions if "TimeZone" in a} <= {shift.time_zone}
    # The node log groups exist with the file's retention (moto models AWS::Logs::LogGroup).
    logs = deployed.session.client("logs")
    groups = {g["logGroupName"]: g for g in logs.describe_log_groups(logGroupNamePrefix=f"/neuronkit/{env.name}/")["logGroups"]}
    boot = groups[f"/neuronkit/{env.name}/{env.training[0].name}/boot"]
    assert boot["retentionInDays"] == env.monitoring.log_retention_days


def test_gpu_pool_reads_back_beside_its_cluster(deployed: Deployment) -> None:
    env = ENVIRONMENTS[environment_of(deployed.stacks[0])]
    autoscaling = deployed.session.client("autoscaling")
    ec2 = deployed.session.client("ec2")
    for cluster in env.training:
        pool = cluster.gpu_pool
        if pool is None or cluster.scheduler == "batch":  # a Batch cluster's GPU pool is a compute environment
            continue
        name = f"{env.name}-{gpu_pool_name(cluster.name)}"
        (group,) = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"]
        assert (group["MinSize"], group["DesiredCapacity"], group["MaxSize"]) == (pool.min_size, pool.min_size, pool.max_size)
        versions = ec2.describe_launch_template_versions(LaunchTemplateId=group["LaunchTemplate"]["LaunchTemplateId"])
        data = versions["LaunchTemplateVersions"][0]["LaunchTemplateData"]
        assert data["InstanceType"] == pool.instance_type
        efa = [n for n in data["NetworkInterfaces"] if n.get("InterfaceType") == "efa-only"]
        assert len(efa) == catalog.get(pool.instance_type).efa_max_interfaces
