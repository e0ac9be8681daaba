"""Kubernetes, JobSet, Kueue, Neuron and EKS rules the rendered training jobs rely on that no fake enforces.

Each test quotes the sentence of the document it enforces (docs/aws-contracts.md lists them). They run over the
jobs the kit renders for the pools the issue names (trn1.32xlarge and trn2.48xlarge, both launch profiles) and over
the example's Capacity Block pool.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from typing import Any

import pytest

from neuronkit import config, job_environment
from neuronkit.cli.job_cmd import block_lead
from neuronkit.kubernetes import training_job as tj
from tests.conftest import ROOT

IMAGE = "123456789012.dkr.ecr.us-east-2.amazonaws.com/torchneuron-train:2.14.0-sdk2.33.0"
JOBS = [
    tj.JobSpec(name=f"j{i}", environment="team", pool="pretrain", instance_type=t, nodes=4, release=r, image=img,
               datasets_bucket="d", checkpoints_bucket="c", check_only=only)
    for i, (t, r, img, only) in enumerate([
        ("trn1.32xlarge", "2.28.1", None, False), ("trn2.48xlarge", "2.28.1", None, False),
        ("trn2.48xlarge", "2.33.0", IMAGE, False), ("trn2.48xlarge", "2.28.1", None, True),
    ])
]  # fmt: skip


@pytest.fixture(
    scope="module", params=JOBS, ids=[f"{s.instance_type}-{s.release}-{'check' if s.check_only else 'job'}" for s in JOBS]
)
def jobset(request: pytest.FixtureRequest) -> dict[str, Any]:
    return tj.render_jobset(request.param)


def test_failure_policy_rule_names_and_reasons_pass_the_jobset_webhook(jobset: dict[str, Any]) -> None:
    """JobSet v0.12.0 (api/jobset/v1alpha2/jobset_types.go, FailurePolicyRule): "The name must match the regular
    expression "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"." and "The rule must match both the job failure reason and
    the job failure message. The rules are evaluated in order and the first matching rule is executed."
    pkg/webhooks/jobset_webhook.go rejects other names, unknown replicated jobs and reasons outside
    validOnJobFailureReasons (BackoffLimitExceeded, DeadlineExceeded, FailedIndexes, MaxFailedIndexesExceeded,
    PodFailurePolicy)."""
    rules = jobset["spec"]["failurePolicy"]["rules"]
    assert rules
    names = {r["name"] for r in jobset["spec"]["replicatedJobs"]}
    valid = {"BackoffLimitExceeded", "DeadlineExceeded", "FailedIndexes", "MaxFailedIndexesExceeded", "PodFailurePolicy"}
    for rule in rules:
        assert re.fullmatch(r"[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?", rule["name"]) and len(rule["name"]) <= 128
        assert set(rule["targetReplicatedJobs"]) <= names
        assert set(rule.get("onJobFailureReasons", [])) <= valid
        for pattern in rule.get("onJobFailureMessagePatterns", []):
            re.compile(pattern)  # RE2 syntax; these patterns use only what both share
    assert len({r["name"] for r in rules}) == len(rules)  # "rule names are not unique" otherwise


def test_each_fail_job_rule_is_matched_by_its_jobset_rule_through_the_jobs_failure_message(jobset: dict[str, Any]) -> None:
    """Kubernetes Job controller (pkg/controller/job/pod_failure_policy.go): a FailJob rule fails the Job with reason
    PodFailurePolicy and the message "Container %s for pod %s/%s failed with exit code %v matching %v rule at index
    %d". Kubernetes 1.35 API, PodFailurePolicyOnExitCodesRequirement.containerName: "When specified, it should match
    one the container or initContainer names in the pod template"; values: "Value '0' cannot be used for the In
    operator"; JobSpec.podFailurePolicy: "This field cannot be used in combination with restartPolicy=OnFailure"."""
    found = 0
    for rjob in jobset["spec"]["replicatedJobs"]:
        job = rjob["template"]["spec"]
        pod = job["template"]["spec"]
        assert pod["restartPolicy"] == "Never"
        containers = {c["name"] for c in pod["containers"] + pod.get("initContainers", [])}
        for index, rule in enumerate(job["podFailurePolicy"]["rules"]):
            found += 1
            codes = rule["onExitCodes"]
            assert codes["containerName"] in containers and 0 not in codes["values"]
            assert codes["values"] == sorted(set(codes["values"]))  # "must be ordered and must not contain duplicates"
            message = (
                f"Container {codes['containerName']} for pod neuronkit-training/x-0 failed with exit code "
                f"{codes['values'][0]} matching FailJob rule at index {index}"
            )
            matching = [
                r
                for r in jobset["spec"]["failurePolicy"]["rules"]
                if "PodFailurePolicy" in r["onJobFailureReasons"]
                and any(re.search(p, message) for p in r["onJobFailureMessagePatterns"])
                and rjob["name"] in r["targetReplicatedJobs"]
            ]
            # the first match applies: peers that never arrived restart the set without counting it (waiting is not
            # failing), every other FailJob rule fails the set
            want = "RestartJobSetAndIgnoreMaxRestarts" if codes["values"] == [tj.EXIT_PEERS_MISSING] else "FailJobSet"
            assert [r["action"] for r in matching[:1]] == [want]
    assert found


