"""An encrypted, TLS-only SNS topic for operational notifications."""

from __future__ import annotations

import weakref
from collections.abc import Sequence

import jsii
from aws_cdk import aws_events as events
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from constructs import Construct

from neuronkit.constructs import pseudo, values

# The service-linked role Auto Scaling publishes notifications with (Auto Scaling User Guide, "Service-linked
# roles for Amazon EC2 Auto Scaling"; KMS key policies must name it: "Required AWS KMS key policy for use
# with encrypted volumes/topics").
AUTOSCALING_SLR_ARN = (
    "arn:{partition}:iam::{account}:role/aws-service-role/autoscaling.amazonaws.com/AWSServiceRoleForAutoScaling"
)


_EVENTBRIDGE_ALLOWED: weakref.WeakSet[sns.Topic] = weakref.WeakSet()
_ARNS: weakref.WeakKeyDictionary[sns.ITopic, str] = weakref.WeakKeyDictionary()


def arn_of(topic: sns.ITopic) -> str:
    """``topic.topic_arn``, read from the jsii kernel once per topic (every rule and budget names it)."""
    arn = _ARNS.get(topic)
    if arn is None:
        arn = _ARNS[topic] = topic.topic_arn
    return arn


def allow_eventbridge(topic: sns.ITopic) -> None:
    """Let this account's EventBridge rules, and only them, publish to ``topic`` (once per topic).

    CDK's ``targets.SnsTopic`` grants ``events.amazonaws.com`` with no condition, so a rule in any account
    could publish; this statement carries ``aws:SourceAccount`` and ``aws:SourceArn`` (SNS Developer Guide,
    "Example cases for Amazon SNS access control": confused-deputy prevention). An imported topic is left as
    it is: its owner writes its policy.
    """
    if not isinstance(topic, sns.Topic) or topic in _EVENTBRIDGE_ALLOWED:
        return
    _EVENTBRIDGE_ALLOWED.add(topic)
    account = pseudo.ACCOUNT_ID
    topic.add_to_resource_policy(
        iam.PolicyStatement(
            sid="EventBridgeRulesOfThisAccount",
            actions=["sns:Publish"],
            principals=[values.service_principal("events.amazonaws.com")],
            resources=[arn_of(topic)],
            conditions={
                "StringEquals": {"aws:SourceAccount": account},
                "ArnLike": {"aws:SourceArn": f"arn:{pseudo.PARTITION}:events:{pseudo.REGION}:{account}:rule/*"},
            },
        )
    )


@jsii.implements(events.IRuleTarget)
class TopicTarget:
    """An EventBridge rule target publishing ``message`` to ``topic``, admitted by a conditioned topic statement
    (:func:`allow_eventbridge`) instead of the unconditioned one ``targets.SnsTopic`` adds. An encrypted topic's
    key must let ``events.amazonaws.com`` use it (:class:`NotificationTopic`'s key does, for this account)."""

    def __init__(self, topic: sns.ITopic, *, message: events.RuleTargetInput | None = None) -> None:
        self.topic = topic
        self.message = message

    def bind(self, rule: events.IRule, id: str | None = None) -> events.RuleTargetConfig:
        allow_eventbridge(self.topic)
        return events.RuleTargetConfig(arn=arn_of(self.topic), input=self.message)


class NotificationTopic(Construct):
    """An SNS topic encrypted with its own KMS key (rotated), refusing non-TLS publishers.

    ``emails`` subscribes each address (each must confirm the subscription). ``service_publishers``
    lists service principals (e.g. ``budgets.amazonaws.com``) allowed to publish; the key lets them
    encrypt. Public attributes: ``topic``, ``key``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        display_name: str,
        emails: Sequence[str] = (),
        service_publishers: Sequence[str] = (),
    ) -> None:
        super().__init__(scope, id)
        self.key = kms.Key(self, "Key", enable_key_rotation=True, description=f"{display_name} (SNS)")
        self.topic = sns.Topic(self, "Topic", display_name=display_name, master_key=self.key, enforce_ssl=True)
        account = pseudo.ACCOUNT_ID
        same_account = {"StringEquals": {"aws:SourceAccount": account}}
        key_statements = [
            iam.PolicyStatement(
                sid=f"Publish-{service.split('.')[0]}",
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                principals=[values.service_principal(service)],
                resources=["*"],
                conditions=same_account,
            )
            for service in ("events.amazonaws.com", "cloudwatch.amazonaws.com", *service_publishers)
        ]
        # Auto Scaling publishes group notifications as its service-linked role, an IAM role of this account
        # (not the autoscaling service principal); named by condition so the key works before the role exists.
        key_statements.append(
            iam.PolicyStatement(
                sid="Publish-AutoScalingServiceLinkedRole",
                actions=["kms:Decrypt", "kms:GenerateDataKey*"],
                principals=[values.any_principal()],
                resources=["*"],
                conditions={
                    "StringEquals": {"kms:CallerAccount": account},
                    "ArnLike": {"aws:PrincipalArn": AUTOSCALING_SLR_ARN.format(partition=pseudo.PARTITION, account=account)},
                },
            )
        )
        for statement in key_statements:
            self.key.add_to_resource_policy(statement)
        # CloudWatch alarms of this account may publish (the topic policy replaces SNS's default one).
        self.topic.add_to_resource_policy(
            iam.PolicyStatement(
                sid="CloudWatchAlarms",
                actions=["sns:Publish"],
                principals=[values.service_principal("cloudwatch.amazonaws.com")],
                resources=[arn_of(self.topic)],
                conditions={
                    **same_account,
                    "ArnLike": {"aws:SourceArn": f"arn:{pseudo.PARTITION}:cloudwatch:{pseudo.REGION}:{account}:alarm:*"},
                },
            )
        )
        for service in service_publishers:
            self.topic.add_to_resource_policy(
                iam.PolicyStatement(
                    actions=["sns:Publish"],
                    principals=[values.service_principal(service)],
                    resources=[arn_of(self.topic)],
                    conditions=same_account,
                )
            )
        allow_eventbridge(self.topic)
        for address in emails:
            self.topic.add_subscription(subs.EmailSubscription(address))
