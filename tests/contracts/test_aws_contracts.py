"""AWS rules moto does not enforce, checked on every synthesized template of the example environments.

Each test names the AWS document the rule comes from; docs/aws-contracts.md lists them all. moto accepts a
topic nobody may publish to, a hook nobody completes or a Batch environment that can never be updated;
real AWS does not, so these rules are checked here, on the templates a deploy would send.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
import re
from collections.abc import Iterator
from typing import Any

import pytest

from neuronkit import catalog
from tests.conftest import Synth
from tests.project import environment_of, environments
from tests.sandbox import resolve

ACCELERATOR_ROLES = {"training", "training-gpu", "inference"}


def _resources(synth: Synth, type_: str) -> Iterator[tuple[str, str, dict[str, Any]]]:
    for stack, template in synth.templates.items():
        for logical_id, r in template["Resources"].items():
            if r["Type"] == type_:
                yield stack, logical_id, r


def _pool_groups(synth: Synth) -> Iterator[tuple[str, str, dict[str, Any]]]:
    """Every capacity pool's group; every other group the kit makes must be a fleet's compile group."""
    for stack, lid, group in _resources(synth, "AWS::AutoScaling::AutoScalingGroup"):
        if "neuronkit" in group["Metadata"]:
            yield stack, lid, group
        else:
            assert set(group["Metadata"]) == {"neuronkit-precompile"}, (stack, lid)


def _logical_of(ref: Any) -> str | None:
    """The logical ID a Ref/GetAtt (or a cross-stack import of one) points at, when visible."""
    if isinstance(ref, dict) and "Ref" in ref:
        return str(ref["Ref"])
    if isinstance(ref, dict) and "Fn::GetAtt" in ref:
        return str(ref["Fn::GetAtt"][0])
    if isinstance(ref, dict) and "Fn::ImportValue" in ref:
        m = re.search(r"(\w+?)(?:Ref|Arn)?[0-9A-F]{8}", json.dumps(ref["Fn::ImportValue"]))
        return m.group(1) if m else None
    return None


def _topic_policies(synth: Synth) -> dict[str, list[dict[str, Any]]]:
    """Topic logical ID -> its policy statements (across stacks: logical IDs of topics are unique here)."""
    out: dict[str, list[dict[str, Any]]] = {}
    for _, _, r in _resources(synth, "AWS::SNS::TopicPolicy"):
        for topic in r["Properties"]["Topics"]:
            logical = _logical_of(topic)
            if logical:
                out.setdefault(logical, []).extend(r["Properties"]["PolicyDocument"]["Statement"])
    return out


def _allows(statements: list[dict[str, Any]], service: str, action: str) -> list[dict[str, Any]]:
    return [
        s
        for s in statements
        if s["Effect"] == "Allow"
        and (s.get("Principal") or {}).get("Service") == service
        and action in (s["Action"] if isinstance(s["Action"], list) else [s["Action"]])
    ]


def test_every_alarm_topic_lets_cloudwatch_publish(synth: Synth) -> None:
    """CloudWatch alarms publish as cloudwatch.amazonaws.com; a topic policy without it makes every alarm action
    fail. https://repost.aws/knowledge-center/cloudwatch-receive-sns-for-alarm-trigger"""
    policies = _topic_policies(synth)
    checked = 0
    for stack, logical_id, alarm in _resources(synth, "AWS::CloudWatch::Alarm"):
        for action in alarm["Properties"].get("AlarmActions", []):
            topic = _logical_of(action)
            assert topic in policies, (stack, logical_id, action)
            allowed = _allows(policies[topic], "cloudwatch.amazonaws.com", "sns:Publish")
            assert allowed, (stack, logical_id)
            # Scoped to this account's alarms (confused deputy).
            assert all("aws:SourceAccount" in json.dumps(s.get("Condition", {})) for s in allowed)
            checked += 1
    assert checked >= 20


def _key_statements(synth: Synth) -> dict[str, list[dict[str, Any]]]:
    return {lid: r["Properties"]["KeyPolicy"]["Statement"] for _, lid, r in _resources(synth, "AWS::KMS::Key")}


def _topic_keys(synth: Synth) -> dict[str, str]:
    return {
        lid: str(_logical_of(r["Properties"]["KmsMasterKeyId"]))
        for _, lid, r in _resources(synth, "AWS::SNS::Topic")
        if "KmsMasterKeyId" in r["Properties"]
    }


def test_encrypted_topics_let_their_publishers_use_the_key(synth: Synth) -> None:
    """An encrypted topic needs its key to allow every publisher: CloudWatch and EventBridge service principals,
    and Auto Scaling's service-linked role for group notifications.
    https://docs.aws.amazon.com/sns/latest/dg/sns-key-management.html#compatibility-with-aws-services and
    https://docs.aws.amazon.com/autoscaling/ec2/userguide/ec2-auto-scaling-sns-notifications.html"""
    keys, topics = _key_statements(synth), _topic_keys(synth)
    assert topics
    for topic, key in topics.items():
        statements = keys[key]
        for service in ("cloudwatch.amazonaws.com", "events.amazonaws.com"):
            assert _allows(statements, service, "kms:GenerateDataKey*"), (topic, service)
        slr = [s for s in statements if "AWSServiceRoleForAutoScaling" in json.dumps(s.get("Condition", {}))]
        assert slr and "kms:GenerateDataKey*" in slr[0]["Action"], topic


def test_auto_scaling_notifications_go_to_topics_whose_key_admits_the_service_linked_role(synth: Synth) -> None:
    """Auto Scaling publishes notifications with AWSServiceRoleForAutoScaling, which must be allowed by the
    topic's KMS key. https://docs.aws.amazon.com/autoscaling/ec2/userguide/ec2-auto-scaling-sns-notifications.html"""
    keys, topics = _key_statements(synth), _topic_keys(synth)
    seen = 0
    for stack, lid, group in _resources(synth, "AWS::AutoScaling::AutoScalingGroup"):
        for config in group["Properties"].get("NotificationConfigurations", []):
            topic = _logical_of(config["TopicARN"])
            assert topic in topics, (stack, lid)
            assert "AWSServiceRoleForAutoScaling" in json.dumps(keys[topics[topic]]), (stack, lid)
            seen += 1
    assert seen


def test_every_accelerator_group_has_a_launch_hook_that_abandons_by_default(synth: Synth) -> None:
    """A booting node passes or fails through a launch lifecycle hook (CompleteLifecycleAction CONTINUE/ABANDON);
    a node that never answers is abandoned. https://docs.aws.amazon.com/autoscaling/ec2/userguide/lifecycle-hooks.html"""
    hook = catalog.software_facts()["lifecycle"]["hook_name"]
    groups = list(_pool_groups(synth))
    assert groups
    for stack, lid, group in groups:
        assert group["Metadata"]["neuronkit"]["role"] in ACCELERATOR_ROLES
        (spec,) = [
            h
            for h in group["Properties"]["LifecycleHookSpecificationList"]
            if h["LifecycleTransition"] == "autoscaling:EC2_INSTANCE_LAUNCHING"
        ]
        assert spec["LifecycleHookName"] == hook and spec["DefaultResult"] == "ABANDON", (stack, lid)
        assert 30 <= spec["HeartbeatTimeout"] <= 7200, (stack, lid)


