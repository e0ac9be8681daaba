"""Every GPU fallback type of a served fleet on EKS (issue 49): each type its own profile, node group and seeded
Deployment behind the fleet's one Service and binding; the spill function names every GPU Deployment (environment and
Kubernetes rights); a fleet without fallback still gets the rollout and compile alarms; adding a second type to a
running environment replaces nothing of the first (day two)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from aws_cdk import Stack

from neuronkit.catalog import releases, serving
from neuronkit.config.base import ConfigError
from neuronkit.config.loader import parse_environment
from neuronkit.constructs.eks import EksServingFleet, EksServingSpec, GpuFallback, GpuSpill, LoadBalancerController, SpillSpec
from neuronkit.constructs.serving_specs import ServingSpec
from neuronkit.kubernetes import scheduling
from neuronkit.kubernetes import serving as ks
from neuronkit.kubernetes import spill as rbac
from tests.templates import bare_stack, group_name, resources, template
from tests.unit.test_eks import _cluster

ROOT = Path(__file__).parents[2]
MLP = ROOT / "tests" / "fixtures" / "user_environments" / "mlp.yaml"
LLAMA_8B = serving.ModelSpec(id="meta-llama/Llama-3.1-8B-Instruct", s3_prefix="models/llama/", parameters_billion=8.0)
R2311 = releases.release("2.31.1")
TYPES = ("g6e.xlarge", "g6.2xlarge")


def _fleet(stack: Stack, gpu: tuple[str, ...]) -> EksServingFleet:
    cluster = _cluster(stack)
    controller = LoadBalancerController(stack, "Lbc", cluster=cluster, environment="team")
    first = {"gpu_type": gpu[0], "gpu_pool": "chat-gpu"} if len(gpu) == 1 else {}
    more = (
        tuple(GpuFallback(t, "chat-gpu" if i == 0 else f"chat-gpu-{scheduling.type_slug(t)}") for i, t in enumerate(gpu))
        if len(gpu) > 1
        else ()
    )
    return EksServingFleet(
        stack, "Serving-chat", environment="team", cluster=cluster, controller=controller,
        spec=EksServingSpec(
            name="chat", serving=ServingSpec(model=LLAMA_8B, neuron_release=R2311), neuron_type="inf2.8xlarge",
            neuron_pool="chat", replicas=2, gpu_fallbacks=more, **first,  # type: ignore[arg-type]
        ),
        vpc=cluster.cluster.vpc, subnets=cluster.cluster.vpc.private_subnets[:2], artifacts_bucket="team-artifacts",
        ingress_cidr="10.0.0.0/16",
    )  # fmt: skip


@pytest.fixture(scope="module")
def two() -> tuple[dict[str, Any], EksServingFleet]:
    stack = bare_stack()
    fleet = _fleet(stack, TYPES)
    return template(stack), fleet


def _patched_labels(w: ks.FleetWorkload) -> dict[str, str]:
    labels: dict[str, str] = {op["path"]: op["value"] for op in ks.template_patch(w)}["/spec/template"]["metadata"]["labels"]
    return labels


def _matches(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """Kubernetes' label selector: matchLabels and the matchExpressions operators the kit uses."""
    if not all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items()):
        return False
    for e in selector.get("matchExpressions", []):
        present = e["key"] in labels
        if (e["operator"] == "DoesNotExist" and present) or (e["operator"] == "Exists" and not present):
            return False
        if e["operator"] not in ("DoesNotExist", "Exists"):
            raise AssertionError(f"operator {e['operator']} not modelled here")
    return bool(selector)


