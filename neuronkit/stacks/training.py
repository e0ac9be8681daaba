from __future__ import annotations

import dataclasses
import datetime as dt
from typing import TYPE_CHECKING, Any

from aws_cdk import aws_autoscaling as autoscaling
from constructs import Construct

from neuronkit import catalog
from neuronkit.config import Ami, CapacityBlock, Environment, GpuPool, Odcr, PoolRelease, pool_releases
from neuronkit.config import TrainingCluster as ClusterConfig
from neuronkit.config.training import offering_warnings
from neuronkit.constructs import compliance
from neuronkit.constructs.launch_template import AmiSpec
from neuronkit.constructs.node_pool import NodePoolSpec
from neuronkit.constructs.notifications import NotificationTopic, arn_of
from neuronkit.constructs.observability import ObservabilitySpec
from neuronkit.constructs.storage import StorageAccess
from neuronkit.constructs.training_cluster import CapacitySpec, TrainingCluster
from neuronkit.reports.pools import fallback_pool_name, gpu_pool_name
from neuronkit.stacks.base import NeuronkitStack, bucket_names
from neuronkit.stacks.network import NetworkStack
from neuronkit.stacks.storage import StorageStack

if TYPE_CHECKING:
    from neuronkit.constructs.batch import BatchTrainingCluster


def ami_spec(ami: Ami, kind: str, release: PoolRelease | None = None) -> AmiSpec:
    """A pinned id, a floating ``latest`` (asked for with ``track: latest``), or the family's image pinned
    through a lookup: on Neuron pools the DLAMI of the pool's Neuron release (neuronkit.config.pool_releases)."""
    version = release.release.version if release is not None and release.release is not None else None
    workload = release.workload if release is not None else None
    if ami.ami_id:
        assert ami.root_device_name
        spec = AmiSpec(root_device_name=ami.root_device_name, ami_id=ami.ami_id)
    elif ami.track == "latest":
        spec = AmiSpec.latest(ami.family or catalog.default_ami_family(kind))
    else:
        spec = AmiSpec.family(ami.family or catalog.default_ami_family(kind), version)
    # The pool's release and workload label the image for the PR summary, however the image is chosen.
    return dataclasses.replace(spec, release=version, workload=workload)


def protected(config: Environment, cluster: ClusterConfig) -> bool:
    """Scale-in protection of a cluster's new nodes: off when the day/night shift scales training down, since a
    scheduled action cannot remove protection and protected nodes would keep running (and billing) all day."""
    shift = config.monitoring.day_night
    if shift is not None and shift.training_day_desired < shift.training_night_desired:
        return False
    return cluster.scale_in_protection


def _driver(pool: PoolRelease | None) -> str | None:
    """The minimum Neuron driver of a pool's release: nodes with an older one fail their boot check."""
    return pool.release.driver_min if pool is not None and pool.release is not None else None


def _shipped(pool: PoolRelease | None) -> str | None:
    """The Neuron driver a pool's release shipped: nodes below it join with a warning and a metric."""
    return pool.release.driver_shipped if pool is not None and pool.release is not None else None


def _release(pool: PoolRelease | None) -> str | None:
    """The Neuron release of a pool: its nodes' boot check holds their driver to the release's window."""
    return pool.release.version if pool is not None and pool.release is not None else None


def observability_spec(config: Environment) -> ObservabilitySpec:
    """Where the nodes' metrics and logs go: the file's monitoring namespace and log retention."""
    return ObservabilitySpec(namespace=config.monitoring.namespace, log_retention_days=config.monitoring.log_retention_days)


def node_pool(pool: ClusterConfig | GpuPool, ami: AmiSpec) -> NodePoolSpec:
    """The file's type, sizes and root volume of a cluster (or its GPU pool) as the constructs take them."""
    return NodePoolSpec(
        instance_type=pool.instance_type,
        min_size=pool.min_size,
        max_size=pool.max_size,
        desired_size=pool.desired_size,
        ami=ami,
        root_volume_gib=pool.root_volume_gib if isinstance(pool, ClusterConfig) else None,
    )