def test_a_capacity_block_drains_before_ec2_reclaims_its_nodes(synth: Synth) -> None:
    """EC2 starts terminating a Capacity Block's instances 30 minutes before its end; a termination hook holds a
    node at most its heartbeat timeout (30..7200 s). The scheduled scale-down plus the drain must end before the
    reclaim, or EC2 kills the job mid-checkpoint. https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/capacity-blocks-using.html
    https://docs.aws.amazon.com/autoscaling/ec2/userguide/lifecycle-hooks.html"""
    reclaim = dt.timedelta(minutes=catalog.capacity_facts()["capacity_blocks"]["reclaim_minutes_before_end"])
    blocks = [
        (stack, lid, group)
        for stack, lid, group in _pool_groups(synth)
        if group["Metadata"]["neuronkit"]["capacity"] == "capacity-block"
    ]
    assert blocks  # prod trains on a Capacity Block
    for stack, lid, group in blocks:
        meta = group["Metadata"]["neuronkit"]
        (drain,) = [
            h
            for h in group["Properties"]["LifecycleHookSpecificationList"]
            if h["LifecycleTransition"] == "autoscaling:EC2_INSTANCE_TERMINATING"
        ]
        assert 30 <= drain["HeartbeatTimeout"] <= 7200, (stack, lid)
        end = dt.datetime.fromisoformat(meta["block_end"].replace("Z", "+00:00"))
        down = dt.datetime.fromisoformat(meta["scale_down_at"].replace("Z", "+00:00"))
        assert down + dt.timedelta(seconds=drain["HeartbeatTimeout"]) <= end - reclaim, (stack, lid)
        # ... and the group is scaled to zero exactly then, by a scheduled action of its own stack.
        actions = [a["Properties"] for s, _, a in _resources(synth, "AWS::AutoScaling::ScheduledAction") if s == stack]
        assert any(a.get("StartTime") == meta["scale_down_at"] and a.get("DesiredCapacity") == 0 for a in actions), (stack, lid)
        # A Capacity Block needs no placement group (it is placed close together already).
        assert "PlacementGroup" not in group["Properties"], (stack, lid)


def _one_off_actions(templates: dict[str, dict[str, Any]]) -> list[tuple[str, str, dt.datetime]]:
    return [
        (stack, lid, dt.datetime.fromisoformat(r["Properties"]["StartTime"].replace("Z", "+00:00")))
        for stack, template in templates.items()
        for lid, r in template["Resources"].items()
        if r["Type"] == "AWS::AutoScaling::ScheduledAction" and "StartTime" in r["Properties"]
        and not r["Properties"].get("Recurrence")
    ]  # fmt: skip


def test_no_scheduled_action_lies_in_the_past(synth: Synth) -> None:
    """Auto Scaling API reference, PutScheduledUpdateGroupAction: "If you try to schedule your action in the past,
    Amazon EC2 Auto Scaling returns an error message." (CloudFormation's AWS::AutoScaling::ScheduledAction calls it.)
    https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_PutScheduledUpdateGroupAction.html
    Every one-off action (a Capacity Block's start and scale-down) lies after the time the app was synthesized at."""
    from neuronkit import clock

    now = clock.parse(synth.context["neuronkit:now"])
    actions = _one_off_actions(synth.templates)
    assert actions  # prod's Capacity Block
    assert [(s, lid, at) for s, lid, at in actions if at <= now] == []


def test_a_running_block_schedules_nothing_in_the_past_on_either_platform() -> None:
    """PutScheduledUpdateGroupAction: "If you try to schedule your action in the past, Amazon EC2 Auto Scaling returns
    an error message." The prod (Auto Scaling) and EKS examples synthesized while their block runs: no start action
    (it would lie in the past), only the scale-down, and the block's group starts at its size."""
    import yaml

    from neuronkit import clock
    from neuronkit.config.loader import parse_environment
    from neuronkit.stacks import build_environment
    from tests.conftest import ROOT, pinned_app

    during = "2027-01-05T00:00:00Z"
    for path in (ROOT / "environments" / "prod.yaml", ROOT / "examples" / "environments" / "eks.yaml"):
        env = parse_environment(yaml.safe_load(path.read_text()), str(path))
        (block,) = [c.capacity for c in env.training if c.capacity.type == "capacity-block"]
        assert block.start < clock.parse(during) < block.end, "the example block's dates moved: move `during` too"

        def build(app: Any, env: Any = env) -> Any:
            app.node.set_context(clock.CONTEXT_KEY, during)
            return build_environment(app, env)

        app, _ = pinned_app(build)
        templates = {s.stack_name: s.template for s in app.synth().stacks}
        actions = _one_off_actions(templates)
        assert len(actions) == 1, (path.name, actions)  # the scale-down only
        assert actions[0][2] > clock.parse(during)


def _user_data(synth: Synth) -> Iterator[tuple[str, str, str]]:
    for stack, lid, lt in _resources(synth, "AWS::EC2::LaunchTemplate"):
        raw = lt["Properties"]["LaunchTemplateData"].get("UserData")
        if raw is None:
            continue
        text = resolve(raw) if isinstance(raw, dict) else base64.b64decode(raw).decode()
        yield stack, lid, text


def test_boot_scripts_complete_the_hook_and_never_mark_health_during_the_grace_period(synth: Synth) -> None:
    """SetInstanceHealth is refused during the health-check grace period unless ShouldRespectGracePeriod is false.
    https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_SetInstanceHealth.html"""
    seen = 0
    for stack, lid, text in _user_data(synth):
        for line in text.splitlines():
            if "set-instance-health" in line:
                assert "--no-should-respect-grace-period" in line, (stack, lid, line)
        if "training-node.sh" in text or "inference-node.sh" in text:
            assert "complete-lifecycle-action" in text and "trap '" in text and " ERR" in text, (stack, lid)
            # The failure path answers ABANDON, never CONTINUE; the sandbox runs it (test_boot_sandbox.py).
            start = text.index("fail_node() {")
            body = text[start : text.index("\n}\n", start)]
            answers = re.findall(r"complete_hook (\w+)", body)
            assert answers == ["ABANDON"], (stack, lid, answers)
            seen += 1
    assert seen >= 4


