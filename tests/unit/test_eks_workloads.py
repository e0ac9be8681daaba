"""EKS part 2 offline: the Neuron chart's values (device plugin or DRA, node recovery on), the DRA refusals, the EFA
plugin and Lustre volume, pinned versions, pod identity roles, and every manifest against the Kubernetes schemas."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from neuronkit import catalog
from neuronkit.catalog import releases
from neuronkit.catalog.releases import version_key
from neuronkit.config.base import ConfigError
from neuronkit.config.loader import parse_environment
from neuronkit.constructs.eks import LustreVolume, NeuronWorkloads, WorkloadsSpec
from neuronkit.kubernetes import efa_chart, lustre, neuron_chart, nvidia_chart, scheduling
from neuronkit.kubernetes.neuron_chart import NeuronChartOptions, Taint, dra_problems
from tests.templates import bare_stack, one, resources, template
from tests.unit.test_eks import _cluster

EKS = catalog.eks_facts()
FIXTURES = Path(__file__).parents[1] / "fixtures" / "charts"
EXAMPLE = Path(__file__).parents[2] / "examples" / "environments" / "eks.yaml"
K8S = str(EKS["kubernetes"]["version"])


def _paths(doc: Any, prefix: str = "") -> set[str]:
    """Every key path of a mapping (lists are leaves): {"npd.nodeRecovery.enabled", ...}."""
    out: set[str] = set()
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.add(prefix + k)
            out |= _paths(v, prefix + k + ".")
    return out


def _chart_fixture(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((FIXTURES / name).read_text())
    return data


def test_values_turn_node_recovery_on_and_run_the_device_plugin_by_default() -> None:
    values = neuron_chart.values(NeuronChartOptions())
    assert values["npd"]["enabled"] is True and values["npd"]["nodeRecovery"]["enabled"] is True
    assert values["devicePlugin"]["enabled"] is True and values["draDriver"]["enabled"] is False
    assert values["scheduler"]["enabled"] is False  # never the second scheduler
    assert values["npd"]["serviceAccount"]["name"] == EKS["node_problem_detector"]["service_account"]


def test_dra_swaps_the_device_plugin_for_the_dra_driver() -> None:
    values = neuron_chart.values(NeuronChartOptions(dra=True))
    assert values["devicePlugin"] == {"enabled": False}
    assert values["draDriver"]["enabled"] is True and values["draDriver"]["tolerations"]
    assert values["scheduler"]["enabled"] is False


def test_tolerations_keep_the_chart_defaults_and_add_the_node_groups_taints() -> None:
    taints = [Taint("neuronkit.io/dedicated", value="training"), Taint("aws.amazon.com/neuron")]
    tol = neuron_chart.values(NeuronChartOptions(taints=taints))["devicePlugin"]["tolerations"]
    chart = _chart_fixture("neuron-helm-chart-1.9.0.values.yaml")["values"]["devicePlugin"]["tolerations"]
    assert {"key": "CriticalAddonsOnly", "operator": "Exists"} in tol and chart[0] in tol and chart[1] in tol
    assert {"key": "neuronkit.io/dedicated", "operator": "Equal", "value": "training", "effect": "NoSchedule"} in tol
    assert len(tol) == 3  # the neuron taint is the chart's own toleration: not repeated


@pytest.mark.parametrize("options", [NeuronChartOptions(), NeuronChartOptions(dra=True, node_recovery=False)])
def test_every_neuron_values_key_exists_in_the_pinned_chart(options: NeuronChartOptions) -> None:
    """The chart ships no values.schema.json (catalog charts.neuron.values_schema: false): the kit's keys are checked
    against the key tree of the pinned chart's values.yaml instead, checked in with its version and source."""
    assert EKS["charts"]["neuron"]["values_schema"] is False
    fixture = _chart_fixture("neuron-helm-chart-1.9.0.values.yaml")
    assert fixture["chart_version"] in {str(v) for v in EKS["charts"]["neuron"]["by_release"].values()}
    emitted = _paths(neuron_chart.values(options))
    assert "npd.nodeRecovery.enabled" in emitted
    assert emitted - _paths(fixture["values"]) == set()


