"""The TrainingJobs construct on a bare stack: JobSet and Kueue pinned through Helm on the system node group, queues,
pod identity for the pool's checkpoints, the Lustre claim in the training namespace, the Capacity Block signal."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from neuronkit import catalog
from neuronkit.constructs.eks import LustreVolume, TrainingJobs, TrainingJobsSpec, TrainingPool
from neuronkit.constructs.eks.training_jobs import jobset_values, kueue_values
from neuronkit.constructs.storage import StorageAccess
from neuronkit.kubernetes import scheduling
from neuronkit.kubernetes import training_job as tj
from tests.templates import bare_stack, resources, template
from tests.unit.test_eks import _cluster
from tests.unit.test_training_job import crd_validate

PINS = catalog.eks_facts()["training_jobs"]
K8S = str(catalog.eks_facts()["kubernetes"]["version"])
CHARTS = Path(__file__).parents[1] / "fixtures" / "charts"
END = dt.datetime(2027, 1, 18, 11, 30, tzinfo=dt.UTC)
STORAGE = StorageAccess(
    datasets_bucket="team-datasets-123456789012-us-east-2",
    checkpoints_bucket="team-checkpoints-123456789012-us-east-2",
    artifacts_bucket="team-artifacts-123456789012-us-east-2",
)
POOLS = [
    TrainingPool(name="pretrain", instance_type="trn2.48xlarge", max_nodes=16, release="2.28.1", block_end=END, lead_minutes=60),
    TrainingPool(name="finetune", instance_type="trn1.32xlarge", max_nodes=4, release="2.28.1"),
]


@pytest.fixture(scope="module")
def built() -> tuple[TrainingJobs, dict[str, Any]]:
    stack = bare_stack()
    jobs = TrainingJobs(
        stack,
        "Jobs",
        cluster=_cluster(stack),
        spec=TrainingJobsSpec(
            environment="team", pools=POOLS,
            lustre=LustreVolume(file_system_id="fs-0123456789abcdef0", dns_name="fs.example", mount_name="abcdefgh", size_gib=4800),
        ),
        storage=STORAGE,
    )  # fmt: skip
    return jobs, template(stack)


def _charts(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["Properties"]["Chart"]: r["Properties"] for r in resources(data, "Custom::AWSCDK-EKS-HelmChart").values()}


def test_jobset_and_kueue_are_the_pinned_charts(built: Any) -> None:
    _, data = built
    charts = _charts(data)
    assert set(charts) == {"jobset", "kueue"}
    for key in ("jobset", "kueue"):
        props = charts[key]
        assert props["Version"] == str(PINS[key]["version"]) and props["Namespace"] == PINS[key]["namespace"]
        assert props["Repository"] == f"{PINS[key]['repository']}/{key}" and props["Repository"].startswith("oci://")
        values = json.loads(props["Values"]) if isinstance(props["Values"], str) else props["Values"]
        assert json.dumps(values).count(str(PINS[key]["image"]).rsplit(":", 1)[1]) == 1


def test_both_charts_wait_for_their_webhooks_within_the_catalog_timeout(built: Any) -> None:
    """helm --wait on JobSet and Kueue: the CDK handler returns only once the controllers (and their webhooks, which
    refuse objects while down) are ready, so the queues applied after Kueue are not rejected on a fresh deploy."""
    _, data = built
    charts = _charts(data)
    assert set(charts) == {"jobset", "kueue"}
    for key, props in charts.items():
        assert props.get("Wait") is True, key
        assert props.get("Timeout") == f"{int(PINS[key]['helm_wait_minutes']) * 60}s", key
        assert int(PINS[key]["helm_wait_minutes"]) < 15  # the CDK Helm handler's Lambda stops at 15 minutes


def _paths(doc: Any, prefix: str = "") -> set[str]:
    out: set[str] = set()
    if isinstance(doc, dict):
        for k, v in doc.items():
            out.add(prefix + k)
            if k != "nodeSelector":  # a free-form map: its keys are labels, not chart keys
                out |= _paths(v, prefix + k + ".")
    return out


@pytest.mark.parametrize(("name", "values"), [("jobset-0.12.0", jobset_values()), ("kueue-0.19.2", kueue_values())])
def test_every_values_key_exists_in_the_pinned_chart_and_runs_on_the_system_nodes(name: str, values: dict[str, Any]) -> None:
    fixture = yaml.safe_load((CHARTS / f"{name}.values.yaml").read_text())
    assert str(fixture["chart_version"]) == name.split("-", 1)[1]
    emitted = _paths(values)
    assert emitted - _paths(fixture["values"]) == set()
    selectors = [k for k in emitted if k.endswith("nodeSelector")]
    assert selectors
    for key in selectors:
        node = values
        for part in key.split("."):
            node = node[part]
        assert node == scheduling.system_node_selector()


def test_kueue_admits_all_or_nothing_and_manages_jobsets() -> None:
    config = yaml.safe_load(kueue_values()["managerConfig"]["controllerManagerConfigYaml"])
    assert config["apiVersion"] == "config.kueue.x-k8s.io/v1beta2"
    ready = config["waitForPodsReady"]
    assert ready["timeout"] == PINS["kueue"]["wait_for_pods_ready"]["timeout"]
    # cluster-wide in Kueue 0.19.2: on, one pool's job waiting for its block would stop admission in every pool
    assert ready["blockAdmission"] is False
    # a restart after a rank failure gets the whole timeout (recoveryTimeout "Defaults to the value of timeout"), and
    # an evicted job keeps its place in the StrictFIFO queue (requeued by creation, not eviction, time)
    assert "recoveryTimeout" not in ready or _minutes(ready["recoveryTimeout"]) >= _minutes(ready["timeout"])
    assert ready["requeuingStrategy"] == {"timestamp": "Creation"}
    assert "jobset.x-k8s.io/jobset" in config["integrations"]["frameworks"]


def _minutes(duration: str) -> float:
    value, unit = float(duration[:-1]), duration[-1]
    return value * {"s": 1 / 60, "m": 1, "h": 60}[unit]


def test_queues_for_every_pool_validate_and_wait_for_kueue(built: Any) -> None:
    jobs, data = built
    kinds = [d["kind"] for d in jobs.queue_documents]
    assert kinds == ["ResourceFlavor", "ClusterQueue", "LocalQueue"] * len(POOLS)
    for d in jobs.queue_documents:
        crd_validate(d)
    queues = [r for k, r in resources(data, "Custom::AWSCDK-EKS-KubernetesResource").items() if "Queues" in k]
    assert len(queues) == 1
    deps = queues[0].get("DependsOn", [])
    assert any("Kueue" in d for d in deps)


def test_pool_manifests_validate_against_the_kubernetes_schema(built: Any) -> None:
    jobs, _ = built
    kinds = [d["kind"] for d in jobs.pool_documents]
    # no pool ConfigMap: each job brings its own programs (job render), so a user's apply never touches the stack's
    assert kinds.count("ServiceAccount") == len(POOLS) and kinds.count("ConfigMap") == 0
    assert kinds.count("CronJob") == 1  # the Capacity Block pool only
    for d in jobs.pool_documents:
        kubernetes_validate.validate(d, K8S, strict=True)
    pvc = next(d for d in jobs.pool_documents if d["kind"] == "PersistentVolumeClaim")
    pv = next(d for d in jobs.pool_documents if d["kind"] == "PersistentVolume")
    assert pvc["metadata"] == {**pvc["metadata"], "name": tj.lustre_claim("team"), "namespace": scheduling.TRAINING_NAMESPACE}
    assert pvc["spec"]["volumeName"] == pv["metadata"]["name"] != "team-lustre"
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Retain"


def test_the_block_pool_is_signalled_at_e_minus_l(built: Any) -> None:
    jobs, _ = built
    cron = jobs.signals["pretrain"]
    assert cron["spec"]["schedule"] == "30 10 18 1 *"  # 11:30 - 60 min


def test_each_pool_writes_checkpoints_under_its_prefix_by_pod_identity(built: Any) -> None:
    _, data = built
    assoc = sorted(
        (r["Properties"]["Namespace"], r["Properties"]["ServiceAccount"])
        for r in resources(data, "AWS::EKS::PodIdentityAssociation").values()
    )
    assert assoc == sorted((scheduling.TRAINING_NAMESPACE, tj.service_account(p.name)) for p in POOLS)
    policies = json.dumps([r["Properties"]["PolicyDocument"] for r in resources(data, "AWS::IAM::Policy").values()])
    for p in POOLS:
        assert f"{STORAGE.checkpoints_bucket}/{p.name}/*" in policies


def test_spec_refuses_what_cannot_work() -> None:
    with pytest.raises(ValueError, match="no training pools"):
        TrainingJobsSpec(environment="team", pools=[])
    with pytest.raises(ValueError, match="together"):
        TrainingPool(name="x", instance_type="trn2.48xlarge", max_nodes=1, release="2.28.1", block_end=END)


def _kueue_admits(
    block_admission: bool, not_ready: dict[str, list[str]], cluster_queue: str, free_nodes: int, nodes: int
) -> bool:
    """Kueue v0.19.2's admission of a workload, reduced to what decides it here: quota in its own ClusterQueue, and
    with blockAdmission, no ClusterQueue anywhere holding a workload not yet ready (pkg/cache/scheduler/cache.go lines
    250-259: ``for _, cq := range c.hm.ClusterQueues() { if len(cq.WorkloadsNotReady) > 0 { return false } }``;
    pkg/scheduler/scheduler.go waitForPodsReadyIfNeeded)."""
    del cluster_queue  # the wait does not look at which queue the workload is in
    if block_admission and any(not_ready.values()):
        return False
    return nodes <= free_nodes


def test_two_pools_jobs_are_admitted_independently() -> None:
    """Recorded state: pool a's job was admitted before its Capacity Block started (its pods Pending, not ready);
    pool b has free nodes and a job queued. With the kit's configuration b's job is admitted."""
    config = yaml.safe_load(kueue_values()["managerConfig"]["controllerManagerConfigYaml"])
    block = bool(config["waitForPodsReady"]["blockAdmission"])
    state = {"team-a": ["team/a-1128-101500"], "team-b": []}
    assert _kueue_admits(block, state, "team-b", free_nodes=4, nodes=4)
    assert not _kueue_admits(True, state, "team-b", free_nodes=4, nodes=4)  # what blockAdmission: true did


def test_a_pools_quota_is_its_nodes_so_admitted_jobs_never_overcommit_them() -> None:
    """Why blockAdmission is not needed: the quota of a pool is max_size whole nodes, each rank pod asks for a whole
    node, so the jobs admitted in one pool fit its nodes together."""
    for pool in POOLS:
        queue = tj.kueue_manifests(
            environment="team", pool=pool.name, instance_type=pool.instance_type, max_nodes=pool.max_nodes
        )[1]
        (flavor,) = queue["spec"]["resourceGroups"][0]["flavors"]
        neuron = next(r for r in flavor["resources"] if r["name"] == "aws.amazon.com/neuron")
        assert int(neuron["nominalQuota"]) == pool.max_nodes * catalog.get(pool.instance_type).neuron_devices


def test_the_submitter_rbac_validates_and_is_applied_after_the_namespace(built: Any) -> None:
    jobs, _ = built
    for d in tj.submitter_rbac():
        kubernetes_validate.validate(d, K8S, strict=True)
    assert jobs.namespace in jobs.submitter_rbac.node.dependencies


def test_the_jobset_and_kueue_namespaces_are_the_kits_labelled_before_their_charts(built: Any) -> None:
    """kubernetes.io, "Pod Security Admission" reads ``pod-security.kubernetes.io/<MODE>`` labels on the namespace;
    Helm's ``--create-namespace`` makes it without any. The controllers' pods at the pinned charts set every
    "restricted" control (catalog ``pod_security`` beside each pin, with the templates it was read from)."""
    from tests.chart_namespaces import assert_chart_namespaces_are_labelled

    _, data = built
    assert_chart_namespaces_are_labelled(
        data, {str(PINS[k]["namespace"]): str(PINS[k]["pod_security"]) for k in ("jobset", "kueue")}
    )