def test_the_runtime_root_communicator_and_torchrun_use_different_ports(synth: Synth) -> None:
    """NEURON_RT_ROOT_COMM_ID names the Neuron runtime's root communicator, a socket of its own on rank 0 beside
    torchrun's store at MASTER_PORT. https://awsdocs-neuron.readthedocs-hosted.com/en/latest/neuron-runtime/nrt-configurable-parameters.html"""
    ports = catalog.software_facts()["collectives"]
    assert ports["master_port"] != ports["root_comm_port"]
    for _stack, _lid, text in _user_data(synth):
        if "training-node.sh" in text:
            assert f"MASTER_PORT='{ports['master_port']}'" in text and f"ROOT_COMM_PORT='{ports['root_comm_port']}'" in text
    launchers = 0
    for stack, lid, jd in _resources(synth, "AWS::Batch::JobDefinition"):
        command = json.dumps(jd["Properties"])
        if "NEURON_RT_ROOT_COMM_ID" in command:
            assert f"NEURON_RT_ROOT_COMM_PORT:-{ports['root_comm_port']}" in command, (stack, lid)
            assert not re.search(r"NEURON_RT_ROOT_COMM_ID=[^ ]*MASTER_PORT", command), (stack, lid)
            launchers += 1
    assert launchers


def test_batch_compute_environments_use_the_service_linked_role_and_an_updatable_strategy(synth: Synth) -> None:
    """Batch updates a compute environment's infrastructure (launch template, AMI, instance types) only with
    AWSServiceRoleForBatch and BEST_FIT_PROGRESSIVE or SPOT_CAPACITY_OPTIMIZED.
    https://docs.aws.amazon.com/batch/latest/userguide/updating-compute-environments.html"""
    found = list(_resources(synth, "AWS::Batch::ComputeEnvironment"))
    assert found
    for stack, lid, ce in found:
        assert "ServiceRole" not in ce["Properties"], (stack, lid)
        strategy = ce["Properties"]["ComputeResources"]["AllocationStrategy"]
        assert strategy in ("BEST_FIT_PROGRESSIVE", "SPOT_CAPACITY_OPTIMIZED", "SPOT_PRICE_CAPACITY_OPTIMIZED"), (stack, lid)


@pytest.fixture(scope="module")
def reserved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """prod on an On-Demand Capacity Reservation the stack creates (tests/conftest.py ``reserved_prod``): the
    examples buy Capacity Blocks, so the ODCR rules need a synth that has one. Stack name -> template."""
    import yaml

    from neuronkit.config import load_environment
    from neuronkit.stacks import build_environment
    from tests.conftest import pinned_app, reserved_prod

    folder = tmp_path_factory.mktemp("reserved")
    (folder / "prod.yaml").write_text(yaml.safe_dump(reserved_prod()))
    env = load_environment(folder / "prod.yaml")
    app, _ = pinned_app(lambda a: build_environment(a, env))
    return {s.stack_name: s.template for s in app.synth().stacks}


def test_capacity_reservations_carry_the_environment_tags(synth: Synth, reserved: dict[str, dict[str, Any]]) -> None:
    """A reservation bills whether used or not; only its own tags (TagSpecifications, not stack tags) put it under
    the environment's cost allocation tags and budget.
    https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-resource-ec2-capacityreservation.html and
    https://docs.aws.amazon.com/awsaccountbilling/latest/aboutv2/cost-alloc-tags.html"""
    templates = {**synth.templates, **{f"reserved:{k}": v for k, v in reserved.items()}}
    found = [
        (stack, lid, r)
        for stack, t in templates.items()
        for lid, r in t["Resources"].items()
        if r["Type"] == "AWS::EC2::CapacityReservation"
    ]
    assert found  # the reserved prod creates one
    for stack, lid, r in found:
        (spec,) = r["Properties"]["TagSpecifications"]
        keys = {t["Key"] for t in spec["Tags"]}
        assert spec["ResourceType"] == "capacity-reservation"
        assert {"neuronkit:environment", "cost-center", "neuronkit:pool"} <= keys, (stack, lid)


def test_groups_keep_the_sizes_their_scheduled_actions_set(synth: Synth) -> None:
    """Without IgnoreUnmodifiedGroupSizeProperties a deploy resets the size of a group with scheduled actions.
    https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-attribute-updatepolicy.html"""
    for stack, lid, group in _resources(synth, "AWS::AutoScaling::AutoScalingGroup"):
        policy = group.get("UpdatePolicy", {}).get("AutoScalingScheduledAction", {})
        assert policy.get("IgnoreUnmodifiedGroupSizeProperties") is True, (stack, lid)


def test_every_kit_function_has_an_errors_alarm(synth: Synth) -> None:
    """An asynchronously invoked function (EventBridge, alarms) fails silently unless its Errors metric is
    watched. https://docs.aws.amazon.com/lambda/latest/dg/monitoring-metrics-types.html"""
    functions = [(s, lid) for s, lid, _ in _resources(synth, "AWS::Lambda::Function") if "monitoring" in s or "inference" in s]
    watched = json.dumps([a for _, _, a in _resources(synth, "AWS::CloudWatch::Alarm") if '"Errors"' in json.dumps(a)])
    kit = [(s, lid) for s, lid in functions if "Rebalancer" in lid or "IdleScaleDown" in lid]
    assert kit
    for stack, lid in kit:
        assert lid in watched, (stack, lid)


def test_node_roles_cannot_suspend_processes_or_mark_health(synth: Synth) -> None:
    """Nodes act on their own group only through the launch hook and scale-in protection (least privilege).
    https://docs.aws.amazon.com/autoscaling/ec2/userguide/security-iam-awsmanpol.html"""
    for stack, lid, policy in _resources(synth, "AWS::IAM::Policy"):
        text = json.dumps(policy["Properties"]["PolicyDocument"])
        if "CompleteLifecycleAction" in text:
            assert "SuspendProcesses" not in text and "SetInstanceHealth" not in text, (stack, lid)


def test_every_fleet_has_an_outage_alarm(synth: Synth) -> None:
    """A total outage has no 5xx to count; the target group's HealthyHostCount shows it.
    https://docs.aws.amazon.com/elasticloadbalancing/latest/application/load-balancer-cloudwatch-metrics.html"""
    alarms = {a["Properties"]["AlarmName"] for _, _, a in _resources(synth, "AWS::CloudWatch::Alarm")}
    fleets = [g["Metadata"]["neuronkit"] for _, _, g in _pool_groups(synth) if g["Metadata"]["neuronkit"]["role"] == "inference"]
    assert fleets  # the examples serve
    for meta in fleets:
        assert f"{meta['environment']}-{meta['pool']}-no-healthy-hosts" in alarms, meta["pool"]


def _pull_through_prefixes(synth: Synth) -> dict[str, str]:
    return {s: r["Properties"]["EcrRepositoryPrefix"] for s, _, r in _resources(synth, "AWS::ECR::PullThroughCacheRule")}


