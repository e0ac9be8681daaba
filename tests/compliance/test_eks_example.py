"""examples/environments/eks.yaml end to end offline: it validates, synthesizes with cdk-nag (a finding fails the
synth), cfn-lint finds nothing in its templates, and each stack matches its snapshot. The example is not under
environments/, so the session-wide synth (tests/conftest.py) does not include it: this module synthesizes it once."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from syrupy.assertion import SnapshotAssertion
from syrupy.extensions.json import JSONSnapshotExtension

from neuronkit import catalog
from neuronkit.config import load_environment
from tests.conftest import ROOT
from tests.snapshots.test_snapshots import normalise
from tests.templates import group_name

FILE = ROOT / "examples" / "environments" / "eks.yaml"
EKS = catalog.eks_facts()


@pytest.fixture(scope="module")
def eks_synth(eks_example: tuple[Path, dict[str, dict[str, Any]]]) -> tuple[Path, dict[str, dict[str, Any]]]:
    return eks_example  # one synthesis per test run, with cdk-nag (tests/conftest.py)


def test_the_example_builds_network_storage_and_eks_stacks(eks_synth: tuple[Path, dict[str, Any]]) -> None:
    _, templates = eks_synth
    assert sorted(templates) == ["eks-eks", "eks-network", "eks-storage"]
    types = [r["Type"] for r in templates["eks-eks"]["Resources"].values()]
    assert types.count("AWS::EKS::Cluster") == 1
    # pretrain (trn2 on a Capacity Block), its p5 GPU pool, chat (inf2) and chat's GPU fallback.
    groups = {group_name(r): r["Properties"] for r in templates["eks-eks"]["Resources"].values()
              if r["Type"] == "AWS::EKS::Nodegroup"}  # fmt: skip
    assert sorted(groups) == ["eks-chat", "eks-chat-gpu", "eks-chat-trn2", "eks-pretrain", "eks-pretrain-gpu", "eks-system"]
    assert groups["eks-pretrain"]["CapacityType"] == "CAPACITY_BLOCK"
    images = {v["ami_type"] for k, v in EKS["node_images"].items() if k != "source"}
    assert {g["AmiType"] for g in groups.values()} == images | {EKS["system_nodes"]["ami_type"]}


def test_cfn_lint_is_clean_on_the_example(eks_synth: tuple[Path, dict[str, Any]]) -> None:
    outdir, templates = eks_synth
    paths = sorted(str(p) for p in outdir.glob("*.template.json"))
    assert len(paths) == len(templates) == 3
    region = load_environment(FILE).region
    cfn_lint = str(Path(sys.executable).parent / "cfn-lint")
    result = subprocess.run(
        [cfn_lint, "--format", "parseable", "--regions", region, "--", *paths], capture_output=True, text=True
    )
    assert result.returncode == 0 and result.stdout.strip() == "", result.stdout + result.stderr


@pytest.mark.parametrize("stack", ["eks-network", "eks-storage", "eks-eks"])
def test_example_stack_snapshot(eks_synth: tuple[Path, dict[str, Any]], snapshot: SnapshotAssertion, stack: str) -> None:
    assert normalise(eks_synth[1][stack]) == snapshot.use_extension(JSONSnapshotExtension)


def test_the_example_carries_the_neuron_chart_the_efa_plugin_and_the_lustre_volume(
    eks_synth: tuple[Path, dict[str, Any]],
) -> None:
    """Part 2: pinned charts from the catalog, node recovery on, the Lustre PV/PVC, no removed resource, nothing floats."""
    import json

    import kubernetes_validate

    from neuronkit.kubernetes import neuron_chart

    _, templates = eks_synth
    res = templates["eks-eks"]["Resources"]
    charts = {r["Properties"]["Chart"]: r["Properties"] for r in res.values() if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"}
    assert sorted(charts) == [
        "aws-efa-k8s-device-plugin", "aws-load-balancer-controller", "cluster-autoscaler", "jobset", "keda", "kueue",
        "neuron-helm-chart", "nvidia-device-plugin",
    ]  # fmt: skip
    assert charts["nvidia-device-plugin"]["Version"] == EKS["charts"]["nvidia_device_plugin"]["version"]
    gpu = json.loads(charts["nvidia-device-plugin"]["Values"])["affinity"]["nodeAffinity"]
    terms = gpu["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert [e["values"] for t in terms for e in t["matchExpressions"]] == [["chat-gpu", "pretrain-gpu"]]
    assert charts["neuron-helm-chart"]["Version"] in {str(v) for v in EKS["charts"]["neuron"]["by_release"].values()}
    assert charts["aws-efa-k8s-device-plugin"]["Version"] == EKS["charts"]["efa_device_plugin"]["version"]
    values = json.loads(charts["neuron-helm-chart"]["Values"])
    assert values["npd"]["nodeRecovery"]["enabled"] is True and values["devicePlugin"]["enabled"] is True
    manifests = {k: r["Properties"]["Manifest"] for k, r in res.items() if r["Type"] == "Custom::AWSCDK-EKS-KubernetesResource"}
    # The Lustre volume (tokens of the storage stack) and the node problem detector's namespace (plain JSON).
    (lustre,) = [m for k, m in manifests.items() if k.startswith("WorkloadsLustreVolume")]
    (namespace,) = [json.loads(m) for k, m in manifests.items() if k.startswith("WorkloadsNpdNamespace")]
    assert [d["metadata"]["name"] for d in namespace] == [EKS["node_problem_detector"]["namespace"]]
    for doc in namespace:
        kubernetes_validate.validate(doc, str(EKS["kubernetes"]["version"]), strict=True)
    # The manifest names the storage stack's file system through an import: validate it with the token replaced.
    text = json.dumps(lustre["Fn::Join"][1])
    parts = lustre["Fn::Join"][1]
    rendered = "".join(p if isinstance(p, str) else "fs-0123456789abcdef0" for p in parts)
    docs = json.loads(rendered)
    assert [d["kind"] for d in docs] == ["PersistentVolume", "PersistentVolumeClaim"]
    for doc in docs:
        kubernetes_validate.validate(doc, str(EKS["kubernetes"]["version"]), strict=True)
    assert neuron_chart.REMOVED_RESOURCE not in json.dumps(templates["eks-eks"])
    # What the kit applies to the cluster names no floating tag (IMDS paths elsewhere in user data say /latest/).
    applied = json.dumps([c["Values"] for c in charts.values()]) + text
    assert "latest" not in applied.lower()


def test_eks_nodes_publish_metrics_and_logs_like_auto_scaling_pools(eks_synth: tuple[Path, dict[str, Any]]) -> None:
    """Every node group runs observability.sh before its boot check: the CloudWatch agent and the neuron-monitor
    publisher, with the pool's log groups and the metric namespace of the ASG path (same script, same dimensions)."""
    import json

    from neuronkit.constructs.observability import DEFAULT_NAMESPACE, log_group_names

    _, templates = eks_synth
    res = templates["eks-eks"]["Resources"]
    # The pools' node groups (the system node group runs add-ons, no accelerator to watch).
    groups = [group_name(r) for r in res.values() if r["Type"] == "AWS::EKS::Nodegroup" and "neuronkit" in r.get("Metadata", {})]
    # Named groups only: the kit's functions (the spill controller) keep CloudFormation-named groups, like the rebalancer.
    log_groups = json.dumps([r["Properties"].get("LogGroupName") for r in res.values() if r["Type"] == "AWS::Logs::LogGroup"])
    assert len(groups) == 5
    for group in groups:
        pool = group.removeprefix("eks-")
        assert all(f'"{name}"' in log_groups for name in log_group_names("eks", pool).values()), pool
    templates_ = [
        r for r in res.values() if r["Type"] == "AWS::EC2::LaunchTemplate" and "UserData" in r["Properties"]["LaunchTemplateData"]
    ]
    assert len(templates_) == 5
    for lt in templates_:
        text = json.dumps(lt["Properties"]["LaunchTemplateData"]["UserData"])
        assert "observability.sh" in text and f"METRICS_NAMESPACE='{DEFAULT_NAMESPACE}'" in text
        assert text.index("observability.sh") < text.index("eks-node.sh")
        assert len(text) < 16 * 1024  # EC2's user data cap (the JSON-escaped text is longer than the real one)
    policies = json.dumps([r["Properties"] for r in res.values() if r["Type"] == "AWS::IAM::Policy"])
    assert policies.count(f'"cloudwatch:namespace": "{DEFAULT_NAMESPACE}"') == 5


