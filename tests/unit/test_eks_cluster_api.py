"""`neuronkit preflight` through the Kubernetes API of the user's cluster (issue 51): the controllers of the `existing`
components, their CRDs at the versions the kit applies, Kueue's configuration against the pre-job check and requeue
behaviour, and the ClusterQueues the pools name, against a fake API server answering recorded JSON
(tests/fixtures/kube-preflight); what cannot be read is said. The token is the spill function's."""

from __future__ import annotations

import base64
import copy
import json
import urllib.parse
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml

from neuronkit import catalog
from neuronkit.account.check import Check
from neuronkit.config import Environment, parse_environment
from neuronkit.kubernetes import cluster_api, keda, serving
from neuronkit.kubernetes import training_job as tj
from neuronkit.kubernetes.cluster_api import api_checks, check_cluster_api, duration_seconds
from neuronkit.lambdas.spill.handler import CLUSTER_ID_HEADER, KubernetesApi
from tests.fake_kube_api import FakeApi

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "kube-preflight"
DATA = yaml.safe_load((ROOT / "tests" / "fixtures" / "user_environments" / "ownk8s.yaml").read_text())
WHERE = "environments/ownk8s.yaml"
ALL = ("load_balancer_controller", "cluster_autoscaler", "keda", "jobset", "kueue", "neuron", "efa_device_plugin",
       "nvidia_device_plugin")  # fmt: skip


def _env(**components: str) -> Environment:
    data = copy.deepcopy(DATA)
    data["eks"]["components"] = {**data["eks"]["components"], **components}
    return parse_environment(data, WHERE, context={})


def _all_existing() -> Environment:
    return _env(**dict.fromkeys(ALL, "existing"))


def _routes(config: str = "good", override: dict[str, Any] | None = None) -> dict[str, Any]:
    routes: dict[str, Any] = {
        "GET /apis/apps/v1/deployments": "deployments-kueue-ca.json",
        "GET /apis/apps/v1/daemonsets": "daemonsets-none.json",
        "GET /api/v1/namespaces/kueue-system/configmaps/kueue-manager-config": f"kueue-manager-config-{config}.json",
        "GET /apis/kueue.x-k8s.io/v1beta2/clusterqueues/research-cq": "clusterqueue-research-cq.json",
    }
    for crd in (p.name[4:-5] for p in FIXTURES.glob("crd-*.*.json")):
        routes[f"GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/{crd}"] = f"crd-{crd}.json"
    routes.update(override or {})
    return {k: v for k, v in routes.items() if v is not None}


def _lines(env: Environment, routes: dict[str, Any]) -> list[Check]:
    with FakeApi(routes, FIXTURES) as api:
        checks = api_checks(env, KubernetesApi(api.endpoint, "k8s-aws-v1.token").get)
        assert {r["method"] for r in api.requests} == {"GET"}  # read-only
    assert checks
    return checks


def _run(env: Environment, routes: dict[str, Any]) -> dict[str, Check]:
    return {c.name: c for c in _lines(env, routes)}


def test_every_existing_component_found_serving_the_kits_versions_passes() -> None:
    checks = _run(
        _all_existing(),
        _routes(
            override={"GET /apis/apps/v1/deployments": "deployments.json", "GET /apis/apps/v1/daemonsets": "daemonsets.json"}
        ),
    )
    assert {c.status for c in checks.values()} == {"PASS"}, [c for c in checks.values() if c.status != "PASS"]
    for component in ALL:
        assert f"EKS cluster platform-prod {component} controller" in checks
    assert (
        "kube-system/platform-ca-aws-cluster-autoscaler"
        in checks["EKS cluster platform-prod cluster_autoscaler controller"].detail
    )
    assert checks["EKS cluster platform-prod CRD targetgroupbindings.elbv2.k8s.aws"].detail == "serves v1beta1"
    assert "ClusterQueue research-cq" in " ".join(checks)


def test_a_missing_controller_a_missing_crd_and_an_old_version_fail_with_the_fix() -> None:
    routes = _routes(override={
        "GET /apis/apps/v1/deployments": "deployments-none.json",
        "GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/jobsets.jobset.x-k8s.io": None,
        "GET /apis/apiextensions.k8s.io/v1/customresourcedefinitions/clusterqueues.kueue.x-k8s.io": "crd-clusterqueues-v1beta1-only.json",
    })  # fmt: skip
    checks = _run(_all_existing(), routes)
    lbc = checks["EKS cluster platform-prod load_balancer_controller controller"]
    assert lbc.status == "FAIL" and "aws-load-balancer-controller image" in lbc.detail
    assert lbc.fix == "install it, or set eks.components.load_balancer_controller: install"
    jobset = checks["EKS cluster platform-prod CRD jobsets.jobset.x-k8s.io"]
    assert jobset.status == "FAIL" and jobset.detail.startswith("not installed; the kit applies v1alpha2")
    cq = checks["EKS cluster platform-prod CRD clusterqueues.kueue.x-k8s.io"]
    assert cq.status == "FAIL" and cq.detail == "serves v1beta1, not v1beta2, which the kit applies"


