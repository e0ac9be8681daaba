"""One environment's CloudWatch dashboard and alarms: Neuron and GPU nodes, fleets, Lustre, quotas, cost."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from aws_cdk import Stack, Tags, Token
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_events as events
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sns as sns
from constructs import Construct

from neuronkit import catalog
from neuronkit.catalog import pricing, quotas, serving
from neuronkit.constructs import durations
from neuronkit.constructs.notifications import TopicTarget
from neuronkit.constructs.observability import DEFAULT_NAMESPACE

# The rebalancer of an inference fleet publishes the instances in service per family under this name
# (neuronkit/lambdas/rebalancer/handler.py); the dimensions are Environment, Pool and Family.
from neuronkit.lambdas.rebalancer.handler import METRIC_NAME as FAMILY_METRIC

GIB = 1024**3
# neuron_monitor_publisher.py's metric names (dimensions Environment, Pool).
UTILIZATION = "NeuronCoreUtilization"
DEVICE_MEMORY = "DeviceMemoryUtilization"
EXECUTION_ERRORS = "ExecutionErrors"
LATENCY_P50, LATENCY_P99 = "ExecutionLatencyP50", "ExecutionLatencyP99"
ECC_UNCORRECTED, ECC_CORRECTED = "EccUncorrected", "EccCorrected"
BUSY = "NodeBusy"  # 1 while a job holds a node (marker file or an open /dev/neuron*)
# The CloudWatch agent's nvidia_gpu metric (observability.sh rolls it up per Environment and Pool).
GPU_UTILIZATION = "nvidia_smi_utilization_gpu"


# Repeated boot failures of one pool within an hour (NodeBootFailures): one failed node can be bad luck, two are a
# pattern (a driver, an image or a device the pool's check keeps refusing). A choice of the kit (docs/node-lifecycle.md).
BOOT_FAILURES_PER_HOUR = 2


@dataclass(frozen=True)
class LoadBalancerRef:
    """A fleet's load balancer and target group, by the full names CloudWatch uses as dimensions."""

    kind: Literal["alb", "nlb"]
    full_name: str
    target_group_full_name: str
    # The fleet's latency alarm threshold (its file's inference[].p99_latency_seconds, resolved by the stack);
    # None: the thresholds' p99_latency_ms, else the catalog's default from the ALB's default idle timeout.
    p99_latency_seconds: float | None = None


@dataclass(frozen=True)
class WatchedPool:
    """One Auto Scaling group as the dashboard and the alarms see it.

    ``role``: ``training`` (a Trainium cluster), ``training-gpu`` (a GPU pool beside one) or ``inference``
    (a fleet). ``neuron_types``/``gpu_types``: what it launches, in launch order (the first of each
    prices the cost widget). ``idle_alarm``: watch for a running but idle pool (training pools).
    ``family_counts``: a fleet's rebalancer publishes its in-service instances per family (else the
    group's GroupInServiceInstances counts the pool's only family). ``load_balancer``: a fleet's.
    ``prepaid``: capacity paid up front (a Capacity Block), left out of the cost widget.
    ``compile_group_names``: a fleet's compile groups (one node per new compiled-artifact key); their launch
    failures go to the topic too. ``idle_scale_down``: the idle alarm's text may point at the file's
    ``idle_scale_down`` (False for EKS node groups, where the key is refused).
    """

    pool: str
    group_name: str
    role: Literal["training", "training-gpu", "inference"]
    neuron_types: tuple[str, ...] = ()
    gpu_types: tuple[str, ...] = ()
    idle_alarm: bool = False
    family_counts: bool = False
    load_balancer: LoadBalancerRef | None = None
    prepaid: bool = False  # a Capacity Block: paid up front, so the cost widget does not price what runs
    compile_group_names: tuple[str, ...] = ()
    idle_scale_down: bool = True  # the idle alarm may name idle_scale_down (not on EKS, where the file cannot set it)

    @property
    def runs_neuron(self) -> bool:
        return bool(self.neuron_types)

    @property
    def runs_gpu(self) -> bool:
        return bool(self.gpu_types)


@dataclass(frozen=True)
class LustreRef:
    """A Lustre file system to watch: its id and size (the free-capacity alarm's base)."""

    file_system_id: str
    size_gib: int