def test_nodes_pulling_through_a_cache_may_create_and_import_its_repositories(synth: Synth) -> None:
    """The first pull of an image through a pull-through cache rule creates the repository and imports the
    image as the pulling principal: it needs ecr:CreateRepository and ecr:BatchImportUpstreamImage, or the
    pull fails. https://docs.aws.amazon.com/AmazonECR/latest/userguide/pull-through-cache-iam.html"""
    prefixes = _pull_through_prefixes(synth)
    assert prefixes, "the example fleets pull through a cache"
    for stack, prefix in prefixes.items():
        # Prefixes are 2-30 characters of lower-case letters, digits, and . _ - / separators.
        assert 2 <= len(prefix) <= 30 and re.fullmatch(r"[a-z0-9]+(?:[._/-][a-z0-9]+)*", prefix), prefix
        granted = [
            st
            for s, _, p in _resources(synth, "AWS::IAM::Policy")
            if s == stack
            for st in p["Properties"]["PolicyDocument"]["Statement"]
            if f"repository/{prefix}/*" in json.dumps(st.get("Resource"))
        ]
        actions = {a for st in granted for a in ([st["Action"]] if isinstance(st["Action"], str) else st["Action"])}
        assert {
            "ecr:BatchImportUpstreamImage",
            "ecr:CreateRepository",
            "ecr:BatchGetImage",
            "ecr:GetDownloadUrlForLayer",
        } <= actions


def test_launch_hook_heartbeats_stay_within_the_api_limit(synth: Synth) -> None:
    """A lifecycle hook's HeartbeatTimeout lies between 30 and 7200 seconds.
    https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_PutLifecycleHook.html"""
    for stack, lid, group in _resources(synth, "AWS::AutoScaling::AutoScalingGroup"):
        for hook in group["Properties"].get("LifecycleHookSpecificationList", []):
            assert 30 <= hook["HeartbeatTimeout"] <= 7200, (stack, lid)


def test_rolling_update_pauses_stay_within_an_hour(synth: Synth) -> None:
    """CloudFormation's AutoScalingRollingUpdate PauseTime is at most one hour (PT1H).
    https://docs.aws.amazon.com/AWSCloudFormation/latest/UserGuide/aws-attribute-updatepolicy.html"""
    for stack, lid, group in _resources(synth, "AWS::AutoScaling::AutoScalingGroup"):
        pause = group.get("UpdatePolicy", {}).get("AutoScalingRollingUpdate", {}).get("PauseTime")
        if pause:
            m = re.fullmatch(r"PT(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?", pause)
            assert m, pause
            h, mi, se = (int(x or 0) for x in m.groups())
            assert h * 3600 + mi * 60 + se <= 3600, (stack, lid, pause)


def test_tls_listeners_name_a_certificate_and_a_tls13_policy(synth: Synth) -> None:
    """An HTTPS/TLS listener needs a certificate; ELBSecurityPolicy-TLS13-1-2-2021-06 is the recommended policy.
    https://docs.aws.amazon.com/elasticloadbalancing/latest/application/describe-ssl-policies.html"""
    tls = [
        (s, r)
        for s, _, r in _resources(synth, "AWS::ElasticLoadBalancingV2::Listener")
        if r["Properties"]["Protocol"] in ("HTTPS", "TLS")
    ]
    assert any(s == "prod-inference" for s, _ in tls), "prod terminates TLS"
    for stack, r in tls:
        assert r["Properties"]["Certificates"][0]["CertificateArn"].startswith("arn:aws:acm:"), stack
        assert r["Properties"]["SslPolicy"] == "ELBSecurityPolicy-TLS13-1-2-2021-06", stack


def _joined(value: Any) -> Any:
    """A custom resource's Create/Delete call: the Fn::Join of JSON with GetAtts spliced in, parsed back."""
    parts = value["Fn::Join"][1]
    text = "".join(p if isinstance(p, str) else "<" + ".".join(p["Fn::GetAtt"]) + ">" for p in parts)
    return json.loads(text)


def _batch_efa_environments(synth: Synth) -> set[str]:
    """Environments with a Batch compute environment whose launch template carries EFA interfaces."""
    templates = {lid: lt for _, lid, lt in _resources(synth, "AWS::EC2::LaunchTemplate")}
    out = set()
    for stack, _, ce in _resources(synth, "AWS::Batch::ComputeEnvironment"):
        lt = templates[str(_logical_of(ce["Properties"]["ComputeResources"]["LaunchTemplate"]["LaunchTemplateId"]))]
        if lt["Properties"]["LaunchTemplateData"].get("NetworkInterfaces"):
            out.add(stack.rsplit("-", 1)[0])
    return out


def test_every_vpc_the_kit_creates_has_its_default_security_group_emptied(synth: Synth) -> None:
    """Amazon VPC User Guide, "Default security groups for your VPCs": a new VPC's default group allows all
    traffic from itself and all traffic out, and CloudFormation cannot change its rules; Security Hub control
    EC2.2 wants it empty. The network stack revokes both rules on create and puts them back on delete."""
    vpcs = list(_resources(synth, "AWS::EC2::VPC"))
    assert vpcs
    for stack, vpc_id, _ in vpcs:
        template = synth.template(stack)
        group = f"<{vpc_id}.DefaultSecurityGroup>"
        calls = {}
        for r in template["Resources"].values():
            if r["Type"] == "Custom::RestrictDefaultSecurityGroup":
                create, delete = _joined(r["Properties"]["Create"]), _joined(r["Properties"]["Delete"])
                assert create["parameters"] == delete["parameters"] and create["parameters"]["GroupId"] == group
                assert delete["action"] == create["action"].replace("revoke", "authorize")
                calls[create["action"]] = create["parameters"]["IpPermissions"]
        expected = {
            "revokeSecurityGroupIngress": [{"IpProtocol": "-1", "UserIdGroupPairs": [{"GroupId": group}]}],
            "revokeSecurityGroupEgress": [{"IpProtocol": "-1", "IpRanges": [{"CidrIp": "0.0.0.0/0"}]}],
        }
        if stack.rsplit("-", 1)[0] in _batch_efa_environments(synth):
            # Batch multi-node containers on EFA types live in the default group: its member ingress stays
            # (test_batch_multi_node_containers_reach_their_peers_and_s3).
            del expected["revokeSecurityGroupIngress"]
        assert calls == expected, stack
        # The function that makes the calls may touch that group only.
        policies = [
            s
            for r in template["Resources"].values()
            if r["Type"] == "AWS::IAM::Policy" and "CustomResourcePolicy" in json.dumps(r["Properties"].get("PolicyName", ""))
            for s in r["Properties"]["PolicyDocument"]["Statement"]
        ]
        assert policies and all("security-group/" in json.dumps(s["Resource"]) for s in policies), stack


def test_subnets_and_the_vpc_block_are_sizes_aws_accepts(synth: Synth) -> None:
    """Amazon VPC User Guide, "VPC CIDR blocks" and "Subnet CIDR blocks": a VPC block and each subnet lie
    between /16 and /28, and AWS reserves 5 addresses per subnet. Validation sizes subnets from the pools'
    maximum sizes (neuronkit/config/addressing.py); every synthesized one must still be a size AWS creates."""
    import ipaddress

    blocks = [r["Properties"]["CidrBlock"] for t in ("AWS::EC2::VPC", "AWS::EC2::Subnet") for _, _, r in _resources(synth, t)]
    assert blocks
    for block in blocks:
        assert 16 <= ipaddress.IPv4Network(block).prefixlen <= 28, block


