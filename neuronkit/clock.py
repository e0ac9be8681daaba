"""The one place the kit reads the time at synth and validate: what a Capacity Block's scheduled actions depend on.

Auto Scaling refuses a scheduled action in the past, so the actions a block gets depend on when the stack is
synthesized (docs/capacity-blocks.md). The time is injectable: the CDK context key ``neuronkit:now`` (an ISO 8601
time, e.g. ``cdk synth -c neuronkit:now=2027-01-05T00:00:00Z``), or ``now=`` where a function takes it; else the
environment variable ``NEURONKIT_NOW`` (same format), which a process and every program it starts inherit: the test
suite sets it so that the rehearsal's ``cdk synth`` and every CLI subprocess run at the frozen time too
(docs/testing.md); otherwise the system clock, in UTC. Every command of the kit reads the time here, so pinning it here
pins it everywhere (a test walks the source for other reads of the wall clock).
"""

from __future__ import annotations

import datetime as dt
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # `neuronkit validate` reads the clock without loading the CDK (and Node)
    from constructs import IConstruct

CONTEXT_KEY = "neuronkit:now"
ENV_VAR = "NEURONKIT_NOW"


def utc_now() -> dt.datetime:
    """``NEURONKIT_NOW`` when set (an ISO 8601 time), else the system clock, in UTC."""
    pinned = os.environ.get(ENV_VAR)
    if pinned:
        return _pinned(pinned, f"environment variable {ENV_VAR}")
    return dt.datetime.now(dt.UTC)


def _pinned(value: str, where: str) -> dt.datetime:
    """``value`` parsed, or one line naming ``where`` it came from and the format."""
    try:
        return parse(value)
    except ValueError:
        raise ValueError(f"{where}: {value!r} is not an ISO 8601 time; use e.g. 2027-01-05T00:00:00Z") from None


def parse(value: str | dt.datetime) -> dt.datetime:
    """An ISO 8601 time (``Z`` accepted) as an aware UTC datetime; a naive one is taken as UTC."""
    when = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return (when if when.tzinfo else when.replace(tzinfo=dt.UTC)).astimezone(dt.UTC)


def now(scope: IConstruct | None = None) -> dt.datetime:
    """The time a synth plans for: ``scope``'s context ``neuronkit:now`` when set, else the system clock."""
    if scope is not None:
        value = scope.node.try_get_context(CONTEXT_KEY)
        if value:
            return _pinned(value, f"context {CONTEXT_KEY}")
    return utc_now()
