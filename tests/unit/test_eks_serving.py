"""Serving on EKS offline: one serving profile on both platforms, the manifests against the pinned Kubernetes schema and
the checked-in TargetGroupBinding CRD, timing consistent with the target group, the artifact wait on recorded S3
states, the load balancer controller pins, and validate's refusals of partial-node requests."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml
from aws_cdk import Stack

from neuronkit import catalog
from neuronkit.catalog import releases, serving
from neuronkit.config.base import ConfigError
from neuronkit.config.loader import parse_environment
from neuronkit.constructs.eks import EksServingFleet, EksServingSpec, LoadBalancerController
from neuronkit.constructs.inference_fleet import InferenceFleet
from neuronkit.constructs.node_pool import FleetNodesSpec
from neuronkit.constructs.serving_specs import ServingSpec
from neuronkit.kubernetes import load_balancer_controller as lbc
from neuronkit.kubernetes import scheduling
from neuronkit.kubernetes import serving as ks
from tests.templates import bare_stack, template
from tests.unit.test_eks import _cluster

K8S = str(catalog.eks_facts()["kubernetes"]["version"])
STATES = Path(__file__).parents[1] / "fixtures" / "s3-states"
FIXTURES = Path(__file__).parents[1] / "fixtures" / "charts"
EXAMPLE = Path(__file__).parents[2] / "examples" / "environments" / "eks.yaml"
LLAMA_8B = serving.ModelSpec(id="meta-llama/Llama-3.1-8B-Instruct", s3_prefix="models/llama/", parameters_billion=8.0)
R2281, R2311, R233 = releases.release("2.28.1"), releases.release("2.31.1"), releases.release("2.33.0")


def _fleet(stack: Stack, cluster: Any, controller: Any, name: str, neuron: str, release: Any, gpu: str | None) -> EksServingFleet:
    return EksServingFleet(
        stack,
        f"Serving-{name}",
        environment="team",
        cluster=cluster,
        controller=controller,
        spec=EksServingSpec(
            name=name, serving=ServingSpec(model=LLAMA_8B, neuron_release=release), neuron_type=neuron, neuron_pool=name,
            gpu_type=gpu, gpu_pool=f"{name}-gpu" if gpu else None, replicas=2,
        ),
        vpc=cluster.cluster.vpc,
        subnets=cluster.cluster.vpc.private_subnets[:2],
        artifacts_bucket="team-artifacts",
        ingress_cidr="10.0.0.0/16",
    )  # fmt: skip


@pytest.fixture(scope="module")
def built() -> tuple[dict[str, Any], dict[str, EksServingFleet]]:
    """One cluster: an inf2 fleet on 2.31.1 with a GPU fallback and a trn2 fleet on 2.33.0 (per-pool releases)."""
    stack = bare_stack()
    cluster = _cluster(stack)
    controller = LoadBalancerController(stack, "Lbc", cluster=cluster, environment="team")
    fleets = {
        "chat": _fleet(stack, cluster, controller, "chat", "inf2.48xlarge", R2311, "g6e.12xlarge"),
        "big": _fleet(stack, cluster, controller, "big", "trn2.48xlarge", R233, None),
    }
    return template(stack), fleets


def _of_type(t: dict[str, Any], kind: str) -> dict[str, Any]:
    return {k: r for k, r in t["Resources"].items() if r["Type"] == kind}


_PSEUDO = {"AWS::AccountId": "111111111111", "AWS::Region": "us-east-1", "AWS::URLSuffix": "amazonaws.com",
           "AWS::Partition": "aws"}  # fmt: skip


def _render(value: Any) -> Any:
    """CloudFormation intrinsics in a resolved manifest as the strings they become at deploy (pseudo parameters by
    their example values, other references by a placeholder)."""
    if isinstance(value, list):
        return [_render(v) for v in value]
    if isinstance(value, dict):
        if "Ref" in value:
            return _PSEUDO.get(value["Ref"], f"ref-{value['Ref']}")
        if "Fn::GetAtt" in value:
            return "arn:aws:elasticloadbalancing:us-east-1:111111111111:targetgroup/team/0123456789abcdef"
        if "Fn::Join" in value:
            sep, parts = value["Fn::Join"]
            return sep.join(str(_render(x)) for x in parts)
        return {k: _render(v) for k, v in value.items()}
    return value


def _resolve(fleet: EksServingFleet) -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = _render(Stack.of(fleet).resolve(fleet.documents))
    return docs


# --- one serving profile, two platforms ------------------------------------------------------------------------------
def test_an_asg_fleet_and_an_eks_fleet_render_the_same_args_env_and_key() -> None:
    """The same model, type and release on both paths: the Auto Scaling fleet's profile and the EKS Deployment's
    container carry equal server command lines, environments and compiled-artifact keys (compared through the
    functions and the rendered outputs, never literals)."""
    spec = ServingSpec(model=LLAMA_8B, neuron_release=R2281)
    asg_stack = bare_stack("Asg")
    eks_stack = bare_stack("Eks")
    cluster = _cluster(eks_stack)
    asg = InferenceFleet(
        asg_stack, "Fleet", environment="team", name="chat",
        nodes=FleetNodesSpec(neuron_types=["inf2.48xlarge"], fallback_types=["g6e.12xlarge"], min_size=1, max_size=2),
        vpc=_asg_vpc(asg_stack), subnet_ids={"use1-az1": "subnet-1", "use1-az2": "subnet-2"},
        artifacts_bucket="team-artifacts", serving=spec,
    )  # fmt: skip
    controller = LoadBalancerController(eks_stack, "Lbc", cluster=cluster, environment="team")
    eks_fleet = EksServingFleet(
        eks_stack, "Serving", environment="team", cluster=cluster, controller=controller,
        spec=EksServingSpec(name="chat", serving=spec, neuron_type="inf2.48xlarge", neuron_pool="chat",
                            gpu_type="g6e.12xlarge", gpu_pool="chat-gpu"),
        vpc=cluster.cluster.vpc, subnets=cluster.cluster.vpc.private_subnets[:2], artifacts_bucket="team-artifacts",
        ingress_cidr="10.0.0.0/16",
    )  # fmt: skip
    for t in ("inf2.48xlarge", "g6e.12xlarge"):
        a, e = asg.profiles[t], eks_fleet.profiles[t]
        assert serving.server_command(a, LLAMA_8B, 8080) == serving.server_command(e, LLAMA_8B, 8080)
        assert a.env == e.env and a.cache_key == e.cache_key and a.tensor_parallel == e.tensor_parallel and a.lnc == e.lnc
    # And what each platform renders: the node's SERVE_COMMAND_ARGS / CACHE_PREFIX vs the Deployment's container.
    neuron = next(w for w in eks_fleet.workloads if w.accelerator == "neuron")
    container = ks.deployment(neuron)["spec"]["template"]["spec"]["containers"][0]
    asg_values = asg._type_values("inf2.48xlarge", 8080)
    assert " ".join(container["command"]) == asg_values["SERVE_COMMAND_ARGS"]
    assert {v["name"]: v["value"] for v in container["env"]} == dict(
        pair.split("=", 1) for pair in str(asg_values["SERVE_ENV"]).split()
    )
    assert next(v["value"] for v in ks.deployment(neuron)["spec"]["template"]["spec"]["initContainers"][0]["env"]
                if v["name"] == "CACHE_PREFIX") == asg_values["CACHE_PREFIX"]  # fmt: skip


def _asg_vpc(stack: Stack) -> Any:
    from aws_cdk import aws_ec2 as ec2

    return ec2.Vpc.from_vpc_attributes(
        stack, "Vpc", vpc_id="vpc-1", vpc_cidr_block="10.0.0.0/16", availability_zones=["us-east-1a", "us-east-1b"],
        private_subnet_ids=["subnet-1", "subnet-2"],
    )  # fmt: skip


def test_inf2_on_231_and_trn2_on_233_in_one_cluster_render_their_own_engines(
    built: tuple[dict[str, Any], dict[str, EksServingFleet]],
) -> None:
    _, fleets = built
    inf2 = fleets["chat"].profiles["inf2.48xlarge"]
    trn2 = fleets["big"].profiles["trn2.48xlarge"]
    assert serving.engine_of(inf2.image) == serving.family_engine("inf2.48xlarge") == "nxdi-vllm"
    assert serving.engine_of(trn2.image) == serving.family_engine("trn2.48xlarge") == "vllm-neuron"
    assert inf2.image == R2311.container("vllm-serving") and trn2.image == R233.container("vllm-serving")
    assert "sdk2.31.1" in str(inf2.cache_key) and "sdk2.33.0" in str(trn2.cache_key)
    images = {w.fleet: w.image for f in fleets.values() for w in f.workloads if w.accelerator == "neuron"}
    assert images["chat"].endswith(inf2.image.split("/", 1)[1]) and images["big"].endswith(trn2.image.split("/", 1)[1])


# --- manifests --------------------------------------------------------------------------------------------------------
def test_every_manifest_validates_against_the_pinned_kubernetes_and_the_crd(
    built: tuple[dict[str, Any], dict[str, EksServingFleet]],
) -> None:
    _, fleets = built
    schema = lbc.target_group_binding_schema("v1beta1")
    kinds: list[str] = []
    for fleet in fleets.values():
        for doc in [ks.namespace(), *_resolve(fleet)]:
            kinds.append(doc["kind"])
            if doc["kind"] == "TargetGroupBinding":
                jsonschema.validate(doc, schema)
            else:
                kubernetes_validate.validate(doc, K8S, strict=True)
    # The GPU Deployment is in no re-applied manifest: its seed and the seed with its template patch applied validate.
    for fleet in fleets.values():
        for w in (w for w in fleet.workloads if w.seeded):
            seed = _render(Stack.of(fleet).resolve(ks.seed_deployment(w)))
            kubernetes_validate.validate(seed, K8S, strict=True)
            kubernetes_validate.validate(
                _json_patch(seed, _render(Stack.of(fleet).resolve(ks.template_patch(w)))), K8S, strict=True
            )
            kinds.append("Deployment")
    assert kinds.count("Deployment") == 3 and kinds.count("TargetGroupBinding") == 2 and kinds.count("Job") == 2
    # The CRD schema refuses what the controller would: a binding without its target group.
    bad = ks.target_group_binding("chat", "arn", 8080)
    del bad["spec"]["targetGroupARN"]
    bad["spec"]["targetType"] = "pod"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(bad, schema)


def test_the_checked_in_crd_and_policy_name_the_pinned_app_version() -> None:
    facts = lbc.chart_facts()
    header = (Path(lbc.__file__).parent / "crds" / str(facts["crd"])).read_text().splitlines()[:3]
    assert any(str(facts["app_version"]) in line for line in header) and any("Source: https://" in line for line in header)
    assert lbc.target_group_binding_crd()["metadata"]["name"] == "targetgroupbindings.elbv2.k8s.aws"
    doc = lbc.iam_policy_document()
    assert doc["version"] == facts["app_version"] and f"/{facts['app_version']}/" in doc["source"]
    assert any("elasticloadbalancing:RegisterTargets" in s.get("Action", []) for s in doc["policy"]["Statement"])
    fixture = yaml.safe_load((FIXTURES / "aws-load-balancer-controller-3.5.0.values.yaml").read_text())
    assert fixture["chart_version"] == str(facts["version"])


def test_controller_values_exist_in_the_pinned_chart_and_run_on_the_system_group() -> None:
    fixture = yaml.safe_load((FIXTURES / "aws-load-balancer-controller-3.5.0.values.yaml").read_text())["values"]
    values = lbc.values(cluster_name="team", region="us-east-1", vpc_id="vpc-1")
    assert set(values) - set(fixture) == set()
    assert values["nodeSelector"] == scheduling.system_node_selector()
    assert (
        values["enableServiceMutatorWebhook"] is False
        and values["serviceAccount"]["name"] == lbc.chart_facts()["service_account"]
    )


def test_deployments_are_whole_node_on_their_tainted_group_and_never_drop_below_replicas(
    built: tuple[dict[str, Any], dict[str, EksServingFleet]],
) -> None:
    _, fleets = built
    seen = 0
    for fleet in fleets.values():
        for w in fleet.workloads:
            d = ks.deployment(w)
            pod = d["spec"]["template"]["spec"]
            it = catalog.get(w.instance_type)
            limits = pod["containers"][0]["resources"]["limits"]
            if w.accelerator == "neuron":
                assert (
                    limits == {"aws.amazon.com/neuron": str(it.neuron_devices)}
                    and d["metadata"]["name"] == fleet.neuron_deployment
                )
            else:
                assert limits == {scheduling.GPU_DEVICE: str(it.gpus)} and d["metadata"]["name"] == fleet.gpu_deployment
                assert d["spec"]["replicas"] == 0  # the GPU Deployment starts at zero
            assert pod["tolerations"] == scheduling.accelerator_tolerations(w.accelerator)
            assert pod["nodeSelector"][scheduling.POOL_LABEL] == w.pool
            assert d["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0
            # Stalled only past the compile wait and the boot (the rollout-stalled alarm reads the controller's verdict).
            budget = w.profile.boot_seconds + (serving.compile_budget_seconds() if w.profile.cache_key else 0)
            assert d["spec"]["progressDeadlineSeconds"] >= budget
            assert pod["containers"][0]["image"] == w.image and ":latest" not in w.image
            seen += 1
    assert seen == 3


def test_prestop_and_grace_follow_the_target_groups_deregistration_delay(
    built: tuple[dict[str, Any], dict[str, EksServingFleet]],
) -> None:
    t, fleets = built
    groups = _of_type(t, "AWS::ElasticLoadBalancingV2::TargetGroup")
    assert len(groups) == 2
    for g in groups.values():
        assert g["Properties"]["TargetType"] == "ip"
        attrs = {a["Key"]: a["Value"] for a in g["Properties"]["TargetGroupAttributes"]}
        drain = int(attrs["deregistration_delay.timeout_seconds"])
        for fleet in fleets.values():
            for w in fleet.workloads:
                pod = ks.deployment(w)["spec"]["template"]["spec"]
                prestop = pod["containers"][0]["lifecycle"]["preStop"]["sleep"]["seconds"]
                assert prestop >= drain
                assert pod["terminationGracePeriodSeconds"] > prestop
    ns = ks.namespace()["metadata"]["labels"]
    assert ns["elbv2.k8s.aws/pod-readiness-gate-inject"] == "enabled"
    assert ns["pod-security.kubernetes.io/enforce"] == "baseline"


def test_the_target_groups_route_to_the_least_outstanding_requests(
    built: tuple[dict[str, Any], dict[str, EksServingFleet]],
) -> None:
    """Neuron and GPU pods share a target group and serve at different speeds: round robin (the ALB default) would send
    each as many requests (ALB user guide, "Edit target group attributes": load_balancing.algorithm.type)."""
    t, _ = built
    groups = _of_type(t, "AWS::ElasticLoadBalancingV2::TargetGroup")
    assert groups
    for g in groups.values():
        attrs = {a["Key"]: a["Value"] for a in g["Properties"]["TargetGroupAttributes"]}
        assert attrs["load_balancing.algorithm.type"] == "least_outstanding_requests"


def _containers(pod: dict[str, Any]) -> list[dict[str, Any]]:
    return [*pod.get("initContainers", []), *pod["containers"]]


def test_no_serving_or_compile_container_adds_a_capability(
    built: tuple[dict[str, Any], dict[str, EksServingFleet]],
) -> None:
    """On Kubernetes the Neuron device plugin hands the pod its devices; no Neuron Kubernetes document asks for an added
    capability (catalog/serving.yaml eks.neuron_capabilities, with its sources), and Pod Security "baseline" refuses
    SYS_ADMIN and IPC_LOCK. Adding either (or any capability) back to a serving or compile container fails here."""
    from neuronkit.kubernetes import pod_security

    _, fleets = built
    pods = [ks.deployment(w)["spec"]["template"]["spec"] for f in fleets.values() for w in f.workloads]
    pods += [ks.compile_job(w)["spec"]["template"]["spec"] for f in fleets.values() for w in f.workloads if w.profile.cache_key]
    assert len(pods) == 5  # three Deployments, two compile Jobs
    for pod in pods:
        for c in _containers(pod):
            added = (c.get("securityContext") or {}).get("capabilities", {}).get("add", [])
            assert added == [], f"{c['name']} adds {added}"
        assert pod_security.baseline_violations(pod) == []
    assert ks.eks_facts()["neuron_capabilities"] == []
    # The checker itself refuses what the Docker path adds.
    bad = {"containers": [{"name": "server", "securityContext": {"capabilities": {"add": ["SYS_ADMIN", "IPC_LOCK"]}}}]}
    assert pod_security.baseline_violations(bad) == ["Capabilities: container server adds IPC_LOCK, SYS_ADMIN"]


def _selects(selector: dict[str, str], labels: dict[str, str]) -> bool:
    """Kubernetes' equality-based selector: every key-value pair of the selector is among the labels."""
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def test_the_bindings_service_selects_both_the_neuron_and_the_gpu_pods(
    built: tuple[dict[str, Any], dict[str, EksServingFleet]],
) -> None:
    """One TargetGroupBinding registers the endpoints of its ``serviceRef`` Service: a Service that selects only the
    Neuron pods leaves spilled GPU pods without traffic. The binding's Service selects the Neuron Deployment's pods
    and the GPU pods as the template patch makes them, and no compile pod."""
    _, fleets = built
    fleet = fleets["chat"]
    docs = fleet.documents
    (binding,) = [d for d in docs if d["kind"] == "TargetGroupBinding"]
    (svc,) = [d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == binding["spec"]["serviceRef"]["name"]]
    selector = svc["spec"]["selector"]
    neuron = next(w for w in fleet.workloads if w.accelerator == "neuron")
    gpu = next(w for w in fleet.workloads if w.accelerator == "gpu")
    neuron_pod = next(d for d in docs if d["kind"] == "Deployment")["spec"]["template"]["metadata"]["labels"]
    patched = {op["path"]: op["value"] for op in ks.template_patch(gpu)}["/spec/template"]["metadata"]["labels"]
    compile_pod = ks.compile_job(neuron)["spec"]["template"]["metadata"]["labels"]
    assert _selects(selector, neuron_pod), "the Service does not select the Neuron pods"
    assert _selects(selector, patched), "the Service does not select the GPU pods: spilled pods would get no traffic"
    assert not _selects(selector, compile_pod), "the Service selects compile pods, which serve nothing"
    # Restricting the Service to the Neuron pods is what this test exists to catch.
    assert not _selects({**selector, ks.ACCELERATOR_LABEL: "neuron"}, patched)