def capacity_spec(cluster: ClusterConfig) -> CapacitySpec:
    cap = cluster.capacity
    if isinstance(cap, Odcr):
        return CapacitySpec(
            kind="odcr",
            reservation_id=cap.reservation_id,
            create_count=cap.instance_count if cap.create else None,
            end=cap.end_date,
        )
    if isinstance(cap, CapacityBlock):
        return CapacitySpec(
            kind="capacity-block",
            reservation_id=cap.reservation_id,
            reservation_ids=tuple(cap.reservation_ids),
            start=cap.start,
            end=cap.end,
            drain_minutes=cap.drain_minutes,
            upfront_fee_usd=cap.upfront_fee_usd,
        )
    return CapacitySpec()


def lnc_of(cluster: ClusterConfig) -> int | None:
    """The cluster's logical NeuronCore setting: the file's, else the catalog's default for its family."""
    return cluster.lnc or catalog.lnc_default(cluster.instance_type.split(".", 1)[0])


def ultraserver_size(cluster: ClusterConfig) -> int:
    unit = catalog.ultraserver(cluster.ultraserver) if cluster.ultraserver else None
    return int(unit["servers"]) if unit else 0


class TrainingStack(NeuronkitStack):
    """One TrainingCluster per entry of the file's ``training`` list; AWS Batch for ``scheduler: batch`` entries."""

    def __init__(
        self, scope: Construct, id: str, *, config: Environment, network: NetworkStack, storage: StorageStack, **kwargs: Any
    ) -> None:
        super().__init__(scope, id, config=config, description="training clusters", **kwargs)
        self.add_stack_dependency(storage)
        names = bucket_names(config)
        shared = storage.storage.access()
        access = StorageAccess(
            datasets_bucket=names["datasets"],
            checkpoints_bucket=names["checkpoints"],
            artifacts_bucket=names["artifacts"],
            lustre_dns_name=shared.lustre_dns_name,
            lustre_mount_name=shared.lustre_mount_name,
            client_security_group_id=shared.client_security_group_id,
        )
        self.events = NotificationTopic(self, "ClusterEvents", display_name=f"neuronkit {config.name} training events")
        self.clusters: dict[str, TrainingCluster] = {}
        self.releases = pool_releases(config)
        for cluster in config.training:
            if cluster.scheduler == "batch":
                continue  # built by add_batch_clusters below
            self.clusters[cluster.name] = TrainingCluster(
                self,
                f"Cluster-{cluster.name}",
                environment=config.name,
                name=cluster.name,
                nodes=node_pool(cluster, ami_spec(cluster.ami, "neuron", self.releases.get(cluster.name))),
                vpc=network.network.vpc,
                subnet_id=network.network.subnet_ids[cluster.az_id],
                az_id=cluster.az_id,
                expected_neuron_driver=_driver(self.releases.get(cluster.name)),
                shipped_neuron_driver=_shipped(self.releases.get(cluster.name)),
                neuron_release=_release(self.releases.get(cluster.name)),
                capacity=capacity_spec(cluster),
                storage=access,
                notifications_topic_arn=arn_of(self.events.topic),
                compile_cache=cluster.compile_cache,
                scale_in_protection=protected(config, cluster),
                tags={"neuronkit:environment": config.name, "cost-center": config.cost_center},
                observability=observability_spec(config),
                lnc=lnc_of(cluster),
                ultraserver_size=ultraserver_size(cluster),
            )
            if cluster.gpu_pool is not None:
                self._gpu_pool(config, cluster, network, access)
            if isinstance(cluster.capacity, CapacityBlock) and cluster.capacity.fallback != "none":
                self._block_fallback(config, cluster, network, access)
        # A Capacity Block or UltraServer cluster outside the catalog's offerings is accepted with a warning
        # (neuronkit.config.offering_warnings); cfn-lint's own offerings say the same, acknowledged with that text.
        for key, line in offering_warnings(config.region, list(config.training)):
            cluster = config.training[int(key.split("[")[1].split("]")[0])]
            if cluster.name in self.clusters:  # Batch clusters run on-demand only: validation refuses them outside
                compliance.acknowledge_cfn_lint(self.clusters[cluster.name], compliance.CFN_LINT_REGION_RULE, f"{key}: {line}")
        # scheduler: batch -- AWS Batch compute environments, queues and job definitions instead of Auto
        # Scaling groups (neuronkit/stacks/batch.py, docs/batch.md).
        self.batch_clusters: dict[str, BatchTrainingCluster] = {}
        if any(c.scheduler == "batch" for c in config.training):
            from neuronkit.stacks.batch import add_batch_clusters  # aws-cdk-lib's Batch module: only when used

            self.batch_clusters = add_batch_clusters(self, config=config, network=network, storage=access)

    def _gpu_pool(self, config: Environment, cluster: ClusterConfig, network: NetworkStack, access: StorageAccess) -> None:
        """The cluster's GPU pool: same storage, notifications and hostfile conventions, its own placement
        group and EFA layout (from the catalog, e.g. 32 EFA interfaces on p5.48xlarge), the GPU AMI."""
        pool = cluster.gpu_pool
        assert pool is not None
        name = gpu_pool_name(cluster.name)
        az = pool.az_id or cluster.az_id
        self.clusters[name] = TrainingCluster(
            self,
            f"Cluster-{name}",
            environment=config.name,
            name=name,
            role="training-gpu",
            nodes=node_pool(pool, ami_spec(pool.ami, "gpu")),
            vpc=network.network.vpc,
            subnet_id=network.network.subnet_ids[az],
            az_id=az,
            storage=access,
            notifications_topic_arn=arn_of(self.events.topic),
            scale_in_protection=protected(config, cluster),
            tags={"neuronkit:environment": config.name, "cost-center": config.cost_center},
            observability=observability_spec(config),
        )

    def _block_fallback(self, config: Environment, cluster: ClusterConfig, network: NetworkStack, access: StorageAccess) -> None:
        """What takes over when a Capacity Block ends (docs/capacity-blocks.md): an on-demand sibling cluster
        (empty until then) or the cluster's GPU pool, scaled up when the block's cluster scales to zero."""
        cap = cluster.capacity
        assert isinstance(cap, CapacityBlock)
        at = capacity_spec(cluster).scale_down_at
        assert at is not None
        when = at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        if cap.fallback == "gpu-pool":
            assert cluster.gpu_pool is not None
            target, size = self.clusters[gpu_pool_name(cluster.name)], cluster.gpu_pool.max_size
        else:
            name = fallback_pool_name(cluster.name)
            target = self.clusters[name] = TrainingCluster(
                self,
                f"Cluster-{name}",
                environment=config.name,
                name=name,
                nodes=NodePoolSpec(
                    instance_type=cluster.instance_type,
                    max_size=cluster.max_size,
                    desired_size=0,
                    ami=ami_spec(cluster.ami, "neuron", self.releases.get(cluster.name)),
                    root_volume_gib=cluster.root_volume_gib,
                ),
                vpc=network.network.vpc,
                subnet_id=network.network.subnet_ids[cluster.az_id],
                az_id=cluster.az_id,
                expected_neuron_driver=_driver(self.releases.get(cluster.name)),
                shipped_neuron_driver=_shipped(self.releases.get(cluster.name)),
                neuron_release=_release(self.releases.get(cluster.name)),
                storage=access,
                notifications_topic_arn=arn_of(self.events.topic),
                compile_cache=cluster.compile_cache,
                scale_in_protection=protected(config, cluster),
                tags={"neuronkit:environment": config.name, "cost-center": config.cost_center},
                observability=observability_spec(config),
                lnc=lnc_of(cluster),
            )
            size = cluster.max_size
        autoscaling.CfnScheduledAction(
            target,
            "TakeOverFromBlock",
            auto_scaling_group_name=target.auto_scaling_group.ref,
            start_time=when,
            min_size=0,
            max_size=size,
            desired_capacity=size,
        )