def test_every_root_volume_is_a_gp3_size_a_launch_template_accepts(synth: Synth) -> None:
    """gp3 volumes are 1 to 65,536 GiB (16,384 GiB is gp2's cap); catalog/capacity.yaml max_root_volume_gib.
    https://docs.aws.amazon.com/ebs/latest/userguide/general-purpose.html"""
    sizes = [
        m["Ebs"]["VolumeSize"]
        for _, _, r in _resources(synth, "AWS::EC2::LaunchTemplate")
        for m in r["Properties"]["LaunchTemplateData"].get("BlockDeviceMappings", [])
        if m.get("Ebs", {}).get("VolumeType") == "gp3"
    ]
    assert sizes
    assert all(1 <= size <= catalog.max_root_volume_gib() for size in sizes), sizes


def _iso_seconds(value: str) -> int:
    match = re.fullmatch(r"PT(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?", value)
    assert match and any(match.groups()), value
    hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def test_a_compile_group_is_one_signalled_node_that_can_leave_and_gates_its_fleet(synth: Synth) -> None:
    """A CreationPolicy waits for Count signals within Timeout, at most 12 hours, and a node signals through
    SignalResource with its group's logical ID. TerminateInstanceInAutoScalingGroup with
    ShouldDecrementDesiredCapacity cannot take the desired capacity below MinSize, so MinSize is 0. The fleet's
    group depends on the compile group, so its rolling update starts only after the signal.
    https://docs.aws.amazon.com/AWSCloudFormation/latest/TemplateReference/aws-attribute-creationpolicy.html
    https://docs.aws.amazon.com/AWSCloudFormation/latest/APIReference/API_SignalResource.html
    https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_TerminateInstanceInAutoScalingGroup.html"""
    compiles = [
        (s, lid, g)
        for s, lid, g in _resources(synth, "AWS::AutoScaling::AutoScalingGroup")
        if "neuronkit-precompile" in g["Metadata"]
    ]
    serving = {
        f"{e.name}-inference"
        for e in environments().values()
        if e.platform != "eks" and any(f.model is not None and f.precompile for f in e.inference)
    }  # on EKS a compile Job per key does this (tests/unit/test_eks_serving.py)
    assert {s for s, _, _ in compiles} == serving >= {"dev-inference", "prod-inference"}  # both examples serve a model
    for stack, lid, group in compiles:
        props, template = group["Properties"], synth.templates[stack]
        signal = group["CreationPolicy"]["ResourceSignal"]
        assert signal["Count"] == int(props["DesiredCapacity"]) == 1 and props["MinSize"] == "0", (stack, lid)
        assert 0 < _iso_seconds(signal["Timeout"]) <= 43200, (stack, lid)
        assert len(props["AutoScalingGroupName"]) <= 255
        # Tag values (the group's and its instances', which carry the key) are at most 256 characters.
        # https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_Tag.html
        assert all(len(t["Value"]) <= 256 for t in props["Tags"]), (stack, lid)
        lt = template["Resources"][props["LaunchTemplate"]["LaunchTemplateId"]["Ref"]]["Properties"]["LaunchTemplateData"]
        text = resolve(lt["UserData"])
        assert f"SIGNAL_RESOURCE='{lid}'" in text and "NODE_ROLE='compile'" in text, (stack, lid)
        fleet = group["Metadata"]["neuronkit-precompile"]["group"]
        (fleet_group,) = [g for _, _, g in _pool_groups(synth) if g["Properties"]["AutoScalingGroupName"] == fleet]
        assert lid in fleet_group["DependsOn"], (stack, lid)
        # The node's role (its instance profile's) may terminate itself in this group and signal this stack.
        profile = template["Resources"][lt["IamInstanceProfile"]["Arn"]["Fn::GetAtt"][0]]["Properties"]
        (role,) = [r["Ref"] for r in profile["Roles"]]
        statements = [
            st
            for in_stack, _, p in _resources(synth, "AWS::IAM::Policy")
            if in_stack == stack and {"Ref": role} in p["Properties"]["Roles"]
            for st in p["Properties"]["PolicyDocument"]["Statement"]
        ]
        (leave,) = [st for st in statements if st["Action"] == "autoscaling:TerminateInstanceInAutoScalingGroup"]
        assert f"autoScalingGroupName/{props['AutoScalingGroupName']}" in json.dumps(leave["Resource"]), (stack, lid)
        assert any(st["Action"] == "cloudformation:SignalResource" for st in statements), (stack, lid)


# Conditions that scope a service principal to this account's resources (confused-deputy prevention).
_SOURCE_KEYS = (
    "aws:SourceAccount",
    "aws:SourceArn",
    "aws:SourceOwner",
    "kms:EncryptionContext:aws:logs:arn",
    "kms:CallerAccount",
)


def test_service_principals_on_topic_and_key_policies_carry_source_conditions(synth: Synth) -> None:
    """A topic or key statement that names a service principal must say which account's (or resource's) calls it
    admits, or another account's rule, alarm or budget can use it: the "confused deputy" problem.
    https://docs.aws.amazon.com/sns/latest/dg/sns-access-policy-use-cases.html and
    https://docs.aws.amazon.com/IAM/latest/UserGuide/confused-deputy.html"""
    checked = 0
    policies = [(f"topic {t}", s) for t, statements in _topic_policies(synth).items() for s in statements]
    policies += [(f"key {k}", s) for k, statements in _key_statements(synth).items() for s in statements]
    for where, statement in policies:
        principal = statement.get("Principal")
        if statement["Effect"] != "Allow" or not isinstance(principal, dict) or "Service" not in principal:
            continue
        condition = json.dumps(statement.get("Condition", {}))
        assert any(key in condition for key in _SOURCE_KEYS), (where, statement)
        checked += 1
    # EventBridge publishes the launch-failure rule to every environment's topic: its statement is among them.
    events = [
        s for _, s in policies if isinstance(s.get("Principal"), dict) and s["Principal"].get("Service") == "events.amazonaws.com"
    ]
    assert checked >= 4 and events
    assert all("aws:SourceArn" in json.dumps(s.get("Condition", {})) for s in events if "sns:Publish" in json.dumps(s["Action"]))