def test_startup_probe_covers_the_boot_budget_and_the_root_volume_the_weights() -> None:
    big = serving.ModelSpec(id="m/big", s3_prefix="m/", parameters_billion=70.6)
    for model in (LLAMA_8B, big):
        p = serving.fleet_profile(model, "inf2.48xlarge", R2281)
        w = ks.FleetWorkload(fleet="f", pool="f", instance_type="inf2.48xlarge", profile=p, model=model, image="i:1",
                             artifacts_image="a:1", bucket="b")  # fmt: skip
        probe = ks.deployment(w)["spec"]["template"]["spec"]["containers"][0]["startupProbe"]
        assert probe["periodSeconds"] * probe["failureThreshold"] >= p.boot_seconds
        assert p.root_volume_gib >= model.weights_gib
    small = ks.startup_failures(ks.FleetWorkload(fleet="f", pool="f", instance_type="inf2.48xlarge", profile=serving.fleet_profile(LLAMA_8B, "inf2.48xlarge", R2281), model=LLAMA_8B, image="i", artifacts_image="a", bucket="b"))  # fmt: skip
    large = ks.startup_failures(ks.FleetWorkload(fleet="f", pool="f", instance_type="inf2.48xlarge", profile=serving.fleet_profile(big, "inf2.48xlarge", R2281), model=big, image="i", artifacts_image="a", bucket="b"))  # fmt: skip
    assert large > small  # bigger weights, longer start-up allowance