@dataclass(frozen=True)
class AlarmThresholds:
    """Alarm thresholds; the defaults are the environment file's (``monitoring.alarms``)."""

    idle_utilization_percent: float = 5.0
    idle_minutes: int = 60
    p99_latency_ms: int | None = None  # None: each fleet's own (LoadBalancerRef.p99_latency_seconds) or the catalog's
    error_5xx_percent: float = 5.0
    fallback_hours: int = 6
    lustre_free_percent: float = 10.0
    quota_usage_percent: float = 80.0
    execution_errors: int = 0


@dataclass
class _Row:
    widgets: list[cloudwatch.IWidget] = field(default_factory=list)


class EnvironmentMonitoring(Construct):
    """A CloudWatch dashboard and the alarms of one environment, every alarm notifying ``topic``.

    Alarms (names ``ENV-POOL-WHAT``; thresholds from ``thresholds``, defaults as in the environment file):

    - per Neuron pool: ``ecc-uncorrected`` (uncorrected DRAM/SRAM ECC events above zero in 5 minutes) and
      ``execution-errors`` (Neuron execution errors above ``execution_errors`` in 5 minutes);
    - per pool with ``idle_alarm``: ``idle``, metric math ``IF(inservice > 0 AND util < T, 1, 0)`` over
      one-minute points for ``idle_minutes`` (NeuronCore utilization, or GPU utilization on GPU pools; a
      missing utilization point counts as busy, so a broken publisher never looks idle);
    - per fleet behind an ALB: ``p99-latency`` (TargetResponseTime p99) and ``5xx-rate`` (target and load
      balancer 5xx over requests, percent), five minutes in a row; NLBs have neither metric;
    - per fleet with GPU fallback: ``gpu-fallback`` (GPU instances in service every hour for
      ``fallback_hours`` hours);
    - ``ENV-lustre-free-capacity`` (FreeDataStorageCapacity below ``lustre_free_percent`` of the size);
    - ``ENV-vcpu-quota-CLASS`` per On-Demand vCPU quota the pools' families count against
      (``AWS/Usage`` ResourceCount over ``SERVICE_QUOTA()``, percent) of the pools' types, or of
      ``quota_instance_types`` when given (e.g. to include pools without an Auto Scaling group).

    An EventBridge rule sends "EC2 Instance Launch Unsuccessful" events of every pool's group to the topic.
    The dashboard's estimated cost per hour multiplies the instances in service by the catalog's
    On-Demand price of the pool's first Neuron type (Neuron instances) and first GPU type (GPU
    instances): an approximation, see docs/monitoring.md.

    Public attributes: ``dashboard``, ``alarms`` (alarm name -> ``cloudwatch.Alarm``), ``idle_alarms``
    (pool -> alarm), ``idle_alarm_names`` (pool -> alarm name), ``launch_failures`` (``events.Rule``, None without pools), ``cost_per_hour`` (the math
    expression, or None when nothing can be priced).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        environment: str,
        topic: sns.ITopic,
        pools: Sequence[WatchedPool],
        namespace: str = DEFAULT_NAMESPACE,
        thresholds: AlarmThresholds | None = None,
        lustre: LustreRef | None = None,
        quota_instance_types: Sequence[str] | None = None,
    ) -> None:
        super().__init__(scope, id)
        t = thresholds or AlarmThresholds()
        if not 1 <= t.idle_minutes <= 1440:
            raise ValueError(f"idle_minutes: {t.idle_minutes} must be 1 to 1440 (one-minute alarm points, one day at most)")
        if not 1 <= t.fallback_hours <= 168:
            raise ValueError(f"fallback_hours: {t.fallback_hours} must be 1 to 168 (hourly alarm points, seven days at most)")
        names = [p.pool for p in pools]
        duplicates = sorted({n for n in names if names.count(n) > 1})
        if duplicates:
            raise ValueError(f"pools: {', '.join(duplicates)} appear more than once; pool names must be unique")
        self.environment = environment
        self.namespace = namespace
        self.topic = topic
        self.pools = list(pools)
        self.thresholds = t
        self.alarms: dict[str, cloudwatch.Alarm] = {}
        self.idle_alarms: dict[str, cloudwatch.Alarm] = {}
        self.idle_alarm_names: dict[str, str] = {}
        self._action = cw_actions.SnsAction(topic)

        for p in self.pools:
            self._boot_failures_alarm(p)
            if p.runs_neuron:
                self._neuron_alarms(p)
            if p.idle_alarm:
                self._idle_alarm(p)
            if p.load_balancer is not None and p.load_balancer.kind == "alb":
                self._fleet_alarms(p, p.load_balancer)
            if p.load_balancer is not None:
                self._outage_alarm(p, p.load_balancer)
            if p.runs_neuron and p.role == "training":
                self._driver_versions_alarm(p)
            if p.role == "inference" and p.runs_gpu and p.family_counts:
                self._fallback_alarm(p)
        if lustre is not None:
            self._lustre_alarm(lustre)
        watched_types = [t for p in self.pools for t in (*p.neuron_types, *p.gpu_types)]
        for quota in _quotas_of(quota_instance_types if quota_instance_types is not None else watched_types):
            self._quota_alarm(quota)

        # In pool order, not sorted: the names are tokens, whose text (and so their sorted order) depends on how many
        # tokens the process made before, so a sort made the template differ between two equal environments.
        groups = list(dict.fromkeys([n for p in self.pools for n in (p.group_name, *p.compile_group_names)]))
        self.launch_failures: events.Rule | None = None
        if groups:
            self.launch_failures = self._launch_failures_rule(groups)

        self.cost_per_hour = self._cost_expression()
        # All rows in the constructor: one round trip to the jsii kernel instead of one add_widgets per row.
        self.dashboard = cloudwatch.Dashboard(
            self,
            "Dashboard",
            dashboard_name=f"neuronkit-{environment}",
            default_interval=durations.hours(6),
            widgets=[row.widgets for row in self._rows(lustre)],
        )

    def _launch_failures_rule(self, groups: list[str]) -> events.Rule:
        environment, topic = self.environment, self.topic
        return events.Rule(
            self,
            "LaunchFailures",
            description=f"neuronkit {environment}: an Auto Scaling group could not launch an instance",
            event_pattern=events.EventPattern(
                source=["aws.autoscaling"],
                detail_type=["EC2 Instance Launch Unsuccessful"],
                detail={"AutoScalingGroupName": groups},
            ),
            targets=[
                TopicTarget(
                    topic,
                    message=events.RuleTargetInput.from_text(
                        f"neuronkit {environment}: {events.EventField.from_path('$.detail.AutoScalingGroupName')} could not "
                        f"launch an instance: {events.EventField.from_path('$.detail.StatusMessage')} "
                        f"({events.EventField.from_path('$.detail.Details')})"
                    ),
                )
            ],
        )

    # ----------------------------------------------------------------------------------------
    # metrics
    # ----------------------------------------------------------------------------------------
    def neuron_metric(
        self, pool: str, name: str, statistic: str, *, period_minutes: int = 5, label: str | None = None
    ) -> cloudwatch.Metric:
        """One of the publisher's metrics for a pool (dimensions Environment, Pool)."""
        return cloudwatch.Metric(
            namespace=self.namespace,
            metric_name=name,
            dimensions_map={"Environment": self.environment, "Pool": pool},
            statistic=statistic,
            period=durations.minutes(period_minutes),
            label=label,
        )

    def in_service(
        self, p: WatchedPool, family: Literal["neuron", "gpu"], *, period_minutes: int = 5, labelled: bool = True
    ) -> cloudwatch.Metric | None:
        """Instances of one family in service in a pool, or None when the pool runs no such family."""
        if (family == "neuron" and not p.runs_neuron) or (family == "gpu" and not p.runs_gpu):
            return None
        label = f"{p.pool} ({family})" if labelled else None
        if p.family_counts:
            return cloudwatch.Metric(
                namespace=self.namespace,
                metric_name=FAMILY_METRIC,
                dimensions_map={"Environment": self.environment, "Pool": p.pool, "Family": family},
                statistic="Maximum",
                period=durations.minutes(period_minutes),
                label=label,
            )
        if p.runs_neuron and p.runs_gpu:
            return None  # the group's count mixes both families; only the rebalancer's metric splits them
        return _group_in_service(p.group_name, period_minutes, label)

    # ----------------------------------------------------------------------------------------
    # alarms
    # ----------------------------------------------------------------------------------------
    def _alarm(self, p: WatchedPool | None, what: str, **props: object) -> cloudwatch.Alarm:
        name = f"{self.environment}-{p.pool}-{what}" if p is not None else f"{self.environment}-{what}"
        alarm = cloudwatch.Alarm(self, f"Alarm-{name}", alarm_name=name, actions_enabled=True, **props)  # type: ignore[arg-type]
        alarm.add_alarm_action(self._action)
        if p is not None:
            Tags.of(alarm).add("neuronkit:pool", p.pool)
        self.alarms[name] = alarm
        return alarm

    def _neuron_alarms(self, p: WatchedPool) -> None:
        self._alarm(
            p,
            "ecc-uncorrected",
            metric=self.neuron_metric(p.pool, ECC_UNCORRECTED, "Sum"),
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=(
                f"{p.pool}: uncorrected ECC events on a Neuron device (DRAM or SRAM) in 5 minutes. The per-instance metric "
                f"(dimension InstanceId) names the node; replace it (aws autoscaling set-instance-health --health-status Unhealthy)."
            ),
        )
        self._alarm(
            p,
            "execution-errors",
            metric=self.neuron_metric(p.pool, EXECUTION_ERRORS, "Sum"),
            threshold=self.thresholds.execution_errors,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"{p.pool}: more than {self.thresholds.execution_errors} Neuron execution errors in 5 minutes.",
        )

    def _idle_alarm(self, p: WatchedPool) -> None:
        t = self.thresholds
        if p.runs_neuron:
            util = self.neuron_metric(p.pool, UTILIZATION, "Average", period_minutes=1)
            what = "NeuronCore utilization"
        else:
            util = cloudwatch.Metric(
                namespace=self.namespace,
                metric_name=GPU_UTILIZATION,
                dimensions_map={"Environment": self.environment, "Pool": p.pool},
                statistic="Average",
                period=durations.minutes(1),
            )
            what = "GPU utilization"
        threshold = _number(t.idle_utilization_percent)
        metrics: dict[str, cloudwatch.IMetric] = {"inservice": _group_in_service(p.group_name, 1, "in service"), "util": util}
        condition = f"FILL(inservice, 0) > 0 AND FILL(util, 100) < {threshold}"
        if p.runs_neuron:
            # A node a job holds (marker file, or an open /dev/neuron*) is not idle, whatever its NeuronCores show:
            # a CPU-side compile phase must not be scaled away (neuron_monitor_publisher.py publishes NodeBusy).
            metrics["busy"] = self.neuron_metric(p.pool, BUSY, "Maximum", period_minutes=1)
            condition += " AND FILL(busy, 0) < 1"
        expression = cloudwatch.MathExpression(
            expression=f"IF({condition}, 1, 0)",
            using_metrics=metrics,
            period=durations.minutes(1),
            label=f"{p.pool} idle",
        )
        self.idle_alarm_names[p.pool] = f"{self.environment}-{p.pool}-idle"
        self.idle_alarms[p.pool] = self._alarm(
            p,
            "idle",
            metric=expression,
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=t.idle_minutes,
            datapoints_to_alarm=t.idle_minutes,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=(
                f"{p.group_name}: instances in service but {what} below {threshold}% for {t.idle_minutes} minutes. "
                "A forgotten cluster bills every hour; "
                + ("scale it down (or let idle_scale_down do it)." if p.idle_scale_down else "scale its node group down.")
            ),
        )

    def _fleet_alarms(self, p: WatchedPool, lb: LoadBalancerRef) -> None:
        t = self.thresholds
        dims = {"LoadBalancer": lb.full_name}
        if lb.p99_latency_seconds is not None:
            p99 = lb.p99_latency_seconds
        elif t.p99_latency_ms is not None:
            p99 = t.p99_latency_ms / 1000
        else:
            p99 = serving.default_p99_latency_seconds(None)
        self._alarm(
            p,
            "p99-latency",
            metric=cloudwatch.Metric(
                namespace="AWS/ApplicationELB",
                metric_name="TargetResponseTime",
                dimensions_map=dims,
                statistic="p99",
                period=durations.minutes(1),
            ),
            threshold=p99,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=5,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=(
                f"{p.pool}: p99 target response time above {p99:g} s for 5 minutes (a non-streaming completion counts "
                "whole; set inference[].p99_latency_seconds from a benchmark)."
            ),
        )
        share = _number(t.error_5xx_percent)
        self._alarm(
            p,
            "5xx-rate",
            metric=cloudwatch.MathExpression(
                expression="100 * (FILL(target5xx, 0) + FILL(elb5xx, 0)) / requests",
                using_metrics={
                    "target5xx": _alb(dims, "HTTPCode_Target_5XX_Count"),
                    "elb5xx": _alb(dims, "HTTPCode_ELB_5XX_Count"),
                    "requests": _alb(dims, "RequestCount"),
                },
                period=durations.minutes(1),
                label=f"{p.pool} 5xx %",
            ),
            threshold=t.error_5xx_percent,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=5,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"{p.pool}: more than {share}% of requests answered 5xx (targets or load balancer) for 5 minutes.",
        )

    def _outage_alarm(self, p: WatchedPool, lb: LoadBalancerRef) -> None:
        """A total outage: the group wants nodes but the target group has no healthy one (the 5xx rate is
        silent then: with no healthy target there may be no requests to count)."""
        namespace = "AWS/ApplicationELB" if lb.kind == "alb" else "AWS/NetworkELB"
        minute = durations.minutes(1)
        self._alarm(
            p,
            "no-healthy-hosts",
            metric=cloudwatch.MathExpression(
                expression="IF(FILL(desired, 0) > 0 AND FILL(healthy, 0) < 1, 1, 0)",
                using_metrics={
                    "desired": cloudwatch.Metric(
                        namespace="AWS/AutoScaling",
                        metric_name="GroupDesiredCapacity",
                        dimensions_map={"AutoScalingGroupName": p.group_name},
                        statistic="Maximum",
                        period=minute,
                    ),
                    "healthy": cloudwatch.Metric(
                        namespace=namespace,
                        metric_name="HealthyHostCount",
                        dimensions_map={"LoadBalancer": lb.full_name, "TargetGroup": lb.target_group_full_name},
                        statistic="Minimum",
                        period=minute,
                    ),
                },
                period=minute,
                label=f"{p.pool} outage",
            ),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=3,
            treat_missing_data=cloudwatch.TreatMissingData.BREACHING,
            alarm_description=f"{p.pool}: no healthy target for 3 minutes while the group wants nodes (total outage).",
        )

    def _boot_failures_alarm(self, p: WatchedPool) -> None:
        """Repeated boot failures of a pool: its nodes publish NodeBootFailures (Environment, Pool) before they power
        off (EKS, Batch) or ABANDON their launch hook (Auto Scaling), docs/node-lifecycle.md. A powered-off node is
        no launch failure, so without this a pool whose every node fails its check would replace nodes forever."""
        self._alarm(
            p,
            "boot-failures",
            metric=cloudwatch.Metric(
                namespace=self.namespace,
                metric_name="NodeBootFailures",
                dimensions_map={"Environment": self.environment, "Pool": p.pool},
                statistic="Sum",
                period=durations.minutes(60),
            ),
            threshold=BOOT_FAILURES_PER_HOUR,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=(
                f"{p.pool}: {BOOT_FAILURES_PER_HOUR} or more nodes failed their boot check within an hour and were "
                "replaced. The Reason dimension of NodeBootFailures says why (devices, efa, driver, lustre, deadline, "
                "step); the pool's boot log group has each node's last lines (docs/node-lifecycle.md)."
            ),
        )

    def _driver_versions_alarm(self, p: WatchedPool) -> None:
        """More than one Neuron driver among a training pool's ready nodes (each node's hostfile refresher
        publishes the count from its peers' neuronkit:neuron-driver tags): collectives across drivers fail."""
        self._alarm(
            p,
            "driver-versions",
            metric=cloudwatch.Metric(
                namespace=self.namespace,
                metric_name="NeuronDriverVersions",
                dimensions_map={"Environment": self.environment, "Pool": p.pool},
                statistic="Maximum",
                period=durations.minutes(5),
            ),
            threshold=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=(
                f"{p.pool}: its ready nodes run more than one Neuron driver (an AMI or release change reached new "
                "nodes only); drain and relaunch the pool so that every node runs the pinned release."
            ),
        )

    def watch_function(self, name: str, function: lambda_.IFunction) -> cloudwatch.Alarm:
        """An alarm on a kit function's errors (the rebalancer, idle scale-down): they must not fail silently."""
        return self._alarm(
            None,
            f"{name}-errors",
            metric=function.metric_errors(period=durations.minutes(5), statistic="Sum"),
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"The {name} function failed in the last 5 minutes; read its log group.",
        )

    def _fallback_alarm(self, p: WatchedPool) -> None:
        hours = self.thresholds.fallback_hours
        gpu = self.in_service(p, "gpu", period_minutes=60, labelled=False)
        assert gpu is not None
        self._alarm(
            p,
            "gpu-fallback",
            metric=gpu.with_(statistic="Minimum"),
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=hours,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=(
                f"{p.pool}: GPU fallback instances in service for more than {hours} hours: Neuron capacity is still "
                "short (check the Neuron types' quotas and offerings), and the fleet costs its GPU price."
            ),
        )

    def _lustre_alarm(self, lustre: LustreRef) -> None:
        floor = lustre.size_gib * GIB * self.thresholds.lustre_free_percent / 100
        self._alarm(
            None,
            "lustre-free-capacity",
            metric=cloudwatch.Metric(
                namespace="AWS/FSx",
                metric_name="FreeDataStorageCapacity",
                dimensions_map={"FileSystemId": lustre.file_system_id},
                statistic="Minimum",
                period=durations.minutes(5),
            ),
            threshold=floor,
            comparison_operator=cloudwatch.ComparisonOperator.LESS_THAN_THRESHOLD,
            evaluation_periods=1,
            alarm_description=(
                f"Lustre: less than {_number(self.thresholds.lustre_free_percent)}% of {lustre.size_gib} GiB free; "
                "jobs writing to /fsx will fail. Clean up or raise storage.lustre.size_gib."
            ),
        )

    def _quota_alarm(self, quota: quotas.VcpuQuota) -> None:
        assert quota.usage_class is not None
        family = quota.usage_class.split("/")[0].lower()
        share = _number(self.thresholds.quota_usage_percent)
        self._alarm(
            None,
            f"vcpu-quota-{family}",
            metric=cloudwatch.MathExpression(
                expression="100 * usage / SERVICE_QUOTA(usage)",
                using_metrics={"usage": usage_metric(quota.usage_class)},
                period=durations.minutes(5),
                label=f"{quota.name} (% of quota)",
            ),
            threshold=self.thresholds.quota_usage_percent,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=(
                f"{quota.name} ({quota.code}): On-Demand vCPUs in use above {share}% of the account's quota in this region; "
                f"the next launches will fail. Request an increase: aws service-quotas request-service-quota-increase "
                f"--service-code {quotas.service_code()} --quota-code {quota.code} --desired-value N"
            ),
        )

    # ----------------------------------------------------------------------------------------
    # cost
    # ----------------------------------------------------------------------------------------
    def _cost_expression(self) -> cloudwatch.MathExpression | None:
        region = Stack.of(self).region
        if Token.is_unresolved(region):
            return None  # an environment-agnostic stack has no region to price
        table = pricing.load_prices()
        terms: list[str] = []
        using: dict[str, cloudwatch.IMetric] = {}
        for i, p in enumerate(self.pools):
            for family, types in (("neuron", p.neuron_types), ("gpu", p.gpu_types)):
                metric = self.in_service(p, family)  # type: ignore[arg-type]
                price = table.hourly(types[0], region) if types and not p.prepaid else None
                if metric is None or price is None:
                    continue
                key = f"{family[0]}{i}"
                using[key] = metric
                terms.append(f"FILL({key}, 0) * {_number(price)}")
        if not terms:
            return None
        return cloudwatch.MathExpression(
            expression=" + ".join(terms),
            using_metrics=using,
            period=durations.minutes(5),
            label=f"≈ $/hour On-Demand (prices of {table.as_of})",
        )

    # ----------------------------------------------------------------------------------------
    # dashboard
    # ----------------------------------------------------------------------------------------
    def _rows(self, lustre: LustreRef | None) -> list[_Row]:
        """The dashboard, top to bottom: header, Neuron and GPU health, capacity and cost, drivers, balancers,
        Lustre, alarms."""
        rows = [
            _Row(
                [
                    cloudwatch.TextWidget(
                        markdown=(
                            f"# neuronkit {self.environment}\n"
                            f"Neuron metrics: namespace `{self.namespace}` (neuron-monitor via neuronkit's publisher), "
                            "dimensions Environment, Pool (and InstanceId). Estimated cost: instances in service x the "
                            "catalog's On-Demand price of the pool's first Neuron / GPU type; reservations, Capacity "
                            "Blocks, storage and traffic are not in it (see docs/monitoring.md)."
                        ),
                        width=24,
                        height=2,
                    )
                ]
            )
        ]
        rows.extend(self._device_rows())
        rows.append(self._capacity_row())
        rows.extend(self._driver_rows())
        fleets = [(p, p.load_balancer) for p in self.pools if p.load_balancer is not None]
        if fleets:
            rows.append(_Row(self._load_balancer_widgets(fleets)))  # type: ignore[arg-type]
        if lustre is not None:
            rows.append(_Row(_lustre_widgets(lustre)))
        if self.alarms:
            rows.append(
                _Row(
                    [
                        cloudwatch.AlarmStatusWidget(
                            title="Alarms",
                            alarms=list(self.alarms.values()),
                            width=24,
                            height=max(3, math.ceil(len(self.alarms) / 4) + 1),
                        )
                    ]
                )
            )
        return rows

    def _device_rows(self) -> list[_Row]:
        neuron = [p for p in self.pools if p.runs_neuron]
        gpu = [p for p in self.pools if p.runs_gpu]
        rows: list[_Row] = []
        rows.append(
            _Row(
                [
                    _graph(
                        "NeuronCore utilization (%)",
                        [self.neuron_metric(p.pool, UTILIZATION, "Average", label=p.pool) for p in neuron],
                    ),
                    _graph(
                        "Neuron device memory used (%)",
                        [self.neuron_metric(p.pool, DEVICE_MEMORY, "Average", label=p.pool) for p in neuron],
                    ),
                ]
            )
        )
        rows.append(
            _Row(
                [
                    _graph(
                        "Neuron execution errors (per 5 minutes)",
                        [self.neuron_metric(p.pool, EXECUTION_ERRORS, "Sum", label=p.pool) for p in neuron],
                    ),
                    _graph(
                        "Neuron execution latency p50 / p99 (ms)",
                        [
                            self.neuron_metric(p.pool, name, "Average", label=f"{p.pool} {name[-3:].lower()}")
                            for p in neuron
                            for name in (LATENCY_P50, LATENCY_P99)
                        ],
                    ),
                ]
            )
        )
        rows.append(
            _Row(
                [
                    _graph(
                        "Hardware ECC events (per 5 minutes)",
                        [
                            self.neuron_metric(p.pool, name, "Sum", label=f"{p.pool} {kind}")
                            for p in neuron
                            for name, kind in ((ECC_UNCORRECTED, "uncorrected"), (ECC_CORRECTED, "corrected"))
                        ],
                    ),
                    _graph(
                        "GPU utilization of GPU and fallback pools (%)",
                        [
                            cloudwatch.Metric(
                                namespace=self.namespace,
                                metric_name=GPU_UTILIZATION,
                                dimensions_map={"Environment": self.environment, "Pool": p.pool},
                                statistic="Average",
                                period=durations.minutes(5),
                                label=p.pool,
                            )
                            for p in gpu
                        ],
                    ),
                ]
            )
        )
        return rows

    def _capacity_row(self) -> _Row:
        counts = [m for p in self.pools for f in ("neuron", "gpu") if (m := self.in_service(p, f)) is not None]  # type: ignore[arg-type]
        cost: list[cloudwatch.IWidget] = [_graph("Instances in service per pool (Neuron / GPU)", counts, stacked=True)]
        if self.cost_per_hour is not None:
            cost.append(
                cloudwatch.GraphWidget(title="Estimated cost of what runs ($/hour)", left=[self.cost_per_hour], width=8, height=6)
            )
            cost.append(
                cloudwatch.SingleValueWidget(
                    title="Estimated cost now ($/hour)",
                    metrics=[self.cost_per_hour],
                    width=4,
                    height=6,
                    set_period_to_time_range=False,
                )
            )
            cost[0] = _graph("Instances in service per pool (Neuron / GPU)", counts, stacked=True, width=12)
        return _Row(cost)

    def _driver_rows(self) -> list[_Row]:
        rows: list[_Row] = []
        trained = [p for p in self.pools if p.runs_neuron and p.role == "training"]
        if trained:
            # What the nodes really run: one line per driver version per pool (each node publishes its own).
            versions = [
                cloudwatch.MathExpression(
                    expression=(
                        f'SEARCH(\'{{{self.namespace},DriverVersion,Environment,Pool}} MetricName="NeuronDriverInfo" '
                        f'Environment="{self.environment}" Pool="{p.pool}"\', \'Sum\', 300)'
                    ),
                    label=f"{p.pool} nodes per Neuron driver",
                    period=durations.minutes(5),
                )
                for p in trained
            ]
            rows.append(_Row([_graph("Nodes per Neuron driver version (training pools)", versions, width=24)]))
        return rows

    def _load_balancer_widgets(self, fleets: list[tuple[WatchedPool, LoadBalancerRef]]) -> list[cloudwatch.IWidget]:
        requests, latency, errors = [], [], []
        for p, lb in fleets:
            dims = {"LoadBalancer": lb.full_name}
            if lb.kind == "alb":
                requests.append(_alb(dims, "RequestCount", label=p.pool))
                for stat in ("p50", "p99"):
                    latency.append(_alb(dims, "TargetResponseTime", stat, label=f"{p.pool} {stat}"))
                errors.append(_alb(dims, "HTTPCode_Target_5XX_Count", label=f"{p.pool} target 5xx"))
                errors.append(_alb(dims, "HTTPCode_ELB_5XX_Count", label=f"{p.pool} load balancer 5xx"))
            else:
                requests.append(
                    cloudwatch.Metric(
                        namespace="AWS/NetworkELB",
                        metric_name="NewFlowCount",
                        dimensions_map=dims,
                        statistic="Sum",
                        period=durations.minutes(1),
                        label=f"{p.pool} new flows",
                    )
                )
                errors.append(
                    cloudwatch.Metric(
                        namespace="AWS/NetworkELB",
                        metric_name="TCP_Target_Reset_Count",
                        dimensions_map=dims,
                        statistic="Sum",
                        period=durations.minutes(1),
                        label=f"{p.pool} target resets",
                    )
                )
        return [
            _graph("Load balancer requests (per minute)", requests, width=8),
            _graph("Target response time p50 / p99 (s)", latency, width=8),
            _graph("5xx responses (per minute)", errors, width=8),
        ]


