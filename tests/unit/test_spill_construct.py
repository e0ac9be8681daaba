"""The GPU spill construct in a bare stack with an eks_v2 cluster: schedule, VPC config, access entry with no access
policy, the Role/RoleBinding of least rights (validated against the pinned Kubernetes schema), the role's policy,
the metrics and the lasting-fallback alarm."""

from __future__ import annotations

import json
from typing import Any

import kubernetes_validate
import pytest
from aws_cdk import aws_sns as sns

from neuronkit import catalog
from neuronkit.constructs.eks import GpuSpill, SpillSpec
from neuronkit.kubernetes import spill as rbac
from tests.templates import bare_stack, resources, template
from tests.unit.test_eks import _cluster

K8S = str(catalog.eks_facts()["kubernetes"]["version"])


@pytest.fixture(scope="module")
def spill_template() -> dict[str, Any]:
    stack = bare_stack()
    cluster = _cluster(stack)
    GpuSpill(
        stack, "ChatSpill", cluster=cluster.cluster, subnets=cluster.cluster.vpc.private_subnets,
        spec=SpillSpec(environment="team", fleet="chat", max_gpu_replicas=4, spill_after_minutes=3),
        neuron_group_names=["eks-chat-neuron-20c9a1b2"], alarm_topic=sns.Topic(stack, "Alarms"),
    )  # fmt: skip
    return template(stack)


def _function(data: dict[str, Any]) -> dict[str, Any]:
    found = [
        f for f in resources(data, "AWS::Lambda::Function").values() if "spills chat" in f["Properties"].get("Description", "")
    ]
    assert len(found) == 1
    return found[0]["Properties"]


def test_runs_every_minute_in_the_vpc_with_its_settings(spill_template: dict[str, Any]) -> None:
    fn = _function(spill_template)
    assert fn["VpcConfig"]["SubnetIds"] == ["subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2"]
    assert len(fn["VpcConfig"]["SecurityGroupIds"]) == 1
    env = fn["Environment"]["Variables"]
    assert env["NEURON_DEPLOYMENT"] == "chat-neuron" and env["GPU_DEPLOYMENT"] == "chat-gpu"
    assert env["FLEET_NAMESPACE"] == "neuronkit-serving" and env["SPILL_AFTER_MINUTES"] == "3"
    assert env["RETURN_AFTER_MINUTES"] == "30" and env["MAX_GPU_REPLICAS"] == "4"
    assert env["NEURON_GROUPS"] == "eks-chat-neuron-20c9a1b2"
    assert "Fn::GetAtt" in env["CLUSTER_ENDPOINT"] and "Fn::GetAtt" in env["CLUSTER_CA"]
    rules = [
        r["Properties"]
        for r in resources(spill_template, "AWS::Events::Rule").values()
        if "spill" in r["Properties"]["Description"]
    ]
    assert [r["ScheduleExpression"] for r in rules] == ["rate(1 minute)"]


def test_the_function_reaches_the_api_server_on_443_only(spill_template: dict[str, Any]) -> None:
    groups = [
        g["Properties"]
        for g in resources(spill_template, "AWS::EC2::SecurityGroup").values()
        if "spill" in g["Properties"]["GroupDescription"]
    ]
    assert len(groups) == 1
    assert [(e["FromPort"], e["ToPort"], e["CidrIp"]) for e in groups[0]["SecurityGroupEgress"]] == [(443, 443, "0.0.0.0/0")]
    ingress = [
        i["Properties"]
        for i in resources(spill_template, "AWS::EC2::SecurityGroupIngress").values()
        if "spill" in i["Properties"].get("Description", "")
    ]
    assert len(ingress) == 1 and ingress[0]["FromPort"] == 443 and "ClusterSecurityGroupId" in json.dumps(ingress[0]["GroupId"])


def test_the_access_entry_names_a_group_and_no_access_policy(spill_template: dict[str, Any]) -> None:
    entries = [
        e["Properties"]
        for e in resources(spill_template, "AWS::EKS::AccessEntry").values()
        if e["Properties"].get("KubernetesGroups")
    ]
    assert len(entries) == 1
    entry = entries[0]
    assert entry["KubernetesGroups"] == ["neuronkit:spill:chat"] and "AccessPolicies" not in entry
    assert entry["Type"] == "STANDARD" and "ChatSpillRole" in json.dumps(entry["PrincipalArn"])


