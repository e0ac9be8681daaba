"""Pieces every Auto Scaling group of the kit shares: its ARN, the cdk-nag note on it, notifications."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_iam as iam
from constructs import Construct

from neuronkit import catalog
from neuronkit.constructs import arns
from neuronkit.constructs.compliance import acknowledge_each, iam5
from neuronkit.constructs.policy import add_statement

# What a group reports to its notifications topic: launches and terminations, and their failures.
NOTIFICATION_TYPES = (
    "autoscaling:EC2_INSTANCE_LAUNCH",
    "autoscaling:EC2_INSTANCE_LAUNCH_ERROR",
    "autoscaling:EC2_INSTANCE_TERMINATE",
    "autoscaling:EC2_INSTANCE_TERMINATE_ERROR",
)


def group_arn(scope: Construct, group_name: str) -> str:
    """The ARN of an Auto Scaling group by name (its UUID part is unknown before creation)."""
    return arns.format_arn(
        scope, service="autoscaling", resource="autoScalingGroup", resource_name=f"*:autoScalingGroupName/{group_name}", sep=":"
    )


def group_arn_reason(arn: str, whose: str) -> dict[str, str]:
    """The cdk-nag note on a policy that names a group by ARN: its ``*`` is the UUID, not a wildcard grant."""
    return {iam5(arn): f"The group's UUID is unknown before creation; the ARN is fixed to {whose}"}


def acknowledge_group_arn(role: iam.IRole, arn: str, whose: str) -> None:
    acknowledge_each(role, group_arn_reason(arn, whose))


def group_tags(tags: Mapping[str, str]) -> list[autoscaling.CfnAutoScalingGroup.TagPropertyProperty]:
    """A group's tags, sorted, on the group only: its launch templates tag the instances and volumes."""
    return [
        autoscaling.CfnAutoScalingGroup.TagPropertyProperty(key=k, value=v, propagate_at_launch=False)
        for k, v in sorted(tags.items())
    ]


def notifications(topic_arn: str | None) -> list[autoscaling.CfnAutoScalingGroup.NotificationConfigurationProperty] | None:
    """A group's notification configuration to ``topic_arn`` (None: no notifications)."""
    if not topic_arn:
        return None
    return [
        autoscaling.CfnAutoScalingGroup.NotificationConfigurationProperty(
            topic_arn=topic_arn, notification_types=list(NOTIFICATION_TYPES)
        )
    ]


def launch_hook(heartbeat_seconds: int) -> autoscaling.CfnAutoScalingGroup.LifecycleHookSpecificationProperty:
    """The launch lifecycle hook a node completes once it proved itself (CONTINUE) or failed (ABANDON).

    Inline in the group (not a separate AWS::AutoScaling::LifecycleHook), so it also holds the nodes the group
    launches while it is being created. Without an answer within ``heartbeat_seconds`` the hook ends with
    its default result, ABANDON: Auto Scaling terminates the node and launches another.
    """
    facts = catalog.software_facts()["lifecycle"]
    return autoscaling.CfnAutoScalingGroup.LifecycleHookSpecificationProperty(
        lifecycle_hook_name=facts["hook_name"],
        lifecycle_transition="autoscaling:EC2_INSTANCE_LAUNCHING",
        heartbeat_timeout=heartbeat_seconds,
        default_result=facts["default_result"],
    )


def drain_hook(heartbeat_seconds: int) -> autoscaling.CfnAutoScalingGroup.LifecycleHookSpecificationProperty:
    """The termination hook that gives a node ``heartbeat_seconds`` to checkpoint its job before it goes
    (kit/neuronkit-drain completes it with CONTINUE; unanswered it times out with CONTINUE)."""
    facts = catalog.software_facts()["lifecycle"]
    return autoscaling.CfnAutoScalingGroup.LifecycleHookSpecificationProperty(
        lifecycle_hook_name=facts["drain_hook_name"],
        lifecycle_transition="autoscaling:EC2_INSTANCE_TERMINATING",
        heartbeat_timeout=heartbeat_seconds,
        default_result=facts["drain_default_result"],
    )


# The tag a training node puts on itself once it passed its checks (training-node.sh), which peers' hostfiles
# select on (kit/neuronkit-hostfile), and which it removes again when it fails after that.
READY_TAG = "neuronkit:ready"


def grant_node_lifecycle(role: iam.IRole, scope: Construct, group_name: str, *, removable_tags: Sequence[str] = ()) -> None:
    """What a node of ``group_name`` may do to its own group and itself: complete its launch hook, drop its
    scale-in protection at the end of a job, tag itself (versions, ready) and remove ``removable_tags`` (only those
    keys) from itself, nothing else."""
    arn = group_arn(scope, group_name)
    add_statement(
        role,
        iam.PolicyStatement(
            sid="OwnGroup",
            actions=[
                "autoscaling:CompleteLifecycleAction",
                "autoscaling:RecordLifecycleActionHeartbeat",
                "autoscaling:SetInstanceProtection",
            ],
            resources=[arn],
        ),
    )
    instances = arns.format_arn(scope, service="ec2", resource="instance", resource_name="*")
    add_statement(
        role,
        iam.PolicyStatement(
            sid="TagSelf",
            actions=["ec2:CreateTags"],
            resources=[instances],
            conditions={"StringEquals": {"aws:ResourceTag/aws:autoscaling:groupName": group_name}},
        ),
    )
    if removable_tags:
        add_statement(
            role,
            iam.PolicyStatement(
                sid="UntagSelf",
                actions=["ec2:DeleteTags"],
                resources=[instances],
                conditions={
                    "StringEquals": {"aws:ResourceTag/aws:autoscaling:groupName": group_name},
                    # Without a Tags parameter DeleteTags removes every tag: aws:TagKeys is then absent, and
                    # ForAllValues passes on an absent key, so the null check requires the request to name its keys.
                    "ForAllValues:StringEquals": {"aws:TagKeys": list(removable_tags)},
                    "Null": {"aws:TagKeys": "false"},
                },
            ),
        )
    acknowledge_each(
        role,
        {
            **group_arn_reason(arn, f"the node's own group {group_name}"),
            iam5(instances): "Nodes tag only instances of their own group (aws:ResourceTag/aws:autoscaling:groupName condition)",
        },
    )


def lifecycle_values() -> dict[str, str | int]:
    """The boot scripts' values for the hook and the collective ports (catalog/software.yaml)."""
    software = catalog.software_facts()
    return {
        "LIFECYCLE_HOOK": software["lifecycle"]["hook_name"],
        "MASTER_PORT": software["collectives"]["master_port"],
        "ROOT_COMM_PORT": software["collectives"]["root_comm_port"],
    }
