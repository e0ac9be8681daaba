"""AWS and EKS rules the spill controller, Cluster Autoscaler and KEDA rely on that moto does not enforce (moto models
no access entry, pod identity association or Kubernetes object). Cluster-wide parts are checked on every synthesized
EKS environment of the project (tests/conftest.py); the per-fleet parts (GpuSpill, FleetScaling) on a bare stack until
the lead wires them into EksStack. Each test quotes the document it enforces; docs/aws-contracts.md lists them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2

from neuronkit import catalog
from neuronkit.constructs.eks import FleetScaling, GpuSpill, SpillSpec
from tests.conftest import Synth
from tests.templates import bare_stack, resources, template
from tests.unit.test_eks import _cluster

EKS = catalog.eks_facts()


@pytest.fixture(scope="module")
def fleet_template() -> dict[str, Any]:
    stack = bare_stack()
    cluster = _cluster(stack)
    vpc = cluster.cluster.vpc
    GpuSpill(
        stack, "Spill", cluster=cluster.cluster, subnets=vpc.private_subnets,
        spec=SpillSpec(environment="team", fleet="chat", max_gpu_replicas=2),
    )  # fmt: skip
    lb = elbv2.ApplicationLoadBalancer(stack, "Alb", vpc=vpc, vpc_subnets=ec2.SubnetSelection(subnets=vpc.private_subnets))
    tg = elbv2.ApplicationTargetGroup(stack, "Tg", vpc=vpc, port=8080, target_type=elbv2.TargetType.IP)
    lb.add_listener("Http", port=80, default_target_groups=[tg])
    FleetScaling(
        stack, "Scaling", cluster=cluster.cluster, fleet="chat", target_group=tg, load_balancer=lb,
        requests_per_replica_per_minute=100, min_replicas=1, max_replicas=4,
    )  # fmt: skip
    return template(stack)


def _documents(data: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for r in resources(data, "Custom::AWSCDK-EKS-KubernetesResource").values():
        manifest = r["Properties"]["Manifest"]
        if isinstance(manifest, str):
            out += json.loads(manifest)
    return out


def test_every_access_entry_group_is_bound_by_a_rendered_binding(fleet_template: dict[str, Any]) -> None:
    """CreateAccessEntry, kubernetesGroups: "Amazon EKS doesn't confirm that the value for name exists in any bindings
    on your cluster." An entry with a group and no access policy grants nothing unless the kit binds that group."""
    entries = [
        e["Properties"]
        for e in resources(fleet_template, "AWS::EKS::AccessEntry").values()
        if e["Properties"].get("KubernetesGroups")
    ]
    assert entries
    bound = {
        s["name"]
        for d in _documents(fleet_template)
        if d["kind"] in ("RoleBinding", "ClusterRoleBinding")
        for s in d["subjects"]
        if s["kind"] == "Group"
    }
    for entry in entries:
        assert "AccessPolicies" not in entry
        assert set(entry["KubernetesGroups"]) <= bound
        assert not any(g.startswith("system:") for g in entry["KubernetesGroups"])


def test_the_rate_schedule_of_one_minute_is_singular(fleet_template: dict[str, Any]) -> None:
    """EventBridge schedule expressions: "If the value is equal to 1, then the unit must be singular."""
    rates = [r["Properties"]["ScheduleExpression"] for r in resources(fleet_template, "AWS::Events::Rule").values()]
    assert "rate(1 minute)" in rates and "rate(1 minutes)" not in rates


def test_the_scaling_trigger_queries_a_dimension_set_the_alb_publishes(fleet_template: dict[str, Any]) -> None:
    """CloudWatch concepts: "CloudWatch treats each unique combination of dimensions as a separate metric"; the ALB
    publishes RequestCount for LoadBalancer; TargetGroup, LoadBalancer; ... (ELB User Guide, "CloudWatch metrics for
    your Application Load Balancer"). A trigger on any other combination reads no data and never scales."""
    scaled = [d for d in _documents_with_tokens(fleet_template) if d.get("kind") == "ScaledObject"]
    assert scaled
    for so in scaled:
        for trig in so["spec"]["triggers"]:
            meta = trig["metadata"]
            published = EKS["alb_metrics"]["published"][meta["metricName"]]
            assert meta["dimensionName"].split(";") in published["dimensions"]
            assert meta["metricStat"] == published["statistic"]