def test_application_load_balancers_wait_long_enough_for_a_completion(synth: Synth) -> None:
    """An ALB closes a connection idle for its idle timeout (default 60 s) with a 504; LLM completions take longer,
    so the kit sets at least the catalog's default and the server keeps connections alive longer than the balancer.
    https://docs.aws.amazon.com/elasticloadbalancing/latest/application/edit-load-balancer-attributes.html#connection-idle-timeout"""
    from neuronkit.catalog import serving

    facts = serving.facts()["load_balancer"]
    albs = 0
    for stack, lid, lb in _resources(synth, "AWS::ElasticLoadBalancingV2::LoadBalancer"):
        if lb["Properties"].get("Type", "application") != "application":
            continue
        attributes = {a["Key"]: a["Value"] for a in lb["Properties"].get("LoadBalancerAttributes", [])}
        idle = int(attributes.get("idle_timeout.timeout_seconds", 60))
        assert facts["alb_idle_timeout_default_seconds"] <= idle <= facts["alb_idle_timeout_max_seconds"], (stack, lid, idle)
        albs += 1
    assert albs
    keep_alive = re.compile(rf"{facts['keep_alive_env']}=(\d+)")
    served = 0
    for stack, lid, text in _user_data(synth):
        for found in keep_alive.findall(text):
            assert int(found) > facts["alb_idle_timeout_default_seconds"], (stack, lid, found)
            served += 1
    assert served


def test_training_nodes_are_ready_before_they_continue_and_lose_readiness_when_abandoned(synth: Synth) -> None:
    """A launch hook answered CONTINUE cannot be answered ABANDON afterwards (CompleteLifecycleAction): a node must
    mark itself ready while the hook is open, and a node that fails afterwards must leave its peers' hostfiles.
    https://docs.aws.amazon.com/autoscaling/ec2/APIReference/API_CompleteLifecycleAction.html"""
    seen = 0
    for stack, lid, text in _user_data(synth):
        if "training-node.sh" not in text:
            continue
        ready = text.index('tag_node "Key=neuronkit:ready,Value=true"')
        assert ready < text.index("complete_hook CONTINUE"), (stack, lid)
        abandon = text.index("fail_node() {")
        body = text[abandon : text.index("\n}\n", abandon)]
        assert (
            "delete-tags" in body
            and "Key=neuronkit:ready" in body
            and body.index("delete-tags") < body.index("complete_hook ABANDON")
        )
        seen += 1
    assert seen


def test_serving_tensor_parallelism_fits_the_logical_neuron_cores(synth: Synth) -> None:
    """vLLM's tensor-parallel degree counts the NeuronCores the runtime exposes: physical cores / LNC (Trn2 and Trn3
    default to LNC=2). https://awsdocs-neuron.readthedocs-hosted.com/en/latest/about-neuron/arch/neuron-features/logical-neuroncore-config.html"""
    from neuronkit.catalog import serving

    templates = {lid: lt for _, lid, lt in _resources(synth, "AWS::EC2::LaunchTemplate")}
    checked = 0
    for stack, lid, group in _pool_groups(synth):
        profiles = group["Metadata"]["neuronkit"].get("profiles", {})
        overrides = group["Properties"].get("MixedInstancesPolicy", {}).get("LaunchTemplate", {}).get("Overrides", [])
        for override in overrides:
            t = override["InstanceType"]
            if t not in profiles or serving.accelerator_of(t) != "neuron":
                continue
            p = profiles[t]
            logical = catalog.get(t).neuron_cores // (p.get("lnc") or 1)
            assert p["tensor_parallel"] <= logical and logical % p["tensor_parallel"] == 0, (stack, lid, t, p)
            assert p.get("lnc") == serving.lnc_of(t, p.get("lnc")), (stack, lid, t)  # the family's setting when LNC applies
            spec = override["LaunchTemplateSpecification"]
            text = resolve(templates[str(_logical_of(spec["LaunchTemplateId"]))]["Properties"]["LaunchTemplateData"]["UserData"])
            assert f"TENSOR_PARALLEL='{p['tensor_parallel']}'" in text and f"LNC='{p.get('lnc') or ''}'" in text, (stack, lid, t)
            checked += 1
    assert checked


def _self_ingress(template: dict[str, Any], group_lid: str) -> bool:
    """Whether the group (logical ID) admits all traffic from its own members."""
    for r in template["Resources"].values():
        p = r.get("Properties", {})
        if r["Type"] == "AWS::EC2::SecurityGroupIngress" and _logical_of(p.get("GroupId")) == group_lid:
            if _logical_of(p.get("SourceSecurityGroupId")) == group_lid and p.get("IpProtocol") == "-1":
                return True
    inline = template["Resources"][group_lid]["Properties"].get("SecurityGroupIngress", [])
    return any(_logical_of(rule.get("SourceSecurityGroupId")) == group_lid and rule.get("IpProtocol") == "-1" for rule in inline)


def test_batch_multi_node_containers_reach_their_peers_and_s3(synth: Synth) -> None:
    """Batch runs each multi-node job container in the awsvpc network mode on its own interface, with the compute
    environment's security groups or, when it names none (EFA launch templates carry the interfaces), the VPC's
    default security group. Node 1 must reach node 0 on MASTER_PORT and the runtime's root communicator, and
    containers must reach S3. https://docs.aws.amazon.com/batch/latest/userguide/multi-node-parallel-jobs.html and
    https://docs.aws.amazon.com/batch/latest/userguide/efa.html"""
    templates = {lid: (stack, lt) for stack, lid, lt in _resources(synth, "AWS::EC2::LaunchTemplate")}
    efa, plain = 0, 0
    for stack, lid, ce in _resources(synth, "AWS::Batch::ComputeEnvironment"):
        resources = ce["Properties"]["ComputeResources"]
        lt_stack, lt = templates[str(_logical_of(resources["LaunchTemplate"]["LaunchTemplateId"]))]
        if lt["Properties"]["LaunchTemplateData"].get("NetworkInterfaces"):
            assert not resources.get("SecurityGroupIds"), (stack, lid)  # Batch refuses both
            environment = stack.rsplit("-", 1)[0]
            network = synth.template(f"{environment}-network")["Resources"]
            egress = [r["Properties"] for r in network.values() if r["Type"] == "AWS::EC2::SecurityGroupEgress"]
            default = (
                [e for e in egress if e["GroupId"] == {"Fn::GetAtt": [e["GroupId"]["Fn::GetAtt"][0], "DefaultSecurityGroup"]}]
                if egress
                else []
            )
            members = [e for e in default if e.get("DestinationSecurityGroupId") == e["GroupId"] and e["IpProtocol"] == "-1"]
            https = [
                e for e in default if e.get("IpProtocol") == "tcp" and e.get("FromPort") == 443 and e.get("CidrIp") == "0.0.0.0/0"
            ]
            assert members and https, (environment, "the default group lets Batch containers reach their peers and S3")
            # AWS's member-to-member ingress of the default group is kept: nothing revokes it.
            revoked = json.dumps([r for r in network.values() if r["Type"] == "Custom::RestrictDefaultSecurityGroup"])
            assert "revokeSecurityGroupIngress" not in revoked and "revokeSecurityGroupEgress" in revoked, environment
            efa += 1
        else:
            groups = [_logical_of(g) for g in resources["SecurityGroupIds"]]
            template = synth.template(stack)
            assert any(g in template["Resources"] and _self_ingress(template, g) for g in groups if g), (stack, lid)
            plain += 1
    assert efa  # the examples run a Batch pool on an EFA type


