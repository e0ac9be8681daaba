"""The monitoring stack: dashboard, alarms, budget, day/night schedule and idle scale-down of one environment."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aws_cdk import aws_sns as sns
from constructs import Construct

from neuronkit.config import CapacityBlock, Environment
from neuronkit.config.inference import p99_latency_alarm_seconds
from neuronkit.constructs.budget import CostBudget
from neuronkit.constructs.capacity_block import CapacityBlockWatch
from neuronkit.constructs.day_night import DayNightSchedule, ShiftCapacity
from neuronkit.constructs.idle_scale_down import IdleScaleDown
from neuronkit.constructs.monitoring import AlarmThresholds, EnvironmentMonitoring, LoadBalancerRef, LustreRef, WatchedPool
from neuronkit.constructs.notifications import NotificationTopic
from neuronkit.reports.pools import fallback_pool_name, gpu_pool_name
from neuronkit.stacks.base import NeuronkitStack, environment_tags
from neuronkit.stacks.inference import InferenceStack
from neuronkit.stacks.storage import StorageStack
from neuronkit.stacks.training import TrainingStack, capacity_spec

if TYPE_CHECKING:
    from neuronkit.constructs.pilot import PilotDashboard


def environment_monitoring(
    scope: Construct, config: Environment, storage: StorageStack, topic: sns.ITopic, pools: list[WatchedPool], **extra: Any
) -> EnvironmentMonitoring:
    """The environment's dashboard and alarms over its pools and file system: the Auto Scaling and EKS paths share it."""
    fs = storage.storage.file_system
    lustre = config.storage.lustre
    return EnvironmentMonitoring(
        scope,
        "Monitoring",
        environment=config.name,
        topic=topic,
        pools=pools,
        namespace=config.monitoring.namespace,
        thresholds=thresholds(config),
        lustre=LustreRef(file_system_id=fs.ref, size_gib=lustre.size_gib) if fs is not None and lustre is not None else None,
        **extra,
    )


def alarms_topic(scope: Construct, config: Environment) -> NotificationTopic:
    """The environment's alarm topic (both paths): the file's monitoring.emails; CloudWatch, EventBridge and Budgets
    may publish to it."""
    return NotificationTopic(
        scope,
        "Alarms",
        display_name=f"neuronkit {config.name} alarms",
        emails=config.monitoring.emails,
        service_publishers=["budgets.amazonaws.com"],
    )


def environment_budget(scope: Construct, config: Environment, topic: sns.ITopic) -> CostBudget | None:
    """The monthly cost budget with its notifications to ``topic``, when the file sets one (both paths)."""
    if config.budget is None:
        return None
    return CostBudget(
        scope,
        "Budget",
        environment=config.name,
        monthly_usd=config.budget.monthly_usd,
        topic=topic,
        tags=environment_tags(config),
    )


def capacity_block_watches(scope: Construct, config: Environment, topic: sns.ITopic) -> dict[str, CapacityBlockWatch]:
    """One ``CapacityBlockWatch`` per Capacity Block cluster: EC2's events, the expiry alarm, notices (both paths)."""
    watches: dict[str, CapacityBlockWatch] = {}
    for c in config.training:
        if isinstance(c.capacity, CapacityBlock):
            at = capacity_spec(c).scale_down_at
            assert at is not None
            watches[c.name] = CapacityBlockWatch(
                scope,
                f"CapacityBlock-{c.name}",
                environment=config.name,
                pool=c.name,
                reservation_ids=c.capacity.reservations,
                end=c.capacity.end,
                scale_down_at=at,
                topic=topic,
                warn_hours_before_end=c.capacity.warn_hours_before_end,
                fallback=c.capacity.fallback,
            )
    return watches


def thresholds(config: Environment) -> AlarmThresholds:
    # AlarmThresholds has exactly the fields of the file's monitoring.alarms.
    return AlarmThresholds(**config.monitoring.alarms.model_dump())


