"""Scale an idle training cluster to its minimum when its idle alarm fires (a small Lambda function)."""

from __future__ import annotations

import json
from collections.abc import Mapping
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
from neuronkit.lambdas.idle_scale_down import handler as code

CODE_DIR = Path(code.__file__).parent


class IdleScaleDown(Construct):
    """When one of ``alarms`` goes to ALARM, unprotect its group's instances and set desired = min size.

    ``alarms`` maps each idle alarm to the Auto Scaling group it watches. Training nodes start protected
    from scale-in, so an alarm's own Auto Scaling action could lower the desired capacity but never
    remove a node; this function (``neuronkit/lambdas/idle_scale_down/handler.py``) removes the
    protection first. An EventBridge rule passes it the "CloudWatch Alarm State Change" event of those
    alarms' ALARM state. Least privilege: SetInstanceProtection and UpdateAutoScalingGroup on those
    groups only, DescribeAutoScalingGroups (no resource-level permissions), its own log group
    (``log_retention_days``, default 30).

    Public attributes: ``function``, ``rule``, ``log_group``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        alarms: Mapping[str, tuple[cloudwatch.IAlarm, str]],
        log_retention_days: int = 30,
    ) -> None:
        super().__init__(scope, id)
        if not alarms:
            raise ValueError("alarms: give at least one idle alarm and its group")
        groups = {name: group for name, (_, group) in alarms.items()}
        self.log_group = log_group(self, "Logs", log_retention_days)

        role = iam.Role(self, "Role", assumed_by=values.service_principal("lambda.amazonaws.com"), description="idle scale-down")
        role.add_to_policy(
            iam.PolicyStatement(
                sid="Logs", actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[self.log_group.log_group_arn]
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(sid="ReadGroups", actions=["autoscaling:DescribeAutoScalingGroups"], resources=["*"])
        )
        arns = [group_arn(self, g) for g in sorted(set(groups.values()))]
        role.add_to_policy(
            iam.PolicyStatement(
                sid="ScaleDownOwnGroups",
                actions=["autoscaling:SetInstanceProtection", "autoscaling:UpdateAutoScalingGroup"],
                resources=arns,
            )
        )
        acknowledge(
            role, "AwsSolutions-IAM5[Resource::*]", "autoscaling:DescribeAutoScalingGroups has no resource-level permissions"
        )
        for arn in arns:
            acknowledge_group_arn(role, arn, "the idle cluster's group name")

        self.function = python_function(
            self,
            "Function",
            code_dir=CODE_DIR,
            role=role,
            log_group=self.log_group,
            description="neuronkit: scales an idle training cluster to its minimum when its idle alarm fires",
            retry_attempts=2,
            environment={"GROUPS": json.dumps(groups, sort_keys=True)},
        )
        self.rule = events.Rule(
            self,
            "IdleAlarms",
            description="neuronkit: idle alarms of clusters with idle_scale_down, in ALARM",
            event_pattern=events.EventPattern(
                source=[code.SOURCE],
                detail_type=[code.DETAIL_TYPE],
                resources=[alarm.alarm_arn for alarm, _ in alarms.values()],
                detail={"state": {"value": ["ALARM"]}},
            ),
            targets=[targets.LambdaFunction(self.function, retry_attempts=2, max_event_age=durations.hours(1))],
        )
