"""The EKS stack of a platform: eks environment: the cluster and one managed node group per pool."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from aws_cdk import Tags, aws_eks_v2
from constructs import Construct

from neuronkit import catalog
from neuronkit.catalog import eks_images
from neuronkit.config import Environment, pool_releases
from neuronkit.config import InferenceFleet as FleetConfig
from neuronkit.config import TrainingCluster as ClusterConfig
from neuronkit.config.eks import CLUSTER_ADDONS
from neuronkit.constructs.budget import CostBudget
from neuronkit.constructs.capacity_block import CapacityBlockWatch
from neuronkit.constructs.eks import (
    AutoscalingSpec,
    ClusterAutoscaling,
    ClusterSpec,
    EksServingFleet,
    EksServingSpec,
    FleetScaling,
    GpuFallback,
    GpuSpill,
    LoadBalancerController,
    LustreVolume,
    NeuronEksCluster,
    NeuronNodeGroup,
    NeuronWorkloads,
    NodeGroupSpec,
    ScaledGroup,
    SpillSpec,
    SystemNodesSpec,
    WorkloadsSpec,
    eks_boot_script,
)  # fmt: skip
from neuronkit.constructs.eks.cluster import kubectl_layer
from neuronkit.constructs.eks.existing_cluster import ExistingClusterSpec, ExistingEksCluster
from neuronkit.constructs.eks.node_group_size import AutoscaledSize, AutoscaledSizeSpec
from neuronkit.constructs.eks.training_jobs import TrainingJobs, TrainingJobsSpec, TrainingPool
from neuronkit.constructs.monitoring import EnvironmentMonitoring, WatchedPool
from neuronkit.constructs.storage import StorageAccess
from neuronkit.kubernetes import serving as serving_manifests
from neuronkit.kubernetes.autoscaler import node_group_template_tags
from neuronkit.kubernetes.neuron_chart import NeuronChartOptions, Taint
from neuronkit.kubernetes.training_job import lead_minutes
from neuronkit.reports.pools import eks_fallback_groups, gpu_pool_name
from neuronkit.stacks.base import NeuronkitStack, bucket_names, environment_tags
from neuronkit.stacks.monitoring import alarms_topic, capacity_block_watches, environment_budget, environment_monitoring
from neuronkit.stacks.network import NetworkStack
from neuronkit.stacks.storage import StorageStack
from neuronkit.stacks.training import capacity_spec, lnc_of, observability_spec


class EksStack(NeuronkitStack):
    """``ENV-eks``: the cluster, then a node group per training cluster (and its GPU pool) and per inference fleet
    (its Neuron types, and its GPU fallback types as groups starting empty: one per type for a served fleet)."""

    def __init__(
        self, scope: Construct, id: str, *, config: Environment, network: NetworkStack, storage: StorageStack, **kwargs: Any
    ) -> None:
        super().__init__(scope, id, config=config, description="EKS cluster and node groups", **kwargs)
        self.add_stack_dependency(storage)
        eks = config.eks
        assert eks is not None, "platform: eks needs the eks section (validation requires it)"
        self._subnets = dict(zip(config.network.az_ids, network.network.vpc.private_subnets, strict=True))
        self.cluster: NeuronEksCluster | ExistingEksCluster = (
            self._existing(config, network) if eks.existing is not None else self._own(config, network)
        )
        self._access: StorageAccess = storage.storage.access()
        self._releases = pool_releases(config)
        self.node_groups: dict[str, NeuronNodeGroup] = {}
        self._roles: dict[str, str] = {}
        for cluster in config.training:
            self._training(config, cluster)
        for fleet in config.inference:
            self._inference(config, fleet)
        self.workloads = self._workloads(config, storage)
        self.training_jobs = self._training_jobs(config)
        self.serving = self._serving(config, network, storage)
        self.autoscaling = self._autoscaling(config)
        self.monitoring = self._monitoring(config, storage)
        self.spill = self._fleet_scaling(config)  # after monitoring: its alarms go to the topic, its graph on the dashboard

    def _own(self, config: Environment, network: NetworkStack) -> NeuronEksCluster:
        """The kit's own cluster, with the core add-ons eks.components installs (all by default)."""
        eks = config.eks
        assert eks is not None
        addons = {k: str(v["version"]) for k, v in catalog.eks_facts()["addons"].items() if k != "source"}
        skipped = {addon for name, addon in CLUSTER_ADDONS.items() if not eks.installs(name)}
        return NeuronEksCluster(
            self,
            "Cluster",
            spec=ClusterSpec(
                name=config.name, version=eks.version, admins=eks.admins, viewers=eks.viewers, endpoint=eks.endpoint,
                job_submitters=eks.job_submitters,
                public_access_cidrs=eks.public_access_cidrs, max_pods_per_node=eks.max_pods_per_node,
                system_nodes=SystemNodesSpec(**eks.system_nodes.resolved()),  # type: ignore[arg-type]
                addon_versions={k: v for k, v in addons.items() if k not in skipped},
            ),
            vpc=network.network.vpc,
            subnets=list(self._subnets.values()),
            tags=environment_tags(config),
        )  # fmt: skip

    def _existing(self, config: Environment, network: NetworkStack) -> ExistingEksCluster:
        """eks.existing: the cluster imported with aws_eks_v2 ``Cluster.from_cluster_attributes`` and kubectl provider
        options (the pinned layer, the private subnets), an access entry for the kit's kubectl handler, and the kit's
        system node group; no AWS::EKS::Cluster, and none of the cluster's own add-ons (docs/eks.md, "Your own cluster")."""
        eks = config.eks
        assert eks is not None and eks.existing is not None
        ex = eks.existing
        subnets = list(self._subnets.values())
        options = aws_eks_v2.KubectlProviderOptions(kubectl_layer=kubectl_layer(self, "KubectlLayer"), private_subnets=subnets)
        imported = aws_eks_v2.Cluster.from_cluster_attributes(
            self, "ImportedCluster", cluster_name=ex.cluster_name, cluster_endpoint=ex.endpoint,
            cluster_certificate_authority_data=ex.certificate_authority, cluster_security_group_id=ex.cluster_security_group_id,
            vpc=network.network.vpc, kubectl_provider_options=options,
        )  # fmt: skip
        return ExistingEksCluster(
            self,
            "Cluster",
            cluster=imported,
            spec=ExistingClusterSpec(
                name=ex.cluster_name, version=ex.kubernetes_version, authentication_mode=ex.authentication_mode,  # type: ignore[arg-type]
                service_cidr=ex.service_cidr, prefix=config.name,
                system_nodes=SystemNodesSpec(**eks.system_nodes.resolved()),  # type: ignore[arg-type]
            ),
            kubectl_provider_options=options,
            subnets=subnets,
            tags=environment_tags(config),
        )  # fmt: skip

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
                    load_balancer=self._load_balancer_ref(config, name),
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
        groups = [g.spec for g in self.node_groups.values()]
        # The DaemonSets that must run on accelerators tolerate exactly the taints of the groups they serve.
        neuron_taints = _distinct(t for g in groups if g.image == "neuron" for t in g.all_taints)
        efa_taints = _distinct(t for g in groups if g.uses_efa for t in g.all_taints)
        workloads = NeuronWorkloads(
            self,
            "Workloads",
            cluster=self.cluster,
            spec=WorkloadsSpec(
                environment=config.name,
                neuron_releases=releases,
                options=NeuronChartOptions(dra=neuron.dra, node_recovery=neuron.node_recovery, taints=neuron_taints),
                # No EFA plugin where no node group carries EFA.
                efa=any(g.uses_efa for g in groups) and config.eks.installs("efa_device_plugin"),
                efa_taints=efa_taints,
                lustre=volume,
                # The NVIDIA device plugin only where GPU node groups exist, on those groups only.
                gpu_pools=[g.name for g in groups if g.image == "gpu"],
                gpu_taints=_distinct(t for g in groups if g.image == "gpu" for t in g.all_taints),
                neuron=config.eks.installs("neuron"),
                nvidia=config.eks.installs("nvidia_device_plugin"),
                fsx_csi=config.eks.installs("fsx_csi"),
            ),
        )
        return workloads

    def _training_jobs(self, config: Environment) -> TrainingJobs | None:
        """JobSet and Kueue on the system node group, and per Trainium training pool its queue, role and claim
        (docs/training-on-eks.md); None when the environment has no Trainium training pool."""
        pools = []
        for c in config.training:
            release = self._releases.get(c.name)
            if release is None or release.release is None or not catalog.get(c.instance_type).is_neuron:
                continue
            cap = c.capacity
            block = cap if cap.type == "capacity-block" else None
            pools.append(
                TrainingPool(
                    name=c.name, instance_type=c.instance_type, max_nodes=c.max_size, release=release.release.version,
                    block_end=block.end if block else None,
                    lead_minutes=lead_minutes("eks-node-group", block.checkpoint_budget_minutes,
                                              kit_drain_minutes=block.drain_minutes) if block else None,
                    cluster_queue=c.cluster_queue,
                )
            )  # fmt: skip
        if not pools:
            return None
        volume = self.workloads.spec.lustre
        names = bucket_names(config)  # literal names: the pool roles' object wildcards are reviewed one by one
        access = StorageAccess(
            datasets_bucket=names["datasets"], checkpoints_bucket=names["checkpoints"], artifacts_bucket=names["artifacts"]
        )
        jobs = TrainingJobs(
            self,
            "TrainingJobs",
            cluster=self.cluster,
            spec=TrainingJobsSpec(
                environment=config.name,
                pools=pools,
                lustre=volume,
                install_jobset=self._installs(config, "jobset"),
                install_kueue=self._installs(config, "kueue"),
            ),
            storage=access,
        )
        if self.workloads.lustre_manifest is not None:
            jobs.pool_manifest.node.add_dependency(self.workloads.lustre_manifest)  # the FSx CSI driver first
        return jobs

    def _serving(self, config: Environment, network: NetworkStack, storage: StorageStack) -> dict[str, EksServingFleet]:
        """Fleets with a model: the load balancer controller once, then per fleet its ALB, pod role and manifests, from
        the Auto Scaling path's serving spec (docs/eks.md, "Serving")."""
        from neuronkit.config.inference import model_spec
        from neuronkit.constructs.serving_specs import HealthCheckSpec, TlsSpec
        from neuronkit.stacks.base import bucket_names
        from neuronkit.stacks.serving import serving_spec

        fleets = [f for f in config.inference if model_spec(f) is not None]
        self.load_balancer_controller: LoadBalancerController | None = None
        out: dict[str, EksServingFleet] = {}
        if not fleets:
            return out
        self.load_balancer_controller = LoadBalancerController(
            self, "LoadBalancerController", cluster=self.cluster, environment=config.name,
            install=self._installs(config, "load_balancer_controller"),
        )  # fmt: skip
        for f in fleets:
            spec = serving_spec(config, f, f.name)
            assert spec is not None
            gpu_groups = _fallback_groups(f)
            roles = [g.role for n, g in self.node_groups.items() if n in (f.name, *(name for name, _ in gpu_groups))]
            out[f.name] = EksServingFleet(
                self,
                f"Serving-{f.name}",
                environment=config.name,
                cluster=self.cluster,
                controller=self.load_balancer_controller,
                spec=EksServingSpec(
                    name=f.name, serving=spec, neuron_type=f.neuron_types[0], neuron_pool=f.name,
                    # Each GPU type on its own group, in the file's order (the spill fills them in that order).
                    gpu_fallbacks=tuple(GpuFallback(instance_type=types[0], pool=name) for name, types in gpu_groups),
                    # KEDA owns the Neuron replicas when the cluster scales on demand (docs/eks.md, "Scaling on demand").
                    replicas=None if self._keda_scales(config) else (f.desired_size if f.desired_size is not None else f.min_size),
                    port=f.port,
                    health_check=HealthCheckSpec(**f.health_check.model_dump()),
                    tls=TlsSpec(certificate_arn=f.tls.certificate_arn, port=f.tls.port) if f.tls else None,
                    idle_timeout_seconds=f.idle_timeout_seconds,
                ),
                vpc=network.network.vpc,
                subnets=[self._subnets[a] for a in f.az_ids],
                artifacts_bucket=bucket_names(config)["artifacts"],
                node_roles=roles,
                ingress_cidr=config.network.cidr,
                access_logs_bucket=storage.storage.access_logs,
            )  # fmt: skip
        return out

    def _load_balancer_ref(self, config: Environment, pool: str) -> Any:
        from neuronkit.config.inference import p99_latency_alarm_seconds
        from neuronkit.constructs.monitoring import LoadBalancerRef

        fleet = getattr(self, "serving", {}).get(pool)
        if fleet is None:
            return None
        (f,) = [f for f in config.inference if f.name == pool]
        return LoadBalancerRef(
            kind="alb", full_name=fleet.load_balancer_full_name, target_group_full_name=fleet.target_group_full_name,
            p99_latency_seconds=p99_latency_alarm_seconds(f, config.monitoring.alarms.p99_latency_ms),
        )  # fmt: skip

    @staticmethod
    def _installs(config: Environment, component: str) -> bool:
        assert config.eks is not None
        return config.eks.installs(component)

    @staticmethod
    def _keda_scales(config: Environment) -> bool:
        """Served fleets scale on their target group's requests through KEDA (installed with any inference fleet)."""
        assert config.eks is not None
        return bool(config.inference) and config.eks.component("keda") != "off"

    def _fleet_scaling(self, config: Environment) -> dict[str, GpuSpill]:
        """Per served fleet: KEDA scales the Neuron Deployment on the ALB's requests, and the spill function watches it:
        with fallback types it gives the GPU Deployments the Neuron shortfall in the file's order; with or without, it
        reports the rollout and compile state its alarms read (docs/eks.md, "Scaling on demand and GPU spill")."""
        spills: dict[str, GpuSpill] = {}
        assert config.eks is not None
        if self.autoscaling is None or config.eks.component("keda") == "off":
            return spills
        for f in config.inference:
            served = self.serving.get(f.name)
            if served is None:
                continue
            FleetScaling(
                self, f"Scaling-{f.name}", cluster=self.cluster.cluster, fleet=f.name, target_group=served.target_group,
                load_balancer=served.load_balancer, requests_per_replica_per_minute=f.requests_per_target,
                min_replicas=f.min_size, max_replicas=f.max_size,
                after=[c for c in (self.autoscaling.keda_chart, served.manifest) if c is not None],
            )  # fmt: skip
            gpu_groups = [self.node_groups[name] for name, _ in _fallback_groups(f)]
            spill = GpuSpill(
                self, f"Spill-{f.name}", cluster=self.cluster.cluster, subnets=[self._subnets[a] for a in f.az_ids],
                spec=SpillSpec(
                    # The serving maximum, not the group's: the group keeps room above it for a surge pod. Without
                    # fallback types the function runs for the rollout and compile alarms only (issue 49).
                    environment=config.name, fleet=f.name, max_gpu_replicas=f.max_size if served.gpu_deployments else 0,
                    gpu_deployments=tuple(served.gpu_deployments),
                    spill_after_minutes=f.spill_after_minutes, return_after_minutes=f.return_after,
                    fallback_hours=config.monitoring.alarms.fallback_hours, metrics_namespace=config.monitoring.namespace,
                ),
                neuron_group_names=[self.node_groups[f.name].auto_scaling_group_name],
                gpu_group_names=[g.auto_scaling_group_name for g in gpu_groups], alarm_topic=self.alarms_topic.topic,
            )  # fmt: skip
            spill.node.add_dependency(served.manifest)
            for patch in served.template_patches.values():
                spill.node.add_dependency(patch)  # the GPU Deployment exists, with its template, before it is scaled
            self.monitoring.dashboard.add_widgets(spill.widget())
            spills[f.name] = spill
        return spills

    def _autoscaling(self, config: Environment) -> ClusterAutoscaling | None:
        """With inference fleets: Cluster Autoscaler (eks.components.cluster_autoscaler) on the fleets' node groups only, whose empty
        Neuron groups tell it the devices a node would offer, and the KEDA operator (per fleet: ScaledObject and GPU
        spill, docs/eks.md "Scaling on demand"). Training node groups keep their sizes."""
        assert config.eks is not None
        fleets = {f.name for f in config.inference} | {name for f in config.inference for name, _ in _fallback_groups(f)}
        serving = [g for name, g in self.node_groups.items() if name in fleets]
        if not serving:
            return None
        groups: list[ScaledGroup] = []
        if config.eks.autoscales:  # installed by the kit, or the cluster's own (eks.components.cluster_autoscaler)
            for group in serving:
                node_spec = group.spec
                devices = catalog.get(node_spec.instance_types[0]).neuron_devices if node_spec.image == "neuron" else 0
                for key, value in node_group_template_tags(neuron_devices=devices).items():
                    Tags.of(group.nodegroup).add(key, value, include_resource_types=["AWS::EKS::Nodegroup"])
                groups.append(
                    ScaledGroup(name=group.auto_scaling_group_name, min_size=node_spec.min_size, max_size=node_spec.max_size)
                )
                # Cluster Autoscaler owns the size: a deploy keeps it, clamped to new bounds (docs/eks.md, "Day two").
                size = AutoscaledSize(
                    group, "AutoscaledSize", nodegroup=group.nodegroup,
                    spec=AutoscaledSizeSpec(
                        cluster=self.cluster.spec.name, nodegroup=group.nodegroup_name,
                        nodegroup_pattern=group.replaceable_name.pattern, min_size=node_spec.min_size,
                        previous_names=(group.replaceable_name.prefix,),
                        max_size=node_spec.max_size,
                        initial_size=node_spec.desired_size if node_spec.desired_size is not None else node_spec.min_size,
                    ),
                    refresh=(group.launch_template.attr_latest_version_number,),
                )  # fmt: skip
                # Asked after the cluster exists (the name above is a plain string): a new group is then "not found"
                # (the initial size), never a call into a cluster still being created (review of issue 47).
                size.resource.node.add_dependency(self.cluster.cluster)
        scaling = AutoscalingSpec(
            environment=config.name,
            node_autoscaler=config.eks.installs("cluster_autoscaler"),
            groups=groups,
            keda=config.eks.installs("keda"),
        )
        return ClusterAutoscaling(self, "Autoscaling", cluster=self.cluster, spec=scaling)

    def _script(
        self, config: Environment, pool: str, types: list[str], efa: bool, lnc: int | None, *, host_lustre: bool = True
    ) -> Callable[[Mapping[str, str | int] | None], str]:
        """The node group's boot script, given the values of its NodeObservability (created inside the group).
        ``host_lustre`` off (serving pools): no host mount of Lustre, so the file system, the package repository
        and a kernel-matching client never keep serving nodes from joining; their pods reach Lustre through the
        CSI volume, if at all (docs/eks.md)."""
        release = self._releases.get(pool)
        rel = release.release if release is not None else None
        storage = self._access if host_lustre else dataclasses.replace(self._access, lustre_dns_name=None, lustre_mount_name=None)
        render = functools.partial(
            eks_boot_script,
            environment=config.name, pool=pool, instance_types=types, efa=efa, storage=storage,
            neuron_driver=rel.driver_min if rel else None, neuron_driver_shipped=rel.driver_shipped if rel else None,
            neuron_release=rel.version if rel else None, lnc=lnc,
        )  # fmt: skip
        return lambda values: render(observability=values)

    def _release_version(self, config: Environment, accelerator: str, pool: str) -> str | None:
        """The EKS AMI release of a node group: the file's eks.node_release_version; else, for a Neuron group, the
        newest catalog image whose Neuron driver lies in the window of its pool's release (validation refused the file
        where none does), so pools on different releases boot different images; a GPU group keeps the catalog's GPU
        pin of the cluster's Kubernetes version."""
        assert config.eks is not None
        if config.eks.node_release_version:
            return config.eks.node_release_version
        if accelerator == "gpu":
            return eks_images.pinned("gpu", config.eks.version).release_version
        release = self._releases.get(pool)
        if release is None or release.release is None:
            return eks_images.pinned("neuron", config.eks.version).release_version
        image = eks_images.for_release(config.eks.version, release.release.version)
        return image.release_version if image is not None else None

    def _group(self, config: Environment, spec: NodeGroupSpec, az_ids: list[str], role: Any) -> None:
        spec = dataclasses.replace(spec, release_version=self._release_version(config, spec.image, spec.name))
        script = self._script(
            config, spec.name, list(spec.instance_types), spec.uses_efa, spec.lnc, host_lustre=role != "inference"
        )
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
        # A served fleet's groups keep room above the serving maximum (KEDA's max = max_size) for the whole-node
        # compile Job and a rollout's surge pod (kubernetes/serving.headroom_nodes; docs/eks.md, "Serving").
        served = f.model is not None
        spec = NodeGroupSpec(
            name=f.name, instance_types=list(f.neuron_types), min_size=f.min_size, max_size=f.max_size + (serving_manifests.headroom_nodes("neuron") if served else 0),
            desired_size=f.desired_size, root_volume_gib=f.root_volume_gib or _served_root_volume(f, f.neuron_types),
            efa=False, max_pods=self._max_pods(config),
        )  # fmt: skip
        self._group(config, spec, list(f.az_ids), "inference")
        # The first GPU group keeps its name (and construct id) when a served fleet lists a second type: nothing of a
        # running environment is replaced (docs/eks.md, "Serving").
        for name, types in _fallback_groups(f):
            fallback = NodeGroupSpec(
                name=name, instance_types=types, min_size=0,
                max_size=f.max_size + (serving_manifests.headroom_nodes("gpu") if served else 0),
                efa=False, max_pods=self._max_pods(config), root_volume_gib=_served_root_volume(f, types),
                fallback_for=f.name,
            )  # fmt: skip
            self._group(config, fallback, list(f.az_ids), "inference")

    @staticmethod
    def _max_pods(config: Environment) -> int:
        assert config.eks is not None
        return config.eks.max_pods_per_node


def _fallback_groups(f: FleetConfig) -> list[tuple[str, list[str]]]:
    """The fleet's GPU fallback node groups (pool name, types): one per type when it serves a model."""
    return eks_fallback_groups(f.name, list(f.fallback_types), f.model is not None)


def _served_root_volume(f: FleetConfig, types: list[str]) -> int | None:
    """With a model, the root volume its profile needs (image, weights, compiled artifacts), as on the Auto Scaling path."""
    from neuronkit.catalog import serving
    from neuronkit.config.inference import model_spec

    model = model_spec(f)
    if model is None or not types:
        return None
    return max(serving.root_volume_gib(model, t) for t in types)


def _distinct(taints: Iterable[Taint]) -> tuple[Taint, ...]:
    return tuple(dict.fromkeys(taints))


__all__ = ["EksStack"]