class MonitoringStack(NeuronkitStack):
    """Built last: it reads the other stacks' groups, load balancers and file system.

    ``alarms_topic`` (``NotificationTopic``: the file's ``monitoring.emails``, Budgets may publish) receives
    every alarm, launch failure and budget notification. ``monitoring`` is the dashboard and alarms,
    ``budget`` the ``CostBudget`` (None without ``budget:``), ``schedule`` the ``DayNightSchedule`` (None
    without ``monitoring.day_night``), ``idle_scale_down`` the ``IdleScaleDown`` (None when no cluster
    sets ``idle_scale_down``).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        config: Environment,
        storage: StorageStack,
        training: TrainingStack | None = None,
        inference: InferenceStack | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(scope, id, config=config, description="dashboard, alarms, budget and capacity schedule", **kwargs)
        for stack in (training, inference):
            if stack is not None:
                self.add_stack_dependency(stack)  # scheduled actions name groups those stacks create
        m = config.monitoring
        self.alarms_topic = alarms_topic(self, config)
        pools = self._pools(config, training, inference)
        self._monitoring(config, storage, pools)
        self._budget(config)
        self._pilot(config)
        self._capacity_blocks(config)
        self.schedule: DayNightSchedule | None = None
        if m.day_night is not None:
            self.schedule = self._day_night(config)
        self._idle_scale_down(config, pools)
        self._watch_functions(inference)

    def _monitoring(self, config: Environment, storage: StorageStack, pools: list[WatchedPool]) -> None:
        """The dashboard and the alarms of every pool, the file system and the vCPU quotas."""
        self.monitoring = environment_monitoring(
            self, config, storage, self.alarms_topic.topic, pools, quota_instance_types=_instance_types(config)
        )

    def _budget(self, config: Environment) -> None:
        """The monthly cost budget with its notifications, when the file sets one."""
        self.budget: CostBudget | None = environment_budget(self, config, self.alarms_topic.topic)

    def _pilot(self, config: Environment) -> None:
        """The pilot's side-by-side dashboard, when the file has a pilot: section."""
        # The pilot: one workload on the cluster's Neuron and GPU queues, compared side by side.
        self.pilot: PilotDashboard | None = None
        if config.pilot is not None and config.pilot.cluster is not None:
            from neuronkit.constructs.pilot import PilotDashboard  # aws-cdk-lib's ECS module: only with a pilot

            cluster = next(c for c in config.training if c.name == config.pilot.cluster)
            assert cluster.gpu_pool is not None  # validated
            self.pilot = PilotDashboard(
                self,
                "Pilot",
                environment=config.name,
                pilot=config.pilot.name,
                instance_types={"neuron": cluster.instance_type, "gpu": cluster.gpu_pool.instance_type},
                nodes=config.pilot.nodes,
            )

    def _capacity_blocks(self, config: Environment) -> None:
        """One watch per Capacity Block cluster."""
        # Capacity Blocks: EC2's delivered and expiration events, an alarm on the expiry, notices before the end.
        self.capacity_blocks: dict[str, CapacityBlockWatch] = capacity_block_watches(self, config, self.alarms_topic.topic)

    def _idle_scale_down(self, config: Environment, pools: list[WatchedPool]) -> None:
        """The function that scales an idle cluster to its minimum, for the clusters that ask for it."""
        m = config.monitoring
        scale_down = {
            self.monitoring.idle_alarm_names[p.pool]: (self.monitoring.idle_alarms[p.pool], p.group_name)
            for p in pools
            if p.pool in _idle_scale_down_pools(config) and p.pool in self.monitoring.idle_alarms
        }
        self.idle_scale_down: IdleScaleDown | None = None
        if scale_down:
            self.idle_scale_down = IdleScaleDown(
                self, "IdleScaleDown", alarms=scale_down, log_retention_days=m.log_retention_days
            )
            self.monitoring.watch_function("idle-scale-down", self.idle_scale_down.function)

    def _watch_functions(self, inference: InferenceStack | None) -> None:
        """An errors alarm on each fleet's rebalancer."""
        # The kit's functions may not fail silently: an alarm on each one's errors.
        for name, fleet in sorted((inference.fleets if inference is not None else {}).items()):
            if fleet.rebalancer is not None:
                self.monitoring.watch_function(f"{name}-rebalancer", fleet.rebalancer.function)

    @staticmethod
    def _pools(config: Environment, training: TrainingStack | None, inference: InferenceStack | None) -> list[WatchedPool]:
        pools: list[WatchedPool] = []
        clusters = training.clusters if training is not None else {}
        for c in config.training:
            if c.name not in clusters:
                continue  # scheduler: batch -- AWS Batch owns the nodes; no Auto Scaling group to watch
            pools.append(
                WatchedPool(
                    pool=c.name,
                    group_name=clusters[c.name].group_name,
                    role="training",
                    neuron_types=(c.instance_type,),
                    idle_alarm=True,
                    prepaid=isinstance(c.capacity, CapacityBlock),
                )
            )
            sibling = fallback_pool_name(c.name)
            if sibling in clusters:  # the on-demand cluster that takes over when a Capacity Block ends
                pools.append(
                    WatchedPool(
                        pool=sibling,
                        group_name=clusters[sibling].group_name,
                        role="training",
                        neuron_types=(c.instance_type,),
                        idle_alarm=True,
                    )
                )
            gpu = gpu_pool_name(c.name)
            if c.gpu_pool is not None and gpu in clusters:
                pools.append(
                    WatchedPool(
                        pool=gpu,
                        group_name=clusters[gpu].group_name,
                        role="training-gpu",
                        gpu_types=(c.gpu_pool.instance_type,),
                        idle_alarm=True,
                    )
                )
        fleets = inference.fleets if inference is not None else {}
        for f in config.inference:
            fleet = fleets.get(f.name)
            if fleet is None:
                continue
            pools.append(
                WatchedPool(
                    pool=fleet.pool,
                    group_name=fleet.group_name,
                    role="inference",
                    neuron_types=tuple(fleet.neuron_types),
                    gpu_types=tuple(fleet.fallback_types),
                    family_counts=getattr(fleet, "rebalancer", None) is not None,
                    compile_group_names=tuple(g.auto_scaling_group_name or "" for g in fleet.compile_groups.values()),
                    load_balancer=LoadBalancerRef(
                        kind=f.load_balancer,
                        full_name=fleet.load_balancer_full_name,
                        target_group_full_name=fleet.target_group_full_name,
                        p99_latency_seconds=p99_latency_alarm_seconds(f, config.monitoring.alarms.p99_latency_ms),
                    ),
                )
            )
        return pools

    def _day_night(self, config: Environment) -> DayNightSchedule:
        shift = config.monitoring.day_night
        assert shift is not None
        day: list[ShiftCapacity] = []
        night: list[ShiftCapacity] = []
        for f in config.inference:
            group = f"{config.name}-{f.name}"
            # By day the fleet's floor rises to its day capacity, so target tracking cannot undercut it.
            day.append(ShiftCapacity(group, desired=shift.inference_day_desired, min_size=shift.inference_day_desired))
            night.append(ShiftCapacity(group, desired=shift.inference_night_desired, min_size=f.min_size))
        for c in config.training:
            if c.scheduler != "none" or isinstance(c.capacity, CapacityBlock):
                continue  # Batch sizes its own compute environment; a Capacity Block cluster follows the block
            group = f"{config.name}-{c.name}"
            night.append(ShiftCapacity(group, desired=shift.training_night_desired))
            day.append(ShiftCapacity(group, desired=shift.training_day_desired))
        return DayNightSchedule(
            self,
            "DayNight",
            day=day,
            night=night,
            time_zone=shift.time_zone,
            day_starts=shift.day_starts,
            night_starts=shift.night_starts,
        )


def _idle_scale_down_pools(config: Environment) -> set[str]:
    """Pools scaled down when idle: each cluster with ``idle_scale_down: true`` and its GPU pool."""
    out: set[str] = set()
    for c in config.training:
        if c.idle_scale_down:
            out.add(c.name)
            if c.gpu_pool is not None:
                out.add(gpu_pool_name(c.name))
    return out


def _instance_types(config: Environment) -> list[str]:
    """Every instance type the environment may launch (the vCPU quota alarms cover their families)."""
    types: list[str] = []
    for c in config.training:
        types.append(c.instance_type)
        if c.gpu_pool is not None:
            types.append(c.gpu_pool.instance_type)
    for f in config.inference:
        types.extend([*f.neuron_types, *f.fallback_types])
    return types
