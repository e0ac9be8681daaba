"""Scaling on demand offline: Cluster Autoscaler pinned per Kubernetes minor (the catalog rule), its values against the
pinned chart, serving pods it never evicts, KEDA's ScaledObject on a metric the ALB publishes, validated against the
ScaledObject/TriggerAuthentication CRD schemas checked in with their chart version, and both constructs on a bare
stack with an eks_v2 cluster and a target group of their own."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2

from neuronkit import catalog
from neuronkit.constructs.eks import AutoscalingSpec, ClusterAutoscaling, FleetScaling, ScaledGroup
from neuronkit.kubernetes import autoscaler, keda
from neuronkit.kubernetes.scheduling import system_node_selector
from tests.templates import bare_stack, resources, template
from tests.unit.test_eks import _cluster

EKS = catalog.eks_facts()
FIXTURES = Path(__file__).parents[1] / "fixtures"
CRDS = Path(__file__).parents[2] / str(EKS["keda"]["crds"]["schemas"])
TG = "targetgroup/chat/0123456789abcdef"
LB = "app/team-chat/fedcba9876543210"


def _paths(doc: Any, prefix: str = "") -> set[str]:
    out: set[str] = set()
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.add(prefix + k)
            out |= _paths(v, prefix + k + ".")
    return out


def _unknown(emitted: Any, chart: Any, prefix: str = "") -> set[str]:
    """Keys the kit emits that the chart's values.yaml lacks; below a map the chart leaves empty ({}: nodeSelector,
    extraArgs ...) any key goes."""
    out: set[str] = set()
    if not isinstance(emitted, dict) or chart == {}:
        return out
    for k, v in emitted.items():
        if not isinstance(chart, dict) or k not in chart:
            out.add(prefix + k)
        else:
            out |= _unknown(v, chart[k], prefix + k + ".")
    return out


def _fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((FIXTURES / "charts" / name).read_text())
    return data


# ---------------------------------------------------------------------------------------------------- the catalog rule
def test_every_pinned_kubernetes_minor_has_an_autoscaler_of_the_same_minor() -> None:
    versions = [str(EKS["kubernetes"]["version"]), *map(str, EKS["kubernetes"]["previous"])]
    assert versions
    for v in versions:
        assert autoscaler.version_problems(v) == [], v
        assert autoscaler.pin(v)["image_tag"].lstrip("v").startswith(v + ".")
    assert set(autoscaler.facts()["by_kubernetes"]) == set(versions)


def test_the_rule_refuses_a_missing_row_and_a_mismatched_minor(monkeypatch: pytest.MonkeyPatch) -> None:
    assert "pins no Cluster Autoscaler for Kubernetes 1.29" in autoscaler.version_problems("1.29")[0]
    bad = {**autoscaler.facts(), "by_kubernetes": {"1.35": {"chart_version": "9.59.0", "image_tag": "v1.34.5"}}}
    monkeypatch.setattr(autoscaler, "facts", lambda: bad)
    assert "v1.34.5 for Kubernetes 1.35 is not of minor 1.35" in autoscaler.version_problems("1.35")[0]


def test_validate_refuses_a_kubernetes_version_without_an_autoscaler(monkeypatch: pytest.MonkeyPatch) -> None:
    from neuronkit.config.eks import eks_autoscaling_problems

    assert eks_autoscaling_problems(str(EKS["kubernetes"]["version"]), dra=False) == []
    monkeypatch.setattr(autoscaler, "facts", lambda: {**EKS["node_autoscaler"], "by_kubernetes": {}})
    [(key, why)] = eks_autoscaling_problems(str(EKS["kubernetes"]["version"]), dra=False)
    assert key == "eks.kubernetes_version" and "Cluster Autoscaler" in why


def test_validate_refuses_neuron_dra_the_autoscaler_cannot_drive() -> None:
    from neuronkit.config.eks import eks_autoscaling_problems

    assert autoscaler.drives_dra() is False
    [(key, why)] = eks_autoscaling_problems(str(EKS["kubernetes"]["version"]), dra=True)
    assert key == "eks.neuron.dra" and "Cluster Autoscaler" in why and "remove eks.neuron.dra" in why


# ------------------------------------------------------------------------------------------------ Cluster Autoscaler
def test_autoscaler_values_exist_in_the_pinned_chart_and_run_on_the_system_group() -> None:
    fixture = _fixture("cluster-autoscaler-9.59.0.values.yaml")
    version = str(EKS["kubernetes"]["version"])
    assert fixture["chart_version"] == autoscaler.pin(version)["chart_version"]
    values = autoscaler.values(cluster_name="team", region="us-east-1", kubernetes_version=version)
    flags = values["extraArgs"]  # free-form: checked against the autoscaler's flag list below
    chart_values = {**fixture["values"], "extraArgs": {}}
    assert "rbac.serviceAccount.name" in _paths(values) and _unknown(values, chart_values) == set()
    assert _unknown({"rbac": {"serviceAcount": {}}}, fixture["values"]) == {"rbac.serviceAcount"}  # a typo is caught
    assert flags and set(flags) - set(fixture["flags"]) == set()
    assert values["nodeSelector"] == system_node_selector()
    assert values["image"]["tag"] == autoscaler.pin(version)["image_tag"] and values["autoDiscovery"] == {"clusterName": "team"}


def test_serving_pods_are_never_evicted_by_a_scale_down() -> None:
    assert autoscaler.serving_pod_annotations() == {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}


def test_an_empty_neuron_group_tells_the_autoscaler_its_devices() -> None:
    tags = autoscaler.node_group_template_tags(neuron_devices=catalog.instance_types()["inf2.48xlarge"].neuron_devices)
    assert tags == {"k8s.io/cluster-autoscaler/node-template/resources/aws.amazon.com/neuron": "12"}
    assert autoscaler.node_group_template_tags() == {}


# -------------------------------------------------------------------------------------------------------------- KEDA
def _crd(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((CRDS / f"{name}.json").read_text())
    assert data["chart_version"] == EKS["keda"]["version"] and data["group"] == EKS["keda"]["crds"]["group"]
    return data


def _validate(doc: dict[str, Any]) -> None:
    crd = _crd({"ScaledObject": "scaledobjects", "TriggerAuthentication": "triggerauthentications"}[doc["kind"]])
    assert doc["apiVersion"] == f"{crd['group']}/{crd['version']}" and doc["kind"] == crd["kind"]
    jsonschema.validate(doc, crd["schema"])


def _scaled(**kw: Any) -> dict[str, Any]:
    args = {
        "fleet": "chat", "region": "us-east-1", "load_balancer_full_name": LB, "target_group_full_name": TG,
        "requests_per_replica_per_minute": 100, "min_replicas": 1, "max_replicas": 8, **kw,
    }  # fmt: skip
    return keda.scaled_object(**args)


def test_the_scaled_object_and_its_authentication_validate_against_the_pinned_crds() -> None:
    _validate(_scaled())
    _validate(keda.trigger_authentication("chat"))


def test_the_crd_check_catches_a_bad_scaled_object() -> None:
    bad = _scaled()
    bad["spec"]["scaleTargetRef"] = {"kind": "Deployment"}  # no name
    with pytest.raises(jsonschema.ValidationError):
        _validate(bad)
    bad = _scaled()
    bad["spec"]["triggers"][0]["metadata"]["targetMetricValue"] = 100  # metadata values are strings
    with pytest.raises(jsonschema.ValidationError):
        _validate(bad)


def test_the_trigger_reads_a_metric_the_alb_publishes_with_dimensions_it_accepts() -> None:
    published = EKS["alb_metrics"]["published"]
    meta = _scaled()["spec"]["triggers"][0]["metadata"]
    assert meta["namespace"] == "AWS/ApplicationELB" == EKS["alb_metrics"]["namespace"]
    assert meta["metricName"] in published
    names = meta["dimensionName"].split(";")
    assert names in published[meta["metricName"]]["dimensions"]
    assert dict(zip(names, meta["dimensionValue"].split(";"), strict=True)) == {"TargetGroup": TG, "LoadBalancer": LB}
    assert meta["metricStat"] == published[meta["metricName"]]["statistic"]


def test_the_trigger_keeps_the_scaler_period_rules_and_scales_the_neuron_deployment() -> None:
    so = _scaled()
    meta = so["spec"]["triggers"][0]["metadata"]
    period, window = int(meta["metricStatPeriod"]), int(meta["metricCollectionTime"])
    assert period % 60 == 0 and window % period == 0 and window > 0  # the aws-cloudwatch scaler refuses others
    assert so["spec"]["scaleTargetRef"]["name"] == "chat-neuron" and so["metadata"]["namespace"] == "neuronkit-serving"
    assert so["spec"]["triggers"][0]["metricType"] == "AverageValue" and meta["targetMetricValue"] == "100"
    assert so["spec"]["triggers"][0]["authenticationRef"] == {"name": keda.trigger_authentication("chat")["metadata"]["name"]}
    with pytest.raises(ValueError, match="replicas"):
        _scaled(min_replicas=9)


def _keda_query_window(now: dt.datetime, period: int, offset: int, collection: int) -> tuple[dt.datetime, dt.datetime]:
    """KEDA's aws-cloudwatch scaler (kedacore/keda pkg/scalers/aws_cloudwatch_scaler.go, computeQueryWindow): the end
    is now minus metricEndTimeOffset truncated to metricStatPeriod; the start metricCollectionTime before it."""
    shifted = now - dt.timedelta(seconds=offset)
    end = dt.datetime.fromtimestamp(shifted.timestamp() // period * period, dt.UTC)
    return end - dt.timedelta(seconds=collection), end


def test_the_trigger_reads_complete_minutes_only() -> None:
    """The scaler takes the newest datapoint of its window (ScanBy TimestampDescending, Values[0]). Without an offset
    that is the minute that just ended, which the ALB may not have published in full; the kit's offset of one period
    makes the newest datapoint a minute that ended at least a period before the query, at any second of the minute."""
    meta = _scaled()["spec"]["triggers"][0]["metadata"]
    period, offset = int(meta["metricStatPeriod"]), int(meta["metricEndTimeOffset"])
    collection = int(meta["metricCollectionTime"])
    for second in (0, 1, 30, 59):
        now = dt.datetime(2026, 11, 28, 12, 0, second, tzinfo=dt.UTC)
        start, end = _keda_query_window(now, period, offset, collection)
        newest_ends = end  # the newest datapoint covers [end - period, end)
        assert (now - newest_ends).total_seconds() >= period, (second, end)
        assert start < end - dt.timedelta(seconds=period)  # more than one datapoint in the window
        # Offset 0 (KEDA's default) would read a minute that ended under a period ago.
        _, naive_end = _keda_query_window(now, period, 0, collection)
        assert (now - naive_end).total_seconds() < period


def test_keda_values_exist_in_the_pinned_chart() -> None:
    fixture = _fixture("keda-2.20.2.values.yaml")
    assert fixture["chart_version"] == EKS["keda"]["version"]
    values = keda.chart_values()
    assert "serviceAccount.operator.name" in _paths(values) and _unknown(values, fixture["values"]) == set()


# -------------------------------------------------------------------------------------------------------- constructs
@pytest.fixture(scope="module")
def scaling_template() -> dict[str, Any]:
    stack = bare_stack()
    cluster = _cluster(stack)
    cw = ClusterAutoscaling(stack, "Autoscaling", cluster=cluster, spec=AutoscalingSpec(environment="team"))
    vpc = cluster.cluster.vpc
    lb = elbv2.ApplicationLoadBalancer(
        stack, "Alb", vpc=vpc, internet_facing=False, vpc_subnets=ec2.SubnetSelection(subnets=vpc.private_subnets)
    )
    tg = elbv2.ApplicationTargetGroup(stack, "Tg", vpc=vpc, port=8080, target_type=elbv2.TargetType.IP)
    lb.add_listener("Http", port=80, default_target_groups=[tg])
    assert cw.keda_chart is not None
    FleetScaling(
        stack, "ChatScaling", cluster=cluster.cluster, fleet="chat", target_group=tg, load_balancer=lb,
        requests_per_replica_per_minute=100, min_replicas=1, max_replicas=4, after=[cw.keda_chart],
    )  # fmt: skip
    return template(stack)


def test_both_charts_are_pinned_and_get_their_roles_by_pod_identity(scaling_template: dict[str, Any]) -> None:
    charts = {
        c["Properties"]["Chart"]: c["Properties"] for c in resources(scaling_template, "Custom::AWSCDK-EKS-HelmChart").values()
    }
    version = str(EKS["kubernetes"]["version"])
    assert charts["cluster-autoscaler"]["Version"] == autoscaler.pin(version)["chart_version"]
    assert charts["keda"]["Version"] == EKS["keda"]["version"]
    rendered = json.dumps(charts["cluster-autoscaler"]["Values"])
    assert '\\"neuronkit.io/pool\\":\\"system\\"' in rendered and autoscaler.pin(version)["image_tag"] in rendered
    links = {
        (p["Properties"]["Namespace"], p["Properties"]["ServiceAccount"])
        for p in resources(scaling_template, "AWS::EKS::PodIdentityAssociation").values()
    }
    assert ("kube-system", "cluster-autoscaler") in links and ("keda", "keda-operator") in links


def _policy(data: dict[str, Any], prefix: str) -> dict[str, Any]:
    found = [p["Properties"]["PolicyDocument"] for k, p in resources(data, "AWS::IAM::Policy").items() if k.startswith(prefix)]
    assert len(found) == 1
    return {s["Sid"]: s for s in found[0]["Statement"]}


def test_the_roles_have_the_documented_least_policies(scaling_template: dict[str, Any]) -> None:
    keda_policy = _policy(scaling_template, "AutoscalingKedaRole")
    assert {sid: s["Action"] for sid, s in keda_policy.items()} == {"ReadMetrics": "cloudwatch:GetMetricData"}
    ca = _policy(scaling_template, "AutoscalingAutoscalerRole")
    assert sorted(ca["Discover"]["Action"]) == sorted(EKS["node_autoscaler"]["read_actions"])
    write = ca["ScaleOwnGroups"]
    assert sorted(write["Action"]) == ["autoscaling:SetDesiredCapacity", "autoscaling:TerminateInstanceInAutoScalingGroup"]
    assert write["Condition"] == {"Null": {"autoscaling:ResourceTag/k8s.io/cluster-autoscaler/team": "false"}}


def test_the_fleet_scaled_object_names_its_own_target_group_and_waits_for_keda(scaling_template: dict[str, Any]) -> None:
    [(lid, manifest)] = [
        (k, m)
        for k, m in resources(scaling_template, "Custom::AWSCDK-EKS-KubernetesResource").items()
        if k.startswith("ChatScaling")
    ]
    text = json.dumps(manifest["Properties"]["Manifest"])
    assert "ScaledObject" in text and "TriggerAuthentication" in text
    assert "TargetGroupFullName" in text and "LoadBalancerFullName" in text
    keda_chart = next(
        k for k, c in resources(scaling_template, "Custom::AWSCDK-EKS-HelmChart").items() if c["Properties"]["Chart"] == "keda"
    )
    assert keda_chart in manifest.get("DependsOn", [])


def test_a_cluster_version_without_an_autoscaler_pin_stops_synth(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(autoscaler, "facts", lambda: {**EKS["node_autoscaler"], "by_kubernetes": {}})
    stack = bare_stack()
    with pytest.raises(ValueError, match="node_autoscaler: the catalog pins no Cluster Autoscaler"):
        ClusterAutoscaling(stack, "A", cluster=_cluster(stack), spec=AutoscalingSpec(environment="team"))


def test_named_groups_are_the_only_ones_the_autoscaler_resizes_or_may_change() -> None:
    """The autoscaler README's "Minimal IAM Permissions Policy": --nodes=min:max:name per group and writes on those
    groups' ARNs only (the kit passes its inference fleets' node groups; training groups keep their sizes)."""
    stack = bare_stack()
    cluster = _cluster(stack)
    spec = AutoscalingSpec(
        environment="team", keda=False,
        groups=[ScaledGroup(name="eks-chat-1a2b", min_size=1, max_size=4), ScaledGroup(name="eks-chat-gpu-3c4d", min_size=0, max_size=4)],
    )  # fmt: skip
    built = ClusterAutoscaling(stack, "Autoscaling", cluster=cluster, spec=spec)
    assert built.keda_chart is None
    data = template(stack)
    ca = _policy(data, "AutoscalingAutoscalerRole")["ScaleOwnGroups"]
    assert "Condition" not in ca
    names = [json.dumps(r) for r in ca["Resource"]]
    assert (
        len(names) == 2
        and "autoScalingGroupName/eks-chat-1a2b" in names[0]
        and "autoScalingGroupName/eks-chat-gpu-3c4d" in names[1]
    )
    values = autoscaler.values(
        cluster_name="team", region="us-east-1", kubernetes_version="1.35", groups=[("eks-chat-1a2b", 1, 4)]
    )
    assert (
        values["autoscalingGroups"] == [{"name": "eks-chat-1a2b", "minSize": 1, "maxSize": 4}] and "autoDiscovery" not in values
    )
    assert _unknown(values, {**_fixture("cluster-autoscaler-9.59.0.values.yaml")["values"], "extraArgs": {}}) == set()
    with pytest.raises(ValueError, match="sizes"):
        ScaledGroup(name="g", min_size=3, max_size=2)


def test_the_keda_namespace_is_the_kits_labelled_before_the_chart(scaling_template: dict[str, Any]) -> None:
    """kubernetes.io, "Pod Security Admission": "Pod Security admission places requirements on a Pod's Security
    Context ... based on the three levels defined by the Pod Security Standards", read from the namespace's
    ``pod-security.kubernetes.io/<MODE>`` labels; Helm's ``--create-namespace`` makes a namespace with none. KEDA
    v2.20.2's pods are secure by default (runAsNonRoot, RuntimeDefault seccomp, drop ALL), so its namespace enforces
    the catalog's "restricted"."""
    from tests.chart_namespaces import assert_chart_namespaces_are_labelled

    assert EKS["keda"]["pod_security"] == "restricted"
    assert_chart_namespaces_are_labelled(scaling_template, {str(EKS["keda"]["namespace"]): "restricted"})
