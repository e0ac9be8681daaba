"""Deploy the inference stack (with the network and storage stacks it imports) into moto and read it back.

What is really created: the launch templates, the Auto Scaling group with its mixed instances policy
(moto launches the desired capacity from it), the load balancer, listener and target group, security
groups, roles, the rebalancer's function (its code zip uploaded first, as ``cdk deploy`` would publish
it), its schedule and log group. What moto skips is listed in SKIPPED_COVERED_BY with the assertion test
that checks it instead. moto launches every instance from the group's main (Neuron) launch template and
ignores the overrides, so the GPU override templates are read back and launched from directly, as EC2
does when the group falls back to a GPU type.
"""

from __future__ import annotations

import base64
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

from neuronkit.catalog import serving
from neuronkit.config import Environment
from neuronkit.config.inference import model_spec
from neuronkit.lambdas.rebalancer import handler as rebalancer
from neuronkit.rehearsal import moto_workarounds
from neuronkit.rehearsal.assembly import pinned_image_ids
from neuronkit.rehearsal.moto_workarounds import seed_pinned_images
from tests.conftest import Synth
from tests.moto.buckets import ensure_bucket
from tests.project import on_platform
from tests.templates import pool_image

SKIPPED_COVERED_BY = {
    "AWS::AutoScaling::ScalingPolicy": "tests/unit/test_inference_fleet.py::test_target_tracking_on_alb_requests_per_target",
    "AWS::Lambda::EventInvokeConfig": "tests/unit/test_inference_fleet.py::test_rebalancer_runs_on_the_files_schedule_with_least_privilege",
    "AWS::EC2::SecurityGroupEgress": "tests/unit/test_inference_fleet.py::test_load_balancer_is_internal_and_admits_the_vpc_only",
    "AWS::SNS::TopicPolicy": "tests/compliance/test_cdk_nag.py::test_whole_app_passes_aws_solutions_checks",
    "AWS::ECR::PullThroughCacheRule": "tests/unit/test_inference_fleet.py::test_images_come_through_the_fleets_pull_through_cache",
}
# Skipped in the stacks the inference stack imports from; tests/moto/test_deploy.py covers them.
IMPORTED_STACKS_SKIP = {
    "Custom::RestrictDefaultSecurityGroup",
    "AWS::FSx::FileSystem",
    "AWS::FSx::DataRepositoryAssociation",
    "AWS::S3::BucketPolicy",
    "AWS::EC2::SecurityGroupEgress",
    "AWS::EC2::FlowLog",
    "AWS::EC2::VPCEndpoint",
}
# Fleets on the Auto Scaling path (an EKS fleet is a node group: tests/moto/test_eks_deploy.py).
ENVIRONMENTS = {name: e for name, e in on_platform("asg").items() if e.inference}
pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse .* not supported by moto:UserWarning")


class Deployment:
    def __init__(self, env: Any, session: boto3.Session, skipped: dict[str, set[str]], images: dict[str, str]):
        self.env = env
        self.session = session
        self.skipped = skipped
        self.images = images  # SSM parameter -> the AMI seeded behind it

    def client(self, service: str) -> Any:
        return self.session.client(service)

    def physical(self, stack: str, type_: str) -> list[str]:
        resources = self.client("cloudformation").describe_stack_resources(StackName=stack)["StackResources"]
        return [r["PhysicalResourceId"] for r in resources if r.get("ResourceType") == type_]


def upload_assets(session: boto3.Session, synth: Synth, template: dict[str, Any]) -> list[str]:
    """Put each Lambda asset of ``template`` where the template expects it, zipped as the CDK CLI publishes it."""
    s3 = session.client("s3")
    uploaded = []
    for resource in template["Resources"].values():
        code = resource["Properties"].get("Code") if resource["Type"] == "AWS::Lambda::Function" else None
        if not code or "S3Key" not in code:
            continue
        bucket, key = code["S3Bucket"], code["S3Key"]
        folder = synth.outdir / f"asset.{key.removesuffix('.zip')}"
        assert folder.is_dir(), f"the synthesized asset {folder} is missing"
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(Path(folder).rglob("*")):
                if path.is_file():
                    archive.write(path, path.relative_to(folder).as_posix())
        ensure_bucket(s3, bucket)
        s3.put_object(Bucket=bucket, Key=key, Body=buffer.getvalue())
        uploaded.append(key)
    return uploaded


