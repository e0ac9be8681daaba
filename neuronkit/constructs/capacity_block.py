"""Warnings around a Capacity Block's end: EC2's own events, an alarm on its expiry warning, and earlier notices."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from aws_cdk import Tags
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as actions
from aws_cdk import aws_events as events
from aws_cdk import aws_sns as sns
from constructs import Construct

from neuronkit.constructs import durations
from neuronkit.constructs.notifications import TopicTarget

# EC2 sends these through EventBridge (source aws.ec2): when the block's capacity is ready, and 40 minutes
# before its end (instances start terminating 10 minutes later). EC2 user guide, "Monitor Capacity Blocks
# using EventBridge".
DELIVERED = "Capacity Block Delivered"
EXPIRATION_WARNING = "Capacity Block Expiration Warning"


class CapacityBlockWatch(Construct):
    """Tells ``topic`` about one Capacity Block of ``pool``: EC2's delivered and expiration-warning events
    (matched on ``reservation_ids``: one, or one per UltraServer), an alarm that goes to ALARM when the expiration warning arrives, and a
    notice ``warn_hours_before_end`` hours before ``end`` (EventBridge schedule rules firing once, at a
    cron with the year). ``scale_down_at`` and ``fallback`` are said in the notices.

    Works in any stack: the topic must let ``events.amazonaws.com`` and ``cloudwatch.amazonaws.com``
    publish (``NotificationTopic`` does). Public attributes: ``expiration_rule``, ``delivered_rule``,
    ``expiration_alarm``, ``notices`` (rules by hours).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        environment: str,
        pool: str,
        reservation_ids: Sequence[str],
        end: dt.datetime,
        scale_down_at: dt.datetime,
        topic: sns.ITopic,
        warn_hours_before_end: Sequence[int] = (24, 2),
        fallback: str = "none",
    ) -> None:
        super().__init__(scope, id)
        if not reservation_ids:
            raise ValueError("reservation_ids: name the block's reservation (one per UltraServer for UltraServer blocks)")
        label = f"neuronkit {environment}: Capacity Block {', '.join(reservation_ids)} of {pool}"
        after = {
            "none": "nothing takes over",
            "on-demand": "the on-demand cluster takes over",
            "gpu-pool": "the GPU pool takes over",
        }
        plan = f"the cluster scales to zero at {_iso(scale_down_at)} (jobs are asked to checkpoint), then {after.get(fallback, fallback)}"

        self._ec2_events(label, plan, reservation_ids, end, topic)
        self._expiration_alarm(environment, pool, label, plan, topic)
        self._notices(label, plan, end, warn_hours_before_end, topic)

    def _ec2_events(self, label: str, plan: str, reservation_ids: Sequence[str], end: dt.datetime, topic: sns.ITopic) -> None:
        """EC2's own events for the block (delivered; ending in 10 minutes) forwarded to the topic in words."""

        def ec2_event(rule_id: str, detail_type: str, text: str) -> events.Rule:
            return events.Rule(
                self,
                rule_id,
                description=f"{label}: {detail_type}",
                event_pattern=events.EventPattern(
                    source=["aws.ec2"], detail_type=[detail_type], detail={"capacity-reservation-id": list(reservation_ids)}
                ),
                targets=[TopicTarget(topic, message=events.RuleTargetInput.from_text(text))],
            )

        self.delivered_rule = ec2_event("Delivered", DELIVERED, f"{label} is delivered: the cluster can launch its nodes.")
        self.expiration_rule = ec2_event(
            "ExpirationWarning",
            EXPIRATION_WARNING,
            f"{label} ends at {_iso(end)}: EC2 starts terminating its instances in 10 minutes; {plan}.",
        )

    def _expiration_alarm(self, environment: str, pool: str, label: str, plan: str, topic: sns.ITopic) -> None:
        """An alarm on the expiration rule firing, so the ending shows among the environment's alarms."""
        triggered = cloudwatch.Metric(
            namespace="AWS/Events",
            metric_name="TriggeredRules",
            dimensions_map={"RuleName": self.expiration_rule.rule_name},
            statistic="Sum",
            period=durations.minutes(5),
        )
        self.expiration_alarm = cloudwatch.Alarm(
            self,
            "ExpirationAlarm",
            alarm_name=f"{environment}-{pool}-capacity-block-ending",
            actions_enabled=True,
            alarm_description=f"{label} is about to end (EC2's expiration warning); {plan}",
            metric=triggered,
            threshold=1,
            evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
        )
        self.expiration_alarm.add_alarm_action(actions.SnsAction(topic))
        Tags.of(self.expiration_alarm).add("neuronkit:pool", pool)

    def _notices(self, label: str, plan: str, end: dt.datetime, warn_hours_before_end: Sequence[int], topic: sns.ITopic) -> None:
        """One scheduled notice per ``warn_hours_before_end`` (24 h and 2 h by default)."""
        self.notices: dict[int, events.Rule] = {}
        for hours in sorted(set(warn_hours_before_end), reverse=True):
            at = end - dt.timedelta(hours=hours)
            self.notices[hours] = events.Rule(
                self,
                f"EndsIn{hours}h",
                description=f"{label}: {hours} h before the block ends",
                schedule=events.Schedule.expression(_once(at)),
                targets=[
                    TopicTarget(
                        topic, message=events.RuleTargetInput.from_text(f"{label} ends in {hours} h, at {_iso(end)}; {plan}.")
                    )
                ],
            )


def _utc(when: dt.datetime) -> dt.datetime:
    return (when if when.tzinfo else when.replace(tzinfo=dt.UTC)).astimezone(dt.UTC)


def _iso(when: dt.datetime) -> str:
    return _utc(when).strftime("%Y-%m-%dT%H:%M:%SZ")


def _once(when: dt.datetime) -> str:
    """An EventBridge cron expression that fires once: minute, hour, day, month and year of ``when`` (UTC)."""
    w = _utc(when)
    return f"cron({w.minute} {w.hour} {w.day} {w.month} ? {w.year})"
