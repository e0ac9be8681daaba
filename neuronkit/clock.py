"""The one place the kit reads the time at synth and validate: what a Capacity Block's scheduled actions depend on.

Auto Scaling refuses a scheduled action in the past, so the actions a block gets depend on when the stack is
synthesized (docs/capacity-blocks.md). The time is injectable: the CDK context key ``neuronkit:now`` (an ISO 8601
time, e.g. ``cdk synth -c neuronkit:now=2027-01-05T00:00:00Z``; the tests freeze it that way), or ``now=`` where a
function takes it; otherwise the system clock, in UTC.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # `neuronkit validate` reads the clock without loading the CDK (and Node)
    from constructs import IConstruct

CONTEXT_KEY = "neuronkit:now"


def utc_now() -> dt.datetime:
    """The system clock in UTC."""
    return dt.datetime.now(dt.UTC)


def parse(value: str | dt.datetime) -> dt.datetime:
    """An ISO 8601 time (``Z`` accepted) as an aware UTC datetime; a naive one is taken as UTC."""
    when = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    return (when if when.tzinfo else when.replace(tzinfo=dt.UTC)).astimezone(dt.UTC)


def now(scope: IConstruct | None = None) -> dt.datetime:
    """The time a synth plans for: ``scope``'s context ``neuronkit:now`` when set, else the system clock."""
    if scope is not None:
        value = scope.node.try_get_context(CONTEXT_KEY)
        if value:
            try:
                return parse(value)
            except ValueError:
                raise ValueError(
                    f"context {CONTEXT_KEY}: {value!r} is not an ISO 8601 time; use e.g. 2027-01-05T00:00:00Z"
                ) from None
    return utc_now()