def test_eks_managed_node_group_launch_templates_follow_the_eks_rules(synth: Synth) -> None:
    """Amazon EKS refuses, or silently overrides, a managed node group's launch template that names an image while
    the node group names an amiType, an instance profile (EKS attaches the node role), or an instance type while the
    node group lists them (a Capacity Block group names its type in the template only); pods must not reach the node role through IMDS (hop limit 1, tokens required); a
    CAPACITY_BLOCK node group's template targets its reservation with the capacity-block market type. Tags of a
    node group do not reach its instances, so the template's TagSpecifications carry the cost-allocation tags.
    https://docs.aws.amazon.com/eks/latest/userguide/launch-templates.html,
    https://docs.aws.amazon.com/eks/latest/userguide/capacity-blocks-mng.html and
    https://docs.aws.amazon.com/eks/latest/APIReference/API_CreateNodegroup.html (tags)"""
    groups = list(_resources(synth, "AWS::EKS::Nodegroup"))
    assert groups, "the project has an EKS file (tests/fixtures/user_environments/team.yaml)"
    for stack, lid, group in groups:
        props = group["Properties"]
        lt = synth.template(stack)["Resources"][str(_logical_of(props["LaunchTemplate"]["Id"]))]["Properties"][
            "LaunchTemplateData"
        ]
        assert props["AmiType"].startswith("AL2023_") and "ImageId" not in lt, (stack, lid)
        assert "IamInstanceProfile" not in lt, (stack, lid)
        # The type is named once: by the node group, or (a Capacity Block) by the template (test_node_contracts.py).
        assert ("InstanceType" in lt) != bool(props.get("InstanceTypes")), (stack, lid)
        metadata = lt["MetadataOptions"]
        assert (metadata["HttpTokens"], metadata["HttpPutResponseHopLimit"]) == ("required", 1), (stack, lid)
        scaling = props["ScalingConfig"]
        desired = scaling.get("DesiredSize", scaling["MinSize"])
        if isinstance(desired, dict):  # an autoscaled group: the size custom resource's clamp(current, min, max)
            (target, _attribute) = desired["Fn::GetAtt"]
            assert synth.template(stack)["Resources"][target]["Type"] == "Custom::NeuronkitNodegroupDesiredSize", (stack, lid)
        else:
            assert scaling["MinSize"] <= desired <= scaling["MaxSize"], (stack, lid)
        environment = environment_of(stack)
        for spec in lt["TagSpecifications"]:
            tags = {t["Key"]: t["Value"] for t in spec["Tags"]}
            assert tags["neuronkit:environment"] == environment and "cost-center" in tags, (stack, lid, spec["ResourceType"])
        assert {spec["ResourceType"] for spec in lt["TagSpecifications"]} >= {"instance", "volume"}, (stack, lid)
        if props.get("CapacityType") == "CAPACITY_BLOCK":
            assert lt["InstanceMarketOptions"]["MarketType"] == "capacity-block", (stack, lid)
            assert "CapacityReservationId" in json.dumps(lt["CapacityReservationSpecification"]), (stack, lid)