def usage_metric(usage_class: str) -> cloudwatch.Metric:
    """The account's On-Demand vCPUs in use for one quota class (``AWS/Usage`` ResourceCount, maximum)."""
    return cloudwatch.Metric(
        namespace="AWS/Usage",
        metric_name="ResourceCount",
        dimensions_map={"Service": "EC2", "Type": "Resource", "Resource": "vCPU", "Class": usage_class},
        statistic="Maximum",
        period=durations.minutes(5),
    )


def _quotas_of(instance_types: Sequence[str]) -> list[quotas.VcpuQuota]:
    """The vCPU quotas (with a usage metric) that instances of these types count against, in catalog order."""
    known = catalog.instance_types()
    families = {known[t].family if t in known else t.split(".")[0] for t in instance_types}
    counted = {quotas.quota_for_family(f) for f in families}
    return [q for q in quotas.vcpu_quotas().values() if q.usage_class and q in counted]


def _group_in_service(group_name: str, period_minutes: int, label: str | None) -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace="AWS/AutoScaling",
        metric_name="GroupInServiceInstances",
        dimensions_map={"AutoScalingGroupName": group_name},
        statistic="Average",
        period=durations.minutes(period_minutes),
        label=label,
    )


def _alb(dims: Mapping[str, str], name: str, statistic: str = "Sum", *, label: str | None = None) -> cloudwatch.Metric:
    return cloudwatch.Metric(
        namespace="AWS/ApplicationELB",
        metric_name=name,
        dimensions_map=dict(dims),
        statistic=statistic,
        period=durations.minutes(1),
        label=label,
    )


