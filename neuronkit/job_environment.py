"""The environment and ports of a multi-node training job, one source for every path that launches one.

The Auto Scaling path writes these into ``/etc/neuronkit/job.env`` and ``ranks.env`` on each node
(``userdata/training-node.sh``, ``userdata/kit/neuronkit-hostfile``); the EKS path puts them into the rank
containers of a JobSet (``neuronkit/kubernetes/training_job.py``). ``tests/unit/test_training_job.py`` runs the
Auto Scaling node's boot script in the sandbox and compares its ``job.env`` with :func:`job_environment`, so the
two paths cannot drift.

Two ports, never one: torchrun's rendezvous store listens on ``MASTER_PORT`` on rank 0 and the Neuron runtime's
root communicator on ``NEURON_RT_ROOT_COMM_ID=<rank-0 address>:<root_comm_port>`` (catalog/software.yaml).
"""

from __future__ import annotations

from dataclasses import dataclass

from neuronkit import catalog


@dataclass(frozen=True)
class CollectivePorts:
    """Rank 0's two listening ports (catalog/software.yaml ``collectives``)."""

    master_port: int
    root_comm_port: int

    def __post_init__(self) -> None:
        if self.master_port == self.root_comm_port:
            raise ValueError(f"MASTER_PORT and the root communicator's port are both {self.master_port}; give each its own")


def collective_ports() -> CollectivePorts:
    facts = catalog.software_facts()["collectives"]
    return CollectivePorts(master_port=int(facts["master_port"]), root_comm_port=int(facts["root_comm_port"]))


def efa_environment(instance_type: str) -> dict[str, str]:
    """libfabric's EFA provider with device RDMA, on types that have EFA (none otherwise)."""
    if not catalog.get(instance_type).efa_supported:
        return {}
    return {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1"}


def checkpoints_url(checkpoints_bucket: str, pool: str) -> str:
    """Where a pool's jobs write checkpoints: the pool's prefix of the environment's checkpoints bucket."""
    return f"s3://{checkpoints_bucket}/{pool}/"


def job_environment(
    *,
    environment: str,
    pool: str,
    instance_type: str,
    datasets_bucket: str,
    checkpoints_bucket: str,
    compile_cache_url: str,
    lnc: int | None,
) -> dict[str, str]:
    """The variables every rank of a pool's job sees, whatever launched it (no per-rank values)."""
    env = {
        **efa_environment(instance_type),
        "NEURON_COMPILE_CACHE_URL": compile_cache_url,
        "NEURONKIT_ENVIRONMENT": environment,
        "NEURONKIT_POOL": pool,
        "NEURONKIT_DATASETS": f"s3://{datasets_bucket}/",
        "NEURONKIT_CHECKPOINTS": checkpoints_url(checkpoints_bucket, pool),
        "MASTER_PORT": str(collective_ports().master_port),
    }
    if lnc is not None:
        env["NEURON_LOGICAL_NC_CONFIG"] = str(lnc)
    return env


def root_comm_id(master_addr: str) -> str:
    """``NEURON_RT_ROOT_COMM_ID`` for a job whose rank 0 is at ``master_addr`` (an address or a DNS name)."""
    return f"{master_addr}:{collective_ports().root_comm_port}"


__all__ = ["CollectivePorts", "checkpoints_url", "collective_ports", "efa_environment", "job_environment", "root_comm_id"]