@pytest.fixture(scope="module")
def pilot_inference(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The inference stack of examples/environments/pilot.yaml (the serving pilot's load job)."""
    from neuronkit.config import load_environment
    from neuronkit.stacks import build_environment
    from tests.conftest import ROOT, new_app

    app = new_app(tmp_path_factory.mktemp("pilot"))
    build_environment(app, load_environment(ROOT / "examples" / "environments" / "pilot.yaml"))
    return next(s.template for s in app.synth().stacks if s.stack_name == "pilot-inference")  # type: ignore[no-any-return]


def test_the_pilot_load_job_finds_each_sides_limit_and_its_saturation(pilot_inference: dict[str, Any]) -> None:
    """vLLM's `vllm bench serve --request-rate` (docs.vllm.ai, CLI reference, bench serve): "Number of requests per
    second. If this is inf, then all the requests are sent at time 0. Otherwise, we use Poisson process or gamma
    distribution to synthesize the request arrival times." The load job sweeps finite rates (Poisson arrivals),
    bisects each side to its limit, then runs once at `inf` for the saturation throughput; the GPU side runs the
    upstream vLLM the Neuron image names (catalog/pilot.yaml), so the difference left is the plugin."""
    from neuronkit.adoption import pilot_serving

    jobs = [
        (lid, c)
        for lid, task in pilot_inference["Resources"].items()
        if task["Type"] == "AWS::ECS::TaskDefinition"
        for c in task["Properties"]["ContainerDefinitions"]
        if c["Name"] == "bench"
    ]
    assert jobs, "the pilot example renders a load job"
    for lid, bench in jobs:
        env = {e["Name"]: e["Value"] for e in bench["Environment"]}
        script = bench["Command"][0]
        assert '--request-rate "${rate}"' in script and 'bench "${side}" inf random' in script, lid
        assert "next-rate" in script and float(env["RESOLUTION"]) > 0, lid
        rates = [float(r) for r in env["RATES"].split()]
        assert all(0 < r < float("inf") for r in rates) and float(env["MAX_RATE"]) >= max(rates), lid
        pairing = pilot_serving.gpu_pairing(env["NEURON_IMAGE"])
        assert pairing is not None and pairing.get("gpu_image"), "the example's Neuron image has a paired GPU image"
        assert env["GPU_VLLM"] == pairing["upstream_vllm"] == env["NEURON_VLLM"] and env["GPU_IMAGE"] == pairing["gpu_image"]


def _served_manifests(synth: Synth) -> Iterator[tuple[str, dict[str, Any], list[dict[str, Any]]]]:
    """Every applied manifest holding a TargetGroupBinding, parsed with deploy-time parts as their intrinsics'
    JSON (a placeholder string each); with the template it came from."""
    by_stack: dict[str, list[dict[str, Any]]] = {}
    for stack, _, r in _resources(synth, "Custom::AWSCDK-EKS-KubernetesResource"):
        m = r["Properties"]["Manifest"]
        parts = m["Fn::Join"][1] if isinstance(m, dict) else [m]
        text = "".join(p if isinstance(p, str) else "INTRINSIC" + json.dumps(p).replace('"', "'") for p in parts)
        by_stack.setdefault(stack, []).extend(json.loads(text))
    # A binding is a manifest resource of its own (issue 47): the stack's documents together.
    for stack, docs in by_stack.items():
        if any(d["kind"] == "TargetGroupBinding" for d in docs):
            yield stack, synth.templates[stack], docs


def test_serving_pods_drain_with_their_target_group_and_carry_readiness_gates(synth: Synth) -> None:
    """AWS Load Balancer Controller, docs/deploy/pod_readiness_gate.md (v3.5.0): "you need to apply the label
    `elbv2.k8s.aws/pod-readiness-gate-inject: enabled` to the pod namespace. However, note that this only works with
    `target-type: ip`"; TargetGroupBinding guide: "TargetGroupBinding CR supports TargetGroups of either `instance` or
    `ip` TargetType" (the binding's targetType must be its group's). Elastic Load Balancing API reference,
    DeregisterTargets (https://docs.aws.amazon.com/elasticloadbalancing/latest/APIReference/API_DeregisterTargets.html):
    "The load balancer stops sending requests to targets that are deregistering, but uses connection draining to ensure
    that in-flight traffic completes on the existing connections": a pod's preStop sleeps at least the deregistration
    delay, so it serves until the balancer has drained it, and its
    termination grace period is longer than the preStop (Kubernetes kills the container when the grace ends)."""
    from neuronkit.kubernetes import load_balancer_controller as lbc

    found = 0
    for stack, template, docs in _served_manifests(synth):
        groups = {lid: r for lid, r in template["Resources"].items() if r["Type"] == "AWS::ElasticLoadBalancingV2::TargetGroup"}
        for binding in (d for d in docs if d["kind"] == "TargetGroupBinding"):
            found += 1
            arn = binding["spec"]["targetGroupARN"]
            group = next(g for lid, g in groups.items() if lid in arn)
            assert binding["spec"]["targetType"] == group["Properties"]["TargetType"] == "ip", stack
            drain = int(
                {a["Key"]: a["Value"] for a in group["Properties"]["TargetGroupAttributes"]}[
                    "deregistration_delay.timeout_seconds"
                ]
            )
            service = next(
                d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == binding["spec"]["serviceRef"]["name"]
            )
            # The fleet's Deployments (a GPU Deployment's create-once seed carries a stand-in template: its real one
            # is the patch the spill tests read).
            pods = [
                d
                for d in docs
                if d["kind"] == "Deployment"
                and service["spec"]["selector"].items() <= d["spec"]["template"]["metadata"]["labels"].items()
                and "lifecycle" in d["spec"]["template"]["spec"]["containers"][0]
            ]
            assert pods, stack
            for d in pods:
                spec = d["spec"]["template"]["spec"]
                prestop = spec["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"]
                assert prestop >= drain and spec["terminationGracePeriodSeconds"] > prestop, (stack, d["metadata"]["name"])
    assert found, "no served fleet on EKS in the project (tests/fixtures/user_environments/team.yaml serves one)"
    # The serving namespace (the kit's other namespaces hold no pods behind a target group).
    from neuronkit.kubernetes import scheduling

    namespaces = [
        doc
        for _, _, r in _resources(synth, "Custom::AWSCDK-EKS-KubernetesResource")
        if isinstance(r["Properties"]["Manifest"], str) and '"Namespace"' in r["Properties"]["Manifest"]
        for doc in json.loads(r["Properties"]["Manifest"])
        if doc.get("kind") == "Namespace" and doc["metadata"]["name"] == scheduling.SERVING_NAMESPACE
    ]
    assert namespaces and all(lbc.readiness_gate_labels().items() <= ns["metadata"]["labels"].items() for ns in namespaces)


def test_every_function_in_a_vpc_may_manage_its_network_interfaces(synth: Synth) -> None:
    """Lambda developer guide, "Giving Lambda functions access to resources in an Amazon VPC": "Lambda uses your
    function's permissions to create and manage network interfaces", with ec2:CreateNetworkInterface,
    ec2:DescribeNetworkInterfaces and ec2:DeleteNetworkInterface (the AWSLambdaVPCAccessExecutionRole managed policy
    grants them). Without them CreateFunction fails and the stack rolls back; moto does not check it. aws-cdk-lib adds
    the policy only to a role the Function creates itself, so a kit function with its own role must add it."""
    found = 0
    for stack, lid, function in _resources(synth, "AWS::Lambda::Function"):
        props = function["Properties"]
        if "VpcConfig" not in props:
            continue
        found += 1
        role_id = props["Role"]["Fn::GetAtt"][0]
        template = synth.templates[stack]["Resources"]
        managed = json.dumps(template[role_id]["Properties"].get("ManagedPolicyArns", []))
        inline = json.dumps(
            [r["Properties"]["PolicyDocument"] for r in template.values()
             if r["Type"] == "AWS::IAM::Policy" and {"Ref": role_id} in r["Properties"]["Roles"]]
        )  # fmt: skip
        assert "AWSLambdaVPCAccessExecutionRole" in managed or "ec2:CreateNetworkInterface" in inline, (stack, lid)
    assert found, "no function in a VPC in the project (the EKS kubectl handler and the GPU spill controller are)"


def test_no_node_can_replace_its_pools_ssh_key(synth: Synth) -> None:
    """AWS Systems Manager User Guide, "Preventing access to Parameter Store API operations"
    (https://docs.aws.amazon.com/systems-manager/latest/userguide/parameter-store-policy-conditions.html): "However, the
    "Deny" statement prevents Entities from changing values of existing parameters because the Overwrite option is
    explicitly denied for the PutParameter operation." A training pool's nodes may create the pool's SSH key once
    (kit/neuronkit-ssh-trust), never overwrite the key their peers trust: every grant of ssm:PutParameter on it comes
    with that Deny on the same parameter. moto does not evaluate IAM conditions."""
    found = 0
    for stack, lid, policy in _resources(synth, "AWS::IAM::Policy"):
        statements = policy["Properties"]["PolicyDocument"]["Statement"]
        for grant in (s for s in statements if s.get("Sid") == "PoolSshKey"):
            found += 1
            assert "ssm:PutParameter" in grant["Action"], (stack, lid)
            denies = [
                s
                for s in statements
                if s.get("Effect") == "Deny"
                and s.get("Action") == "ssm:PutParameter"
                and s.get("Resource") == grant["Resource"]
                and s.get("Condition") == {"StringEquals": {"ssm:Overwrite": "true"}}
            ]
            assert len(denies) == 1, (stack, lid)
    assert found, "no training pool grants its SSH key: this test would check nothing"


def test_served_eks_target_groups_route_to_the_least_busy_target(synth: Synth) -> None:
    """Elastic Load Balancing, Application Load Balancers, "Target group attributes": "load_balancing.algorithm.type -
    The load balancing algorithm determines how the load balancer selects targets when routing requests. The value is
    round_robin, least_outstanding_requests, or weighted_random." Neuron and GPU targets of one fleet serve at different
    speeds: round robin would queue on the slower ones (issue 49), so every EKS serving target group sets
    least_outstanding_requests, a value the attribute takes."""
    found = 0
    for stack, lid, group in _resources(synth, "AWS::ElasticLoadBalancingV2::TargetGroup"):
        if not stack.endswith("-eks"):
            continue
        found += 1
        attributes = {a["Key"]: a["Value"] for a in group["Properties"].get("TargetGroupAttributes", [])}
        assert attributes.get("load_balancing.algorithm.type") == "least_outstanding_requests", (stack, lid)
    assert found, "no served fleet on EKS in the project (tests/fixtures/user_environments/team.yaml serves one)"