def test_every_jobset_names_its_local_queue(jobset: dict[str, Any]) -> None:
    """Kueue v0.19.2, "Run a JobSet" (site/content/en/docs/tasks/run/jobsets.md): "The target local queue should be
    specified in the metadata.labels section of the JobSet configuration." (label kueue.x-k8s.io/queue-name)."""
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == tj.local_queue_name("pretrain")


def test_the_collective_sets_the_root_communicator_to_the_first_host(jobset: dict[str, Any]) -> None:
    """NCCOM-TEST user guide (Neuron 2.29, "MPI Execution"): "To use mpi mode, provide all hosts for your invocation,
    either with the --hosts flag or a ~/hosts file, and set the NEURON_RT_ROOT_COMM_ID environment variable to the IP
    address of the first host listed and any free port." """
    (rjob,) = jobset["spec"]["replicatedJobs"]
    pod = rjob["template"]["spec"]["template"]["spec"]
    (collective,) = [c for c in pod["containers"] + pod["initContainers"] if c["name"] == tj.COLLECTIVE_CONTAINER]
    script = collective["command"][2]
    assert 'NEURON_RT_ROOT_COMM_ID="$(head -n1 /tmp/neuronkit-hostfile):${NEURONKIT_ROOT_COMM_PORT}"' in script
    assert "export NEURON_RT_ROOT_COMM_ID" in script
    assert "--hosts-file /tmp/neuronkit-hostfile" in script
    assert "/usr/sbin/sshd" in script  # "mpi may require passwordless SSH access to each host"


def test_the_ranks_root_communicator_is_an_address_and_port_apart_from_master_port() -> None:
    """Neuron runtime configuration (NEURON_RT_ROOT_COMM_ID): the root communicator is "<ip>:<port>" of rank 0; the
    AWS samples give torchrun's MASTER_PORT a port of its own (catalog/software.yaml)."""
    launchers = [
        r["template"]["spec"]["template"]["spec"]["containers"][0]["command"][2]
        for s in JOBS
        for r in tj.render_jobset(s)["spec"]["replicatedJobs"]
        if r["name"] == tj.RANK_JOB
    ]
    assert len(launchers) == 3
    for launcher in launchers:
        assert "getent hosts" in launcher  # a DNS name resolved to the address the runtime wants
        assert 'NEURON_RT_ROOT_COMM_ID="${MASTER_IP}:${NEURONKIT_ROOT_COMM_PORT}"' in launcher
    ports = job_environment.collective_ports()
    assert ports.master_port != ports.root_comm_port


def test_the_example_block_signal_comes_before_any_drain() -> None:
    """Amazon EKS User Guide, "Create self-managed nodes with Capacity Blocks for ML": "To allow sufficient time to
    gracefully drain the node(s), we suggest that you schedule scaling to scale to zero more than 30 minutes before
    the Capacity Block reservation end time." Managed node groups: EKS's own scheduled action scales to zero 40
    minutes before the end (catalog training_jobs.block_drain_minutes). Jobs are signalled before both, by the
    pool's checkpoint budget."""
    env = config.load_environment(ROOT / "examples" / "environments" / "eks.yaml")
    blocks = [(c, block_lead(c)) for c in env.training if block_lead(c) is not None]
    assert blocks
    for pool, found in blocks:
        assert found is not None
        end, lead = found
        budget = pool.capacity.checkpoint_budget_minutes
        assert tj.signal_at(end, lead) <= end - dt.timedelta(minutes=40 + budget)
        assert tj.signal_at(end, lead) < end - dt.timedelta(minutes=30 + pool.capacity.drain_minutes)