def test_the_role_reads_its_memory_and_launch_failures_and_nothing_else(spill_template: dict[str, Any]) -> None:
    policies = [
        p["Properties"] for k, p in resources(spill_template, "AWS::IAM::Policy").items() if k.startswith("ChatSpillRole")
    ]
    assert len(policies) == 1
    actions = {s["Sid"]: s["Action"] for s in policies[0]["PolicyDocument"]["Statement"]}
    assert actions == {
        "Logs": ["logs:CreateLogStream", "logs:PutLogEvents"],
        "Memory": ["ssm:GetParameter", "ssm:PutParameter"],
        "LaunchFailures": "autoscaling:DescribeScalingActivities",
    }
    params = [p["Properties"] for k, p in resources(spill_template, "AWS::SSM::Parameter").items() if k.startswith("ChatSpill")]
    assert len(params) == 1
    param = params[0]
    assert param["Name"] == "/neuronkit/team/chat/spill" and param["Value"] == "{}"


def test_the_rbac_manifest_is_least_and_valid(spill_template: dict[str, Any]) -> None:
    manifests = [m["Properties"] for m in resources(spill_template, "Custom::AWSCDK-EKS-KubernetesResource").values()]
    docs = [d for m in manifests for d in json.loads(m["Manifest"]) if d.get("metadata", {}).get("name") == "chat-spill"]
    assert [d["kind"] for d in docs] == ["Role", "RoleBinding"]
    for d in rbac.manifests("chat"):
        kubernetes_validate.validate(d, K8S, strict=True)
    rules = rbac.role("chat")["rules"]
    writes = [r for r in rules if set(r["verbs"]) - {"get", "list", "watch"}]
    assert writes == [
        {"apiGroups": ["apps"], "resources": ["deployments/scale"], "resourceNames": ["chat-gpu"], "verbs": ["patch"]}
    ]
    assert all("*" not in json.dumps(r) for r in rules)
    assert rbac.role_binding("chat")["subjects"][0]["name"] == rbac.kubernetes_group("chat")
    assert all(d["kind"] != "ClusterRole" for d in rbac.manifests("chat"))  # nothing cluster-scoped


def test_a_lasting_fallback_and_a_failing_run_alarm_on_the_topic(spill_template: dict[str, Any]) -> None:
    alarms = {a["Properties"]["AlarmName"]: a["Properties"] for a in resources(spill_template, "AWS::CloudWatch::Alarm").values()}
    assert sorted(alarms) == [
        "team-chat-compile-failed",
        "team-chat-gpu-spill",
        "team-chat-rollout-stalled",
        "team-chat-spill-errors",
    ]
    # Issue 49: a failed compile Job and a stalled Neuron rollout alarm on the topic, from the function's metrics.
    for name, metric in (("team-chat-compile-failed", "CompileFailed"), ("team-chat-rollout-stalled", "RolloutStalled")):
        a = alarms[name]
        assert a["MetricName"] == metric and a["Threshold"] == 0 and a["ComparisonOperator"] == "GreaterThanThreshold"
        assert {d["Name"]: d["Value"] for d in a["Dimensions"]} == {"Environment": "team", "Pool": "chat"}
        assert len(a["AlarmActions"]) == 1 and a["TreatMissingData"] == "notBreaching"
    errors = alarms["team-chat-spill-errors"]
    assert errors["MetricName"] == "Errors" and errors["Threshold"] == 0 and len(errors["AlarmActions"]) == 1
    alarm = alarms["team-chat-gpu-spill"]
    assert alarm["AlarmName"] == "team-chat-gpu-spill" and alarm["MetricName"] == "GpuReplicas"
    assert alarm["Statistic"] == "Minimum" and alarm["Period"] == 3600 and alarm["EvaluationPeriods"] == 6
    assert alarm["ComparisonOperator"] == "GreaterThanThreshold" and alarm["Threshold"] == 0
    assert {d["Name"]: d["Value"] for d in alarm["Dimensions"]} == {"Environment": "team", "Pool": "chat"}
    assert len(alarm["AlarmActions"]) == 1


def test_the_spec_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="max_gpu_replicas"):
        SpillSpec(environment="t", fleet="chat", max_gpu_replicas=0)
    with pytest.raises(ValueError, match="spill_after_minutes"):
        SpillSpec(environment="t", fleet="chat", max_gpu_replicas=1, spill_after_minutes=-1)