def test_a_new_key_gets_its_own_compile_job_and_pods_wait_for_it(
    built: tuple[dict[str, Any], dict[str, EksServingFleet]],
) -> None:
    _, fleets = built
    w = next(w for w in fleets["chat"].workloads if w.accelerator == "neuron")
    job = ks.compile_job(w)
    assert job["spec"]["template"]["spec"]["containers"][0]["name"] == "publish"
    assert job["spec"]["activeDeadlineSeconds"] >= serving.compile_budget_seconds()
    init = ks.deployment(w)["spec"]["template"]["spec"]["initContainers"]
    assert [c["name"] for c in init] == ["wait-for-artifacts", "fetch"]
    env = {v["name"]: v["value"] for v in init[0]["env"]}
    assert env["CACHE_PREFIX"] == w.profile.cache_key and int(env["WAIT_SECONDS"]) == serving.compile_budget_seconds()
    from dataclasses import replace

    other = replace(w, profile=replace(w.profile, cache_key=str(w.profile.cache_key).replace("seqs8", "seqs4")))
    assert ks.compile_job_name(other) != ks.compile_job_name(w)
    # Deploy-time tokens in the pull-through URI are numbered by creation order, not value: the name ignores the number.
    renumbered = replace(w, image=w.image.replace("${Token[", "${Token[X.").replace("]}", ".99]}"))
    assert "${Token[" in w.image and renumbered.image != w.image
    assert ks.compile_job_name(renumbered) == ks.compile_job_name(w)
    gpu = next(w for w in fleets["chat"].workloads if w.accelerator == "gpu")
    assert [c["name"] for c in ks.deployment(gpu)["spec"]["template"]["spec"]["initContainers"]] == ["fetch"]


