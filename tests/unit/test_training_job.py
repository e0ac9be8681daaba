"""Multi-node training jobs on EKS (issue 40): the rendered JobSet, Kueue queues and the Capacity Block end."""

from __future__ import annotations

import copy
import datetime as dt
import json
import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest

from neuronkit import catalog, job_environment
from neuronkit.catalog import releases
from neuronkit.kubernetes import scheduling
from neuronkit.kubernetes import training_job as tj
from tests import manifests

K8S = str(catalog.eks_facts()["kubernetes"]["version"])
CRDS = Path(tj.__file__).parent / "crds"
DATASETS, CHECKPOINTS = "team-datasets-123456789012-us-east-2", "team-checkpoints-123456789012-us-east-2"
TORCHNEURON_IMAGE = "123456789012.dkr.ecr.us-east-2.amazonaws.com/torchneuron-train:2.14.0-sdk2.33.0"

# (instance type, release, image the user names) -> framework; the pools the issue names, on both launch profiles.
POOLS = [
    ("trn1.32xlarge", "2.28.1", None, "pytorch-xla"),
    ("trn2.48xlarge", "2.28.1", None, "pytorch-xla"),
    ("trn2.48xlarge", "2.33.0", TORCHNEURON_IMAGE, "torchneuron"),
]


def spec(instance_type: str, release: str, image: str | None, **over: Any) -> tj.JobSpec:
    return tj.JobSpec(
        **{
            "name": "llama-pretrain",
            "environment": "team",
            "pool": "pretrain",
            "instance_type": instance_type,
            "nodes": 4,
            "release": release,
            "image": image,
            "datasets_bucket": DATASETS,
            "checkpoints_bucket": CHECKPOINTS,
            **over,
        }
    )


def crd_validate(manifest: dict[str, Any]) -> None:
    """A JobSet or Kueue object against its checked-in CRD schema, unknown fields refused (tests/manifests.py)."""
    assert manifest["apiVersion"].split("/")[0] in ("jobset.x-k8s.io", "kueue.x-k8s.io"), manifest["apiVersion"]
    manifests.validate(manifest)


def pod_templates(jobset: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["name"]: r["template"]["spec"]["template"] for r in jobset["spec"]["replicatedJobs"]}


@pytest.fixture(scope="module", params=POOLS, ids=[f"{t}-{r}" for t, r, _, _ in POOLS])
def rendered(request: pytest.FixtureRequest) -> tuple[tj.JobSpec, list[dict[str, Any]], str]:
    instance_type, release, image, framework = request.param
    s = spec(instance_type, release, image)
    return s, tj.render_job(s), framework


def test_schemas_checked_in_name_their_version_and_source() -> None:
    files = sorted(CRDS.glob("*.json"))
    assert len(files) == 4
    pins = catalog.eks_facts()["training_jobs"]
    for f in files:
        doc = json.loads(f.read_text())
        assert doc["served"] and doc["storage"] and "commit" in doc["source"]
        tag = "v" + str(pins["jobset"]["version"] if doc["group"].startswith("jobset") else pins["kueue"]["version"])
        assert f"/blob/{tag}/" in doc["source"], (f.name, tag)


def test_every_rendered_manifest_validates_against_the_pinned_schemas(rendered: Any) -> None:
    s, docs, _ = rendered
    config_map, jobset = docs
    kubernetes_validate.validate(config_map, K8S, strict=True)
    crd_validate(jobset)
    templates = pod_templates(jobset)
    assert set(templates) == {tj.RANK_JOB}
    for name, template in templates.items():
        job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": f"x-{name}"}}
        job["spec"] = {
            k: v for r in jobset["spec"]["replicatedJobs"] if r["name"] == name for k, v in r["template"]["spec"].items()
        }
        kubernetes_validate.validate(job, K8S, strict=True)
        assert template["spec"]["containers"]