def test_a_pool_naming_a_cluster_queue_is_refused_in_one_line_when_kueue_lacks_what_it_needs() -> None:
    # v1beta2 without a waitForPodsReady section: on, with v1beta2's default timeout (not v1beta1's)
    checks = _run(_env(), _routes("bare"))
    (refused,) = [c for c in checks.values() if c.status == "FAIL"]
    assert refused.name == "training[0] research (ClusterQueue research-cq)"
    default = cluster_api.facts()["kueue"]["configurations"]["config.kueue.x-k8s.io/v1beta2"]["default_timeout"]
    assert "no jobset.x-k8s.io/jobset" in refused.detail
    assert f"waitForPodsReady.timeout {default} (default) does not outlast" in refused.detail
    assert "ConfigMap kueue-system/kueue-manager-config" in refused.detail


def test_a_v1beta1_configuration_waits_for_pods_only_with_enable_true() -> None:
    """kubernetes-sigs/kueue v0.19.2 apis/config/v1beta1/configuration_conversion.go: "if in.WaitForPodsReady == nil ||
    !in.WaitForPodsReady.Enable { out.WaitForPodsReady = nil }" (defaults.go applies the timeout only when enabled)."""
    checks = _run(_env(), _routes("v1beta1-off"))
    (refused,) = [c for c in checks.values() if c.status == "FAIL"]
    assert refused.name == "training[0] research (ClusterQueue research-cq)"
    assert "waitForPodsReady is not enabled (config.kueue.x-k8s.io/v1beta1 needs waitForPodsReady.enable: true" in refused.detail
    checks = _run(_env(), _routes("v1beta1-good"))
    assert {c.status for c in checks.values()} == {"PASS"}, [c for c in checks.values() if c.status != "PASS"]
    assert "(config.kueue.x-k8s.io/v1beta1): JobSet integration, waitForPodsReady 60m" in " ".join(
        c.detail for c in checks.values()
    )


@pytest.mark.parametrize(
    "args",
    [["--config=/controller_manager_config.yaml", "--feature-gates=TopologyAwareScheduling=true,DisableWaitForPodsReady=true"],
     ["--feature-gates", "DisableWaitForPodsReady=true"]],
)  # fmt: skip
def test_a_manager_whose_feature_gate_disables_wait_for_pods_ready_fails_whatever_its_configuration(args: list[str]) -> None:
    """Kueue v0.19.2 pkg/features/kube_features.go: DisableWaitForPodsReady, "Temporary option while WaitForPodsReady is
    enabled by default": set true, the v1beta2 configuration's always-on waitForPodsReady is off (outside review)."""
    deployments = json.loads((FIXTURES / "deployments-kueue-ca.json").read_text())
    (kueue,) = [d for d in deployments["items"] if d["metadata"]["name"] == "kueue-controller-manager"]
    kueue["spec"]["template"]["spec"]["containers"][0]["args"] = args
    checks = _run(_env(), _routes(override={"GET /apis/apps/v1/deployments": deployments}))
    (refused,) = [c for c in checks.values() if c.status == "FAIL"]
    assert "--feature-gates DisableWaitForPodsReady=true: waitForPodsReady is off" in refused.detail
    kueue["spec"]["template"]["spec"]["containers"][0]["args"] = ["--feature-gates=DisableWaitForPodsReady=false"]
    checks = _run(_env(), _routes(override={"GET /apis/apps/v1/deployments": deployments}))
    assert {c.status for c in checks.values()} == {"PASS"}, [c for c in checks.values() if c.status != "PASS"]


def test_a_device_plugin_left_at_install_that_runs_already_fails_and_one_the_file_does_not_need_is_not_read() -> None:
    """A second device plugin of one resource on the kit's nodes registers it twice with kubelet: the user's NVIDIA
    plugin (another release) fails with the fix; the kit's own neuron and efa releases of an earlier deploy warn; a file
    without GPU groups never installs the NVIDIA chart, so its plugin is not looked at (catalog existing_components)."""
    checks = _run(_env(), _routes(override={"GET /apis/apps/v1/daemonsets": "daemonsets.json"}))
    nvidia = checks["EKS cluster platform-prod nvidia_device_plugin controller"]
    assert nvidia.status == "FAIL" and "nvidia-device-plugin/nvdp-nvidia-device-plugin already runs" in nvidia.detail
    assert nvidia.fix == "set eks.components.nvidia_device_plugin: existing"
    assert checks["EKS cluster platform-prod neuron controller"].status == "WARN"
    assert checks["EKS cluster platform-prod efa_device_plugin controller"].status == "WARN"
    data = copy.deepcopy(DATA)
    for fleet in data["inference"]:
        fleet.pop("fallback_types", None)
    no_gpu = parse_environment(data, WHERE, context={})
    checks = _run(no_gpu, _routes(override={"GET /apis/apps/v1/daemonsets": "daemonsets.json"}))
    assert "EKS cluster platform-prod nvidia_device_plugin controller" not in checks
    assert checks["EKS cluster platform-prod neuron controller"].status == "WARN"


