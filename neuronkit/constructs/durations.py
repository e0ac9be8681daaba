"""``aws_cdk.Duration`` values made once per process: each ``Duration.minutes(5)`` is a round trip to the
jsii kernel, and dashboards and alarms ask for the same few periods over a hundred times per synth. A
Duration is immutable, so one object per value serves every construct (docs/performance.md)."""

from __future__ import annotations

from functools import cache

from aws_cdk import Duration


@cache
def seconds(amount: int | float) -> Duration:
    return Duration.seconds(amount)


@cache
def minutes(amount: int | float) -> Duration:
    return Duration.minutes(amount)


@cache
def hours(amount: int | float) -> Duration:
    return Duration.hours(amount)


@cache
def days(amount: int | float) -> Duration:
    return Duration.days(amount)
