"""An AWS Budgets cost budget for one environment, notifying an SNS topic."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from aws_cdk import aws_budgets as budgets
from aws_cdk import aws_sns as sns
from constructs import Construct

from neuronkit.constructs.notifications import arn_of

ENVIRONMENT_TAG = "neuronkit:environment"


@dataclass(frozen=True)
class BudgetNotification:
    """Notify when ``kind`` (ACTUAL or FORECASTED) spend passes ``percent`` of the limit."""

    kind: Literal["ACTUAL", "FORECASTED"]
    percent: float


DEFAULT_NOTIFICATIONS = (
    BudgetNotification("ACTUAL", 80),
    BudgetNotification("ACTUAL", 100),
    BudgetNotification("FORECASTED", 100),
)


def tag_filter(key: str, value: str) -> str:
    """A Budgets cost-filter value for a cost-allocation tag: ``user:KEY$VALUE``."""
    return f"user:{key}${value}"


class CostBudget(Construct):
    """A monthly COST budget over the resources tagged ``neuronkit:environment=ENVIRONMENT``.

    ``monthly_usd`` is the limit; ``notifications`` default to actual spend at 80% and 100% and forecast
    spend at 100%, each sent to ``topic`` (whose policy must let ``budgets.amazonaws.com`` publish:
    ``NotificationTopic(service_publishers=["budgets.amazonaws.com"])``). The budget is named
    ``neuronkit-ENVIRONMENT`` unless ``name`` is given; ``tags`` (default none) become its resource tags
    (the stack-wide tags do not reach AWS::Budgets::Budget, whose tags are the ResourceTags property).

    The tag filter works only once ``neuronkit:environment`` is activated as a cost-allocation tag in the
    Billing console (CloudFormation cannot do it), and billing data lags by hours: the budget tells
    you about a month's spend, it does not stop a forgotten cluster (the idle alarm does).

    Public attributes: ``budget`` (``budgets.CfnBudget``), ``name``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        environment: str,
        monthly_usd: float,
        topic: sns.ITopic,
        notifications: Sequence[BudgetNotification] = DEFAULT_NOTIFICATIONS,
        name: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(scope, id)
        if monthly_usd <= 0:
            raise ValueError(f"monthly_usd: {monthly_usd} must be positive")
        if not notifications:
            raise ValueError("notifications: a budget nobody hears about is useless; give at least one")
        self.name = name or f"neuronkit-{environment}"
        self.budget = budgets.CfnBudget(
            self,
            "Budget",
            budget=budgets.CfnBudget.BudgetDataProperty(
                budget_name=self.name,
                budget_type="COST",
                time_unit="MONTHLY",
                budget_limit=budgets.CfnBudget.SpendProperty(amount=monthly_usd, unit="USD"),
                cost_filters={"TagKeyValue": [tag_filter(ENVIRONMENT_TAG, environment)]},
            ),
            notifications_with_subscribers=[
                budgets.CfnBudget.NotificationWithSubscribersProperty(
                    notification=budgets.CfnBudget.NotificationProperty(
                        notification_type=n.kind,
                        comparison_operator="GREATER_THAN",
                        threshold=n.percent,
                        threshold_type="PERCENTAGE",
                    ),
                    subscribers=[budgets.CfnBudget.SubscriberProperty(subscription_type="SNS", address=arn_of(topic))],
                )
                for n in notifications
            ],
            resource_tags=[budgets.CfnBudget.ResourceTagProperty(key=k, value=v) for k, v in sorted((tags or {}).items())]
            or None,
        )