def test_the_pod_role_reads_the_model_and_writes_only_its_compiled_cache(
    built: tuple[dict[str, Any], dict[str, EksServingFleet]],
) -> None:
    t, _ = built
    associations = _of_type(t, "AWS::EKS::PodIdentityAssociation")
    serving_ones = [
        a["Properties"] for a in associations.values() if a["Properties"]["Namespace"] == scheduling.SERVING_NAMESPACE
    ]
    assert sorted(a["ServiceAccount"] for a in serving_ones) == ["big-serving", "chat-serving"]
    text = json.dumps(_of_type(t, "AWS::IAM::Policy"))
    assert "team-artifacts/models/llama/*" in text and "team-artifacts/compiled/meta-llama-llama-3.1-8b-instruct/*" in text
    assert "s3:DeleteObject" not in text


# --- the init container's wait, on recorded S3 states ----------------------------------------------------------------
def _run_wait(tmp_path: Path, states: list[str], budget: int, poll: int = 30) -> tuple[int, list[str], str]:
    """Run ``neuronkit-artifacts wait`` with a stub ``aws`` answering the recorded listings in turn (the last one
    repeats) and a stub ``sleep`` that records instead of sleeping."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    queue = tmp_path / "queue"
    queue.write_text("\n".join(str(STATES / f"{s}.json") for s in states) + "\n")
    (bin_dir / "aws").write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> {tmp_path}/aws.log\n'
        f'first=$(head -n 1 {queue}); rest=$(tail -n +2 {queue}); [ -n "$rest" ] && printf "%s\\n" "$rest" > {queue}\n'
        'cat "$first"\n'
    )
    (bin_dir / "sleep").write_text(f'#!/bin/sh\necho "$1" >> {tmp_path}/sleeps\n')
    for f in ("aws", "sleep"):
        (bin_dir / f).chmod(0o755)
    key = json.loads((STATES / "empty.json").read_text())["Prefix"][:-1]
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "ARTIFACTS_BUCKET": "eks-artifacts", "CACHE_PREFIX": key,
           "MODEL_PREFIX": "models/x/", "WAIT_SECONDS": str(budget), "POLL_SECONDS": str(poll)}  # fmt: skip
    done = subprocess.run(["sh", str(ks.SCRIPT), "wait"], env=env, capture_output=True, text=True, timeout=60)
    sleeps = (tmp_path / "sleeps").read_text().split() if (tmp_path / "sleeps").exists() else []
    return done.returncode, sleeps, done.stderr


def test_the_wait_returns_at_once_for_a_complete_key(tmp_path: Path) -> None:
    code, sleeps, log = _run_wait(tmp_path, ["complete"], budget=600)
    assert code == 0 and sleeps == [] and "complete" in log


def test_the_wait_waits_for_a_missing_key_until_the_compile_job_publishes_it(tmp_path: Path) -> None:
    code, sleeps, log = _run_wait(tmp_path, ["empty", "empty", "locked", "locked", "complete"], budget=600)
    assert code == 0 and sleeps == ["30"] * 4
    assert "waiting for the compile Job" in log and "under way" in log and "waited 120 s" in log


def test_the_wait_gives_up_at_the_compile_budget(tmp_path: Path) -> None:
    code, sleeps, log = _run_wait(tmp_path, ["empty", "locked"], budget=90)
    assert code == 1 and sum(map(int, sleeps)) == 90 and "gave up after 90 s" in log
    assert "compile budget of 90 s" in log


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="shellcheck not installed")
def test_the_artifacts_script_is_shellcheck_clean() -> None:
    done = subprocess.run(["shellcheck", "--severity=style", str(ks.SCRIPT)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout


# --- validate --------------------------------------------------------------------------------------------------------
def _example_with(**fleet: Any) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(EXAMPLE.read_text())
    data["inference"][0].update(fleet)
    return data


def test_the_eks_example_serves_its_chat_fleet() -> None:
    env = parse_environment(yaml.safe_load(EXAMPLE.read_text()), "examples/environments/eks.yaml")
    chat = next(f for f in env.inference if f.name == "chat")
    assert chat.model is not None and len(chat.neuron_types) == 1


@pytest.mark.parametrize(
    ("change", "key", "fix"),
    [
        ({"profiles": {"inf2.8xlarge": {"tensor_parallel": 1}}}, "inference[0].profiles.inf2.8xlarge.tensor_parallel",
         "set it to 2"),
        ({"neuron_types": ["inf2.8xlarge", "inf2.xlarge"]}, "inference[0].neuron_types", "list one type"),
    ],
)  # fmt: skip
def test_validate_refuses_partial_node_requests_on_eks_in_one_line(change: dict[str, Any], key: str, fix: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_environment(_example_with(**change), "environments/eks.yaml")
    lines = [line for line in str(err.value).splitlines() if key in line]
    assert len(lines) == 1 and "environments/eks.yaml" in lines[0] and fix in lines[0]


def test_serving_and_compile_pods_request_their_node_and_are_never_scaled_in(
    built: tuple[dict[str, Any], dict[str, EksServingFleet]],
) -> None:
    """Whole-node pods request the node's CPU and memory less the reserve (not BestEffort, so not evicted first, and
    Cluster Autoscaler sees the node used), and neither a serving pod nor a compile in progress is evicted by a
    scale-down (the review of issue 39, findings 9 and 11)."""
    from neuronkit.kubernetes import autoscaler, scheduling
    from neuronkit.kubernetes import serving as manifests

    _, fleets = built
    checked = 0
    for doc in (d for fleet in fleets.values() for d in _resolve(fleet)):
        if doc["kind"] not in ("Deployment", "Job"):
            continue
        pod = doc["spec"]["template"]
        assert pod["metadata"]["annotations"] == autoscaler.serving_pod_annotations(), doc["metadata"]["name"]
        # The container that holds the node's devices (the server; in a compile Job, its compiling init container).
        (server,) = [
            c for c in pod["spec"].get("initContainers", []) + pod["spec"]["containers"]
            if set(c.get("resources", {}).get("limits", {})) & {"aws.amazon.com/neuron", "nvidia.com/gpu"}
        ]  # fmt: skip
        instance_type = pod["spec"]["nodeSelector"][manifests.INSTANCE_TYPE_LABEL]
        share = scheduling.node_share(instance_type)
        assert {k: server["resources"]["requests"][k] for k in ("cpu", "memory")} == share
        assert 0 < int(share["cpu"]) < catalog.get(instance_type).vcpus
        checked += 1
    assert checked >= 3  # the Neuron and GPU Deployments and a compile Job


# --- day two: the compile Job's identity covers its whole pod template (issue 47, fix 1) ------------------------------
def _chat_only(path: str) -> list[dict[str, Any]]:
    """The chat fleet's resolved manifests in a fresh app, with ``path`` as its health check path."""
    from neuronkit.constructs.serving_specs import HealthCheckSpec

    stack = bare_stack()
    cluster = _cluster(stack)
    controller = LoadBalancerController(stack, "Lbc", cluster=cluster, environment="team")
    fleet = EksServingFleet(
        stack, "Serving-chat", environment="team", cluster=cluster, controller=controller,
        spec=EksServingSpec(
            name="chat", serving=ServingSpec(model=LLAMA_8B, neuron_release=R2311), neuron_type="inf2.48xlarge",
            neuron_pool="chat", replicas=None, health_check=HealthCheckSpec(path=path),
        ),
        vpc=cluster.cluster.vpc, subnets=cluster.cluster.vpc.private_subnets[:2], artifacts_bucket="team-artifacts",
        ingress_cidr="10.0.0.0/16",
    )  # fmt: skip
    return _resolve(fleet)


