"""Where pods run on the kit's EKS cluster, as behaviour: the system node group, the accelerated groups' taints, the
placement check over a template, the system nodes' settings in the file, the EFA plugin only with EFA groups, the
Neuron chart from the pools' releases, the node problem detector's namespace and region (docs/eks.md)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from neuronkit import catalog
from neuronkit.catalog import eks_images
from neuronkit.config.base import ConfigError
from neuronkit.config.loader import parse_environment
from neuronkit.constructs.eks import NeuronNodeGroup, NodeGroupSpec, SystemNodesSpec
from neuronkit.kubernetes import neuron_chart, placement, scheduling
from neuronkit.kubernetes.neuron_chart import NeuronChartOptions, Taint
from tests.templates import bare_stack, group_name, resources, template
from tests.unit.test_eks import _cluster

EKS = catalog.eks_facts()
EXAMPLE = Path(__file__).parents[2] / "examples" / "environments" / "eks.yaml"
K8S = str(EKS["kubernetes"]["version"])


@pytest.fixture(scope="module")
def groups_template() -> dict[str, Any]:
    stack = bare_stack()
    cluster = _cluster(stack)
    subnets = cluster.cluster.vpc.private_subnets
    for id_, name, types in (("Train", "train", ["trn1.32xlarge"]), ("Gpu", "train-gpu", ["p5.48xlarge"])):
        NeuronNodeGroup(
            stack, id_, environment="team", cluster=cluster, subnets=subnets[:1], script="#!/bin/bash\n",
            spec=NodeGroupSpec(name=name, instance_types=types, max_size=2),
        )  # fmt: skip
    return template(stack)


def _by_name(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {group_name(g): g["Properties"] for g in resources(data, "AWS::EKS::Nodegroup").values()}


def test_node_groups_carry_their_accelerators_taint_and_the_cluster_a_system_group(groups_template: dict[str, Any]) -> None:
    groups = _by_name(groups_template)
    assert groups["team-train"]["Taints"] == [{"Key": "aws.amazon.com/neuron", "Effect": "NO_SCHEDULE"}]
    assert groups["team-train-gpu"]["Taints"] == [{"Key": "nvidia.com/gpu", "Effect": "NO_SCHEDULE"}]
    system = groups["team-system"]
    assert "Taints" not in system and system["Labels"] == {"neuronkit.io/pool": "system"}
    assert system["CapacityType"] == "ON_DEMAND" and len(system["Subnets"]) == 2
    assert system["ScalingConfig"]["MinSize"] == EKS["system_nodes"]["min_size"] >= 2


def test_coredns_selects_the_system_group_through_its_addon_configuration(groups_template: dict[str, Any]) -> None:
    addons = {a["Properties"]["AddonName"]: a for a in resources(groups_template, "AWS::EKS::Addon").values()}
    config = json.loads(addons["coredns"]["Properties"]["ConfigurationValues"])
    assert config["nodeSelector"] == scheduling.system_node_selector()
    system = next(k for k, g in resources(groups_template, "AWS::EKS::Nodegroup").items() if "System" in k)
    assert system in addons["coredns"].get("DependsOn", [])  # CoreDNS waits for nodes it may run on
    assert placement.placement_problems(groups_template) == []


def test_the_system_nodes_spec_refuses_accelerators_and_a_single_node() -> None:
    with pytest.raises(ValueError, match="accelerated type"):
        SystemNodesSpec(instance_type="inf2.xlarge")
    with pytest.raises(ValueError, match="one node per Availability Zone"):
        SystemNodesSpec(min_size=1, desired_size=1)
    assert SystemNodesSpec().instance_type == EKS["system_nodes"]["instance_type"]


def _example() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    return data


@pytest.mark.parametrize(
    ("change", "key", "phrase"),
    [
        ({"instance_type": "trn1.2xlarge"}, "eks.system_nodes.instance_type", "general-purpose type"),
        ({"min_size": 3, "max_size": 2}, "eks.system_nodes", "min_size (3) <= desired_size"),
    ],
)
def test_validate_refuses_bad_system_nodes_one_line(change: dict[str, Any], key: str, phrase: str) -> None:
    data = _example()
    data["eks"]["system_nodes"] = change
    with pytest.raises(ConfigError) as err:
        parse_environment(data, "eks.yaml")
    lines = [p for p in err.value.problems if f"{key}:" in p]
    assert len(lines) == 1 and phrase in lines[0] and "eks.yaml" in lines[0], err.value.problems


def test_validate_refuses_a_pool_named_system() -> None:
    data = _example()
    data["inference"][0]["name"] = "system"
    with pytest.raises(ConfigError) as err:
        parse_environment(data, "eks.yaml")
    assert any("inference[0].name" in p and "system node group" in p for p in err.value.problems)


def test_system_nodes_override_reaches_the_cluster_spec() -> None:
    data = _example()
    data["eks"]["system_nodes"] = {"instance_type": "m7i.xlarge", "max_size": 6}
    env = parse_environment(data, "eks.yaml")
    assert env.eks is not None
    assert env.eks.system_nodes.resolved() == {"instance_type": "m7i.xlarge", "min_size": 2, "desired_size": 2, "max_size": 6}


# --- the placement check itself: it fails on the regressions it exists for ---


def _addon(name: str, config: dict[str, Any] | None) -> dict[str, Any]:
    props: dict[str, Any] = {"AddonName": name, "ClusterName": "c"}
    if config is not None:
        props["ConfigurationValues"] = json.dumps(config)
    return {"Type": "AWS::EKS::Addon", "Properties": props}


def _manifest(*docs: dict[str, Any]) -> dict[str, Any]:
    return {"Type": "Custom::AWSCDK-EKS-KubernetesResource", "Properties": {"Manifest": json.dumps(list(docs))}}


def _workload(kind: str, name: str, namespace: str, pod: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1", "kind": kind, "metadata": {"name": name, "namespace": namespace},
        "spec": {"selector": {"matchLabels": {"app": name}},
                 "template": {"metadata": {"labels": {"app": name}},
                              "spec": {"containers": [{"name": name, "image": "public.ecr.aws/x/y:1.0"}], **pod}}},
    }  # fmt: skip


def test_a_deployment_off_the_system_group_is_a_problem() -> None:
    ok = {"Resources": {"A": _addon("coredns", {"nodeSelector": scheduling.system_node_selector()})}}
    assert placement.placement_problems(ok) == []
    dropped = {"Resources": {"A": _addon("coredns", None)}}
    (line,) = placement.placement_problems(dropped)
    assert "Deployment coredns (add-on coredns) does not select the system node group" in line
    stray = _workload("Deployment", "spill-controller", scheduling.CONTROLLERS_NAMESPACE, {})
    serving = _workload("Deployment", "chat-neuron", scheduling.SERVING_NAMESPACE, {})  # belongs on accelerators
    (line,) = placement.placement_problems({"Resources": {"M": _manifest(stray, serving)}})
    assert "spill-controller" in line


@pytest.mark.parametrize(
    "tolerations",
    [
        [{"operator": "Exists"}],  # tolerates everything
        [{"operator": "Exists", "effect": "NoSchedule"}],
        [{"key": "aws.amazon.com/neuron", "operator": "Exists", "effect": "NoSchedule"}],
        [{"key": "nvidia.com/gpu", "operator": "Exists"}],
    ],
)
def test_a_daemonset_that_need_not_run_on_accelerators_must_not_tolerate_them(tolerations: list[dict[str, Any]]) -> None:
    agent = _workload("DaemonSet", "log-agent", scheduling.CONTROLLERS_NAMESPACE, {"tolerations": tolerations})
    (line,) = placement.placement_problems({"Resources": {"M": _manifest(agent)}})
    assert "DaemonSet log-agent" in line and "need not run on accelerators" in line
    plugin = _workload("DaemonSet", "neuron-device-plugin", "kube-system", {"tolerations": tolerations})
    assert placement.placement_problems({"Resources": {"M": _manifest(plugin)}}) == []


def test_tolerations_follow_kubernetes_matching() -> None:
    neuron = scheduling.NEURON_TAINT
    assert placement.tolerates({"operator": "Exists"}, neuron)
    assert placement.tolerates({"key": neuron.key, "operator": "Exists", "effect": "NoSchedule"}, neuron)
    assert not placement.tolerates({"key": neuron.key, "operator": "Exists", "effect": "NoExecute"}, neuron)
    assert not placement.tolerates({"key": "CriticalAddonsOnly", "operator": "Exists"}, neuron)
    assert placement.tolerates({"key": "k", "operator": "Equal", "value": "v"}, Taint("k", value="v"))


# --- the Neuron chart: controllers on the system group, recovery's region, the NPD namespace ---


def test_the_charts_controllers_select_the_system_group_and_recovery_gets_the_region() -> None:
    options = NeuronChartOptions(region="us-east-2", system_node_selector=scheduling.system_node_selector())
    values = neuron_chart.values(options)
    for path in EKS["charts"]["neuron"]["deployments"].values():
        assert neuron_chart.get_path(values, str(path)) == scheduling.system_node_selector(), path
    env = {e["name"]: e["value"] for e in values["npd"]["nodeRecovery"]["extraEnvs"]}
    assert env == {"AWS_STS_REGIONAL_ENDPOINTS": "regional", "AWS_REGION": "us-east-2", "AWS_DEFAULT_REGION": "us-east-2"}
    assert values["scheduler"]["enabled"] is False and values["ultraserverOperator"]["enabled"] is False


def test_the_npd_namespace_is_valid_and_adoptable_by_the_chart() -> None:
    doc = neuron_chart.npd_namespace(release="neuron", release_namespace="kube-system")
    kubernetes_validate.validate(doc, K8S, strict=True)
    assert doc["metadata"]["name"] == EKS["node_problem_detector"]["namespace"]
    assert doc["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "Helm"
    assert doc["metadata"]["annotations"] == {
        "meta.helm.sh/release-name": "neuron",
        "meta.helm.sh/release-namespace": "kube-system",
    }


def test_workloads_create_the_npd_namespace_before_the_chart_and_pass_the_region() -> None:
    from neuronkit.constructs.eks import NeuronWorkloads, WorkloadsSpec

    stack = bare_stack()
    cluster = _cluster(stack)
    NeuronWorkloads(stack, "Workloads", cluster=cluster, spec=WorkloadsSpec(environment="team", neuron_releases=["2.31.0"]))
    data = template(stack)
    (chart_id,) = [k for k, r in resources(data, "Custom::AWSCDK-EKS-HelmChart").items() if "Neuron" in k]
    namespace_ids = [k for k, r in resources(data, "Custom::AWSCDK-EKS-KubernetesResource").items() if "NpdNamespace" in k]
    assert len(namespace_ids) == 1 and namespace_ids[0] in data["Resources"][chart_id]["DependsOn"]
    values = json.loads(data["Resources"][chart_id]["Properties"]["Values"])
    assert {"name": "AWS_REGION", "value": "us-east-1"} in values["npd"]["nodeRecovery"]["extraEnvs"]
    assert placement.placement_problems(data) == []


# --- through the EKS stack: EFA plugin only with EFA groups; the chart from the pools' releases ---


def _eks_template(data: dict[str, Any]) -> dict[str, Any]:
    from neuronkit.stacks import build_environment
    from tests.conftest import pinned_app

    env = parse_environment(data, "eks.yaml")
    app, _ = pinned_app(lambda a: build_environment(a, env))
    assembly = app.synth()
    return dict(next(s.template for s in assembly.stacks if s.stack_name.endswith("-eks")))


def _charts(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["Properties"]["Chart"]: r["Properties"] for r in resources(data, "Custom::AWSCDK-EKS-HelmChart").values()}


@pytest.fixture(scope="module")
def serving_only() -> dict[str, Any]:
    """The example without its training cluster: inf2 and g6e groups only, none with EFA; the fleet on 2.31.1."""
    data = _example()
    data.pop("training")
    data["inference"][0]["neuron_sdk"] = "2.31.1"
    return _eks_template(data)


def test_no_efa_plugin_where_no_node_group_has_efa(serving_only: dict[str, Any]) -> None:
    charts = _charts(serving_only)
    assert "neuron-helm-chart" in charts and "aws-efa-k8s-device-plugin" not in charts
    groups = [g for g in resources(serving_only, "AWS::EKS::Nodegroup").values() if "neuronkit" in g.get("Metadata", {})]
    assert groups and all(g["Properties"]["Taints"] for g in groups)


def test_the_chart_comes_from_the_pools_releases(serving_only: dict[str, Any]) -> None:
    rows = {str(k): str(v) for k, v in EKS["charts"]["neuron"]["by_release"].items()}
    assert _charts(serving_only)["neuron-helm-chart"]["Version"] == rows["2.31"]
    # A mix: inf2 stays on 2.31 while the trn2 cluster moves to 2.32: the newest pool's row serves both.
    mixed = _example()
    mixed["inference"][0]["neuron_sdk"] = "2.31.1"
    mixed["training"][0]["neuron_sdk"] = "2.32.0"
    mixed["training"][0]["workload"] = "jax"  # 2.32 has no PyTorch training stack; JAX NeuronX runs on trn2
    mixed["training"][0].pop("gpu_pool")
    # 2.32's driver is newer than any node image the catalog lists: the user pins a newer image, with its source.
    mixed["eks"] = {**mixed["eks"], "node_release_version": "1.35.9-20261001",
                    "node_release_source": "a later amazon-eks-ami release whose changelog lists a newer Neuron driver"}  # fmt: skip
    data = _eks_template(mixed)
    assert _charts(data)["neuron-helm-chart"]["Version"] == rows["2.32"] != rows["2.31"]


def test_the_mix_rule_is_the_newest_pool_release() -> None:
    rows = {str(k): str(v) for k, v in EKS["charts"]["neuron"]["by_release"].items()}
    assert neuron_chart.chart_version(["2.31.1", "2.32.0"]) == rows["2.32"]
    assert neuron_chart.chart_version(["2.32.0", "2.31.1"]) == rows["2.32"]  # order does not matter
    assert neuron_chart.chart_version(["2.28.1"]) == rows["2.31"]  # no row of its own: the next newer row
    newest = max(rows, key=lambda k: tuple(map(int, k.split("."))))
    assert neuron_chart.chart_version(["2.31.1", "2.99.0"]) == rows[newest]  # newer than every row: the newest


# --- reuse: the kit's acknowledgements follow the constructs under any id ---


def test_a_users_app_nests_the_cluster_under_another_id_with_the_compliance_gates_on() -> None:
    from aws_cdk import App, Environment, Stack
    from aws_cdk import aws_ec2 as ec2
    from constructs import Construct

    from neuronkit.constructs import ClusterSpec, NeuronEksCluster, NeuronNodeGroup, NeuronWorkloads, WorkloadsSpec, compliance

    app = App(builtin_cloud_formation_validation=False)
    stack = Stack(app, "UserStack", env=Environment(account="111111111111", region="us-east-2"))
    outer = Construct(stack, "Platform")
    inner = Construct(outer, "Compute")
    vpc = ec2.Vpc.from_vpc_attributes(
        stack, "Vpc", vpc_id="vpc-0a1b2c3d4e5f67890", availability_zones=["us-east-2a", "us-east-2b"],
        private_subnet_ids=["subnet-0a1b2c3d4e5f67890", "subnet-0a1b2c3d4e5f67891"],
    )  # fmt: skip
    kube = NeuronEksCluster(
        inner, "Kube", spec=ClusterSpec(name="research", admins=["arn:aws:iam::111111111111:role/admin"]),
        vpc=vpc, subnets=vpc.private_subnets,
    )  # fmt: skip
    NeuronNodeGroup(
        inner, "Trn2", environment="research", cluster=kube, subnets=vpc.private_subnets[:1], script="#!/bin/bash\n",
        spec=NodeGroupSpec(name="train", instance_types=["trn2.48xlarge"], max_size=2),
    )  # fmt: skip
    NeuronWorkloads(inner, "Neuron", cluster=kube, spec=WorkloadsSpec(environment="research", neuron_releases=["2.31.1"]))
    compliance.apply(app)
    assembly = app.synth()  # a finding the kit did not acknowledge fails here (cdk-nag ValidationFailed)
    data = assembly.get_stack_by_name("UserStack").template
    handlers = [k for k in data["Resources"] if "KubectlProviderHandler" in k]
    assert handlers and not any(k.startswith("ClusterKubectlProvider") for k in handlers)


def test_every_pinned_chart_says_where_its_deployments_go_with_keys_of_its_values() -> None:
    """Each chart the catalog pins lists its Deployments and the values key of each one's nodeSelector, and each key's
    section exists in the chart's values.yaml at its pin (tests/fixtures/charts/): a chart bump that renames the key
    fails here, not at deploy with a controller on an accelerator."""
    import yaml

    descriptors = placement.chart_descriptors()
    assert {"neuron-helm-chart", "jobset", "kueue", "aws-load-balancer-controller", "cluster-autoscaler", "keda"} <= set(
        descriptors
    )
    fixtures = Path(__file__).parents[1] / "fixtures" / "charts"
    checked = 0
    for chart, facts in descriptors.items():
        for path in (facts.get("deployments") or {}).values():
            (fixture,) = [f for f in fixtures.glob(f"{chart}-*.values.yaml")]
            values = yaml.safe_load(fixture.read_text())["values"]
            parent = str(path).rsplit(".", 1)[0] if "." in str(path) else ""
            section = neuron_chart.get_path(values, parent) if parent else values
            assert isinstance(section, dict) and str(path).rsplit(".", 1)[-1] in section, (chart, path, fixture.name)
            checked += 1
    assert checked >= 8


# --- the NVIDIA device plugin: on the GPU node groups only, where there are any ---


def _lands_on(values: dict[str, Any], group: dict[str, Any]) -> bool:
    """Whether a DaemonSet pod with the chart's affinity (``In`` terms) and tolerations can run on a node group's nodes:
    some term matches the group's labels, and every NoSchedule/NoExecute taint is tolerated (Kubernetes' rules)."""
    labels = group.get("Labels", {})
    terms = values["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert all(e["operator"] == "In" for t in terms for e in t["matchExpressions"])  # the only operator read here
    matched = any(all(labels.get(e["key"]) in e["values"] for e in t["matchExpressions"]) for t in terms)
    effects = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}
    taints = [Taint(t["Key"], effects[t["Effect"]], t.get("Value")) for t in group.get("Taints", [])]
    hard = [t for t in taints if t.effect != "PreferNoSchedule"]
    return matched and all(any(placement.tolerates(tol, t) for tol in values.get("tolerations", [])) for t in hard)


def test_the_nvidia_plugin_lands_on_the_gpu_groups_only() -> None:
    from neuronkit.constructs.eks import NeuronWorkloads, WorkloadsSpec

    stack = bare_stack()
    cluster = _cluster(stack)
    subnets = cluster.cluster.vpc.private_subnets
    for id_, name, types in (("Train", "train", ["trn1.32xlarge"]), ("Gpu", "train-gpu", ["p5.48xlarge"]),
                             ("Chat", "chat", ["inf2.48xlarge"]), ("ChatGpu", "chat-gpu", ["g6e.12xlarge"])):  # fmt: skip
        NeuronNodeGroup(
            stack, id_, environment="team", cluster=cluster, subnets=subnets[:1], script="#!/bin/bash\n",
            spec=NodeGroupSpec(name=name, instance_types=types, max_size=2),
        )  # fmt: skip
    spec = WorkloadsSpec(environment="team", neuron_releases=["2.31.0"], gpu_pools=["train-gpu", "chat-gpu"])
    NeuronWorkloads(stack, "Workloads", cluster=cluster, spec=spec)
    data = template(stack)
    (nvidia,) = [c["Properties"] for c in resources(data, "Custom::AWSCDK-EKS-HelmChart").values()
                 if c["Properties"]["Chart"] == "nvidia-device-plugin"]  # fmt: skip
    values = json.loads(nvidia["Values"])
    groups = _by_name(data)
    assert len(groups) == 5  # four pools and the system group
    assert sorted(g for g, props in groups.items() if _lands_on(values, props)) == ["team-chat-gpu", "team-train-gpu"]
    # Neither the affinity alone nor the toleration alone would do: a Neuron node with the label is still refused.
    neuron_labelled = {**groups["team-chat"], "Labels": {"neuronkit.io/pool": "chat-gpu"}}
    assert not _lands_on(values, neuron_labelled)
    assert values["tolerations"] == [scheduling.GPU_TAINT.toleration()]
    assert placement.placement_problems(data) == []


def test_the_stack_installs_the_nvidia_plugin_for_its_gpu_groups(serving_only: dict[str, Any]) -> None:
    """The example's fleet has a GPU fallback group (g6e, amiType AL2023_x86_64_NVIDIA): the plugin selects it."""
    nvidia = _charts(serving_only)["nvidia-device-plugin"]
    assert nvidia["Version"] == EKS["charts"]["nvidia_device_plugin"]["version"]
    values = json.loads(nvidia["Values"])
    groups = {group_name(g): g["Properties"] for g in resources(serving_only, "AWS::EKS::Nodegroup").values()}
    gpu = sorted(n for n, g in groups.items() if g.get("AmiType") == EKS["node_images"]["gpu"]["ami_type"])
    assert gpu and sorted(n for n, g in groups.items() if _lands_on(values, g)) == gpu


