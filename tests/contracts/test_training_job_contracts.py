"""Kubernetes, JobSet, Kueue, Neuron and EKS rules the rendered training jobs rely on that no fake enforces.

Each test quotes the sentence of the document it enforces (docs/aws-contracts.md lists them). They run over the
jobs the kit renders for the pools the issue names (trn1.32xlarge and trn2.48xlarge, both launch profiles) and over
the example's Capacity Block pool.
"""

from __future__ import annotations

import datetime as dt
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


def test_depends_on_is_one_item_never_on_the_first_job_and_never_with_startup_policy(jobset: dict[str, Any]) -> None:
    """JobSet v0.12.0 CRD (charts/jobset/crds/jobset.x-k8s.io_jobsets.yaml, ``dependsOn``): "Note, that the first
    ReplicatedJob in the slice cannot use the DependsOn API. Currently, only a single item is supported in the
    DependsOn list. ... This API is mutually exclusive with the StartupPolicy API." """
    jobs = jobset["spec"]["replicatedJobs"]
    assert jobs and "dependsOn" not in jobs[0]
    assert all(len(j.get("dependsOn", [])) <= 1 for j in jobs)
    assert "startupPolicy" not in jobset["spec"]


def test_every_jobset_names_its_local_queue(jobset: dict[str, Any]) -> None:
    """Kueue v0.19.2, "Run a JobSet" (site/content/en/docs/tasks/run/jobsets.md): "The target local queue should be
    specified in the metadata.labels section of the JobSet configuration." (label kueue.x-k8s.io/queue-name)."""
    assert jobset["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == tj.local_queue_name("pretrain")


def test_the_collective_sets_the_root_communicator_to_the_first_host(jobset: dict[str, Any]) -> None:
    """NCCOM-TEST user guide (Neuron 2.29, "MPI Execution"): "To use mpi mode, provide all hosts for your invocation,
    either with the --hosts flag or a ~/hosts file, and set the NEURON_RT_ROOT_COMM_ID environment variable to the IP
    address of the first host listed and any free port." """
    check = next(r for r in jobset["spec"]["replicatedJobs"] if r["name"] == tj.CHECK_JOB)
    script = check["template"]["spec"]["template"]["spec"]["containers"][0]["command"][2]
    assert 'NEURON_RT_ROOT_COMM_ID="$(head -n1 "${dir}/hostfile"):${NEURONKIT_ROOT_COMM_PORT}"' in script
    assert "export NEURON_RT_ROOT_COMM_ID" in script
    assert '--hosts-file "${dir}/hostfile"' in script
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