def test_summary_lists_the_cluster_node_groups_charts_and_versions(eks_synth: tuple[Path, dict[str, Any]]) -> None:
    from neuronkit.kubernetes import neuron_chart
    from neuronkit.reports.summary import summarize

    outdir, templates = eks_synth
    text = summarize(outdir)
    section = text[text.index("#### Kubernetes (EKS)") :]
    assert f"Kubernetes {EKS['kubernetes']['version']}, private endpoint" in section
    # The summary prints EKS's names (ENV-POOL-<digest>): what `aws eks list-nodegroups` shows.
    groups = [
        str(r["Properties"]["NodegroupName"]) for r in templates["eks-eks"]["Resources"].values()
        if r["Type"] == "AWS::EKS::Nodegroup"
    ]  # fmt: skip
    assert len(groups) == 6 and all(f"| {g} |" in section for g in groups)  # the five pools and the system group
    # Each Neuron group's own image and its build date (issue 46): two releases, two images.
    assert "| chat-trn2 | node group | eks-eks | trn2.48xlarge |" in text and "1.35.6-20260714, built 2026-07-14" in text
    assert "AL2023_x86_64_NEURON 1.35.6-20260625, built 2026-06-25" in text
    chart = neuron_chart.chart_version(["2.28.1"])
    assert f"| Helm chart | neuron-helm-chart | {chart} |" in section and "device plugin; node recovery on" in section
    assert f"| Helm chart | aws-efa-k8s-device-plugin | {EKS['charts']['efa_device_plugin']['version']} |" in section
    assert f"| Helm chart | nvidia-device-plugin | {EKS['charts']['nvidia_device_plugin']['version']} |" in section
    assert f"| EKS add-on | aws-fsx-csi-driver | {EKS['storage_addons']['aws-fsx-csi-driver']['version']} |" in section