def _lustre_widgets(lustre: LustreRef) -> list[cloudwatch.IWidget]:
    dims = {"FileSystemId": lustre.file_system_id}

    def fsx(name: str, statistic: str) -> cloudwatch.Metric:
        return cloudwatch.Metric(
            namespace="AWS/FSx", metric_name=name, dimensions_map=dims, statistic=statistic, period=durations.minutes(5)
        )

    throughput = [
        cloudwatch.MathExpression(
            expression=f"{key} / PERIOD({key}) / 1048576", using_metrics={key: fsx(name, "Sum")}, label=label
        )
        for key, name, label in (("read", "DataReadBytes", "read MiB/s"), ("write", "DataWriteBytes", "write MiB/s"))
    ]
    free = cloudwatch.MathExpression(
        expression=f"free / {GIB}",
        using_metrics={"free": fsx("FreeDataStorageCapacity", "Minimum")},
        label=f"free GiB of {lustre.size_gib}",
    )
    return [
        _graph("Lustre throughput (MiB/s)", throughput, width=12),
        _graph("Lustre free capacity (GiB)", [free], width=12),
    ]


def _graph(title: str, metrics: Sequence[cloudwatch.IMetric], *, stacked: bool = False, width: int = 12) -> cloudwatch.IWidget:
    if not metrics:
        return cloudwatch.TextWidget(markdown=f"### {title}\nNo pool of this kind in this environment.", width=width, height=6)
    return cloudwatch.GraphWidget(title=title, left=list(metrics), stacked=stacked, width=width, height=6)


def _number(x: float) -> str:
    """5.0 -> '5', 12.5 -> '12.5' (for expressions and messages)."""
    return f"{x:g}"
