"""An encrypted, TLS-only SNS topic for operational notifications."""

from __future__ import annotations

from collections.abc import Sequence

from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subs
from constructs import Construct


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
        for service in ("autoscaling.amazonaws.com", "events.amazonaws.com", "cloudwatch.amazonaws.com", *service_publishers):
            principal = iam.ServicePrincipal(service)
            self.key.grant(principal, "kms:Decrypt", "kms:GenerateDataKey*")
        for service in service_publishers:
            self.topic.add_to_resource_policy(
                iam.PolicyStatement(
                    actions=["sns:Publish"], principals=[iam.ServicePrincipal(service)], resources=[self.topic.topic_arn]
                )
            )
        for address in emails:
            self.topic.add_subscription(subs.EmailSubscription(address))