def test_a_misspelt_field_fails_the_jobset_schema() -> None:
    jobset = tj.render_jobset(spec("trn1.32xlarge", "2.28.1", None))
    bad = copy.deepcopy(jobset)
    bad["spec"]["failurePolicy"]["maxRestart"] = 3
    with pytest.raises(jsonschema.ValidationError):
        crd_validate(bad)
    bad = copy.deepcopy(jobset)
    bad["spec"]["failurePolicy"]["rules"][0]["action"] = "FailJobset"
    with pytest.raises(jsonschema.ValidationError):
        crd_validate(bad)


def test_every_pod_asks_for_every_device_and_efa_interface_on_the_pools_nodes(rendered: Any) -> None:
    s, (_, jobset), _ = rendered
    it = catalog.get(s.instance_type)
    for template in pod_templates(jobset).values():
        pod = template["spec"]
        assert pod["nodeSelector"] == scheduling.pool_node_selector("pretrain")
        assert pod["tolerations"] == scheduling.accelerator_tolerations("neuron")
        assert pod["serviceAccountName"] == tj.service_account("pretrain")
        for c in pod["containers"] + pod.get("initContainers", []):
            assert c["resources"]["limits"]["aws.amazon.com/neuron"] == str(it.neuron_devices)
            assert c["resources"]["limits"]["vpc.amazonaws.com/efa"] == str(it.efa_max_interfaces)
        claims = [v["persistentVolumeClaim"]["claimName"] for v in pod["volumes"] if "persistentVolumeClaim" in v]
        assert claims == [tj.lustre_claim("team")]
    assert jobset["metadata"]["namespace"] == scheduling.TRAINING_NAMESPACE
    assert jobset["metadata"]["labels"][tj.QUEUE_LABEL] == "pretrain"
    assert jobset["spec"]["suspend"] is True


def test_one_pod_set_per_job_sized_exactly_to_its_nodes(rendered: Any) -> None:
    """Kueue counts one pod set per replicated job: a kit job has one, of one pod per node, so admission counts exactly
    the nodes the job holds and nothing is reclaimed mid-job (no check step that succeeds and gives its quota back)."""
    s, (_, jobset), _ = rendered
    (only,) = jobset["spec"]["replicatedJobs"]
    assert only["name"] == tj.RANK_JOB and only["replicas"] == 1 and "dependsOn" not in only
    job = only["template"]["spec"]
    assert job["parallelism"] == job["completions"] == s.nodes and job["completionMode"] == "Indexed"
    assert job["backoffLimit"] == 0 and "activeDeadlineSeconds" not in job  # a deadline would end the training too
    assert jobset["spec"]["successPolicy"] == {"operator": "All", "targetReplicatedJobs": [tj.RANK_JOB]}


def test_ranks_start_only_after_the_node_check_and_the_collective_pass_on_the_same_pods(rendered: Any) -> None:
    """Init containers run in order, each to success, before the app container starts (restartPolicy Never: a failed
    one fails the pod); none is a sidecar (an init container with restartPolicy Always would not gate the ranks)."""
    s, (config_map, jobset), _ = rendered
    pod = pod_templates(jobset)[tj.RANK_JOB]["spec"]
    assert pod["restartPolicy"] == "Never"
    node_check, collective = pod["initContainers"]
    (train,) = pod["containers"]
    assert [node_check["name"], collective["name"], train["name"]] == [
        tj.NODE_CHECK_CONTAINER,
        tj.COLLECTIVE_CONTAINER,
        tj.TRAIN_CONTAINER,
    ]
    assert all("restartPolicy" not in c for c in pod["initContainers"])
    args = node_check["command"]
    assert args[:3] == ["python3", f"{tj.KIT_MOUNT}/prejob.py", "node"]
    it = catalog.get(s.instance_type)
    assert args[args.index("--devices") + 1] == str(it.neuron_devices)
    assert args[args.index("--efa") + 1] == str(it.efa_max_interfaces)
    assert args[args.index("--lustre") + 1] == tj.LUSTRE_MOUNT
    assert collective["command"][:3] == ["bash", "-c", tj.COLLECTIVE]
    assert "prejob.py collective" in collective["command"][2]
    assert "--min-busbw-gbps" not in collective["command"]  # unset by default
    env = {e["name"]: e.get("value") for e in collective["env"]}
    assert env["NEURONKIT_CHECK_DEADLINE_SECONDS"] == str(tj.facts()["defaults"]["check_deadline_seconds"])
    assert env["NEURONKIT_EXIT_COLLECTIVE_FAILED"] == str(tj.EXIT_COLLECTIVE_FAILED)
    # the same devices for the checks and the ranks: one pod holds the node from the first check to the last step
    assert node_check["resources"] == collective["resources"] == train["resources"]
    assert set(config_map["data"]) == {"prejob.py", "checkpoint_contract.py"}
    assert config_map["data"]["prejob.py"] == (Path(tj.__file__).parent / "prejob.py").read_text()