def _config_answer(text: str) -> dict[str, Any]:
    return {
        "GET /api/v1/namespaces/kueue-system/configmaps/kueue-manager-config": {"data": {"controller_manager_config.yaml": text}}
    }


def test_block_admission_defaults_to_enable_in_v1beta1_and_to_false_in_v1beta2() -> None:
    body = "  timeout: 60m\n  requeuingStrategy: {timestamp: Creation}\nintegrations: {frameworks: [jobset.x-k8s.io/jobset]}\n"
    v1 = "apiVersion: config.kueue.x-k8s.io/v1beta1\nwaitForPodsReady:\n  enable: true\n" + body
    warned = [c.detail for c in _lines(_env(), _routes(override=_config_answer(v1))) if c.status == "WARN"]
    assert warned == [warned[0]] and warned[0].startswith("waitForPodsReady.blockAdmission is true (default)")
    v2 = "apiVersion: config.kueue.x-k8s.io/v1beta2\nwaitForPodsReady:\n" + body
    assert {c.status for c in _lines(_env(), _routes(override=_config_answer(v2)))} == {"PASS"}


@pytest.mark.parametrize(("recovery", "warns"), [("0s", False), ("10m", True)])
def test_a_recovery_timeout_of_0s_disables_it_and_is_not_warned(recovery: str, warns: bool) -> None:
    """kubernetes-sigs/kueue v0.19.2 apis/config/v1beta2/configuration_types.go, RecoveryTimeout: "Defaults to the value
    of timeout. Setting to "0s" disables recovery timeout checking."."""
    config = yaml.safe_load(yaml.safe_load((FIXTURES / "kueue-manager-config-good.json").read_text())["data"][
        "controller_manager_config.yaml"])  # fmt: skip
    config["waitForPodsReady"]["recoveryTimeout"] = recovery
    checks = _lines(_env(), _routes(override=_config_answer(yaml.safe_dump(config))))
    warned = [c.detail for c in checks if c.status == "WARN"]
    assert bool(warned) is warns and all(f"recoveryTimeout {recovery}" in w for w in warned)


def test_a_configuration_of_another_api_version_is_not_checked_and_says_so() -> None:
    text = "apiVersion: config.kueue.x-k8s.io/v1\nintegrations: {frameworks: [jobset.x-k8s.io/jobset]}\n"
    (warn,) = [c for c in _lines(_env(), _routes(override=_config_answer(text))) if "Kueue configuration" in c.name]
    assert warn.status == "WARN" and "apiVersion config.kueue.x-k8s.io/v1, not one of" in warn.detail


def test_a_timeout_shorter_than_the_pre_job_check_is_refused_and_other_settings_are_warned() -> None:
    checks = _lines(_env(), _routes("short"))
    (refused,) = [c for c in checks if c.status == "FAIL"]
    deadline = catalog.eks_facts()["training_jobs"]["defaults"]["check_deadline_seconds"] // 60
    assert f"waitForPodsReady.timeout 10m does not outlast the pre-job check's {deadline} minutes" in refused.detail
    warned = " ".join(c.detail for c in checks if c.status == "WARN")
    assert "blockAdmission is true" in warned and "backoffLimitCount 3" in warned
    assert "requeuingStrategy.timestamp Eviction (default)" in warned


def test_a_cluster_queue_that_does_not_exist_is_reported() -> None:
    checks = _run(_env(), _routes(override={"GET /apis/kueue.x-k8s.io/v1beta2/clusterqueues/research-cq": None}))
    missing = checks["training[0] research ClusterQueue research-cq"]
    assert missing.status == "FAIL" and missing.detail == "no ClusterQueue research-cq on cluster platform-prod"


def test_without_credentials_or_a_reachable_api_preflight_says_what_it_did_not_check(aws_credentials: None) -> None:
    env = _env()

    class NoCredentials:  # what boto3's Session answers when no provider finds credentials
        def get_credentials(self) -> None:
            return None

    (warn,) = check_cluster_api(env, NoCredentials())
    assert warn.status == "WARN" and "no AWS credentials" in warn.detail
    assert (
        "cluster_autoscaler, kueue, ClusterQueue research-cq and whether load_balancer_controller, keda, jobset, neuron, "
        "efa_device_plugin, nvidia_device_plugin (install) already run not checked" in warn.detail
    )
    session = boto3.session.Session(region_name="us-east-1")
    (warn,) = check_cluster_api(env, session, endpoint="http://127.0.0.1:9")  # the discard port: refused
    assert warn.status == "WARN" and warn.detail.startswith("unreachable from here") and "not checked" in warn.detail
    with FakeApi({"GET /apis/apps/v1/deployments": 401}) as api:
        (warn,) = check_cluster_api(env, session, endpoint=api.endpoint)
    assert "refused the caller (HTTP 401)" in warn.detail and "access entry" in warn.fix