def test_each_gpu_type_gets_its_own_profile_pool_and_seeded_deployment(two: tuple[dict[str, Any], EksServingFleet]) -> None:
    t, fleet = two
    gpu = [w for w in fleet.workloads if w.accelerator == "gpu"]
    assert [w.instance_type for w in gpu] == list(TYPES)
    assert fleet.gpu_deployments == ["chat-gpu", "chat-gpu-g6-2xlarge"] and fleet.gpu_deployment == "chat-gpu"
    assert [w.name for w in gpu] == fleet.gpu_deployments and [w.pool for w in gpu] == ["chat-gpu", "chat-gpu-g6-2xlarge"]
    for w in gpu:
        pod = ks.deployment(w)["spec"]["template"]["spec"]
        assert pod["containers"][0]["resources"]["limits"] == {scheduling.GPU_DEVICE: str(serving.accelerators(w.instance_type))}
        assert pod["nodeSelector"][scheduling.POOL_LABEL] == w.pool
        assert w.profile == fleet.profiles[w.instance_type] and w.profile.instance_type == w.instance_type
    assert set(fleet.seeds) == set(fleet.template_patches) == set(fleet.gpu_deployments)
    for name in fleet.gpu_deployments:
        seed = t["Resources"][Stack.of(fleet).get_logical_id(fleet.seeds[name].node.default_child)]["Properties"]
        docs = json.loads(seed["Manifest"])
        assert [(d["metadata"]["name"], d["spec"]["replicas"]) for d in docs] == [(name, 0)] and seed["Overwrite"] is False
    # Neither GPU Deployment is in the re-applied manifest (the spill controller owns their replicas).
    assert [d["metadata"]["name"] for d in fleet.documents if d["kind"] == "Deployment"] == ["chat-neuron"]


def test_one_service_and_one_binding_send_traffic_to_every_gpu_types_pods(two: tuple[dict[str, Any], EksServingFleet]) -> None:
    """The behavioural test of the Service, for every GPU type: restricting the binding's Service to the Neuron pods, or
    to the first GPU type's, leaves spilled pods of a type without traffic."""
    _, fleet = two
    (binding,) = [d for d in fleet.documents if d["kind"] == "TargetGroupBinding"]
    (svc,) = [
        d for d in fleet.documents if d["kind"] == "Service" and d["metadata"]["name"] == binding["spec"]["serviceRef"]["name"]
    ]
    selector = {"matchLabels": svc["spec"]["selector"]}
    gpu = [w for w in fleet.workloads if w.accelerator == "gpu"]
    assert len(gpu) == 2
    for w in gpu:
        assert _matches(selector, _patched_labels(w)), f"the Service does not select {w.name}'s pods"
        assert not _matches({"matchLabels": {**selector["matchLabels"], ks.ACCELERATOR_LABEL: "neuron"}}, _patched_labels(w))
    # A Service narrowed to the first GPU type's pods (its budget's selector) would starve the second type's.
    assert not _matches(ks.selector(gpu[0]), _patched_labels(gpu[1]))


def test_every_pod_has_exactly_one_disruption_budget_and_each_deployment_its_own_pods(
    two: tuple[dict[str, Any], EksServingFleet],
) -> None:
    """Two budgets over one pod make it unevictable (the eviction API refuses a pod with more than one): the first GPU
    type's budget leaves the further types' pods out, though its Deployment selector (immutable) is a subset of theirs."""
    _, fleet = two
    budgets = [d["spec"]["selector"] for d in fleet.documents if d["kind"] == "PodDisruptionBudget"]
    assert len(budgets) == len(fleet.workloads) == 3
    for w in fleet.workloads:
        labels = _patched_labels(w) if w.seeded else ks.deployment(w)["spec"]["template"]["metadata"]["labels"]
        assert sum(_matches(b, labels) for b in budgets) == 1, (
            f"{w.name}'s pods fall under {sum(_matches(b, labels) for b in budgets)} budgets"
        )
    first, second = (w for w in fleet.workloads if w.accelerator == "gpu")
    assert ks.deployment(first)["spec"]["selector"] == {
        "matchLabels": scheduling.fleet_labels("chat") | {ks.ACCELERATOR_LABEL: "gpu"}
    }
    assert ks.labels(second)[scheduling.GPU_TYPE_LABEL] == "g6-2xlarge"


