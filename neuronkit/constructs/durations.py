"""``aws_cdk.Duration`` values made once per process: each ``Duration.minutes(5)`` is a round trip to the
jsii kernel, and dashboards and alarms ask for the same few periods over a hundred times per synth. A
Duration is immutable, so one object per value serves every construct (docs/performance.md)."""

from __future__ import annotations

from functools import cache

from aws_cdk import Duration

seconds = cache(Duration.seconds)
minutes = cache(Duration.minutes)
hours = cache(Duration.hours)
days = cache(Duration.days)