def _documents_with_tokens(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Manifests whose JSON carries tokens (Fn::Join): tokens replaced by a placeholder."""
    out: list[dict[str, Any]] = []
    for r in resources(data, "Custom::AWSCDK-EKS-KubernetesResource").values():
        manifest = r["Properties"]["Manifest"]
        if isinstance(manifest, dict) and "Fn::Join" in manifest:
            manifest = "".join(p if isinstance(p, str) else "TOKEN" for p in manifest["Fn::Join"][1])
        out += json.loads(manifest)
    return out


def test_the_autoscaler_changes_only_groups_eks_tags_for_this_cluster(synth: Synth) -> None:
    """EKS User Guide, "Simplify node lifecycle with managed node groups": "Amazon EKS tags managed node group resources
    so that they are configured to use the Kubernetes Cluster Autoscaler." (k8s.io/cluster-autoscaler/<cluster>): a
    discovering autoscaler changes only groups with this cluster's tag; the kit's names its groups and its role may
    change only those (the autoscaler's minimal policy)."""
    found = 0
    for stack, data in synth.templates.items():
        clusters = [c["Properties"]["Name"] for c in data["Resources"].values() if c["Type"] == "AWS::EKS::Cluster"]
        charts = [
            c
            for c in data["Resources"].values()
            if c["Type"] == "Custom::AWSCDK-EKS-HelmChart" and c["Properties"]["Chart"] == "cluster-autoscaler"
        ]
        if not charts:
            continue
        [name] = clusters
        values = json.dumps(charts[0]["Properties"]["Values"])
        named = "autoscalingGroups" in values
        assert named or f'\\"clusterName\\":\\"{name}\\"' in values, stack
        statements = [
            s
            for k, p in data["Resources"].items()
            if p["Type"] == "AWS::IAM::Policy" and "AutoscalerRole" in k
            for s in p["Properties"]["PolicyDocument"]["Statement"]
        ]
        writes = [s for s in statements if "autoscaling:SetDesiredCapacity" in s["Action"]]
        assert writes
        for s in writes:
            if named:  # the groups it resizes, by name (the README's minimal policy)
                resources = s["Resource"] if isinstance(s["Resource"], list) else [s["Resource"]]
                assert all("autoScalingGroupName/" in json.dumps(r) for r in resources) and "Condition" not in s
            else:
                assert s["Condition"] == {"Null": {f"autoscaling:ResourceTag/k8s.io/cluster-autoscaler/{name}": "false"}}
        found += 1
    assert found, "no synthesized environment installs Cluster Autoscaler (tests/fixtures/user_environments/team.yaml should)"


def test_pod_identity_roles_trust_the_pod_identity_service_with_tag_session(synth: Synth) -> None:
    """EKS User Guide, "Learn how EKS Pod Identity grants pods access to AWS services": the role's trust policy lets
    the service principal pods.eks.amazonaws.com call sts:AssumeRole and sts:TagSession."""
    found = 0
    for data in synth.templates.values():
        roles = {k: r for k, r in data["Resources"].items() if r["Type"] == "AWS::IAM::Role"}
        for assoc in (r for r in data["Resources"].values() if r["Type"] == "AWS::EKS::PodIdentityAssociation"):
            role = roles[assoc["Properties"]["RoleArn"]["Fn::GetAtt"][0]]
            actions = {
                a
                for s in role["Properties"]["AssumeRolePolicyDocument"]["Statement"]
                if s["Principal"].get("Service") == "pods.eks.amazonaws.com"
                for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
            }
            assert {"sts:AssumeRole", "sts:TagSession"} <= actions, assoc["Properties"]["ServiceAccount"]
            found += 1
    assert found