def test_adding_a_second_gpu_type_keeps_the_first_ones_resources() -> None:
    """Day two at the construct: the one-type fleet's resources (seed, template patch, binding, Service manifest) keep
    their logical IDs when a second type is listed; the first GPU Deployment's seed is the same manifest."""
    one_stack, two_stack = bare_stack(), bare_stack()
    one, two_types = _fleet(one_stack, TYPES[:1]), _fleet(two_stack, TYPES)
    before, after = template(one_stack), template(two_stack)
    lost = set(before["Resources"]) - set(after["Resources"])
    assert lost == set(), f"adding a GPU type would replace or delete {sorted(lost)}"
    for fleet, t in ((one, before), (two_types, after)):
        assert Stack.of(fleet).get_logical_id(fleet.seeds["chat-gpu"].node.default_child) in t["Resources"]
    seed_id = Stack.of(one).get_logical_id(one.seeds["chat-gpu"].node.default_child)
    assert before["Resources"][seed_id] == after["Resources"][seed_id]


def _spill_env(t: dict[str, Any]) -> dict[str, Any]:
    (fn,) = [f for f in resources(t, "AWS::Lambda::Function").values() if "MEMORY_PARAMETER" in json.dumps(f)]
    env: dict[str, Any] = fn["Properties"]["Environment"]["Variables"]
    return env


def test_the_spill_function_scales_exactly_the_fleets_gpu_deployments() -> None:
    stack = bare_stack()
    cluster = _cluster(stack)
    names = tuple(scheduling.gpu_deployment_names("chat", TYPES))
    GpuSpill(
        stack, "Spill", cluster=cluster.cluster, subnets=cluster.cluster.vpc.private_subnets,
        spec=SpillSpec(environment="team", fleet="chat", max_gpu_replicas=4, gpu_deployments=names),
        neuron_group_names=["eks-chat"], gpu_group_names=["eks-chat-gpu", "eks-chat-gpu-g6"],
    )  # fmt: skip
    t = template(stack)
    env = _spill_env(t)
    assert env["GPU_DEPLOYMENTS"] == "chat-gpu,chat-gpu-g6-2xlarge" and env["GPU_GROUPS"] == "eks-chat-gpu,eks-chat-gpu-g6"
    role = rbac.role("chat", names)
    (scale,) = [r for r in role["rules"] if r["resources"] == ["deployments/scale"]]
    assert scale["resourceNames"] == list(names) and scale["verbs"] == ["patch"]
    (get,) = [r for r in role["rules"] if r["resources"] == ["deployments"]]
    assert get["resourceNames"] == ["chat-neuron", *names]
    with pytest.raises(ValueError, match="one per Deployment"):
        GpuSpill(
            stack, "Wrong", cluster=cluster.cluster, subnets=cluster.cluster.vpc.private_subnets,
            spec=SpillSpec(environment="team", fleet="chat", max_gpu_replicas=4, gpu_deployments=names),
            gpu_group_names=["eks-chat-gpu"],
        )  # fmt: skip


def test_a_fleet_without_fallback_gets_the_rollout_and_compile_alarms_and_no_right_to_scale() -> None:
    stack = bare_stack()
    cluster = _cluster(stack)
    spill = GpuSpill(
        stack, "Spill", cluster=cluster.cluster, subnets=cluster.cluster.vpc.private_subnets,
        spec=SpillSpec(environment="team", fleet="serve", max_gpu_replicas=0, gpu_deployments=()),
        neuron_group_names=["eks-serve"],
    )  # fmt: skip
    t = template(stack)
    names = {a["Properties"]["AlarmName"] for a in resources(t, "AWS::CloudWatch::Alarm").values()}
    assert names == {"team-serve-rollout-stalled", "team-serve-compile-failed", "team-serve-spill-errors"}
    assert spill.fallback_alarm is None
    env = _spill_env(t)
    assert env["GPU_DEPLOYMENTS"] == "" and "GPU_DEPLOYMENT" not in env and env["MAX_GPU_REPLICAS"] == "0"
    role = rbac.role("serve", ())
    assert not [r for r in role["rules"] if "patch" in r["verbs"]]
    with pytest.raises(ValueError, match="without GPU Deployments must be 0"):
        SpillSpec(environment="team", fleet="serve", max_gpu_replicas=2, gpu_deployments=())


# --- the environment file ------------------------------------------------------------------------------------------
def _mlp(**fleet: Any) -> dict[str, Any]:
    data = copy.deepcopy(yaml.safe_load(MLP.read_text()))
    data["inference"][0].update(fleet)
    return data