def test_the_job_mounts_its_own_programs_never_the_stacks(rendered: Any) -> None:
    """The ConfigMap ``job render`` prints is the job's (same kit version as its scripts), never a stack-owned name."""
    s, (config_map, jobset), _ = rendered
    assert config_map["metadata"]["name"] == f"{s.name}-prejob" != f"{s.pool}-prejob"
    assert config_map["metadata"]["labels"][tj.JOB_LABEL] == jobset["metadata"]["labels"][tj.JOB_LABEL] == s.name
    pod = pod_templates(jobset)[tj.RANK_JOB]["spec"]
    (kit,) = [v for v in pod["volumes"] if v["name"] == "kit"]
    assert kit["configMap"]["name"] == config_map["metadata"]["name"]


def test_the_driver_rule_is_the_boot_checks(rendered: Any) -> None:
    """Below driver_min fails, between driver_min and driver_shipped passes with a warning (as the boot check)."""
    s, (_, jobset), _ = rendered
    args = pod_templates(jobset)[tj.RANK_JOB]["spec"]["initContainers"][0]["command"]
    rel = releases.release(s.release)
    assert args[args.index("--driver-floor") + 1] == rel.driver_min
    assert args[args.index("--driver-shipped") + 1] == rel.driver


def test_rank_environment_is_the_asg_paths_through_the_same_functions(rendered: Any) -> None:
    s, (_, jobset), _ = rendered
    env = {e["name"]: e.get("value") for e in pod_templates(jobset)[tj.RANK_JOB]["spec"]["containers"][0]["env"]}
    shared = job_environment.job_environment(
        environment="team", pool="pretrain", instance_type=s.instance_type, datasets_bucket=DATASETS,
        checkpoints_bucket=CHECKPOINTS, compile_cache_url=tj.compile_cache_url("pretrain"),
        lnc=catalog.lnc_default(releases.family_of(s.instance_type)),
    )  # fmt: skip
    assert shared.items() <= env.items()
    ports = job_environment.collective_ports()
    assert env["MASTER_PORT"] == str(ports.master_port)
    assert env["NEURONKIT_ROOT_COMM_PORT"] == str(ports.root_comm_port) != env["MASTER_PORT"]
    assert env["NEURONKIT_CHECKPOINTS"] == f"s3://{CHECKPOINTS}/pretrain/"
    assert env["FI_PROVIDER"] == "efa"
    launcher = pod_templates(jobset)[tj.RANK_JOB]["spec"]["containers"][0]["command"][2]
    assert 'NEURON_RT_ROOT_COMM_ID="${MASTER_IP}:${NEURONKIT_ROOT_COMM_PORT}"' in launcher
    assert '--master_port="${MASTER_PORT}"' in launcher


def test_collective_ports_refuse_one_port_for_both() -> None:
    with pytest.raises(ValueError, match="give each its own"):
        job_environment.CollectivePorts(master_port=2022, root_comm_port=2022)


