"""Wiring of ``training.scheduler: batch`` clusters (AWS Batch) into the training stack.

A batch cluster gets a :class:`BatchTrainingCluster` for its Trainium type and, with ``gpu_pool``, a
second one for the GPU type: CUDA jobs need another image, AMI and job definition than Neuron jobs, and a
queue that listed both compute environments would not be a fallback (see docs/batch.md). One Batch
service role serves every compute environment of the stack.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

from constructs import Construct

from neuronkit.config import Ami, Environment, PoolRelease, TrainingCluster, ami_family, gpu_ami_family, pool_releases
from neuronkit.constructs.batch import BatchTrainingCluster
from neuronkit.constructs.launch_template import AmiSpec
from neuronkit.constructs.node_pool import NodePoolSpec
from neuronkit.constructs.storage import StorageAccess
from neuronkit.reports.pools import gpu_pool_name
from neuronkit.stacks.network import NetworkStack


class _Pool(NamedTuple):
    name: str
    instance_type: str
    az_id: str
    min_size: int
    max_size: int
    ami: AmiSpec
    trainium: bool
    image: str


def _ami(ami: Ami, family: str | None) -> AmiSpec:
    """The catalog family (ECS-optimized by default for Batch, see neuronkit.config.ami_family), pinned at the
    first synth (or floating with ``track: latest``), or the pinned id."""
    if family is None:
        assert ami.ami_id and ami.root_device_name
        return AmiSpec(root_device_name=ami.root_device_name, ami_id=ami.ami_id)
    return AmiSpec.latest(family) if ami.track == "latest" else AmiSpec.family(family)


def _host(c: TrainingCluster, releases: dict[str, PoolRelease]) -> AmiSpec:
    """The ECS Neuron host image, labelled with the pool's Neuron release (its job image's) for the PR summary."""
    pool = releases.get(c.name)
    version = pool.release.version if pool is not None and pool.release is not None else None
    workload = pool.workload if pool is not None else None
    return dataclasses.replace(_ami(c.ami, ami_family(c)), release=version, workload=workload)


def _image(c: TrainingCluster, releases: dict[str, PoolRelease]) -> str:
    """The job image: the file's, or the release matrix's container for the cluster's release and workload."""
    if c.container_image:
        return c.container_image
    pool = releases[c.name]
    assert pool.release is not None  # validated by neuronkit.config
    image = pool.release.container(pool.workload)
    assert image is not None  # validated by neuronkit.config (container_problems)
    return image


def add_batch_clusters(
    scope: Construct, *, config: Environment, network: NetworkStack, storage: StorageAccess
) -> dict[str, BatchTrainingCluster]:
    """One BatchTrainingCluster per ``scheduler: batch`` cluster (and per GPU pool of one), keyed by pool name."""
    clusters = [c for c in config.training if c.scheduler == "batch"]
    if not clusters:
        return {}
    lustre = config.storage.lustre
    subnets = network.network.subnet_ids
    tags = {"neuronkit:environment": config.name, "cost-center": config.cost_center}
    out: dict[str, BatchTrainingCluster] = {}
    releases = pool_releases(config)
    for c in clusters:
        pools = [_Pool(c.name, c.instance_type, c.az_id, c.min_size, c.max_size, _host(c, releases), True, _image(c, releases))]
        if c.gpu_pool is not None:
            g = c.gpu_pool
            assert g.container_image
            ami = _ami(g.ami, gpu_ami_family(c))
            pools.append(
                _Pool(
                    gpu_pool_name(c.name),
                    g.instance_type,
                    g.az_id or c.az_id,
                    g.min_size,
                    g.max_size,
                    ami,
                    False,
                    g.container_image,
                )
            )
        for pool in pools:
            out[pool.name] = BatchTrainingCluster(
                scope,
                f"Batch-{pool.name}",
                environment=config.name,
                name=pool.name,
                nodes=NodePoolSpec(
                    instance_type=pool.instance_type,
                    min_size=pool.min_size,
                    max_size=pool.max_size,
                    ami=pool.ami,
                    root_volume_gib=c.root_volume_gib if pool.trainium else None,
                ),
                vpc=network.network.vpc,
                subnet_id=subnets[pool.az_id],
                container_image=pool.image,
                storage=storage,
                # The checkpoints bucket is linked at /fsx/checkpoints with automatic export to S3.
                checkpoint_dir=f"/fsx/checkpoints/{pool.name}/" if lustre is not None and lustre.link_checkpoints else None,
                compile_cache=c.compile_cache,
                log_retention_days=config.monitoring.log_retention_days,
                az_id=pool.az_id,
                tags=tags,
            )
    return out