def test_no_nvidia_plugin_without_a_gpu_group() -> None:
    data = _example()
    data.pop("training")
    data["inference"][0].pop("fallback_types")
    charts = _charts(_eks_template(data))
    assert "neuron-helm-chart" in charts and "nvidia-device-plugin" not in charts


@pytest.mark.parametrize("instance_type", sorted(t for t in catalog.instance_types() if t.startswith("trn")))
def test_a_whole_node_pod_fits_what_kubelet_leaves_allocatable(instance_type: str) -> None:
    """nodeadm (amazon-eks-ami nodeadm/internal/kubelet/config.go): kube-reserved memory 11*maxPods+255 MiB, CPU
    6%/1%/0.5%/0.25% by core ranges, evictionHard memory.available 100Mi. The pod's request plus the DaemonSets' must
    fit the allocatable, for every Trainium type."""
    from neuronkit.kubernetes import scheduling

    it = catalog.get(instance_type)
    max_pods = int(catalog.eks_facts()["pods"]["max_pods_per_node"])
    cpu_reserved, mem_reserved = scheduling.kube_reserved(it.vcpus, max_pods)
    assert mem_reserved == 11 * max_pods + 255
    expected_cpu = 60 + 10 + 10 + (it.vcpus * 1000 - 4000) * 0.0025 if it.vcpus >= 4 else None
    if expected_cpu is not None:
        assert cpu_reserved == int(expected_cpu)
    cpu_m, mem_mib = scheduling.allocatable(instance_type)
    assert mem_mib <= it.memory_mib - mem_reserved - 100
    share = scheduling.node_share(instance_type)
    ds = catalog.eks_facts()["training_jobs"]["node_reserve"]["daemonsets"]
    assert int(share["cpu"]) * 1000 + int(ds["cpu_millicores"]) <= cpu_m
    assert int(share["memory"].removesuffix("Gi")) * 1024 + int(ds["memory_mib"]) <= mem_mib


def test_trn1_2xlarge_asks_for_what_its_node_leaves_not_a_fraction() -> None:
    """The review's case: 29 of 32 GiB from a fraction. nodeadm leaves 32768 - 3% - 1465 - 100 MiB."""
    from neuronkit.kubernetes import scheduling

    assert scheduling.allocatable("trn1.2xlarge") == (7910, 30219)
    assert scheduling.node_share("trn1.2xlarge") == {"cpu": "7", "memory": "28Gi"}


@pytest.mark.parametrize("version", sorted({i.kubernetes for i in eks_images.images("neuron")}))
def test_the_system_nodes_boot_an_image_of_the_clusters_own_kubernetes_minor(version: str) -> None:
    """A literal pin booted 1.35 system nodes on a 1.34 control plane (found by the day-two table, issue 47)."""
    stack = bare_stack()
    _cluster(stack, version=version)
    (system,) = [g for g in _by_name(template(stack)).values() if g["Labels"] == scheduling.system_node_selector()]
    assert system["ReleaseVersion"].startswith(version + "."), system["ReleaseVersion"]
    assert system["ReleaseVersion"] == eks_images.pinned("neuron", version).release_version