def test_efa_values_keys_exist_in_the_pinned_chart_and_it_runs_on_the_kits_efa_types() -> None:
    fixture = _chart_fixture("aws-efa-k8s-device-plugin-v0.5.30.values.yaml")
    assert EKS["charts"]["efa_device_plugin"]["values_schema"] is False
    assert fixture["chart_version"] == EKS["charts"]["efa_device_plugin"]["version"]
    assert _paths(efa_chart.values([Taint("x")])) - _paths(fixture["values"]) == set()
    efa_types = [t for t in ("trn2.48xlarge", "trn1.32xlarge", "p5.48xlarge") if catalog.get(t).efa_supported]
    assert efa_types and set(efa_types) <= set(fixture["values"]["supportedInstanceLabels"]["values"])


def test_the_chart_is_the_newest_pool_releases_pin() -> None:
    rows = {str(k): str(v) for k, v in EKS["charts"]["neuron"]["by_release"].items()}
    newest = max(rows, key=version_key)
    assert neuron_chart.chart_version([f"{newest}.0"]) == rows[newest]
    assert neuron_chart.chart_version(["2.28.1"]) == rows[min((k for k in rows if version_key(k) >= (2, 28)), key=version_key)]
    assert neuron_chart.chart_version(["2.28.1", f"{newest}.1"]) == rows[newest]
    assert all(not v.lower().endswith("latest") and version_key(v) for v in rows.values())


DRA_OK = {"kubernetes_version": "1.35", "node_release_version": "1.35.0-20260129", "neuron_releases": ["2.28.1"]}


@pytest.mark.parametrize(
    ("change", "phrase"),
    [
        ({"kubernetes_version": "1.33"}, "Kubernetes 1.34 or later"),
        ({"kubernetes_version": "1.34", "node_release_version": "1.34.1-20250915"}, "node images 1.34.2 or later"),
        ({"neuron_releases": ["2.27.0"]}, "Neuron 2.28 or later"),
        ({"device_plugin": True}, "beside the Neuron device plugin"),
        ({"scheduler_extension": True}, "scheduler extension"),
        ({"auto_mode": True}, "Auto Mode"),
        ({"bottlerocket": True}, "Bottlerocket"),
        ({"karpenter": True}, "Karpenter"),
    ],
)
def test_dra_is_refused_where_it_cannot_work(change: dict[str, Any], phrase: str) -> None:
    assert dra_problems(**DRA_OK) == []
    problems = dra_problems(**{**DRA_OK, **change})
    assert len(problems) == 1 and phrase in problems[0]


def _example(**neuron: Any) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    data["eks"]["neuron"] = neuron
    return data


def test_validate_refuses_dra_beside_the_device_plugin_one_line() -> None:
    data = _example(dra=True, device_plugin=True)
    data["eks"]["components"] = {"cluster_autoscaler": "off"}  # only the device plugin's line, not the autoscaler's
    with pytest.raises(ConfigError) as err:
        parse_environment(data, "eks.yaml")
    lines = [p for p in err.value.problems if "eks.neuron.dra" in p]
    assert len(lines) == 1 and "device plugin" in lines[0] and "\n" not in lines[0]


def test_validate_accepts_dra_on_the_example_cluster() -> None:
    data = _example(dra=True)
    data["eks"]["components"] = {
        "cluster_autoscaler": "off"
    }  # Cluster Autoscaler cannot drive DRA claims (test_eks_autoscaling.py)
    env = parse_environment(data, "eks.yaml")
    assert env.eks is not None and env.eks.neuron.dra and not env.eks.neuron.uses_device_plugin