def test_launch_profile_per_family_and_release(rendered: Any) -> None:
    s, (_, jobset), framework = rendered
    profile = s.profile
    assert profile.framework == framework
    rank = pod_templates(jobset)[tj.RANK_JOB]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in rank["env"]}
    assert env["NEURONKIT_FRAMEWORK"] == framework
    it = catalog.get(s.instance_type)
    lnc = catalog.lnc_default(releases.family_of(s.instance_type)) or 1
    assert env["NEURONKIT_NPROC_PER_NODE"] == str(it.neuron_cores // lnc)
    if framework == "pytorch-xla":
        assert rank["image"] == releases.release(s.release).container("training")
        assert releases.container_release(rank["image"]) is not None
    else:
        assert rank["image"] == TORCHNEURON_IMAGE


def test_launch_profile_refusals_name_the_fix() -> None:
    with pytest.raises(tj.JobError, match="--image"):
        tj.launch_profile("trn2.48xlarge", "2.33.0")
    with pytest.raises(tj.JobError, match="no PyTorch training on trn1; pin the pool's neuron_sdk to 2"):
        tj.launch_profile("trn1.32xlarge", "2.33.0")
    with pytest.raises(tj.JobError, match="never latest"):
        tj.launch_profile("trn2.48xlarge", "2.33.0", image="me/train:latest")


def test_compile_cache_is_on_the_mounted_lustre_per_pool(rendered: Any) -> None:
    _, (_, jobset), _ = rendered
    rank = pod_templates(jobset)[tj.RANK_JOB]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in rank["env"]}
    mounts = {m["mountPath"]: m["name"] for m in rank["volumeMounts"]}
    assert env["NEURON_COMPILE_CACHE_URL"] == f"{tj.LUSTRE_MOUNT}/neuron-compile-cache/pretrain/"
    assert mounts[tj.LUSTRE_MOUNT] == "lustre"


def test_failure_policy_restarts_the_whole_set_a_bounded_number_of_times(rendered: Any) -> None:
    _, (_, jobset), _ = rendered
    policy = jobset["spec"]["failurePolicy"]
    assert policy["maxRestarts"] == catalog.eks_facts()["training_jobs"]["defaults"]["max_restarts"]
    (job,) = jobset["spec"]["replicatedJobs"]
    assert job["template"]["spec"]["backoffLimit"] == 0
    assert job["template"]["spec"]["template"]["spec"]["restartPolicy"] == "Never"


def test_a_failed_collective_and_an_early_stop_fail_the_jobset_at_once(rendered: Any) -> None:
    """The Job's podFailurePolicy fails the Job on the collective's (and the launcher's early-stop) exit code; the
    JobSet rule with the same index turns that into FailJobSet, and peers that never arrived into a restart that
    does not count; any other failure restarts the set."""
    _, (_, jobset), _ = rendered
    (job,) = jobset["spec"]["replicatedJobs"]
    pod_rules = job["template"]["spec"]["podFailurePolicy"]["rules"]
    assert pod_rules == [
        {
            "action": "FailJob",
            "onExitCodes": {"containerName": tj.COLLECTIVE_CONTAINER, "operator": "In", "values": [tj.EXIT_COLLECTIVE_FAILED]},
        },
        {
            "action": "FailJob",
            "onExitCodes": {"containerName": tj.COLLECTIVE_CONTAINER, "operator": "In", "values": [tj.EXIT_PEERS_MISSING]},
        },
        {
            "action": "FailJob",
            "onExitCodes": {"containerName": tj.TRAIN_CONTAINER, "operator": "In", "values": [tj.EXIT_CHECKPOINTED]},
        },
    ]
    rules = jobset["spec"]["failurePolicy"]["rules"]
    assert [r["name"] for r in rules] == ["PreJobCollectiveFailed", "PreJobPeersNeverArrived", "CheckpointedAndStoppedEarly"]
    assert [r["action"] for r in rules] == ["FailJobSet", "RestartJobSetAndIgnoreMaxRestarts", "FailJobSet"]
    for i, rule in enumerate(rules):
        assert rule["onJobFailureReasons"] == ["PodFailurePolicy"]
        assert rule["targetReplicatedJobs"] == [tj.RANK_JOB]
        (pattern,) = rule["onJobFailureMessagePatterns"]
        # Kubernetes' Job failure message: "Container C for pod NS/P failed with exit code N matching FailJob rule at index I"
        message = f"Container x for pod ns/p failed with exit code 3 matching FailJob rule at index {i}"
        assert re.search(pattern, message) and not re.search(pattern, message.replace(f"index {i}", f"index {i + 1}"))
    assert tj.EXIT_POD_STOPPED not in {c for r in pod_rules for c in r["onExitCodes"]["values"]}  # a drain restarts


