"""Pieces every Auto Scaling group of the kit shares: its ARN, the cdk-nag note on it, notifications."""

from __future__ import annotations

from aws_cdk import ArnFormat, Aws, Stack
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_iam as iam
from constructs import Construct

from neuronkit.compliance import acknowledge

# What a group reports to its notifications topic: launches and terminations, and their failures.
NOTIFICATION_TYPES = (
    "autoscaling:EC2_INSTANCE_LAUNCH",
    "autoscaling:EC2_INSTANCE_LAUNCH_ERROR",
    "autoscaling:EC2_INSTANCE_TERMINATE",
    "autoscaling:EC2_INSTANCE_TERMINATE_ERROR",
)


def group_arn(scope: Construct, group_name: str) -> str:
    """The ARN of an Auto Scaling group by name (its UUID part is unknown before creation)."""
    return Stack.of(scope).format_arn(
        service="autoscaling",
        resource="autoScalingGroup",
        resource_name=f"*:autoScalingGroupName/{group_name}",
        arn_format=ArnFormat.COLON_RESOURCE_NAME,
    )


def acknowledge_group_arn(role: iam.IRole, arn: str, whose: str) -> None:
    """The cdk-nag note on a policy that names a group by ARN: its ``*`` is the UUID, not a wildcard grant."""
    acknowledge(
        role,
        f"AwsSolutions-IAM5[Resource::{arn.replace(Aws.PARTITION, '<AWS::Partition>')}]",
        f"The group's UUID is unknown before creation; the ARN is fixed to {whose}",
    )


def notifications(topic_arn: str | None) -> list[autoscaling.CfnAutoScalingGroup.NotificationConfigurationProperty] | None:
    """A group's notification configuration to ``topic_arn`` (None: no notifications)."""
    if not topic_arn:
        return None
    return [
        autoscaling.CfnAutoScalingGroup.NotificationConfigurationProperty(
            topic_arn=topic_arn, notification_types=list(NOTIFICATION_TYPES)
        )
    ]