def test_validate_refuses_dra_with_the_node_autoscaler_one_line() -> None:
    with pytest.raises(ConfigError) as err:
        parse_environment(_example(dra=True), "eks.yaml")
    lines = [p for p in err.value.problems if "eks.neuron.dra" in p]
    assert len(lines) == 1 and "Cluster Autoscaler" in lines[0] and "eks.components.cluster_autoscaler: off" in lines[0]


def _workloads(**spec: Any) -> dict[str, Any]:
    stack = bare_stack()
    cluster = _cluster(stack)
    volume = LustreVolume(file_system_id="fs-0123456789abcdef0", dns_name="fs.example", mount_name="abcdef", size_gib=2400)
    NeuronWorkloads(stack, "Workloads", cluster=cluster, spec=WorkloadsSpec(environment="team", lustre=volume, **spec))
    return template(stack)


def test_charts_and_addon_are_pinned_from_the_catalog_and_nothing_floats() -> None:
    data = _workloads(neuron_releases=["2.28.1"])
    charts = {c["Properties"]["Chart"]: c["Properties"] for c in resources(data, "Custom::AWSCDK-EKS-HelmChart").values()}
    assert sorted(charts) == ["aws-efa-k8s-device-plugin", "neuron-helm-chart"]
    neuron, efa = charts["neuron-helm-chart"], charts["aws-efa-k8s-device-plugin"]
    assert neuron["Repository"] == "oci://public.ecr.aws/neuron/neuron-helm-chart"
    assert neuron["Version"] == neuron_chart.chart_version(["2.28.1"])
    assert (
        efa["Repository"] == "https://aws.github.io/eks-charts"
        and efa["Version"] == EKS["charts"]["efa_device_plugin"]["version"]
    )
    values = json.loads(neuron["Values"])
    assert values["npd"]["nodeRecovery"]["enabled"] is True and values["devicePlugin"]["enabled"] is True
    addon = [
        a["Properties"]
        for a in resources(data, "AWS::EKS::Addon").values()
        if a["Properties"]["AddonName"] == "aws-fsx-csi-driver"
    ]
    assert addon and addon[0]["AddonVersion"] == EKS["storage_addons"]["aws-fsx-csi-driver"]["version"]
    # The launch templates' LatestVersionNumber attribute is CloudFormation's, not a floating image or chart.
    text = json.dumps(data).replace("LatestVersionNumber", "")
    assert neuron_chart.REMOVED_RESOURCE not in text and "latest" not in text.lower()


def test_pod_identity_roles_for_node_recovery_and_the_fsx_controller() -> None:
    data = _workloads(neuron_releases=["2.31.0"])
    assocs = {
        a["Properties"]["ServiceAccount"]: a["Properties"] for a in resources(data, "AWS::EKS::PodIdentityAssociation").values()
    }
    npd, fsx = EKS["node_problem_detector"], EKS["storage_addons"]["aws-fsx-csi-driver"]
    assert assocs[npd["service_account"]]["Namespace"] == npd["namespace"]
    assert assocs[fsx["service_account"]]["Namespace"] == fsx["namespace"]
    roles = resources(data, "AWS::IAM::Role")
    pod_roles = [r for r in roles.values() if "pods.eks.amazonaws.com" in json.dumps(r["Properties"]["AssumeRolePolicyDocument"])]
    assert len(pod_roles) == 2
    policies = json.dumps([p["Properties"] for p in resources(data, "AWS::IAM::Policy").values()])
    for action in npd["actions"]:
        assert action in policies
    assert '"cloudwatch:namespace": "NeuronHealthCheck"' in policies
    assert "fsx:CreateFileSystem" not in policies  # static volumes only