def test_the_dashboard_and_alarms_watch_the_neuron_node_groups(eks_synth: tuple[Path, dict[str, Any]]) -> None:
    _, templates = eks_synth
    res = templates["eks-eks"]["Resources"]
    alarms = {r["Properties"]["AlarmName"] for r in res.values() if r["Type"] == "AWS::CloudWatch::Alarm"}
    neuron_groups = [
        group_name(r).removeprefix("eks-") for r in res.values()
        if r["Type"] == "AWS::EKS::Nodegroup" and r["Properties"]["AmiType"].endswith("NEURON")
    ]  # fmt: skip
    assert sorted(neuron_groups) == ["chat", "chat-trn2", "pretrain"]
    for pool in neuron_groups:
        assert {f"eks-{pool}-ecc-uncorrected", f"eks-{pool}-execution-errors"} <= alarms
    assert "eks-lustre-free-capacity" in alarms
    # Training node groups left running idle alarm as on the Auto Scaling path (the fleet's groups do not).
    assert {"eks-pretrain-idle", "eks-pretrain-gpu-idle"} <= alarms and not {
        a for a in alarms if a.startswith("eks-chat") and a.endswith("-idle")
    }
    assert sum(r["Type"] == "AWS::CloudWatch::Dashboard" for r in res.values()) == 1


def test_node_instances_volumes_and_interfaces_carry_the_environment_tags(eks_synth: tuple[Path, dict[str, Any]]) -> None:
    """The budget and the cost-allocation reports find EKS nodes by these tags; tags on AWS::EKS::Nodegroup do
    not reach its instances (EKS API reference, Nodegroup tags), so each launch template carries them."""
    _, templates = eks_synth
    res = templates["eks-eks"]["Resources"]
    lts = [r for r in res.values() if r["Type"] == "AWS::EC2::LaunchTemplate"]
    assert len(lts) == 6  # the five pools' and the system node group's
    for lt in lts:
        specs = {
            s["ResourceType"]: {t["Key"]: t["Value"] for t in s["Tags"]}
            for s in lt["Properties"]["LaunchTemplateData"]["TagSpecifications"]
        }
        assert set(specs) == {"instance", "volume", "network-interface"}
        for tags in specs.values():
            assert tags["neuronkit:environment"] == "eks" and tags["cost-center"] == "ml-platform"
            assert tags["team"] == "foundation-models" and tags["neuronkit:pool"]


def test_the_budget_and_the_capacity_block_watch_notify_the_alarm_topic(eks_synth: tuple[Path, dict[str, Any]]) -> None:
    import json

    _, templates = eks_synth
    res = templates["eks-eks"]["Resources"]
    topics = [lid for lid, r in res.items() if r["Type"] == "AWS::SNS::Topic"]
    assert len(topics) == 1
    (budget,) = [r["Properties"] for r in res.values() if r["Type"] == "AWS::Budgets::Budget"]
    assert budget["Budget"]["BudgetLimit"] == {"Amount": 250000, "Unit": "USD"}
    assert budget["Budget"]["CostFilters"] == {"TagKeyValue": ["user:neuronkit:environment$eks"]}
    for n in budget["NotificationsWithSubscribers"]:
        assert n["Subscribers"] == [{"SubscriptionType": "SNS", "Address": {"Ref": topics[0]}}]
    policy = json.dumps([r["Properties"] for r in res.values() if r["Type"] == "AWS::SNS::TopicPolicy"])
    assert '"Service": "budgets.amazonaws.com"' in policy
    # The block: EC2's delivered and expiration-warning events for its reservation, the expiry alarm, two notices.
    rules = [r["Properties"] for r in res.values() if r["Type"] == "AWS::Events::Rule"]
    on_block = [r for r in rules if "cr-0a1b2c3d4e5f60718" in json.dumps(r.get("EventPattern", {}))]
    assert len(on_block) == 2
    notices = [r for r in rules if r.get("ScheduleExpression", "").startswith("cron(") and "2027" in r["ScheduleExpression"]]
    # 24 and 2 hours before the end, 2027-01-18T11:30Z.
    assert sorted(r["ScheduleExpression"] for r in notices) == ["cron(30 11 17 1 ? 2027)", "cron(30 9 18 1 ? 2027)"], notices
    alarms = {r["Properties"]["AlarmName"] for r in res.values() if r["Type"] == "AWS::CloudWatch::Alarm"}
    assert any("capacity-block" in a and "pretrain" in a for a in alarms), alarms


def test_reports_read_the_node_groups_as_the_files_pools(eks_synth: tuple[Path, dict[str, Any]]) -> None:
    """`cost --cdk-out`, `cost --diff`, `review` and `summary` read pools from cdk.out: the EKS node groups carry the
    pool Metadata, so a synth prices the same pools as the file does (the fallback types a node group of their own)."""
    from neuronkit.reports.pools import pools_from_cdk_out, pools_from_environment
    from neuronkit.reports.summary import summarize

    outdir, _ = eks_synth
    fields = (
        "pool",
        "role",
        "instance_types",
        "min_size",
        "desired_size",
        "max_size",
        "capacity",
        "block_fee",
        "block_hours",
        "fallback_for",
    )
    synthesized = sorted(tuple(getattr(p, f) for f in fields) for p in pools_from_cdk_out(outdir))
    planned = sorted(tuple(getattr(p, f) for f in fields) for p in pools_from_environment(load_environment(FILE)))
    assert synthesized == planned
    assert [p[0] for p in synthesized] == ["chat", "chat-gpu", "chat-trn2", "pretrain", "pretrain-gpu"]
    assert ("pretrain", "training") == synthesized[3][:2] and synthesized[3][7] == 188160 and synthesized[3][8] == 336
    assert synthesized[1][0] == "chat-gpu" and synthesized[1][9] == "chat"  # the fleet whose GPU fallback it is (cost)
    text = summarize(outdir)
    assert "5 compute pool(s)" in text and "| eks-eks | pretrain | training | trn2.48xlarge | 0/0/16 |" in text


