"""A scheduled Lambda function that moves an inference fleet back from GPU fallback to Neuron."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from constructs import Construct

from neuronkit.constructs import durations, values
from neuronkit.constructs.compliance import acknowledge
from neuronkit.constructs.groups import acknowledge_group_arn, group_arn
from neuronkit.constructs.network import log_group
from neuronkit.constructs.python_function import python_function
from neuronkit.lambdas.rebalancer import handler as rebalancer_code

CODE_DIR = Path(rebalancer_code.__file__).parent
METRIC_NAME = rebalancer_code.METRIC_NAME
MEMORY_TAG = rebalancer_code.MEMORY_TAG


class Rebalancer(Construct):
    """Every ``every_minutes`` (defaults to 30), replace one GPU fallback instance so the group relaunches by priority.

    An Auto Scaling group with the prioritized strategy launches GPU types only when Neuron capacity is
    short, and its termination policy removes GPU instances first on scale-in, but nothing moves a
    steady fleet back to Neuron. This function does (``neuronkit/lambdas/rebalancer/handler.py``): while
    GPU instances are in service and the fleet is steady, it terminates one of them without lowering the
    desired capacity; it stops as soon as a replacement comes back as GPU and tries again after
    ``backoff_minutes`` (defaults to four schedule periods). It never takes the fleet below
    ``min_in_service`` instances in service (defaults to 1). Each run also publishes the metric
    ``InstancesInService`` (namespace ``namespace``, dimensions Environment, Pool, Family = neuron | gpu).

    Permissions: terminate and tag only in the group named ``group_name`` (resource ARN of that group);
    describe calls and PutMetricData (restricted to ``namespace``) have no resource-level permissions.
    The function's logs go to its own log group, kept ``log_retention_days`` (defaults to 30).

    Public attributes: ``function``, ``rule``, ``log_group``, and :meth:`metric` for the family counts.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        environment: str,
        pool: str,
        group_name: str,
        neuron_types: Sequence[str],
        fallback_types: Sequence[str],
        namespace: str = "Neuronkit",
        every_minutes: int = 30,
        backoff_minutes: int | None = None,
        min_in_service: int = 1,
        log_retention_days: int = 30,
    ) -> None:
        super().__init__(scope, id)
        if every_minutes < 1:
            raise ValueError(f"every_minutes: {every_minutes} must be at least 1")
        if min_in_service < 1:
            raise ValueError(f"min_in_service: {min_in_service} must be at least 1 (never take a fleet to zero)")
        self.environment = environment
        self.pool = pool
        self.namespace = namespace
        backoff = backoff_minutes if backoff_minutes is not None else 4 * every_minutes
        arn = group_arn(self, group_name)

        self._logs(log_retention_days)
        role = self._role(group_name, arn, namespace)
        self._function_and_schedule(
            role, environment, pool, group_name, namespace, neuron_types, fallback_types, backoff, min_in_service, every_minutes
        )

    def _logs(self, log_retention_days: int) -> None:
        """The function's log group, removed with the stack."""
        self.log_group = log_group(self, "Logs", log_retention_days)

    def _role(self, group_name: str, arn: str, namespace: str) -> iam.Role:
        """The function's role: its logs, read any group, replace instances in its own group, its metric."""
        role = iam.Role(
            self, "Role", assumed_by=values.service_principal("lambda.amazonaws.com"), description=f"{group_name} rebalancer"
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="Logs",
                actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                resources=[self.log_group.log_group_arn],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadGroup",
                # Neither call has resource-level permissions.
                actions=["autoscaling:DescribeAutoScalingGroups", "autoscaling:DescribeScalingActivities"],
                resources=["*"],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ReplaceInOwnGroup",
                actions=[
                    "autoscaling:TerminateInstanceInAutoScalingGroup",
                    "autoscaling:CreateOrUpdateTags",
                    "autoscaling:DeleteTags",
                ],
                resources=[arn],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="FamilyMetric",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": namespace}},
            )
        )
        acknowledge(
            role,
            "AwsSolutions-IAM5[Resource::*]",
            "DescribeAutoScalingGroups/DescribeScalingActivities have no resource-level permissions; "
            "PutMetricData has none either and is limited to the namespace by a condition",
        )
        acknowledge_group_arn(role, arn, "this fleet's group name")
        return role

    def _function_and_schedule(
        self,
        role: iam.Role,
        environment: str,
        pool: str,
        group_name: str,
        namespace: str,
        neuron_types: Sequence[str],
        fallback_types: Sequence[str],
        backoff: int,
        min_in_service: int,
        every_minutes: int,
    ) -> None:
        """The function and the EventBridge schedule that runs it every ``every_minutes``."""
        self.function = python_function(
            self,
            "Function",
            code_dir=CODE_DIR,
            role=role,
            log_group=self.log_group,
            description=f"neuronkit: moves {group_name} back from GPU fallback to Neuron",
            # A failed run is not retried: the next scheduled run re-reads the group and decides afresh.
            retry_attempts=0,
            environment={
                "GROUP_NAME": group_name,
                "ENVIRONMENT": environment,
                "POOL": pool,
                "NAMESPACE": namespace,
                "NEURON_TYPES": ",".join(neuron_types),
                "FALLBACK_TYPES": ",".join(fallback_types),
                "BACKOFF_MINUTES": str(backoff),
                "MIN_IN_SERVICE": str(min_in_service),
            },
        )
        self.rule = events.Rule(
            self,
            "Schedule",
            description=f"neuronkit: run the {group_name} rebalancer every {every_minutes} minutes",
            schedule=events.Schedule.rate(durations.minutes(every_minutes)),
            targets=[targets.LambdaFunction(self.function, retry_attempts=0, max_event_age=durations.minutes(every_minutes))],
        )

    def metric(self, family: str, *, period_minutes: int = 5) -> cloudwatch.Metric:
        """``InstancesInService`` of one family (``neuron`` or ``gpu``) of this fleet (maximum over the period)."""
        if family not in rebalancer_code.FAMILIES:
            raise ValueError(f"family: {family!r} is not one of {', '.join(rebalancer_code.FAMILIES)}")
        return cloudwatch.Metric(
            namespace=self.namespace,
            metric_name=METRIC_NAME,
            dimensions_map={"Environment": self.environment, "Pool": self.pool, "Family": family},
            statistic="Maximum",
            period=durations.minutes(period_minutes),
        )
