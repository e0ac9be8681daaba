"""Your own EKS cluster (issue 51): `eks.existing` with `network.existing` validates and synthesizes offline into a
stack that creates no cluster and changes none of the cluster's own settings; `eks.components` (install | existing |
off) and the old `eks.node_autoscaler` spelling; a training pool naming the user's ClusterQueue."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from aws_cdk import App
from aws_cdk.assertions import Template

from neuronkit.cli import main
from neuronkit.config import ConfigError, load_environment, neuron_warnings, parse_environment
from neuronkit.kubernetes import training_job as tj
from neuronkit.stacks import build_environment
from tests.templates import group_name

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "user_environments" / "ownk8s.yaml"
DATA = yaml.safe_load(FIXTURE.read_text())
WHERE = "environments/ownk8s.yaml"
IMAGE = "public.ecr.aws/neuron/pytorch-training-neuronx:2.8.0-neuronx-py311-sdk2.28.1-ubuntu22.04"

# What a stack may create in a cluster it did not create (EKS API reference: CreateAccessEntry, CreateNodegroup,
# CreateAddon, CreatePodIdentityAssociation): its access entries, its node groups, its own add-ons (FSx CSI) and its
# pod identity associations; never AWS::EKS::Cluster or a change to the cluster's configuration.
ALLOWED_EKS = {"AWS::EKS::AccessEntry", "AWS::EKS::Nodegroup", "AWS::EKS::Addon", "AWS::EKS::PodIdentityAssociation"}
CORE_ADDONS = {"vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent"}


def _problems(data: dict[str, Any]) -> list[str]:
    try:
        parse_environment(data, WHERE)
    except ConfigError as err:
        return err.problems
    return []


def _edit(**eks: Any) -> dict[str, Any]:
    data = copy.deepcopy(DATA)
    data["eks"].update(eks)
    return data


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    env = load_environment(FIXTURE)
    app = App()
    build_environment(app, env)
    stack = next(s for s in app.node.children if getattr(s, "stack_name", "") == "ownk8s-eks")
    return Template.from_stack(stack).to_json()  # type: ignore[no-any-return]


def _of(template: dict[str, Any], kind: str) -> list[dict[str, Any]]:
    return [r for r in template["Resources"].values() if r["Type"] == kind]


def test_the_fixture_gives_every_attribute_and_validates() -> None:
    env = load_environment(FIXTURE)
    assert env.eks is not None and env.eks.existing is not None and env.network.existing is not None
    assert set(DATA["eks"]["existing"]) == set(type(env.eks.existing).model_fields)
    assert env.eks.version == DATA["eks"]["existing"]["kubernetes_version"]


def test_config_map_authentication_is_refused_in_one_line() -> None:
    data = copy.deepcopy(DATA)
    data["eks"]["existing"]["authentication_mode"] = "CONFIG_MAP"
    found = _problems(data)
    assert len(found) == 1 and found[0].startswith(f"{WHERE}: eks.existing.authentication_mode: CONFIG_MAP"), found
    assert "aws-auth" in found[0] and "API_AND_CONFIG_MAP" in found[0] and "\n" not in found[0]


def test_network_existing_is_required_with_an_existing_cluster() -> None:
    data = copy.deepcopy(DATA)
    data["network"].pop("existing")
    assert [p for p in _problems(data) if "network.existing" in p] == [
        f"{WHERE}: network.existing: required with eks.existing: the VPC of cluster platform-prod (vpc_id and a "
        "private subnet per AZ ID of network.az_ids)"
    ]


def test_keys_that_would_change_the_clusters_own_settings_are_refused() -> None:
    found = _problems(_edit(admins=["arn:aws:iam::777788889999:role/Admin"], endpoint="public-and-private"))
    assert any("eks.admins: not used with eks.existing" in p for p in found), found
    assert any("eks.endpoint: not used with eks.existing" in p for p in found), found
    found = _problems(_edit(components={"vpc_cni": "install"}))
    assert found == [f"{WHERE}: eks.components.vpc_cni: install would change your cluster's own vpc-cni add-on; use existing"]


def test_the_stack_creates_no_cluster_and_changes_only_what_it_adds(template: dict[str, Any]) -> None:
    types = {r["Type"] for r in template["Resources"].values()}
    assert "AWS::EKS::Cluster" not in types and "Custom::AWSCDK-EKS-Cluster" not in types
    assert {t for t in types if t.startswith("AWS::EKS::")} <= ALLOWED_EKS
    addons = {r["Properties"]["AddonName"] for r in _of(template, "AWS::EKS::Addon")}
    assert not addons & CORE_ADDONS, addons
    # Everything EKS-side names the user's cluster.
    named = [r for r in template["Resources"].values() if r["Type"] in ALLOWED_EKS]
    assert named and all(r["Properties"]["ClusterName"] == "platform-prod" for r in named)
    # One access entry for the kit's kubectl handler (cluster admin) and the spill function's group entry.
    entries = _of(template, "AWS::EKS::AccessEntry")
    admin = [
        e
        for e in entries
        if any("AmazonEKSClusterAdminPolicy" in json.dumps(p) for p in e["Properties"].get("AccessPolicies", []))
    ]
    assert len(admin) == 1 and "KubectlProvider" in json.dumps(admin[0]["Properties"]["PrincipalArn"])


def test_node_groups_charts_and_manifests_target_the_named_cluster(template: dict[str, Any]) -> None:
    groups = _of(template, "AWS::EKS::Nodegroup")
    assert {group_name(g) for g in groups} >= {"ownk8s-research", "ownk8s-answer", "ownk8s-system"}
    sg = "sg-0a1b2c3d4e5f60718"
    templates = json.dumps(_of(template, "AWS::EC2::LaunchTemplate"))
    assert sg in templates  # the nodes' interfaces carry the cluster security group
    kube = [r for r in template["Resources"].values() if r["Type"].startswith("Custom::AWSCDK-EKS-")]
    assert kube and all(r["Properties"]["ClusterName"] == "platform-prod" for r in kube)
    charts = {r["Properties"]["Chart"] for r in _of(template, "Custom::AWSCDK-EKS-HelmChart")}
    assert "neuron-helm-chart" in charts and "nvidia-device-plugin" in charts
    # Every Kubernetes object waits for the handler's access entry.
    entry = next(k for k, r in template["Resources"].items() if r["Type"] == "AWS::EKS::AccessEntry" and "KubectlAccess" in k)
    assert all(entry in r.get("DependsOn", []) for r in kube)


def test_kueue_existing_installs_no_kueue_and_the_local_queue_points_at_the_users_cluster_queue(
    template: dict[str, Any],
) -> None:
    charts = {r["Properties"]["Chart"] for r in _of(template, "Custom::AWSCDK-EKS-HelmChart")}
    assert "kueue" not in charts and "jobset" in charts
    docs = [d for r in _of(template, "Custom::AWSCDK-EKS-KubernetesResource") for d in _manifest(r)]
    kinds = {d.get("kind") for d in docs}
    assert "ClusterQueue" not in kinds
    queue = next(d for d in docs if d.get("kind") == "LocalQueue")
    assert queue["spec"]["clusterQueue"] == "research-cq" and queue["metadata"]["name"] == tj.local_queue_name("research")
    assert any(d.get("kind") == "ResourceFlavor" and d["metadata"]["name"] == "ownk8s-research" for d in docs)


def test_job_render_targets_the_local_queue_of_the_users_cluster_queue(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["job", "render", "research", "--file", str(FIXTURE), "--image", IMAGE]) == 0
    captured = capsys.readouterr()
    docs = list(yaml.safe_load_all(captured.out))
    jobset = next(d for d in docs if d["kind"] == "JobSet")
    assert jobset["metadata"]["labels"][tj.QUEUE_LABEL] == tj.local_queue_name("research") == "research"
    assert "LocalQueue research" in captured.err and "ClusterQueue research-cq" in captured.err


def test_the_deploy_prints_the_stanza_for_the_users_cluster_queue(template: dict[str, Any]) -> None:
    outputs = [o for k, o in template.get("Outputs", {}).items() if "ClusterQueueStanza" in k]
    assert len(outputs) == 1 and "research-cq" in outputs[0]["Description"]
    stanza = json.loads(outputs[0]["Value"])
    assert stanza["clusterQueue"] == "research-cq" and stanza["namespace"] == "neuronkit-training"


def test_the_stanza_names_the_pools_flavor_and_quota() -> None:
    stanza = tj.cluster_queue_stanza(
        environment="ownk8s", pool="research", instance_type="trn1.32xlarge", max_nodes=2, cluster_queue="research-cq"
    )
    flavor = stanza["resourceGroups"][0]["flavors"][0]
    assert stanza["clusterQueue"] == "research-cq" and flavor["name"] == "ownk8s-research"
    assert {r["name"] for r in flavor["resources"]} == set(stanza["resourceGroups"][0]["coveredResources"])


def test_components_off_is_refused_where_the_file_needs_it() -> None:
    found = _problems(_edit(components={"kueue": "off"}))
    assert found == [f"{WHERE}: eks.components.kueue: off, but the training queues (Kueue) need it; use install or existing"]


def test_node_autoscaler_keeps_working_with_a_deprecation_line() -> None:
    data = _edit(components={"kueue": "existing"}, node_autoscaler=False)
    env = parse_environment(data, WHERE)
    assert env.eks is not None and env.eks.component("cluster_autoscaler") == "off"
    lines = [w for w in neuron_warnings(env) if w.startswith("eks.node_autoscaler")]
    assert lines == [
        "eks.node_autoscaler: deprecated; write eks.components.cluster_autoscaler: off (the old spelling is accepted "
        "for one more release)"
    ]
    both = _edit(components={"cluster_autoscaler": "install"}, node_autoscaler=True)
    assert any("eks.node_autoscaler: replaced by eks.components.cluster_autoscaler" in p for p in _problems(both))


def _manifest(resource: dict[str, Any]) -> list[dict[str, Any]]:
    raw = resource["Properties"].get("Manifest")
    if not isinstance(raw, str):
        return []
    try:
        return list(json.loads(raw))
    except ValueError:
        return []


def _imported(stack: Any, *, options: bool = True) -> tuple[Any, Any]:
    from aws_cdk import aws_ec2 as ec2
    from aws_cdk import aws_eks_v2 as eks

    from neuronkit.constructs.eks.cluster import kubectl_layer

    vpc = ec2.Vpc.from_vpc_attributes(
        stack, "Vpc", vpc_id="vpc-0a1b2c3d4e5f67890", vpc_cidr_block="10.30.0.0/16",
        availability_zones=["us-east-2a", "us-east-2b"], private_subnet_ids=["subnet-0a1b2c3d4e5f67890", "subnet-0a1b2c3d4e5f67891"],
    )  # fmt: skip
    opts = eks.KubectlProviderOptions(kubectl_layer=kubectl_layer(stack, "Kubectl"), private_subnets=vpc.private_subnets)
    cluster = eks.Cluster.from_cluster_attributes(
        stack, "Imported", cluster_name="platform-prod", vpc=vpc, cluster_security_group_id="sg-0a1b2c3d4e5f60718",
        cluster_endpoint="https://example.gr7.us-east-2.eks.amazonaws.com", cluster_certificate_authority_data="LS0tLS1CRUdJTi0=",
        kubectl_provider_options=opts if options else None,
    )  # fmt: skip
    return cluster, opts


def test_aws_cdk_2_275_builds_no_provider_from_the_import_options_so_the_construct_does() -> None:
    from aws_cdk import Environment, Stack

    from neuronkit.constructs import ExistingClusterSpec, ExistingEksCluster, NeuronNodeGroup, NodeGroupSpec
    from neuronkit.constructs.eks import eks_boot_script

    stack = Stack(App(), "Mine", env=Environment(account="111111111111", region="us-east-2"))
    imported, opts = _imported(stack)
    # The dependency's behaviour the workaround exists for (existing_cluster.with_kubectl_provider); when aws-cdk-lib
    # builds the provider itself this fails and the workaround can go.
    assert imported.kubectl_provider is None
    mine = ExistingEksCluster(
        stack, "Platform", cluster=imported, kubectl_provider_options=opts,
        spec=ExistingClusterSpec(name="platform-prod", version="1.35", prefix="assist", system_nodes=None),
    )  # fmt: skip
    assert mine.cluster.kubectl_provider is not None and mine.system_nodegroup is None
    NeuronNodeGroup(
        stack, "Inf2", environment="assist", cluster=mine, subnets=imported.vpc.private_subnets,
        spec=NodeGroupSpec(name="assist", instance_types=["inf2.xlarge"], max_size=2, efa=False),
        script=eks_boot_script(environment="assist", pool="assist", instance_types=["inf2.xlarge"], efa=False),
    )  # fmt: skip
    mine.cluster.add_manifest("Hello", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "hello"}})
    t = Template.from_stack(stack).to_json()
    types = [r["Type"] for r in t["Resources"].values()]
    assert "AWS::EKS::Cluster" not in types and types.count("AWS::EKS::AccessEntry") == 1
    entry_id, entry = next((k, r) for k, r in t["Resources"].items() if r["Type"] == "AWS::EKS::AccessEntry")
    assert entry["Properties"]["ClusterName"] == "platform-prod" and "KubectlProvider" in json.dumps(
        entry["Properties"]["PrincipalArn"]
    )
    manifest = next(r for r in t["Resources"].values() if r["Type"] == "Custom::AWSCDK-EKS-KubernetesResource")
    assert entry_id in manifest["DependsOn"]
    group = next(r for r in t["Resources"].values() if r["Type"] == "AWS::EKS::Nodegroup")
    assert group["Properties"]["ClusterName"] == "platform-prod" and group_name(group) == "assist-assist"


def test_an_import_without_provider_options_is_refused_with_the_fix() -> None:
    from aws_cdk import Environment, Stack

    from neuronkit.constructs import ExistingClusterSpec, ExistingEksCluster

    stack = Stack(App(), "Mine", env=Environment(account="111111111111", region="us-east-2"))
    imported, _ = _imported(stack, options=False)
    with pytest.raises(ValueError, match="kubectl_provider_options: required"):
        ExistingEksCluster(stack, "Platform", cluster=imported, spec=ExistingClusterSpec(name="platform-prod", version="1.35"))
    with pytest.raises(ValueError, match="access entries"):
        ExistingClusterSpec(name="p", version="1.35", authentication_mode="CONFIG_MAP")  # type: ignore[arg-type]


def test_cost_leaves_out_the_control_plane_of_a_cluster_the_kit_did_not_create() -> None:
    from neuronkit.reports import cost

    env = load_environment(FIXTURE)
    names = [c.item for c in cost.fixed_costs(env)]
    assert "EKS control plane" not in names and any("system" in n for n in names)


def test_existing_components_are_not_installed_and_the_kit_still_applies_its_objects() -> None:
    data = copy.deepcopy(DATA)
    data["eks"]["components"] = {
        "kueue": "existing", "jobset": "existing", "neuron": "existing", "load_balancer_controller": "existing",
        "keda": "existing", "nvidia_device_plugin": "existing", "cluster_autoscaler": "existing",
        "efa_device_plugin": "existing",
    }  # fmt: skip
    env = parse_environment(data, WHERE)
    app = App()
    build_environment(app, env)
    stack = next(s for s in app.node.children if getattr(s, "stack_name", "") == "ownk8s-eks")
    t = Template.from_stack(stack).to_json()
    assert _of(t, "Custom::AWSCDK-EKS-HelmChart") == []  # every chart is the cluster's own
    text = json.dumps(_of(t, "Custom::AWSCDK-EKS-KubernetesResource"))  # manifests with tokens are Fn::Join pieces
    kinds = {k for k in ("TargetGroupBinding", "LocalQueue", "ResourceFlavor", "ScaledObject") if f'\\"kind\\":\\"{k}\\"' in text}
    # The kit's own objects still go on: the fleet's TargetGroupBinding and ScaledObject, the pool's queue and flavor.
    assert {"TargetGroupBinding", "LocalQueue", "ResourceFlavor", "ScaledObject"} <= kinds, kinds


def test_validate_prints_one_line_for_config_map_and_no_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = copy.deepcopy(DATA)
    data["eks"]["existing"]["authentication_mode"] = "CONFIG_MAP"
    path = tmp_path / "ownk8s.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    assert main(["validate", "--file", str(path)]) != 0
    err = capsys.readouterr().err.strip().splitlines()
    assert [line for line in err if "authentication_mode" in line] == [
        f"{path}: eks.existing.authentication_mode: CONFIG_MAP: the kit reaches the cluster through access entries and "
        "never edits aws-auth; switch the cluster to API_AND_CONFIG_MAP (aws eks update-cluster-config --access-config "
        "authenticationMode=API_AND_CONFIG_MAP)"
    ]
    assert not any("Traceback" in line for line in err)


def test_an_unquoted_off_is_off_not_a_refusal() -> None:
    """YAML 1.1 reads `keda: off` as false: the file means off (review of issue 51, finding 8)."""
    data = yaml.safe_load(FIXTURE.read_text().replace("  components:\n", "  components:\n    keda: off\n", 1))
    assert data["eks"]["components"]["keda"] is False
    # Read as off: this file's fleets need KEDA, so it is the refusal of off, not of a boolean.
    (problem,) = _problems(data)
    assert "eks.components.keda: off, but" in problem and "False" not in problem


def test_components_left_at_install_on_an_existing_cluster_are_named_once() -> None:
    """helm upgrade --install would take a same-named release over and uninstall it with the stack: validate names the
    components the file left at install on a cluster the kit did not create (review of issue 51, finding 1)."""
    env = parse_environment(copy.deepcopy(DATA), WHERE)
    lines = [w for w in neuron_warnings(env) if w.startswith("eks.components: ")]
    assert len(lines) == 1 and "load_balancer_controller" in lines[0] and "kueue" not in lines[0], lines


def test_a_file_with_only_the_cluster_name_and_its_pin_synthesizes_the_same_template(template: dict[str, Any]) -> None:
    # What `neuronkit pin` records (tests/moto/test_eks_existing_pin.py runs it against moto's DescribeCluster).
    from neuronkit.config.cluster_pins import ATTRIBUTES, context_key

    full = DATA["eks"]["existing"]
    data = _edit(existing={"cluster_name": full["cluster_name"]})
    pins = {context_key(DATA["account"], DATA["region"], full["cluster_name"]): {k: full[k] for k in ATTRIBUTES}}
    env = parse_environment(data, WHERE, context=pins)
    app = App()
    build_environment(app, env)
    stack = next(s for s in app.node.children if getattr(s, "stack_name", "") == "ownk8s-eks")
    assert Template.from_stack(stack).to_json() == template