def test_the_example_installs_the_pinned_job_api_and_admission(eks_synth: tuple[Path, dict[str, Any]]) -> None:
    """Part 4 (docs/training-on-eks.md): JobSet and Kueue at their catalog pins, a queue per Trainium training pool,
    the pool's role by pod identity in the training namespace, and the Capacity Block's checkpoint signal."""
    import json

    from neuronkit import config
    from neuronkit.kubernetes import scheduling

    _, templates = eks_synth
    res = templates["eks-eks"]["Resources"]
    pins = EKS["training_jobs"]
    charts = {r["Properties"]["Chart"]: r["Properties"] for r in res.values() if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"}
    for key in ("jobset", "kueue"):
        assert charts[key]["Version"] == str(pins[key]["version"]) and charts[key]["Namespace"] == pins[key]["namespace"]
    env = config.load_environment(FILE)
    trainium = [c.name for c in env.training if c.instance_type.startswith("trn")]
    assert trainium
    queues = json.loads(next(r for k, r in res.items() if k.startswith("TrainingJobsQueues"))["Properties"]["Manifest"])
    assert {q["metadata"]["name"] for q in queues if q["kind"] == "LocalQueue"} == set(trainium)
    pools = json.dumps(next(r for k, r in res.items() if k.startswith("TrainingJobsPools"))["Properties"]["Manifest"])
    for name in trainium:
        assert f"{name}-training" in pools
    assert "CronJob" in pools
    assoc = [r["Properties"] for r in res.values() if r["Type"] == "AWS::EKS::PodIdentityAssociation"]
    assert {a["Namespace"] for a in assoc} >= {scheduling.TRAINING_NAMESPACE}


_DEPLOY_TIME = {"AWS::AccountId": "333333333333", "AWS::Region": "us-east-2", "AWS::URLSuffix": "amazonaws.com"}


def _deploy_time_value(part: dict[str, Any]) -> str:
    """A plausible deploy-time value for a join's non-string part: pseudo parameters, the target group's ARN, or the
    storage stack's file system id (the Lustre volume)."""
    import json

    if part.get("Ref") in _DEPLOY_TIME:
        return _DEPLOY_TIME[part["Ref"]]
    if "Targets" in json.dumps(part):
        return "arn:aws:elasticloadbalancing:us-east-2:333333333333:targetgroup/eks-chat/0123456789abcdef"
    return "fs-0123456789abcdef0"


def _rendered_manifests(res: dict[str, Any]) -> list[dict[str, Any]]:
    """Every applied manifest document, with deploy-time values filled in."""
    import json

    docs: list[dict[str, Any]] = []
    for r in res.values():
        if r["Type"] != "Custom::AWSCDK-EKS-KubernetesResource":
            continue
        m = r["Properties"]["Manifest"]
        if isinstance(m, dict):
            m = "".join(p if isinstance(p, str) else _deploy_time_value(p) for p in m["Fn::Join"][1])
        docs.extend(json.loads(m))
    return docs


def test_the_example_serves_its_chat_fleet_behind_the_kits_alb(eks_synth: tuple[Path, dict[str, Any]]) -> None:
    """Issue 38: an internal ALB with an IP target group, the pinned load balancer controller, the fleet's Service,
    one TargetGroupBinding and both Deployments; every manifest validates against Kubernetes and the checked-in CRD."""
    from tests import manifests

    _, templates = eks_synth
    res = templates["eks-eks"]["Resources"]
    albs = [r for r in res.values() if r["Type"] == "AWS::ElasticLoadBalancingV2::LoadBalancer"]
    assert len(albs) == 2 and all(a["Properties"]["Scheme"] == "internal" for a in albs)  # chat and chat-trn2
    groups = [r for r in res.values() if r["Type"] == "AWS::ElasticLoadBalancingV2::TargetGroup"]
    assert [g["Properties"]["TargetType"] for g in groups] == ["ip", "ip"]
    charts = {r["Properties"]["Chart"]: r["Properties"] for r in res.values() if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"}
    assert charts["aws-load-balancer-controller"]["Version"] == str(EKS["load_balancer_controller"]["version"])
    # Helm waits for the controller: its TargetGroupBinding webhooks (failurePolicy Fail) must answer first.
    assert charts["aws-load-balancer-controller"]["Wait"] is True
    docs = _rendered_manifests(res)
    kinds = [(d["kind"], d["metadata"]["name"]) for d in docs]
    assert ("Deployment", "chat-neuron") in kinds and ("Deployment", "chat-gpu") in kinds
    # The binding is named after its target group (a replaced group comes with a new binding: issue 47, fix 2).
    fronts = sorted(k for k in kinds if k[0] in ("Service", "TargetGroupBinding"))
    assert [k for k in fronts if k[0] == "Service"] == [("Service", "chat"), ("Service", "chat-trn2")]
    bindings = sorted(k[1] for k in fronts if k[0] == "TargetGroupBinding")
    assert len(bindings) == 2 and bindings[0].startswith("chat-") and bindings[1].startswith("chat-trn2-"), bindings
    for d in docs:
        manifests.validate(d)
        # Scripts a container runs by path are mounted executable (a ConfigMap volume defaults to 0644).
        template = d.get("spec", {}).get("template", {}).get("spec", {})
        for volume in template.get("volumes", []):
            if d["metadata"].get("namespace") == "neuronkit-serving" and "configMap" in volume:
                assert volume["configMap"].get("defaultMode") == 0o555, (
                    d["metadata"]["name"],
                    volume,
                )  # core kinds against Kubernetes, custom resources against their checked-in schemas
    assert {d["kind"] for d in docs} >= {"ScaledObject", "TargetGroupBinding", "LocalQueue", "ClusterQueue", "Role"}


def test_the_served_fleets_node_groups_hold_image_weights_and_compiled_artifacts(
    eks_synth: tuple[Path, dict[str, Any]],
) -> None:
    """The cold-start budget's disk side: each served node group's root volume is its profile's (image, weights and,
    on Neuron, the compiled artifacts), as on the Auto Scaling path."""
    from neuronkit.catalog import serving
    from neuronkit.config.inference import model_spec

    _, templates = eks_synth
    res = templates["eks-eks"]["Resources"]
    env = load_environment(FILE)
    chat = next(f for f in env.inference if f.name == "chat")
    model = model_spec(chat)
    assert model is not None
    sizes = {
        lid: r["Properties"]["LaunchTemplateData"]["BlockDeviceMappings"][0]["Ebs"]["VolumeSize"]
        for lid, r in res.items()
        if r["Type"] == "AWS::EC2::LaunchTemplate" and "chat" in lid.lower() and "trn2" not in lid.lower()
    }
    want = {serving.root_volume_gib(model, t) for t in [*chat.neuron_types, *chat.fallback_types]}
    assert len(sizes) == 2 and set(sizes.values()) == want


def test_summary_cost_and_alarms_cover_the_served_fleet(eks_synth: tuple[Path, dict[str, Any]]) -> None:
    from neuronkit.reports.cost import fixed_costs
    from neuronkit.reports.summary import summarize

    outdir, templates = eks_synth
    section = summarize(outdir)
    # KEDA owns the Neuron replicas (no count in the manifest); the GPU Deployment starts at zero for the spill controller.
    assert "| chat-neuron | scaler |" in section and "| chat-gpu | 0 |" in section and "nxdi-vllm" in section
    # The GPU Deployment is created from a stand-in and kept by its template patch: the summary shows the patched image.
    gpu_row = next(line for line in section.splitlines() if line.startswith("| chat-gpu |") and "node group" not in line)
    assert "pause" not in gpu_row and "vllm" in gpu_row, gpu_row
    assert "ALB of chat" in {c.item for c in fixed_costs(load_environment(FILE))}
    res = templates["eks-eks"]["Resources"]
    alarms = {r["Properties"]["AlarmName"] for r in res.values() if r["Type"] == "AWS::CloudWatch::Alarm"}
    assert {"eks-chat-p99-latency", "eks-chat-5xx-rate"} <= alarms


def test_the_example_scales_on_demand_with_the_pinned_autoscaler_and_keda(eks_synth: tuple[Path, dict[str, Any]]) -> None:
    """Cluster Autoscaler at the pin of the cluster's minor and the KEDA operator (the example serves a fleet), each on
    the system node group with its pod identity; the empty-able Neuron group tells the autoscaler its devices."""
    import json

    from neuronkit.kubernetes import autoscaler

    _, templates = eks_synth
    res = templates["eks-eks"]["Resources"]
    charts = {r["Properties"]["Chart"]: r["Properties"] for r in res.values() if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"}
    version = str(EKS["kubernetes"]["version"])
    assert charts["cluster-autoscaler"]["Version"] == autoscaler.pin(version)["chart_version"]
    assert charts["keda"]["Version"] == EKS["keda"]["version"]
    links = {
        (r["Properties"]["Namespace"], r["Properties"]["ServiceAccount"])
        for r in res.values()
        if r["Type"] == "AWS::EKS::PodIdentityAssociation"
    }
    assert {("kube-system", "cluster-autoscaler"), ("keda", "keda-operator")} <= links
    # It resizes the fleet's two node groups only (chat, chat-gpu); the training groups keep their sizes.
    parts = charts["cluster-autoscaler"]["Values"]["Fn::Join"][1]
    rendered = "".join(p if isinstance(p, str) else f"<{p['Fn::GetAtt'][0]}>" for p in parts)
    scaled = json.loads(rendered)["autoscalingGroups"]
    assert len(scaled) == 3 and all(g["name"].startswith("<NodeGroupchat") for g in scaled), scaled
    fleet, trn2 = load_environment(FILE).inference
    # Each group's maximum keeps the serving headroom above the fleet's (issue 49): a compile Job and a surge pod.
    from neuronkit.kubernetes.serving import headroom_nodes

    neuron, gpu = headroom_nodes("neuron"), headroom_nodes("gpu")
    assert sorted((g["minSize"], g["maxSize"]) for g in scaled) == sorted(
        [(0, fleet.max_size + gpu), (fleet.min_size, fleet.max_size + neuron), (trn2.min_size, trn2.max_size + neuron)]
    )
    groups = {group_name(r): r["Properties"] for r in res.values() if r["Type"] == "AWS::EKS::Nodegroup"}
    key = "k8s.io/cluster-autoscaler/node-template/resources/aws.amazon.com/neuron"
    assert groups["eks-chat"]["Tags"][key] == str(
        catalog.get(next(f for f in load_environment(FILE).inference if f.name == "chat").neuron_types[0]).neuron_devices
    )
    assert key not in groups["eks-chat-gpu"]["Tags"]


def _groups(templates: dict[str, Any]) -> dict[str, dict[str, Any]]:
    res = templates["eks-eks"]["Resources"]
    return {group_name(r): r for r in res.values() if r["Type"] == "AWS::EKS::Nodegroup"}


def test_the_example_has_an_on_demand_untainted_system_node_group_in_two_azs(eks_synth: tuple[Path, dict[str, Any]]) -> None:
    from neuronkit.kubernetes import scheduling

    _, templates = eks_synth
    system = _groups(templates)["eks-system"]["Properties"]
    assert system["CapacityType"] == "ON_DEMAND" and "Taints" not in system
    assert system["Labels"] == scheduling.system_node_selector()
    assert system["InstanceTypes"] == [EKS["system_nodes"]["instance_type"]]
    assert system["ScalingConfig"]["MinSize"] >= 2
    # One subnet per AZ ID of the file (the network stack's private subnets, exported).
    subnets = {json.dumps(s) for s in system["Subnets"]}
    assert len(subnets) == len(load_environment(FILE).network.az_ids) == 2


def test_every_accelerated_node_group_is_tainted_with_its_accelerator(eks_synth: tuple[Path, dict[str, Any]]) -> None:
    from neuronkit.kubernetes import autoscaler, scheduling

    _, templates = eks_synth
    groups = {n: g for n, g in _groups(templates).items() if "neuronkit" in g.get("Metadata", {})}
    pools = {n: g["Properties"] for n, g in groups.items()}
    assert len(pools) == 5
    for name, props in pools.items():
        first_type = groups[name]["Metadata"]["neuronkit"]["instance_types"][0]
        accelerator = "neuron" if props["AmiType"].endswith("NEURON") else "gpu"
        taint = scheduling.taint_of(accelerator)
        assert {"Key": taint.key, "Effect": "NO_SCHEDULE"} in props["Taints"], name
        # The pool label, and on GPU groups Cluster Autoscaler's GPU label (docs/eks.md, "Accelerator nodes still
        # initialising"); nothing else.
        assert props["Labels"] == {
            **scheduling.pool_node_selector(name.removeprefix("eks-")),
            **autoscaler.accelerator_labels(first_type),
        }, name


def test_every_kit_deployment_selects_the_system_node_group(eks_synth: tuple[Path, dict[str, Any]]) -> None:
    from neuronkit.kubernetes import placement, scheduling

    _, templates = eks_synth
    deployments = {
        w.name: w
        for w in placement.workloads(templates["eks-eks"])
        if w.kind == "Deployment" and w.namespace not in placement.WORKLOAD_NAMESPACES  # serving pods go on their pools
    }
    # CoreDNS and the FSx CSI controller through add-on configuration values; the Neuron chart's controllers (off
    # today) through its values, so that turning one on keeps it off the accelerators.
    assert {"coredns", "aws-fsx-csi-driver", "scheduler", "my-scheduler", "neuron-ultraserver-operator"} <= set(deployments)
    # And every controller chart of the later parts: serving, scaling and training jobs.
    assert {"aws-load-balancer-controller", "cluster-autoscaler", "keda-operator", "jobset-controller-manager",
            "kueue-controller-manager"} <= set(deployments)  # fmt: skip
    for w in deployments.values():
        assert w.node_selector == scheduling.system_node_selector(), (w.name, w.source)
    assert placement.placement_problems(templates["eks-eks"]) == []


def test_only_daemonsets_that_must_run_on_accelerators_tolerate_their_taints(eks_synth: tuple[Path, dict[str, Any]]) -> None:
    from neuronkit.kubernetes import placement, scheduling

    _, templates = eks_synth
    daemonsets = {w.name: w for w in placement.workloads(templates["eks-eks"]) if w.kind == "DaemonSet" and w.enabled}
    assert {"neuron-device-plugin", "aws-efa-k8s-device-plugin"} <= set(daemonsets)
    neuron, gpu = scheduling.NEURON_TAINT, scheduling.GPU_TAINT
    # The device plugin on the Neuron groups; the EFA plugin on trn2 (Neuron) and p5 (GPU), the example's EFA groups.
    assert any(placement.tolerates(t, neuron) for t in daemonsets["neuron-device-plugin"].tolerations)
    assert not any(placement.tolerates(t, gpu) for t in daemonsets["neuron-device-plugin"].tolerations)
    efa = daemonsets["aws-efa-k8s-device-plugin"].tolerations
    assert any(placement.tolerates(t, neuron) for t in efa) and any(placement.tolerates(t, gpu) for t in efa)
    # The NVIDIA plugin on the GPU groups (p5, g6e) only; GPU feature discovery and NFD's worker are off.
    nvidia = daemonsets["nvidia-device-plugin"].tolerations
    assert any(placement.tolerates(t, gpu) for t in nvidia) and not any(placement.tolerates(t, neuron) for t in nvidia)
    assert not {"nvidia-device-plugin-gpu-feature-discovery", "nfd-worker"} & set(daemonsets)
    for w in daemonsets.values():
        if w.name not in placement.MUST_RUN_ON_ACCELERATORS:
            assert not any(placement.tolerates(t, x) for t in w.tolerations for x in (neuron, gpu)), w.name


def _dynamic_parts(value: Any) -> int:
    """How many values of a Fn::Base64 / Fn::Join expression resolve only at deploy (Ref, GetAtt, imports)."""
    if isinstance(value, str):
        return 0
    if isinstance(value, dict) and "Fn::Base64" in value:
        return _dynamic_parts(value["Fn::Base64"])
    if isinstance(value, dict) and "Fn::Join" in value:
        return sum(_dynamic_parts(p) for p in value["Fn::Join"][1])
    return 1


def test_every_pools_user_data_leaves_eks_room_under_the_16_kb_limit(eks_synth: tuple[Path, dict[str, Any]]) -> None:
    """EC2: user data "is limited to 16 KB" in raw form (EC2 User Guide, "Run commands when you launch an EC2 instance
    with user data input"), and EKS merges its own NodeConfig part (cluster endpoint, CA bundle ...) into a managed
    node group's user data: the kit's part of the largest pool, each deploy-time value counted at 128 bytes, stays
    under 16 KB less the catalog's reserve for EKS's part."""
    from neuronkit.constructs.eks.nodegroup import user_data_room
    from neuronkit.constructs.launch_template import USER_DATA_LIMIT_BYTES
    from tests.sandbox import resolve

    _, templates = eks_synth
    sizes = {}
    for lid, r in templates["eks-eks"]["Resources"].items():
        data = r["Properties"].get("LaunchTemplateData", {}) if r["Type"] == "AWS::EC2::LaunchTemplate" else {}
        if "UserData" in data and "neuronkit:pool" in json.dumps(data.get("TagSpecifications", [])):
            raw = data["UserData"]
            sizes[lid] = len(resolve(raw).encode()) + 128 * _dynamic_parts(raw)
    assert len(sizes) >= 4, sizes  # pretrain, pretrain-gpu, chat and chat-gpu (per AZ)
    reserve = int(EKS["user_data"]["merged_part_reserve_bytes"])
    largest = max(sizes.values())
    assert largest <= USER_DATA_LIMIT_BYTES - reserve, (largest, sizes)
    assert user_data_room() <= USER_DATA_LIMIT_BYTES - reserve - 1024  # the guard keeps a margin for tokens too
    print(f"largest EKS pool user data: {largest} bytes of {USER_DATA_LIMIT_BYTES - reserve} (sizes {sorted(sizes.values())})")


def test_the_example_spills_chat_to_its_gpu_deployment_and_scales_it_on_requests(
    eks_synth: tuple[Path, dict[str, Any]],
) -> None:
    """Issue 39 on the example: the spill controller of `chat` runs every minute in the VPC, with an access entry whose
    Kubernetes group a Role binds to the fleet's Deployments only (no access policy), its ENI rights, and a KEDA
    ScaledObject on the fleet's Neuron Deployment."""
    import json

    from neuronkit.kubernetes import scheduling

    _, templates = eks_synth
    res = templates["eks-eks"]["Resources"]
    # "Spillchat" and not chat-trn2's function (every served fleet has one since issue 49, for its alarms).
    ours = [k for k in res if k.startswith("Spillchat") and not k.startswith("Spillchattrn2")]
    functions = {k: res[k] for k in ours if res[k]["Type"] == "AWS::Lambda::Function"}
    ((lid, function),) = functions.items()
    assert "VpcConfig" in function["Properties"]
    env = function["Properties"]["Environment"]["Variables"]
    assert env["GPU_DEPLOYMENT"] == scheduling.gpu_deployment_name("chat")
    assert env["NEURON_DEPLOYMENT"] == scheduling.neuron_deployment_name("chat")
    rules = [
        r
        for r in res.values()
        if r["Type"] == "AWS::Events::Rule" and "rate(1 minute)" == r["Properties"].get("ScheduleExpression")
    ]
    assert any(lid in json.dumps(r["Properties"]["Targets"]) for r in rules)
    (entry,) = [res[k]["Properties"] for k in ours if res[k]["Type"] == "AWS::EKS::AccessEntry"]
    assert entry["KubernetesGroups"] and not entry.get("AccessPolicies")
    role = res[function["Properties"]["Role"]["Fn::GetAtt"][0]]["Properties"]
    assert "AWSLambdaVPCAccessExecutionRole" in json.dumps(role["ManagedPolicyArns"])
    rbac = [
        d for k in ours if res[k]["Type"] == "Custom::AWSCDK-EKS-KubernetesResource"
        for d in json.loads(res[k]["Properties"]["Manifest"])
    ]  # fmt: skip
    (role_doc,) = [d for d in rbac if d["kind"] == "Role"]
    writes = [r for r in role_doc["rules"] if set(r["verbs"]) & {"patch", "update", "create", "delete"}]
    assert writes == [
        {"apiGroups": ["apps"], "resources": ["deployments/scale"], "resourceNames": ["chat-gpu"], "verbs": ["patch"]}
    ]
    scaled = [r for k, r in res.items() if k.startswith("ScalingchatScaledObject")]
    assert scaled and scheduling.neuron_deployment_name("chat") in json.dumps(scaled[0]["Properties"]["Manifest"])
    # The file's requests_per_target (30 in the example, issue 49) is the trigger's target per Neuron replica, and the
    # trigger reads complete minutes only (metricEndTimeOffset one period).
    (doc,) = [d for d in _rendered_manifests({"so": scaled[0]}) if d["kind"] == "ScaledObject"]
    meta = doc["spec"]["triggers"][0]["metadata"]
    fleet = load_environment(FILE).inference[0]
    assert fleet.requests_per_target == 30 and meta["targetMetricValue"] == "30"
    assert int(meta["metricEndTimeOffset"]) >= int(meta["metricStatPeriod"])


# --- Headroom (issue 49): at the fleet's maximum, the compile Job and a rollout's surge pod still find a node ---------
def _place_whole_node_pods(nodes: int, pods: list[str]) -> tuple[list[str], list[str]]:
    """Whole-node pods (each requests every device of the type, so one per node) onto ``nodes`` nodes in order: the
    placed and the pending ones."""
    return pods[:nodes], pods[nodes:]


def _fleet_at_its_maximum(templates: dict[str, Any], fleet: str) -> tuple[int, list[str]]:
    """From the synthesized template: the fleet's Neuron node group's maximum (what Cluster Autoscaler may grow it to),
    and the whole-node pods that want a node when the fleet serves at KEDA's maximum while a new key rolls out: every
    serving replica, the Deployment's surge pods, and the key's compile Job."""
    import json

    from neuronkit import catalog as cat

    res = templates["eks-eks"]["Resources"]
    parts = next(
        r
        for r in res.values()
        if r["Type"] == "Custom::AWSCDK-EKS-HelmChart" and r["Properties"]["Chart"] == "cluster-autoscaler"
    )
    rendered = "".join(
        p if isinstance(p, str) else f"<{p['Fn::GetAtt'][0]}>" for p in parts["Properties"]["Values"]["Fn::Join"][1]
    )
    groups = {g["name"]: g["maxSize"] for g in json.loads(rendered)["autoscalingGroups"]}
    # The group's Auto Scaling group name, read by the custom resource of NeuronNodeGroup "NodeGroup<pool>".
    prefix = f"<NodeGroup{fleet.replace('-', '')}AutoScalingGroupName"
    (neuron_max,) = [m for n, m in groups.items() if n.startswith(prefix)]
    docs = _rendered_manifests(res)
    (scaled,) = [d for d in docs if d["kind"] == "ScaledObject" and d["metadata"]["labels"].get("neuronkit.io/fleet") == fleet]
    (deployment,) = [
        d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == scaled["spec"]["scaleTargetRef"]["name"]
    ]
    jobs = [d for d in docs if d["kind"] == "Job" and d["metadata"]["labels"].get("neuronkit.io/fleet") == fleet]
    devices = str(
        cat.get(deployment["spec"]["template"]["spec"]["nodeSelector"]["node.kubernetes.io/instance-type"]).neuron_devices
    )
    for pod in [deployment["spec"]["template"]["spec"], *(j["spec"]["template"]["spec"] for j in jobs)]:
        requests = [
            c["resources"]["limits"].get("aws.amazon.com/neuron")
            for c in [*pod.get("initContainers", []), *pod["containers"]]
            if "resources" in c
        ]
        assert devices in requests  # a whole-node pod: every Neuron device of the type
    surge = int(deployment["spec"]["strategy"]["rollingUpdate"]["maxSurge"])
    pods = [f"serving-{i}" for i in range(int(scaled["spec"]["maxReplicaCount"]))]
    pods += [f"surge-{i}" for i in range(surge)] + [j["metadata"]["name"] for j in jobs]
    return neuron_max, pods


def test_at_the_fleets_maximum_the_compile_job_and_a_surge_pod_are_placed(eks_synth: tuple[Path, dict[str, Any]]) -> None:
    """Recorded state: the chat fleet serves at KEDA's maxReplicaCount on whole-node inf2 pods and a new key rolls out
    (one compile Job, maxSurge pods). The Neuron node group's maximum (as Cluster Autoscaler's autoscalingGroups carry
    it) places every one of them; without the headroom the compile Job and the surge pod stay Pending: the rollout never
    progresses and the Job fails at its deadline."""
    _, templates = eks_synth
    nodes, pods = _fleet_at_its_maximum(templates, "chat")
    assert nodes is not None and any(p.startswith("chat-compile-") for p in pods) and any(p.startswith("surge-") for p in pods)
    placed, pending = _place_whole_node_pods(nodes, pods)
    assert pending == [], f"{len(pods)} whole-node pods, {nodes} nodes: {pending} stay Pending"
    # The same state with the node group's maximum at the serving maximum (no headroom) leaves both Pending.
    serving = sum(1 for p in pods if p.startswith("serving-"))
    _, starved = _place_whole_node_pods(serving, pods)
    assert any(p.startswith("chat-compile-") for p in starved) and any(p.startswith("surge-") for p in starved)


def test_preflight_knows_the_kits_helm_releases_by_their_names_and_namespaces(eks_synth: tuple[Path, dict[str, Any]]) -> None:
    """`neuronkit preflight` on a user's cluster (neuronkit/kubernetes/cluster_api.py) tells the kit's own release of a
    component from the user's by Helm's release name and namespace: they must be what the kit installs."""
    from neuronkit.kubernetes import cluster_api

    _, templates = eks_synth
    charts = [r["Properties"] for t in templates.values() for r in t["Resources"].values()
              if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"]  # fmt: skip
    kit = {cluster_api.kit_release(c)[0]: cluster_api.kit_release(c) for c in cluster_api.facts()}
    found = [(c["Release"], c["Namespace"]) for c in charts if c["Chart"] in kit]
    assert found and all(kit[name] == (name, namespace) for name, namespace in found), found
    assert {c["Chart"] for c in charts if c["Chart"] in kit} == {name for name, _ in found}