def _pinned(env: Environment, context: dict[str, Any]) -> dict[str, str]:
    """The images the fleet's launch templates boot: the fleet's pinned ami_id, else its lookup's value in the
    synth's context (cdk.context.json, or a stand-in), the Neuron DLAMI of the fleet's release and the GPU DLAMI."""
    images = {"neuron": pool_image(context, env, "inference[0].neuron_ami")}
    if env.inference[0].fallback_types:
        images["gpu"] = pool_image(context, env, "inference[0].gpu_ami")
    return images


@pytest.fixture(scope="module", params=sorted(ENVIRONMENTS))
def deployed(
    request: pytest.FixtureRequest, synth: Synth, aws_credentials: None, monkeypatch_module: pytest.MonkeyPatch
) -> Iterator[Deployment]:
    env = ENVIRONMENTS[request.param]
    monkeypatch_module.setenv("MOTO_ACCOUNT_ID", env.account)
    moto_workarounds.apply()
    names = [f"{env.name}-{part}" for part in ("network", "storage", "inference")]
    with mock_aws():
        session = boto3.Session(region_name=env.region)
        ec2 = session.client("ec2")
        # The pinned images (cdk.context.json) exist in the mock: the Neuron DLAMI of the fleet's release and the
        # GPU DLAMI are different images, so Neuron and GPU nodes can be told apart.
        for name in names:
            seed_pinned_images(env.account, env.region, pinned_image_ids(synth.template(name)))
        images = _pinned(env, synth.context)
        assert ec2.describe_images(ImageIds=sorted(images.values()))["Images"]
        session.client("ssm").put_parameter(Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String")
        assert upload_assets(session, synth, synth.template(f"{env.name}-inference"))
        upload_assets(session, synth, synth.template(f"{env.name}-network"))  # the default-security-group function
        cfn = session.client("cloudformation")
        skipped: dict[str, set[str]] = {}
        for name in names:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                cfn.create_stack(
                    StackName=name,
                    TemplateBody=json.dumps(synth.template(name)),
                    Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"],
                )
            skipped[name] = {str(w.message).split()[3] for w in caught if str(w.message).startswith("Tried to parse ")}
        yield Deployment(env, session, skipped, images)


def test_stacks_reach_create_complete(deployed: Deployment) -> None:
    cfn = deployed.client("cloudformation")
    for name in deployed.skipped:
        assert cfn.describe_stacks(StackName=name)["Stacks"][0]["StackStatus"] == "CREATE_COMPLETE"


def test_what_moto_skipped_is_covered_elsewhere(deployed: Deployment) -> None:
    skipped = deployed.skipped[f"{deployed.env.name}-inference"]
    assert "AWS::AutoScaling::ScalingPolicy" in skipped  # moto has no scaling policies from CloudFormation
    assert skipped <= set(SKIPPED_COVERED_BY), f"cover {sorted(skipped - set(SKIPPED_COVERED_BY))} with assertion tests"
    for name in (f"{deployed.env.name}-network", f"{deployed.env.name}-storage"):
        assert deployed.skipped[name] <= IMPORTED_STACKS_SKIP


def test_group_reads_back_with_its_prioritized_overrides(deployed: Deployment) -> None:
    fleet = deployed.env.inference[0]
    name = f"{deployed.env.name}-{fleet.name}"
    (group,) = deployed.client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"]
    desired = fleet.min_size if fleet.desired_size is None else fleet.desired_size
    assert (group["MinSize"], group["DesiredCapacity"], group["MaxSize"]) == (fleet.min_size, desired, fleet.max_size)
    policy = group["MixedInstancesPolicy"]
    assert [o["InstanceType"] for o in policy["LaunchTemplate"]["Overrides"]] == fleet.neuron_types + fleet.fallback_types
    assert policy["InstancesDistribution"]["OnDemandAllocationStrategy"] == "prioritized"
    # The grace period derives from the model's size (the slowest type's boot) unless the file sets one.
    model = model_spec(fleet)
    grace = fleet.health_check_grace_seconds or (
        max(serving.boot_seconds(model, t) for t in fleet.neuron_types + fleet.fallback_types) if model else 900
    )
    assert group["HealthCheckType"] == "ELB" and group["HealthCheckGracePeriod"] == grace
    assert group["TerminationPolicies"][0] == "AllocationStrategy"


def test_each_neuron_type_has_a_compile_group_booting_its_type_and_the_neuron_dlami(deployed: Deployment) -> None:
    fleet = deployed.env.inference[0]
    prefix = f"{deployed.env.name}-{fleet.name}-compile-"
    autoscaling, ec2 = deployed.client("autoscaling"), deployed.client("ec2")
    groups = [
        g for g in autoscaling.describe_auto_scaling_groups()["AutoScalingGroups"] if g["AutoScalingGroupName"].startswith(prefix)
    ]
    if fleet.model is None or not fleet.precompile:
        assert groups == []
        return
    assert len(groups) == len(fleet.neuron_types)
    booted = set()
    for group in groups:
        assert (group["MinSize"], group["MaxSize"]) == (0, 1)
        template = group["LaunchTemplate"]["LaunchTemplateId"]
        assert template in deployed.physical(f"{deployed.env.name}-inference", "AWS::EC2::LaunchTemplate")
        (version,) = ec2.describe_launch_template_versions(LaunchTemplateId=template)["LaunchTemplateVersions"]
        data = version["LaunchTemplateData"]
        assert data["ImageId"] == deployed.images["neuron"]
        booted.add(data["InstanceType"])
    assert booted == set(fleet.neuron_types)


def test_instances_launch_from_the_neuron_template_with_the_neuron_dlami(deployed: Deployment) -> None:
    fleet = deployed.env.inference[0]
    name = f"{deployed.env.name}-{fleet.name}"
    (group,) = deployed.client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"]
    main = group["MixedInstancesPolicy"]["LaunchTemplate"]["LaunchTemplateSpecification"]["LaunchTemplateId"]
    assert main in deployed.physical(f"{deployed.env.name}-inference", "AWS::EC2::LaunchTemplate")
    neuron_ami = deployed.images["neuron"]
    desired = fleet.min_size if fleet.desired_size is None else fleet.desired_size
    assert len(group["Instances"]) == desired
    ec2 = deployed.client("ec2")
    ids = [i["InstanceId"] for i in group["Instances"]]
    instances = [i for r in ec2.describe_instances(InstanceIds=ids)["Reservations"] for i in r["Instances"]] if ids else []
    assert len(instances) == desired
    for i in instances:
        assert (i["ImageId"], i["InstanceType"]) == (neuron_ami, fleet.neuron_types[0])
    for member in group["Instances"]:
        assert member["LaunchTemplate"]["LaunchTemplateId"] == main


def test_gpu_override_templates_boot_the_gpu_dlami(deployed: Deployment) -> None:
    fleet = deployed.env.inference[0]
    name = f"{deployed.env.name}-{fleet.name}"
    (group,) = deployed.client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"]
    overrides = group["MixedInstancesPolicy"]["LaunchTemplate"]["Overrides"][len(fleet.neuron_types) :]
    assert [o["InstanceType"] for o in overrides] == fleet.fallback_types
    if not fleet.fallback_types:
        return
    gpu_ami, neuron_ami = deployed.images["gpu"], deployed.images["neuron"]
    assert gpu_ami != neuron_ami
    ec2 = deployed.client("ec2")
    subnet = group["VPCZoneIdentifier"].split(",")[0]
    for override in overrides:
        template_id = override["LaunchTemplateSpecification"]["LaunchTemplateId"]
        data = ec2.describe_launch_template_versions(LaunchTemplateId=template_id)["LaunchTemplateVersions"][-1][
            "LaunchTemplateData"
        ]
        assert (data["ImageId"], data["InstanceType"]) == (gpu_ami, override["InstanceType"])
        assert "SERVE_GPU=" in base64.b64decode(data["UserData"]).decode()
        # What EC2 does when the group falls back to this override: launch from its own template.
        (launched,) = ec2.run_instances(
            MinCount=1, MaxCount=1, SubnetId=subnet, LaunchTemplate={"LaunchTemplateId": template_id}
        )["Instances"]
        assert (launched["ImageId"], launched["InstanceType"]) == (gpu_ami, override["InstanceType"])
        ec2.terminate_instances(InstanceIds=[launched["InstanceId"]])


def test_load_balancer_is_internal_and_its_target_group_checks_the_files_path(deployed: Deployment) -> None:
    fleet = deployed.env.inference[0]
    elbv2 = deployed.client("elbv2")
    (lb,) = elbv2.describe_load_balancers()["LoadBalancers"]
    assert lb["Scheme"] == "internal" and lb["Type"] == "application"
    (tg,) = elbv2.describe_target_groups(LoadBalancerArn=lb["LoadBalancerArn"])["TargetGroups"]
    assert (tg["Port"], tg["HealthCheckPath"], tg["HealthCheckProtocol"]) == (fleet.port, fleet.health_check.path, "HTTP")
    (listener,) = elbv2.describe_listeners(LoadBalancerArn=lb["LoadBalancerArn"])["Listeners"]
    if fleet.tls is not None:  # prod: HTTPS with the file's certificate; nodes still serve HTTP on fleet.port
        assert (listener["Port"], listener["Protocol"]) == (fleet.tls.port, "HTTPS")
        assert listener["Certificates"][0]["CertificateArn"] == fleet.tls.certificate_arn
    else:
        assert (listener["Port"], listener["Protocol"]) == (fleet.port, "HTTP")
    # The group registers its instances with the target group.
    name = f"{deployed.env.name}-{fleet.name}"
    (group,) = deployed.client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"]
    assert group["TargetGroupARNs"] == [tg["TargetGroupArn"]]
    targets = {
        t["Target"]["Id"] for t in elbv2.describe_target_health(TargetGroupArn=tg["TargetGroupArn"])["TargetHealthDescriptions"]
    }
    assert targets == {i["InstanceId"] for i in group["Instances"]}


def test_rebalancer_is_deployed_and_runs_against_the_group(deployed: Deployment, monkeypatch: pytest.MonkeyPatch) -> None:
    fleet = deployed.env.inference[0]
    (function_name,) = deployed.physical(f"{deployed.env.name}-inference", "AWS::Lambda::Function")
    config = deployed.client("lambda").get_function_configuration(FunctionName=function_name)
    variables = config["Environment"]["Variables"]
    assert variables["GROUP_NAME"] == f"{deployed.env.name}-{fleet.name}" and config["Runtime"].startswith("python3")
    (rule,) = deployed.client("events").list_rules()["Rules"]
    assert rule["ScheduleExpression"] == f"rate({fleet.rebalance_minutes} minutes)"
    assert any(
        t["Arn"] == config["FunctionArn"] for t in deployed.client("events").list_targets_by_rule(Rule=rule["Name"])["Targets"]
    )
    # The function's code, with the deployed function's settings, against the deployed group.
    for key, value in variables.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("AWS_DEFAULT_REGION", deployed.env.region)
    event = {"source": "aws.events", "detail-type": "Scheduled Event", "time": "2026-11-22T00:30:00Z", "detail": {}}
    result = rebalancer.handler(event, None)
    desired = fleet.min_size if fleet.desired_size is None else fleet.desired_size
    assert result["action"] == "nothing-to-do" and result["in_service"] == {"neuron": desired, "gpu": 0}


def test_node_role_reads_the_model_prefixes_only(deployed: Deployment) -> None:
    fleet = deployed.env.inference[0]
    iam = deployed.client("iam")
    (role,) = [r for r in iam.list_roles()["Roles"] if f"Fleet{fleet.name}NodeRole" in r["RoleName"]]
    (policy_name,) = iam.list_role_policies(RoleName=role["RoleName"])["PolicyNames"]
    document = iam.get_role_policy(RoleName=role["RoleName"], PolicyName=policy_name)["PolicyDocument"]
    statements = {s["Sid"]: s for s in document["Statement"]}
    observability = {"PublishMetrics", "ShipLogs", "ReadNodeKit"}  # NodeObservability: namespace, log groups, kit
    serving_sids = {"CompiledModelCache", "ListCompiledModelCache", "PullServingImages", "EcrLogin"} if fleet.model else set()
    if fleet.model and fleet.precompile:
        serving_sids.add("LeaveCompileGroup")  # a compile node leaves its compile group once its key is cached
    assert (
        set(statements) == {"ListModel", "ReadModel", "OwnGroup", "TagSelf", "SignalRollingUpdate"} | observability | serving_sids
    )
    read = statements["ReadModel"]["Resource"]
    prefixes = (
        {fleet.model.s3_prefix} if fleet.model else {fleet.model_s3_prefix, fleet.gpu_model_s3_prefix or fleet.model_s3_prefix}
    )
    bucket = f"{deployed.env.name}-artifacts-{deployed.env.account}-{deployed.env.region}"
    assert sorted(read if isinstance(read, list) else [read]) == sorted(f"arn:aws:s3:::{bucket}/{p}*" for p in prefixes)