def test_a_users_eks_file_with_two_fallback_types_validates() -> None:
    env = parse_environment(yaml.safe_load(MLP.read_text()), "environments/mlp.yaml")
    (fleet,) = env.inference
    assert len(fleet.fallback_types) == 2 and fleet.model is not None


def test_a_fallback_type_without_a_serving_profile_is_refused_in_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    real = serving.profile

    def without_g6(model: Any, instance_type: str, *args: Any, **kwargs: Any) -> Any:
        if instance_type == "g6.2xlarge":
            raise ValueError("g6.2xlarge: the catalog does not say how to start it")
        return real(model, instance_type, *args, **kwargs)

    monkeypatch.setattr(serving, "profile", without_g6)
    with pytest.raises(ConfigError) as e:
        parse_environment(_mlp(), "environments/mlp.yaml")
    lines = [line for line in str(e.value).splitlines() if "fallback_types" in line]
    assert len(lines) == 1 and "inference[0].fallback_types[1]" in lines[0] and "no serving profile" in lines[0]


# --- the stack, from a user's file (one synth each: the file as it is, and with its first type only) ----------------
def _eks_template(data: dict[str, Any], name: str = "mlp") -> tuple[dict[str, Any], Any]:
    from neuronkit.stacks import build_environment
    from tests.conftest import pinned_app

    env = parse_environment(data, f"environments/{name}.yaml")
    app, stacks = pinned_app(lambda a: build_environment(a, env))
    return app.synth().get_stack_by_name(f"{env.name}-eks").template, stacks.eks


@pytest.fixture(scope="module")
def mlp_two() -> tuple[dict[str, Any], Any]:
    return _eks_template(yaml.safe_load(MLP.read_text()))


@pytest.fixture(scope="module")
def mlp_one() -> tuple[dict[str, Any], Any]:
    data = yaml.safe_load(MLP.read_text())
    data["inference"][0]["fallback_types"] = data["inference"][0]["fallback_types"][:1]
    return _eks_template(data)


def _manifests(t: dict[str, Any]) -> list[dict[str, Any]]:
    """Every Kubernetes object the template applies (manifest resources; deploy-time values as placeholders)."""
    out: list[dict[str, Any]] = []
    for r in t["Resources"].values():
        manifest = r.get("Properties", {}).get("Manifest")
        if r["Type"] != "Custom::AWSCDK-EKS-KubernetesResource" or manifest is None:
            continue
        text = (
            manifest if isinstance(manifest, str) else "".join(p if isinstance(p, str) else "x" for p in manifest["Fn::Join"][1])
        )
        out.extend(json.loads(text))
    return out


def test_the_users_file_synthesizes_two_gpu_groups_two_deployments_one_binding(mlp_two: tuple[dict[str, Any], Any]) -> None:
    t, eks = mlp_two
    groups = {group_name(r): r["Properties"] for r in resources(t, "AWS::EKS::Nodegroup").values()}
    gpu = {n: p for n, p in groups.items() if n.startswith("mlp-llama-gpu")}
    assert sorted(gpu) == ["mlp-llama-gpu", "mlp-llama-gpu-g6-2xlarge"]
    assert gpu["mlp-llama-gpu"]["AmiType"] == gpu["mlp-llama-gpu-g6-2xlarge"]["AmiType"] == "AL2023_x86_64_NVIDIA"
    served = eks.serving["llama"]
    assert served.gpu_deployments == ["llama-gpu", "llama-gpu-g6-2xlarge"]
    docs = _manifests(t)
    deployments = sorted(d["metadata"]["name"] for d in docs if d["kind"] == "Deployment")
    assert deployments == ["llama-gpu", "llama-gpu-g6-2xlarge", "llama-neuron"]
    assert len([d for d in docs if d["kind"] == "TargetGroupBinding"]) == 1
    # The node selector of each GPU Deployment (in its template patch) is its own group.
    pools = {w.name: w.pool for w in served.workloads}
    assert pools == {"llama-neuron": "llama", "llama-gpu": "llama-gpu", "llama-gpu-g6-2xlarge": "llama-gpu-g6-2xlarge"}