def test_the_ranks_pre_stop_hook_asks_them_to_stop_within_the_pods_grace(jobset: dict[str, Any]) -> None:
    """Kubernetes 1.35 API, Lifecycle.preStop: "The Pod's termination grace period countdown begins before the PreStop
    hook is executed. Regardless of the outcome of the handler, the container will eventually terminate within the
    Pod's termination grace period (unless delayed by finalizers). Other management of the container blocks until the
    hook completes or until the termination grace period is reached." So the hook, not SIGTERM (which torchrun's agent
    answers by killing its workers 30 s later), asks the ranks to checkpoint, and the grace bounds both."""
    (rjob,) = jobset["spec"]["replicatedJobs"]
    pod = rjob["template"]["spec"]["template"]["spec"]
    trains = [c for c in pod["containers"] if c["name"] == tj.TRAIN_CONTAINER]
    if not trains:  # a check-only job has no ranks
        assert [c["name"] for c in pod["containers"]] == [tj.COLLECTIVE_CONTAINER]
        return
    (train,) = trains
    hook = train["lifecycle"]["preStop"]["exec"]["command"]
    assert hook == ["bash", "-c", tj.PRE_STOP] and tj.STOP_FILE in hook[2]
    env = {e["name"]: e.get("value") for e in train["env"]}
    assert env["NEURONKIT_STOP_FILE"] == tj.STOP_FILE
    assert "exec torchrun" not in train["command"][2]  # torchrun is a child: SIGTERM never reaches its agent
    # The hook waits at most the checkpoint budget and stops torchrun (30 s to end its workers) within the grace, and
    # the grace stays below EKS's 15-minute drain cap so the node is not terminated under a checkpoint.
    wait = int(env["NEURONKIT_STOP_WAIT_SECONDS"])
    assert wait <= 60 * int(tj.facts()["defaults"]["checkpoint_budget_minutes"])
    assert wait + 30 < pod["terminationGracePeriodSeconds"] < 15 * 60


@pytest.fixture(scope="module")
def eks(eks_example_stack: dict[str, Any]) -> dict[str, Any]:
    """The eks stack of the synthesized EKS example (one synthesis per test run, tests/conftest.py)."""
    return eks_example_stack


def test_the_queues_are_applied_only_after_kueue_and_jobset_answer_their_webhooks(eks: dict[str, Any]) -> None:
    """Kueue v0.19.2 charts/kueue/templates/webhook/manifests.yaml: the ClusterQueue, ResourceFlavor and LocalQueue
    webhooks have ``failurePolicy: Fail``; its installation guide (site/content/en/docs/getting-started/
    installation.md) installs "--wait --timeout 300s". The aws-cdk-lib 2.275 Helm handler (helm/__init__.py) passes
    ``--wait`` only "if wait", and the apply handler retries only on "i/o timeout": the queues' custom resource must
    depend on a chart installed with Wait, or a fresh deploy fails on "no endpoints available"."""
    resources = eks["Resources"]
    charts = {k: r for k, r in resources.items() if r["Type"] == "Custom::AWSCDK-EKS-HelmChart"}
    training = {r["Properties"]["Chart"]: (k, r) for k, r in charts.items() if r["Properties"]["Chart"] in ("jobset", "kueue")}
    assert set(training) == {"jobset", "kueue"}
    for _, chart in training.values():
        assert chart["Properties"]["Wait"] is True and chart["Properties"]["Timeout"].endswith("s")
        assert int(chart["Properties"]["Timeout"][:-1]) < 15 * 60  # the handler's Lambda stops at 15 minutes
    queues = [
        r
        for r in resources.values()
        if r["Type"] == "Custom::AWSCDK-EKS-KubernetesResource"
        and isinstance(r["Properties"]["Manifest"], str)
        and any(d["kind"] == "ClusterQueue" for d in json.loads(r["Properties"]["Manifest"]))
    ]
    assert queues
    for q in queues:
        assert training["kueue"][0] in q.get("DependsOn", [])
    assert training["jobset"][0] in training["kueue"][1].get("DependsOn", [])


def test_rank_pods_reserve_both_ports_as_the_auto_scaling_node_does(jobset: dict[str, Any]) -> None:
    """Kubernetes "Using sysctls in a Kubernetes Cluster": net.ipv4.ip_local_reserved_ports is in the safe set since
    1.27 (Pod Security Standards baseline allows it). Without it an ephemeral port can take MASTER_PORT or the root
    communicator's port before rank 0 binds it."""
    ports = job_environment.collective_ports()
    (rjob,) = jobset["spec"]["replicatedJobs"]
    pod = rjob["template"]["spec"]["template"]["spec"]
    assert pod["securityContext"]["sysctls"] == [
        {"name": "net.ipv4.ip_local_reserved_ports", "value": f"{ports.master_port},{ports.root_comm_port}"}
    ]
    node_script = (ROOT / "neuronkit" / "userdata" / "training-node.sh").read_text()
    assert "net.ipv4.ip_local_reserved_ports = ${MASTER_PORT},${ROOT_COMM_PORT}" in node_script