def test_check_only_job_renders_the_checks_alone() -> None:
    jobset = tj.render_jobset(spec("trn2.48xlarge", "2.28.1", None, check_only=True, min_busbw_gbps=40, calibrate=True))
    crd_validate(jobset)
    assert [r["name"] for r in jobset["spec"]["replicatedJobs"]] == [tj.CHECK_JOB]
    job = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]
    pod = job["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == [tj.NODE_CHECK_CONTAINER]
    assert [c["name"] for c in pod["containers"]] == [tj.COLLECTIVE_CONTAINER]
    command = pod["containers"][0]["command"]
    assert command[command.index("--min-busbw-gbps") + 1] == "40"
    assert command[command.index("--calibrate") + 1] == tj.calibration_file("pretrain")
    assert [r["onExitCodes"]["containerName"] for r in job["podFailurePolicy"]["rules"]] == [tj.COLLECTIVE_CONTAINER] * 2
    assert [r["name"] for r in jobset["spec"]["failurePolicy"]["rules"]] == ["PreJobCollectiveFailed", "PreJobPeersNeverArrived"]
    assert jobset["spec"]["successPolicy"]["targetReplicatedJobs"] == [tj.CHECK_JOB]


def test_kueue_queues_are_sized_to_the_pool_and_validate() -> None:
    docs = tj.kueue_manifests(environment="team", pool="pretrain", instance_type="trn2.48xlarge", max_nodes=16)
    assert [d["kind"] for d in docs] == ["ResourceFlavor", "ClusterQueue", "LocalQueue"]
    for d in docs:
        crd_validate(d)
    flavor, queue, local = docs
    assert flavor["spec"]["nodeLabels"] == scheduling.pool_node_selector("pretrain")
    quota = {r["name"]: r["nominalQuota"] for r in queue["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    it = catalog.get("trn2.48xlarge")
    # exactly the pool: 16 nodes' devices and interfaces, not a doubled quota that admits a second job on a full pool
    assert quota["aws.amazon.com/neuron"] == str(16 * it.neuron_devices)
    assert quota["vpc.amazonaws.com/efa"] == str(16 * it.efa_max_interfaces)
    assert local["metadata"]["namespace"] == scheduling.TRAINING_NAMESPACE and local["spec"]["clusterQueue"] == "team-pretrain"
    # a job of the pool's size fills the queue: its one pod set asks for the whole quota, so nothing else is admitted
    jobset = tj.render_jobset(spec("trn2.48xlarge", "2.28.1", None, nodes=16))
    (pod_set,) = jobset["spec"]["replicatedJobs"]
    pods = pod_set["template"]["spec"]["parallelism"]
    requests = pod_set["template"]["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]
    for name, total in quota.items():
        assert tj._times(requests[name], pods) == total, name


END = dt.datetime(2027, 1, 18, 11, 30, tzinfo=dt.UTC)


@pytest.mark.parametrize(("kind", "drain"), [("eks-node-group", 40), ("instances", 30), ("ultraserver", 30)])
def test_lead_time_is_the_earliest_drain_plus_the_budget(kind: str, drain: int) -> None:
    assert tj.lead_minutes(kind, 15) == drain + 15
    assert tj.signal_at(END, tj.lead_minutes(kind, 15)) == END - dt.timedelta(minutes=drain + 15)


def test_the_kits_own_earlier_scale_down_counts() -> None:
    # an Auto Scaling pool that scales to zero drain_minutes before EC2's 30: 30 + 20 = 50 > 30
    assert tj.lead_minutes("instances", 10, kit_drain_minutes=20) == 60
    with pytest.raises(tj.JobError, match="at least 1 minute"):
        tj.lead_minutes("eks-node-group", 0)
    with pytest.raises(tj.JobError, match="use one of"):
        tj.lead_minutes("u-trn2x64", 10)


def test_admission_refuses_a_deadline_one_minute_past_e_minus_l_and_admits_one_minute_before() -> None:
    lead = tj.lead_minutes("eks-node-group", 15)
    cutoff = END - dt.timedelta(minutes=55)
    assert tj.admission_problem(cutoff - dt.timedelta(minutes=1), END, lead) is None
    assert tj.admission_problem(cutoff, END, lead) is None
    problem = tj.admission_problem(cutoff + dt.timedelta(minutes=1), END, lead)
    assert problem is not None and "2027-01-18T10:35:00+00:00" in problem and "55 min" in problem


def test_the_signal_cronjob_fires_at_e_minus_l_and_writes_the_sentinel() -> None:
    at = tj.signal_at(END, tj.lead_minutes("eks-node-group", 15))
    cron = tj.checkpoint_signal_cronjob(pool="pretrain", environment="team", at=at, image="img:1")
    kubernetes_validate.validate(cron, K8S, strict=True)
    assert cron["spec"]["schedule"] == "35 10 18 1 *" and cron["spec"]["timeZone"] == "Etc/UTC"
    command = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert tj.checkpoint_request("pretrain") in command


def test_bad_job_input_is_one_line_naming_the_fix() -> None:
    with pytest.raises(tj.JobError, match="lower-case"):
        spec("trn2.48xlarge", "2.28.1", None, name="Llama_Pretrain")
    with pytest.raises(tj.JobError, match="Trainium pools"):
        spec("p5.48xlarge", "2.28.1", None)


def test_the_asg_nodes_job_env_equals_the_shared_function(tmp_path: Path) -> None:
    """The Auto Scaling path's boot script, run in the sandbox, writes the same job environment the EKS ranks get."""
    from tests.sandbox import available, run_user_data
    from tests.unit import test_boot_sandbox as boot

    reason = available()
    if reason is not None:
        pytest.fail(reason, pytrace=False)
    stack = boot.bare_stack()
    boot.TrainingCluster(
        stack, "Cluster", environment="team", name="pretrain", vpc=boot.imported_vpc(stack),
        nodes=boot.NodePoolSpec("trn1.32xlarge", max_size=4, ami=boot.AmiSpec(root_device_name="/dev/sda1", ami_id="ami-0123456789abcdef0")),
        subnet_id=boot.SUBNET_ID, az_id="use1-az6", storage=boot.STORAGE, expected_neuron_driver=boot.DRIVER,
    )  # fmt: skip
    run = run_user_data(boot._user_data(boot.template(stack)), boot.healthy(), tmp_path)
    written = dict(line.split("=", 1) for line in run.file("/etc/neuronkit/job.env").splitlines() if "=" in line)
    shared = job_environment.job_environment(
        environment="team", pool="pretrain", instance_type="trn1.32xlarge",
        datasets_bucket=boot.STORAGE.datasets_bucket, checkpoints_bucket=boot.STORAGE.checkpoints_bucket,
        compile_cache_url=written["NEURON_COMPILE_CACHE_URL"], lnc=None,
    )  # fmt: skip
    assert len(shared) >= 7
    assert {k: written.get(k) for k in shared} == shared
    ports = job_environment.collective_ports()
    assert f"{ports.master_port},{ports.root_comm_port}" in run.file("/etc/sysctl.d/90-neuronkit.conf")


def test_the_rendered_scripts_are_shellcheck_clean(tmp_path: Path) -> None:
    """The launcher and the collective step are bash programs inside the manifest: held to the kit's shell rules."""
    import shutil
    import subprocess
    import sys

    shellcheck = shutil.which("shellcheck") or str(Path(sys.executable).parent / "shellcheck")
    for name, text in (("launcher", tj.LAUNCHER), ("collective", tj.COLLECTIVE), ("pre-stop", tj.PRE_STOP)):
        path = tmp_path / f"{name}.sh"
        path.write_text("#!/bin/bash\n" + text)
        done = subprocess.run([shellcheck, "--severity=style", str(path)], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stdout