def test_the_users_spill_function_names_both_gpu_deployments_and_groups(mlp_two: tuple[dict[str, Any], Any]) -> None:
    t, eks = mlp_two
    spill = eks.spill["llama"]
    assert spill.spec.deployments == ("llama-gpu", "llama-gpu-g6-2xlarge")
    env = _spill_env(t)
    assert env["GPU_DEPLOYMENTS"] == "llama-gpu,llama-gpu-g6-2xlarge"
    assert len(env["GPU_GROUPS"]["Fn::Join"][1]) >= 3  # two Auto Scaling group names, looked up at deploy
    (role,) = [d for d in _manifests(t) if d["kind"] == "Role" and d["metadata"]["name"] == "llama-spill"]
    (scale,) = [r for r in role["rules"] if r["resources"] == ["deployments/scale"]]
    assert scale["resourceNames"] == ["llama-gpu", "llama-gpu-g6-2xlarge"]


def test_adding_a_second_fallback_type_replaces_nothing_of_the_first(
    mlp_one: tuple[dict[str, Any], Any], mlp_two: tuple[dict[str, Any], Any]
) -> None:
    """Day two: every resource of the one-type stack keeps its logical ID, and the first GPU group, its launch
    template and the first GPU Deployment's seed keep their properties (no replacement, no re-created Deployment)."""
    before, _ = mlp_one
    after, _ = mlp_two
    lost = sorted(set(before["Resources"]) - set(after["Resources"]))
    assert lost == [], f"adding a GPU type deletes or replaces {lost}"
    first = [k for k, r in before["Resources"].items() if r["Type"] == "AWS::EKS::Nodegroup" and group_name(r) == "mlp-llama-gpu"]
    assert len(first) == 1
    assert before["Resources"][first[0]]["Properties"] == after["Resources"][first[0]]["Properties"]
    seeds = [k for k, r in before["Resources"].items() if "SeedGpu" in k]
    assert len(seeds) == 1 and before["Resources"][seeds[0]] == after["Resources"][seeds[0]]
    templates = [k for k, r in before["Resources"].items() if r["Type"] == "AWS::EC2::LaunchTemplate" and "llamagpu" in k.lower()]
    assert templates and all(before["Resources"][k] == after["Resources"][k] for k in templates)


def test_cluster_autoscaler_and_the_nvidia_plugin_cover_every_gpu_group(mlp_two: tuple[dict[str, Any], Any]) -> None:
    _, eks = mlp_two
    gpu = [eks.node_groups[n] for n in ("llama-gpu", "llama-gpu-g6-2xlarge")]
    scaled = {g.name for g in eks.autoscaling.spec.groups}
    assert {g.auto_scaling_group_name for g in gpu} <= scaled
    assert set(eks.workloads.spec.gpu_pools) >= {"llama-gpu", "llama-gpu-g6-2xlarge"}


def test_every_served_fleet_of_the_eks_example_has_the_rollout_and_compile_alarms() -> None:
    """With and without fallback types (the example's chat-trn2 has none): the alarms read the spill function's
    metrics, so every served fleet gets the function; only fleets with GPU types may scale anything."""
    from neuronkit.config import load_environment

    env = load_environment(ROOT / "examples" / "environments" / "eks.yaml")
    served = [f for f in env.inference if f.model is not None]
    assert any(not f.fallback_types for f in served) and any(f.fallback_types for f in served)
    t, eks = _eks_template(yaml.safe_load((ROOT / "examples" / "environments" / "eks.yaml").read_text()), env.name)
    names = {a["Properties"]["AlarmName"] for a in resources(t, "AWS::CloudWatch::Alarm").values()}
    for f in served:
        assert {f"{env.name}-{f.name}-rollout-stalled", f"{env.name}-{f.name}-compile-failed"} <= names, f.name
        assert (f"{env.name}-{f.name}-gpu-spill" in names) == bool(f.fallback_types)
        roles = [d for d in _manifests(t) if d["kind"] == "Role" and d["metadata"]["name"] == f"{f.name}-spill"]
        patches = [r for role in roles for r in role["rules"] if "patch" in r["verbs"]]
        assert len(roles) == 1 and bool(patches) == bool(f.fallback_types), f.name