def test_the_token_is_the_spill_functions_presigned_get_caller_identity(aws_credentials: None) -> None:
    with FakeApi(_routes(), FIXTURES) as api:
        checks = check_cluster_api(_env(), boto3.session.Session(region_name="us-east-1"), endpoint=api.endpoint)
        header = api.requests[0]["headers"]["Authorization"]
    assert {c.status for c in checks} == {"PASS"}
    token = header.removeprefix("Bearer k8s-aws-v1.")
    url = urllib.parse.urlsplit(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)).decode())
    query = urllib.parse.parse_qs(url.query)
    assert url.netloc == "sts.us-east-1.amazonaws.com" and query["Action"] == ["GetCallerIdentity"]
    assert CLUSTER_ID_HEADER in query["X-Amz-SignedHeaders"][0]


def test_the_catalogs_versions_are_the_ones_the_kits_objects_use() -> None:
    pins = cluster_api.facts()
    group_version = {f"{crd.split('.', 1)[1]}/{v}" for c in pins.values() for crd, v in c["crds"].items()}
    tgb = serving.target_group_binding("answer", "arn:aws:elasticloadbalancing:us-east-1:1:targetgroup/a/b", 8000)
    assert tj.facts()["jobset"]["api_version"] in group_version and tj.facts()["kueue"]["api_version"] in group_version
    assert f"{keda.facts()['crds']['group']}/{keda.facts()['crds']['version']}" in group_version
    assert tgb["kind"] == "TargetGroupBinding" and tgb["apiVersion"] in group_version
    assert set(pins) <= set(type(_env().eks.components).model_fields)  # type: ignore[union-attr]


@pytest.mark.parametrize(("text", "seconds"), [("60m", 3600), ("1h30m", 5400), ("300s", 300), ("0s", 0), ("5", None), ("", None)])
def test_go_durations(text: str, seconds: float | None) -> None:
    assert duration_seconds(text) == seconds


@pytest.mark.parametrize(("version", "ready"), [("v1beta1", "{enable: true}"), ("v1beta2", "{}")])
def test_a_wait_for_pods_ready_without_timeout_has_its_versions_default_which_is_too_short(version: str, ready: str) -> None:
    api_version = f"config.kueue.x-k8s.io/{version}"
    config = f"apiVersion: {api_version}\nwaitForPodsReady: {ready}\nintegrations: {{frameworks: [jobset.x-k8s.io/jobset]}}\n"
    checks = _lines(_env(), _routes(override=_config_answer(config)))
    (refused,) = [c for c in checks if c.status == "FAIL"]
    default = cluster_api.facts()["kueue"]["configurations"][api_version]["default_timeout"]
    assert f"waitForPodsReady.timeout {default} (default) does not outlast" in refused.detail


def test_a_component_left_at_install_whose_controller_runs_already_fails_with_the_fix() -> None:
    """The user's own Cluster Autoscaler (Helm release platform-ca) with eks.components.cluster_autoscaler: install."""
    checks = _run(_env(cluster_autoscaler="install"), _routes())
    clash = checks["EKS cluster platform-prod cluster_autoscaler controller"]
    assert clash.status == "FAIL" and clash.fix == "set eks.components.cluster_autoscaler: existing"
    assert clash.detail.startswith("kube-system/platform-ca-aws-cluster-autoscaler already runs the cluster-autoscaler image")
    for component in ("load_balancer_controller", "keda", "jobset"):  # installed by the kit, not running yet
        free = checks[f"EKS cluster platform-prod {component} controller"]
        assert free.status == "PASS" and free.detail.endswith("the kit installs it")


def test_a_running_controller_named_as_the_kits_release_is_warned_not_refused() -> None:
    """deployments.json: LBC, KEDA and JobSet as Helm releases of the kit's names and namespaces."""
    checks = _run(_env(), _routes(override={"GET /apis/apps/v1/deployments": "deployments.json"}))
    for component in ("load_balancer_controller", "keda", "jobset"):
        release, namespace = cluster_api.kit_release(component)
        warned = checks[f"EKS cluster platform-prod {component} controller"]
        assert warned.status == "WARN" and f"is Helm release {namespace}/{release}, the kit's" in warned.detail
        assert warned.fix == f"if you installed it, set eks.components.{component}: existing"
