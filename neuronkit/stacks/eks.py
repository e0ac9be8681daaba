"""The EKS stack of a platform: eks environment: the cluster and one managed node group per pool."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

from constructs import Construct

from neuronkit.catalog import eks_images
from neuronkit.config import Environment, pool_releases
from neuronkit.config import InferenceFleet as FleetConfig
from neuronkit.config import TrainingCluster as ClusterConfig
from neuronkit.constructs.budget import CostBudget
from neuronkit.constructs.capacity_block import CapacityBlockWatch
from neuronkit.constructs.eks import (
    ClusterSpec,
    LustreVolume,
    NeuronEksCluster,
    NeuronNodeGroup,
    NeuronWorkloads,
    NodeGroupSpec,
    WorkloadsSpec,
    eks_boot_script,
)  # fmt: skip
from neuronkit.constructs.monitoring import EnvironmentMonitoring, WatchedPool
from neuronkit.constructs.storage import StorageAccess
from neuronkit.kubernetes.neuron_chart import NeuronChartOptions
from neuronkit.reports.pools import eks_fallback_pool_name, gpu_pool_name
from neuronkit.stacks.base import NeuronkitStack, environment_tags
from neuronkit.stacks.monitoring import alarms_topic, capacity_block_watches, environment_budget, environment_monitoring
from neuronkit.stacks.network import NetworkStack
from neuronkit.stacks.storage import StorageStack
from neuronkit.stacks.training import capacity_spec, lnc_of, observability_spec


class EksStack(NeuronkitStack):
    """``ENV-eks``: the cluster, then a node group per training cluster (and its GPU pool) and per inference fleet
    (its Neuron types, and its GPU fallback types as a second group starting empty)."""

    def __init__(
        self, scope: Construct, id: str, *, config: Environment, network: NetworkStack, storage: StorageStack, **kwargs: Any
    ) -> None:
        super().__init__(scope, id, config=config, description="EKS cluster and node groups", **kwargs)
        self.add_stack_dependency(storage)
        eks = config.eks
        assert eks is not None, "platform: eks needs the eks section (validation requires it)"
        self._subnets = dict(zip(config.network.az_ids, network.network.vpc.private_subnets, strict=True))
        self.cluster = NeuronEksCluster(
            self,
            "Cluster",
            spec=ClusterSpec(
                name=config.name, version=eks.version, admins=eks.admins, viewers=eks.viewers, endpoint=eks.endpoint,
                public_access_cidrs=eks.public_access_cidrs, max_pods_per_node=eks.max_pods_per_node,
            ),
            vpc=network.network.vpc,
            subnets=list(self._subnets.values()),
        )  # fmt: skip
        self._access: StorageAccess = storage.storage.access()
        self._releases = pool_releases(config)
        self.node_groups: dict[str, NeuronNodeGroup] = {}
        self._roles: dict[str, str] = {}
        for cluster in config.training:
            self._training(config, cluster)
        for fleet in config.inference:
            self._inference(config, fleet)
        self.workloads = self._workloads(config, storage)
        self.monitoring = self._monitoring(config, storage)

    def _monitoring(self, config: Environment, storage: StorageStack) -> EnvironmentMonitoring:
        """The dashboard and alarms of the Auto Scaling path, over the node groups' Auto Scaling groups (named by EKS,
        read at deploy time) and the metrics their nodes publish (same namespace, Environment and Pool dimensions)."""
        self.alarms_topic = alarms_topic(self, config)
        # As on the Auto Scaling path: the month's budget over the environment's tag (the node groups' instances,
        # volumes and interfaces carry it), and each Capacity Block's events, expiry alarm and notices.
        self.budget: CostBudget | None = environment_budget(self, config, self.alarms_topic.topic)
        self.capacity_blocks: dict[str, CapacityBlockWatch] = capacity_block_watches(self, config, self.alarms_topic.topic)
        blocks = {c.name for c in config.training if c.capacity.type == "capacity-block"}
        pools = []
        for name, group in self.node_groups.items():
            spec = group.spec
            neuron = spec.image == "neuron"
            role = self._roles[name]
            pools.append(
                WatchedPool(
                    pool=name, group_name=group.auto_scaling_group_name,
                    role="training-gpu" if role == "training-gpu" else ("training" if role == "training" else "inference"),
                    neuron_types=tuple(spec.instance_types) if neuron else (),
                    gpu_types=() if neuron else tuple(spec.instance_types), prepaid=name in blocks,
                    # A training node group running but idle (NeuronCore or GPU utilization) alarms as on the ASG path.
                    idle_alarm=role in ("training", "training-gpu"), idle_scale_down=False,
                )
            )  # fmt: skip
        return environment_monitoring(self, config, storage, self.alarms_topic.topic, pools)

    def _workloads(self, config: Environment, storage: StorageStack) -> NeuronWorkloads:
        """The Neuron chart (the newest pool release's pin), the EFA plugin, the FSx CSI driver and the Lustre volume."""
        assert config.eks is not None
        releases = sorted({r.release.version for r in self._releases.values() if r.release is not None})
        fs = storage.storage.file_system
        lustre = config.storage.lustre
        volume = (
            LustreVolume(
                file_system_id=fs.ref, dns_name=fs.attr_dns_name, mount_name=fs.attr_lustre_mount_name,
                size_gib=lustre.size_gib,
            )
            if fs is not None and lustre is not None
            else None
        )  # fmt: skip
        neuron = config.eks.neuron
        workloads = NeuronWorkloads(
            self,
            "Workloads",
            cluster=self.cluster,
            spec=WorkloadsSpec(
                environment=config.name,
                neuron_releases=releases,
                options=NeuronChartOptions(dra=neuron.dra, node_recovery=neuron.node_recovery),
                efa=any(g.spec.uses_efa for g in self.node_groups.values()),
                lustre=volume,
            ),
        )
        return workloads

    def _script(
        self, config: Environment, pool: str, types: list[str], efa: bool, lnc: int | None
    ) -> Callable[[Mapping[str, str | int] | None], str]:
        """The node group's boot script, given the values of its NodeObservability (created inside the group)."""
        release = self._releases.get(pool)
        rel = release.release if release is not None else None
        render = functools.partial(
            eks_boot_script,
            environment=config.name, pool=pool, instance_types=types, efa=efa, storage=self._access,
            neuron_driver=rel.driver_min if rel else None, neuron_driver_shipped=rel.driver_shipped if rel else None,
            lnc=lnc,
        )  # fmt: skip
        return lambda values: render(observability=values)

    def _release_version(self, config: Environment, accelerator: str) -> str | None:
        """The EKS AMI release of every node group: the file's eks.node_release_version, else the catalog image whose
        Neuron driver meets driver_min of every Neuron release of the file (validation refused the file otherwise)."""
        assert config.eks is not None
        if config.eks.node_release_version:
            return config.eks.node_release_version
        mins = [r.release.driver_min for r in self._releases.values() if r.release is not None]
        image = eks_images.for_cluster(config.eks.version, mins)
        if image is None:
            return None
        if accelerator == "gpu":
            gpu = eks_images.gpu_image_of(image)
            return gpu.release_version if gpu is not None else None
        return image.release_version

    def _group(self, config: Environment, spec: NodeGroupSpec, az_ids: list[str], role: Any) -> None:
        spec = dataclasses.replace(spec, release_version=self._release_version(config, spec.image))
        script = self._script(config, spec.name, list(spec.instance_types), spec.uses_efa, spec.lnc)
        self._roles[spec.name] = role
        client = self._access.client_security_group_id
        self.node_groups[spec.name] = NeuronNodeGroup(
            self,
            f"NodeGroup-{spec.name}",
            environment=config.name,
            cluster=self.cluster,
            spec=spec,
            subnets=[self._subnets[a] for a in az_ids],
            script=script,
            extra_security_group_ids=[client] if client else [],
            # The environment's cost-allocation tags on the nodes: node group tags do not reach the instances.
            tags=environment_tags(config),
            role=role,
            az_id=az_ids[0] if len(az_ids) == 1 else None,
            observability=observability_spec(config),
        )

    def _training(self, config: Environment, c: ClusterConfig) -> None:
        spec = NodeGroupSpec(
            name=c.name, instance_types=[c.instance_type], min_size=c.min_size, max_size=c.max_size,
            desired_size=c.desired_size, root_volume_gib=c.root_volume_gib, capacity=capacity_spec(c),
            max_pods=self._max_pods(config), lnc=lnc_of(c),
        )  # fmt: skip
        self._group(config, spec, [c.az_id], "training")
        if c.gpu_pool is not None:
            g = c.gpu_pool
            gpu = NodeGroupSpec(
                name=gpu_pool_name(c.name), instance_types=[g.instance_type], min_size=g.min_size, max_size=g.max_size,
                desired_size=g.desired_size, max_pods=self._max_pods(config),
            )  # fmt: skip
            self._group(config, gpu, [g.az_id or c.az_id], "training-gpu")

    def _inference(self, config: Environment, f: FleetConfig) -> None:
        spec = NodeGroupSpec(
            name=f.name, instance_types=list(f.neuron_types), min_size=f.min_size, max_size=f.max_size,
            desired_size=f.desired_size, root_volume_gib=f.root_volume_gib, efa=False, max_pods=self._max_pods(config),
        )  # fmt: skip
        self._group(config, spec, list(f.az_ids), "inference")
        if f.fallback_types:
            fallback = NodeGroupSpec(
                name=eks_fallback_pool_name(f.name), instance_types=list(f.fallback_types), min_size=0, max_size=f.max_size,
                efa=False, max_pods=self._max_pods(config),
            )  # fmt: skip
            self._group(config, fallback, list(f.az_ids), "inference")

    @staticmethod
    def _max_pods(config: Environment) -> int:
        assert config.eks is not None
        return config.eks.max_pods_per_node


__all__ = ["EksStack"]