def test_without_lustre_there_is_no_csi_driver_or_volume() -> None:
    stack = bare_stack()
    NeuronWorkloads(stack, "W", cluster=_cluster(stack), spec=WorkloadsSpec(environment="team", neuron_releases=[], efa=False))
    data = template(stack)
    manifests = [
        json.loads(r["Properties"]["Manifest"]) for r in resources(data, "Custom::AWSCDK-EKS-KubernetesResource").values()
    ]
    assert [[d["kind"] for d in m] for m in manifests] == [["Namespace"]]  # only the NPD namespace: no PV or claim
    assert not [a for a in resources(data, "AWS::EKS::Addon").values() if a["Properties"]["AddonName"] == "aws-fsx-csi-driver"]
    assert one(data, "Custom::AWSCDK-EKS-HelmChart")["Properties"]["Chart"] == "neuron-helm-chart"


def _manifests() -> list[dict[str, Any]]:
    return [
        lustre.persistent_volume(environment="team", file_system_id="fs-0123456789abcdef0", dns_name="fs.example",
                                 mount_name="abcdef", size_gib=2400),
        lustre.persistent_volume_claim(environment="team", size_gib=2400),
        lustre.smoke_pod(image=str(releases.release("2.28.1").container("pytorch-inference"))),
    ]  # fmt: skip


@pytest.mark.parametrize("index", range(3))
def test_every_manifest_validates_against_the_kubernetes_schemas(index: int) -> None:
    """kubernetes-validate bundles the Kubernetes JSON schemas (no network): strict mode refuses unknown fields."""
    manifest = _manifests()[index]
    kubernetes_validate.validate(manifest, K8S, strict=True)
    assert neuron_chart.REMOVED_RESOURCE not in json.dumps(manifest) and ":latest" not in json.dumps(manifest)


def test_the_schema_check_catches_a_bad_manifest() -> None:
    bad = lustre.persistent_volume_claim(environment="team", size_gib=2400)
    bad["spec"]["accesModes"] = bad["spec"].pop("accessModes")  # a typo
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(bad, K8S, strict=True)


def test_the_smoke_pod_asks_for_one_neuron_device() -> None:
    pod = _manifests()[2]
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"aws.amazon.com/neuron": 1} and pod["spec"]["containers"][0]["command"] == ["neuron-ls"]


def test_cost_of_an_eks_environment_has_the_control_plane_and_an_alb_per_served_fleet() -> None:
    from neuronkit.reports.cost import environment_report, fixed_costs

    data = yaml.safe_load(EXAMPLE.read_text())
    data["training"][0]["capacity"]["upfront_fee_usd"] = 250_000  # the block's price: allowed on EKS now
    # chat-trn2: Trn2 has no On-Demand list price in the catalog (Capacity Blocks only); the report prices the rest.
    data["inference"] = [f for f in data["inference"] if f["name"] != "chat-trn2"]
    env = parse_environment(data, "eks.yaml")
    items = {f.item: f for f in fixed_costs(env)}
    hours = 730
    plane = items["EKS control plane"]
    assert plane.monthly == pytest.approx(EKS["extended_support"]["standard_usd_per_cluster_hour"] * hours, rel=0.01)
    # A fleet with a model is served behind its ALB (docs/eks.md, "Serving"); without one it is a node group only.
    served = {f"ALB of {f.name}" for f in env.inference if f.model is not None}
    assert served and {i for i in items if "ALB" in i or "NLB" in i} == served
    bare = parse_environment({**data, "inference": [{**data["inference"][0], "model": None}]}, "eks.yaml")
    assert not [f.item for f in fixed_costs(bare) if "ALB" in f.item]
    system = EKS["system_nodes"]
    assert items["EKS system nodes"].monthly == pytest.approx(system["desired_size"] * system["usd_per_hour"] * hours, rel=0.01)
    text = environment_report([env], "text")
    for pool in ("pretrain", "chat"):
        assert pool in text