def _job_names(docs: list[dict[str, Any]]) -> list[str]:
    return [d["metadata"]["name"] for d in docs if d["kind"] == "Job"]


def test_a_health_path_change_renames_the_compile_job_and_the_same_inputs_keep_its_name() -> None:
    """A Job's spec.template is immutable and CDK's kubectl handler re-applies the whole manifest: a template change
    under the same name is refused and the stack rolls back. Two synths in fresh apps: same inputs, same name; only
    the health path changed, a new name (the old Job is pruned)."""
    first, again, moved = _chat_only("/health"), _chat_only("/health"), _chat_only("/v1/health")
    assert len(_job_names(first)) == 1
    assert _job_names(first) == _job_names(again)
    assert _job_names(moved) != _job_names(first)
    job = next(d for d in moved if d["kind"] == "Job")
    assert "/v1/health" in json.dumps(job["spec"]["template"])


@pytest.mark.parametrize(
    "change",
    ["artifacts_image", "budget", "node_share", "instance_type"],
)
def test_anything_in_the_compile_pod_template_renames_the_job(
    built: tuple[dict[str, Any], dict[str, EksServingFleet]], change: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The helper image, the compile budget (WAIT_SECONDS and the deadline), the node share: each is in the template,
    so each gives a new Job name."""
    from dataclasses import replace

    _, fleets = built
    w = next(w for w in fleets["chat"].workloads if w.accelerator == "neuron")
    before = ks.compile_job(w)
    if change == "artifacts_image":
        w2 = replace(w, artifacts_image="public.ecr.aws/aws-cli/aws-cli:9.9.9")
    elif change == "budget":
        budget = serving.compile_budget_seconds() + 600
        monkeypatch.setattr(ks.serving, "compile_budget_seconds", lambda: budget)
        w2 = w
    elif change == "node_share":
        monkeypatch.setattr(ks.scheduling, "node_share", lambda t: {"cpu": "1", "memory": "1Gi"})
        w2 = w
    else:
        w2 = replace(w, instance_type="inf2.24xlarge")
    after = ks.compile_job(w2)
    assert after["spec"] != before["spec"]
    assert after["metadata"]["name"] != before["metadata"]["name"]


# --- day two: what a controller owns is in no re-applied manifest (issue 47, fix 3) -----------------------------------
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
RECORDED = Path(__file__).parents[1] / "fixtures" / "last-applied"


def _json_patch(doc: dict[str, Any], ops: list[dict[str, Any]]) -> dict[str, Any]:
    """RFC 6902 ``add`` and ``replace`` of object members, as the API server applies ``kubectl patch --type json``
    (``replace`` needs the member to exist; ``add`` sets it either way)."""
    out = json.loads(json.dumps(doc))
    for op in ops:
        assert op["op"] in ("add", "replace"), op
        *parents, leaf = op["path"].lstrip("/").split("/")
        node = out
        for key in parents:
            node = node[key]
        assert op["op"] == "add" or leaf in node, f"replace needs an existing member: {op['path']}"
        node[leaf] = op["value"]
    return out


def _client_side_apply_replicas(live: dict[str, Any], config: dict[str, Any]) -> int:
    """What ``kubectl apply`` (client side) leaves in ``spec.replicas``: the config's value when it has one; deleted
    (the API server defaults it to 1) when the last-applied annotation had it and the config does not; else the live
    value (kubectl "apply" three-way merge; Kubernetes documentation, "Declarative Management of Kubernetes Objects
    Using Configuration Files", "How apply calculates differences and merges changes")."""
    last = json.loads(live["metadata"].get("annotations", {}).get(LAST_APPLIED, "{}"))
    if "replicas" in config.get("spec", {}):
        return int(config["spec"]["replicas"])
    if "replicas" in last.get("spec", {}):
        return 1
    return int(live["spec"]["replicas"])


def test_the_gpu_deployment_is_seeded_once_and_its_template_patched_never_its_replicas(
    built: tuple[dict[str, Any], dict[str, EksServingFleet]],
) -> None:
    """A deploy during a spill used to take the GPU replicas to 0 (``replicas: 0`` in the re-applied manifest). Now no
    re-applied manifest holds the GPU Deployment: a seed creates it at 0 once, a JSON patch keeps its template."""
    t, fleets = built
    fleet = fleets["chat"]
    assert fleet.gpu_deployment is not None
    reapplied = [d for d in _resolve(fleet) if d["kind"] == "Deployment"]
    assert [d["metadata"]["name"] for d in reapplied] == [fleet.neuron_deployment]
    assert reapplied[0]["spec"]["replicas"] == 2  # here the manifest owns the Neuron replicas (no scaler: replicas=2)
    seed = t["Resources"][Stack.of(fleet).get_logical_id(fleet.seeds[fleet.gpu_deployment].node.default_child)]
    assert seed["Properties"]["Overwrite"] is False  # kubectl create on Create; never apply
    seed_docs = json.loads(seed["Properties"]["Manifest"])
    assert [d["spec"]["replicas"] for d in seed_docs] == [0]
    patch = t["Resources"][
        Stack.of(fleet).get_logical_id(fleet.template_patches[fleet.gpu_deployment].node.default_child.node.default_child)
    ]["Properties"]
    assert patch["PatchType"] == "json" and patch["ResourceName"] == f"deployment/{fleet.gpu_deployment}"
    ops = json.loads(_render(patch["ApplyPatchJson"]))
    assert {op["path"] for op in ops} == {"/spec/template", "/spec/strategy"}
    assert "replicas" not in json.dumps(ops)


def test_a_recorded_gpu_deployment_keeps_its_spill_through_a_deploy(
    built: tuple[dict[str, Any], dict[str, EksServingFleet]],
) -> None:
    """On the recorded GPU Deployment as the seed created it (last-applied annotation with ``replicas: 0``) during a
    spill (the spill controller scaled it to 3): the template patch changes the template and keeps 3. The way out
    the issue warns about is shown on the same record: a re-applied manifest without ``replicas`` would take it to
    1 (the HPA guide's one-time degradation), which is why the kit never re-applies it."""
    _, fleets = built
    fleet = fleets["chat"]
    w = next(w for w in fleet.workloads if w.seeded)
    live = json.loads((RECORDED / "gpu-deployment-spilled.json").read_text())
    assert json.loads(live["metadata"]["annotations"][LAST_APPLIED])["spec"]["replicas"] == 0 and live["spec"]["replicas"] == 3
    ops = _render(Stack.of(fleet).resolve(ks.template_patch(w)))
    after = _json_patch(live, ops)
    assert after["spec"]["replicas"] == 3
    assert after["spec"]["template"] == ops[1]["value"] and after["spec"]["template"] != live["spec"]["template"]
    assert after["metadata"]["annotations"][LAST_APPLIED] == live["metadata"]["annotations"][LAST_APPLIED]
    # The failure modes the kit avoids, on the same record: re-applying with replicas resets the spill; without, 1.
    assert _client_side_apply_replicas(live, ks.deployment(w)) == 0
    without = ks.deployment(w)
    del without["spec"]["replicas"]
    assert _client_side_apply_replicas(live, without) == 1
    # The seed never changes with what a user changes (a changed seed would be re-applied): fleet and accelerator only.
    from dataclasses import replace

    moved = replace(
        w, health_path="/v1/health", port=9090, image="other:1", artifacts_image="other:2", instance_type="g6e.48xlarge"
    )
    assert ks.seed_deployment(moved) == ks.seed_deployment(w)


def test_a_fleet_without_an_access_logs_bucket_makes_its_own(built: tuple[dict[str, Any], dict[str, EksServingFleet]]) -> None:
    """Reuse (issue 49): docs/constructs.md's example passes no access_logs_bucket; the construct makes one (SSE-S3, no
    public access, TLS only) and logs to it, so cdk-nag's ELB2 passes instead of failing synthesis with a traceback."""
    t, fleets = built
    balancers = _of_type(t, "AWS::ElasticLoadBalancingV2::LoadBalancer")
    assert len(balancers) == len(fleets) == 2
    for lb in balancers.values():
        attrs = {a["Key"]: a["Value"] for a in lb["Properties"]["LoadBalancerAttributes"]}
        assert attrs["access_logs.s3.enabled"] == "true" and attrs["access_logs.s3.bucket"]
    buckets = [b for k, b in _of_type(t, "AWS::S3::Bucket").items() if "AccessLogs" in k]
    assert len(buckets) == 2
    for b in buckets:
        enc = b["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]["ServerSideEncryptionByDefault"]
        assert enc["SSEAlgorithm"] == "AES256" and b["Properties"]["PublicAccessBlockConfiguration"]["BlockPublicAcls"]


def _depends_on(t: dict[str, Any], logical_id: str) -> set[str]:
    """Every resource ``logical_id`` waits for in CloudFormation (DependsOn and references, transitively)."""
    out: set[str] = set()
    todo = [logical_id]
    while todo:
        r = t["Resources"][todo.pop()]
        direct = set(r.get("DependsOn") or [])
        text = json.dumps(r.get("Properties") or {})
        direct |= {k for k in t["Resources"] if f'"Ref": "{k}"' in text or f'"Fn::GetAtt": ["{k}"' in text}
        todo += [d for d in direct if d not in out]
        out |= direct
    return out


def _kinds_by_resource(t: dict[str, Any]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for k, r in t["Resources"].items():
        if r["Type"] == "Custom::AWSCDK-EKS-KubernetesResource":
            docs = json.loads(_render(r["Properties"]["Manifest"]))
            out[k] = {d["kind"] for d in docs if d["metadata"].get("namespace") == scheduling.SERVING_NAMESPACE}
    return out


def test_every_serving_pod_is_created_after_its_service_and_binding(
    built: tuple[dict[str, Any], dict[str, EksServingFleet]],
) -> None:
    """aws-load-balancer-controller v3.5.0, docs/deploy/pod_readiness_gate.md: "The controller automatically injects
    the necessary readiness gate configuration to the pod spec via mutating webhook during pod creation." A pod
    created before the TargetGroupBinding (and the Service it names) exists gets no `target-health.elbv2.k8s.aws`
    gate, so the first rollout could mark pods Ready before the load balancer sends them traffic. Every manifest
    resource that creates serving pods (Deployments, compile Jobs) and the GPU Deployment's seed wait for the
    resource holding the fleet's binding, which waits for the one holding its Service."""
    t, fleets = built
    kinds = _kinds_by_resource(t)
    binding = {k for k, v in kinds.items() if "TargetGroupBinding" in v}
    service = {k for k, v in kinds.items() if "Service" in v}
    pods = {k for k, v in kinds.items() if v & {"Deployment", "Job"}}
    assert len(binding) == len(service) == len(fleets) and len(pods) >= len(fleets) + 1  # the GPU seed too
    assert not binding & pods and not service & pods
    for k in pods:
        deps = _depends_on(t, k)
        assert deps & binding, f"{k} creates serving pods without waiting for a TargetGroupBinding"
        assert deps & service, f"{k} creates serving pods without waiting for the Service"
    for k in binding:
        assert _depends_on(t, k) & service, f"{k}: the binding is applied before the Service it names"
    for k in service:
        # An environment deployed before has the Service already (it was in the fleet's manifest): the new resource's
        # Create must be `kubectl apply` (Overwrite), not `kubectl create`, which fails with AlreadyExists.
        assert t["Resources"][k]["Properties"].get("Overwrite") is True, k
