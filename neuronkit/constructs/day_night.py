"""Serve by day, train by night: scheduled capacity changes of Auto Scaling groups, in a time zone."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from aws_cdk import aws_autoscaling as autoscaling
from constructs import Construct

_CLOCK = re.compile(r"^([01]\d|2[0-3]):([0-5]\d)$")


@dataclass(frozen=True)
class ShiftCapacity:
    """What one group gets when a shift starts: ``desired`` capacity, and ``min_size`` (None: unchanged)."""

    group_name: str
    desired: int
    min_size: int | None = None


def daily_cron(clock: str) -> str:
    """'07:30' -> '30 7 * * *' (every day at that local time)."""
    m = _CLOCK.match(clock)
    if m is None:
        raise ValueError(f"{clock!r} is not a time of day (HH:MM, 00:00 to 23:59)")
    return f"{int(m.group(2))} {int(m.group(1))} * * *"


class DayNightSchedule(Construct):
    """Daily scheduled actions: the ``day`` capacities at ``day_starts``, the ``night`` ones at ``night_starts``.

    Times are local to ``time_zone`` (an IANA name, default ``UTC``; the ScheduledAction's TimeZone
    property, so daylight saving time is followed). Defaults: day from 08:00, night from 20:00. Groups are
    named, not referenced, so the schedule can live in another stack than the groups (deploy it after
    them). A scheduled desired capacity below the running count scales in only unprotected instances:
    training nodes protected from scale-in finish their job first.

    Public attributes: ``actions`` ((shift, group name) -> ``CfnScheduledAction``).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        day: Sequence[ShiftCapacity],
        night: Sequence[ShiftCapacity],
        time_zone: str = "UTC",
        day_starts: str = "08:00",
        night_starts: str = "20:00",
    ) -> None:
        super().__init__(scope, id)
        if day_starts == night_starts:
            raise ValueError(f"day_starts and night_starts are both {day_starts}; give the shifts different start times")
        self.actions: dict[tuple[str, str], autoscaling.CfnScheduledAction] = {}
        for shift, starts, capacities in (("day", day_starts, day), ("night", night_starts, night)):
            cron = daily_cron(starts)
            for c in capacities:
                if c.desired < 0 or (c.min_size is not None and c.min_size < 0):
                    raise ValueError(f"{c.group_name}: {shift} capacities must not be negative")
                if (shift, c.group_name) in self.actions:
                    raise ValueError(f"{c.group_name}: given twice for the {shift}")
                self.actions[(shift, c.group_name)] = autoscaling.CfnScheduledAction(
                    self,
                    f"{shift.title()}-{c.group_name}",
                    auto_scaling_group_name=c.group_name,
                    recurrence=cron,
                    time_zone=time_zone,
                    desired_capacity=c.desired,
                    min_size=c.min_size,
                )