def test_review_names_a_chart_or_addon_version_bump() -> None:
    from neuronkit.reports.review import compare_templates

    def stack(chart: str, addon: str) -> dict[str, Any]:
        return {"Resources": {
            "Chart": {"Type": "Custom::AWSCDK-EKS-HelmChart", "Properties": {"Chart": "neuron-helm-chart", "Version": chart}},
            "Addon": {"Type": "AWS::EKS::Addon", "Properties": {"AddonName": "aws-fsx-csi-driver", "AddonVersion": addon}},
        }}  # fmt: skip

    changes = compare_templates({"s": stack("1.9.0", "v1")}, {"s": stack("1.10.0", "v2")}, {"s": "us-east-2"})
    notes = {c.logical_id: c.why for c in changes}
    assert notes["Chart"].startswith("Helm chart neuron-helm-chart 1.9.0 -> 1.10.0")
    assert notes["Addon"].startswith("EKS add-on aws-fsx-csi-driver v1 -> v2")


def test_preflight_checks_every_pinned_addon_version_is_offered() -> None:
    """botocore Stubber (moto has no DescribeAddonVersions): the pinned versions pass, a missing one fails with the fix."""
    import boto3
    from botocore.stub import Stubber

    from neuronkit.kubernetes.preflight import check_eks_addons, pinned_addons

    env = parse_environment(yaml.safe_load(EXAMPLE.read_text()), "eks.yaml")
    pins = pinned_addons(env)
    assert "aws-fsx-csi-driver" in pins and len(pins) == 5
    client = boto3.client("eks", region_name=env.region, aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(client)
    for name, version in sorted(pins.items()):
        offered = ["v0.0.1-eksbuild.1"] if name == "aws-fsx-csi-driver" else [version]
        stub.add_response(
            "describe_addon_versions",
            {"addons": [{"addonName": name, "addonVersions": [{"addonVersion": v} for v in offered]}]},
            {"addonName": name, "kubernetesVersion": K8S},
        )
    with stub:
        checks = check_eks_addons(env, client)
    by_name = {c.name: c for c in checks}
    assert len(checks) == 5 and [c.status for c in checks].count("PASS") == 4
    fsx = by_name["EKS add-on aws-fsx-csi-driver"]
    assert fsx.status == "FAIL" and "v0.0.1-eksbuild.1" in fsx.detail and "storage_addons.aws-fsx-csi-driver" in fsx.fix


# --- the NVIDIA device plugin: only with GPU node groups, on those groups only ---


def test_nvidia_values_keys_exist_in_the_pinned_chart() -> None:
    """The chart ships no values.schema.json: every key the kit sets is in the pinned chart's values.yaml key tree,
    or is the dependency condition of its Chart.yaml (nfd.enabled), and so are the catalog's placement paths."""
    facts = EKS["charts"]["nvidia_device_plugin"]
    fixture = _chart_fixture("nvidia-device-plugin-0.20.0.values.yaml")
    assert facts["values_schema"] is False and fixture["chart_version"] == facts["version"]
    known = _paths(fixture["values"]) | set(fixture["conditions"])
    emitted = _paths(nvidia_chart.values(["chat-gpu"]))
    assert {"affinity.nodeAffinity", "tolerations", "gfd.enabled", "nfd.enabled", "nfd.master.nodeSelector"} <= emitted

    def free(path: str) -> bool:  # below a map the chart leaves empty (nodeSelector: {}) any key is the user's
        parts = path.split(".")
        return any(neuron_chart.get_path(fixture["values"], ".".join(parts[:i])) == {} for i in range(1, len(parts)))

    assert {p for p in emitted - known if not free(p)} == set()
    placed = [*facts["deployments"].values(), *facts["daemonsets"].values()]
    paths = {p["path"] if isinstance(p, dict) else p for p in placed} | {p["enabled"] for p in placed if isinstance(p, dict)}
    assert paths and paths - known == set()


def test_nvidia_values_replace_the_charts_nfd_affinity_and_tolerate_only_the_gpu_taint() -> None:
    values = nvidia_chart.values(["train-gpu", "chat-gpu", "chat-gpu"])
    (term,) = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term == {"matchExpressions": [{"key": "neuronkit.io/pool", "operator": "In", "values": ["chat-gpu", "train-gpu"]}]}
    chart = _chart_fixture("nvidia-device-plugin-0.20.0.values.yaml")["values"]
    assert "feature.node.kubernetes.io" not in json.dumps(values) and "feature.node.kubernetes.io" in json.dumps(chart)
    assert values["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    assert values["gfd"] == {"enabled": False} and values["nfd"]["enabled"] is False
    for path in EKS["charts"]["nvidia_device_plugin"]["deployments"].values():  # NFD's, off: on the system group anyway
        assert neuron_chart.get_path(values, str(path)) == {"neuronkit.io/pool": "system"}, path
    with pytest.raises(ValueError, match="GPU node groups"):
        nvidia_chart.values([])


def test_no_gpu_pool_means_no_nvidia_chart() -> None:
    charts = [
        c["Properties"]["Chart"]
        for c in resources(_workloads(neuron_releases=["2.31.0"]), "Custom::AWSCDK-EKS-HelmChart").values()
    ]
    assert charts and "nvidia-device-plugin" not in charts


def test_gpu_pools_get_the_nvidia_chart_at_the_pin() -> None:
    data = _workloads(neuron_releases=["2.31.0"], gpu_pools=["chat-gpu"])
    charts = {c["Properties"]["Chart"]: c["Properties"] for c in resources(data, "Custom::AWSCDK-EKS-HelmChart").values()}
    facts = EKS["charts"]["nvidia_device_plugin"]
    nvidia = charts["nvidia-device-plugin"]
    assert nvidia["Repository"] == "https://nvidia.github.io/k8s-device-plugin" == facts["repository"]
    assert nvidia["Version"] == facts["version"] and nvidia["Namespace"] == facts["namespace"] != "default"
    values = json.loads(nvidia["Values"])
    assert values == nvidia_chart.values(["chat-gpu"]) and "image" not in values  # the chart's appVersion is the tag
    from neuronkit.kubernetes import placement

    assert placement.placement_problems(data) == []


def test_nvidia_placement_values_are_valid_pod_fields() -> None:
    """The chart copies ``affinity`` and ``tolerations`` into its DaemonSet's pod spec: they must be valid core/v1."""
    values = nvidia_chart.values(["chat-gpu", "train-gpu"])
    pod = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "nvidia-device-plugin"},
        "spec": {"containers": [{"name": "plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"}],
                 "affinity": values["affinity"], "tolerations": values["tolerations"]},
    }  # fmt: skip
    kubernetes_validate.validate(pod, K8S, strict=True)
    pod["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerm"] = []
    with pytest.raises(kubernetes_validate.ValidationError):  # a misspelt key is caught
        kubernetes_validate.validate(pod, K8S, strict=True)


def test_the_fsx_addon_waits_for_the_system_nodes_and_the_pod_identity_agent() -> None:
    """The FSx CSI controller runs on the system node group and "The Amazon FSx CSI Driver EKS add-on requires the EKS
    Pod Identity Agent for authentication" (EKS User Guide, fsx-csi-create): created before either, it sits DEGRADED."""
    data = _workloads(neuron_releases=["2.28.1"])
    addons = {a["Properties"]["AddonName"]: (lid, a) for lid, a in resources(data, "AWS::EKS::Addon").items()}
    system = [
        lid
        for lid, g in resources(data, "AWS::EKS::Nodegroup").items()
        if g["Properties"]["Labels"].get(scheduling.POOL_LABEL) == scheduling.SYSTEM_POOL
    ]
    assert len(system) == 1
    _, fsx = addons["aws-fsx-csi-driver"]
    agent, _ = addons["eks-pod-identity-agent"]
    assert {system[0], agent} <= set(fsx["DependsOn"])
