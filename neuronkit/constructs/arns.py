"""ARNs of a stack's own resources, formatted in Python.

``Stack.format_arn`` is a round trip to the jsii kernel that costs more than most (about 1.7 ms each, 36 per
whole-app synth). It only joins the stack's partition, region and account with the parts it is given
(aws-cdk-lib ``Arn.format``: ``arn:PARTITION:SERVICE:REGION:ACCOUNT:RESOURCE`` then the separator and the
resource name); this module reads the three values once per stack and joins them the same way, so the
result is the same string, tokens included, for stacks with or without an explicit environment
(docs/performance.md; tests/unit/test_constructs_arns.py compares both).
"""

from __future__ import annotations

import weakref
from typing import Literal

from aws_cdk import Stack
from constructs import IConstruct

_ENV: weakref.WeakKeyDictionary[Stack, tuple[str, str, str]] = weakref.WeakKeyDictionary()


def format_arn(
    scope: IConstruct | Stack,
    *,
    service: str,
    resource: str,
    resource_name: str | None = None,
    sep: Literal["/", ":"] = "/",
) -> str:
    """``Stack.of(scope).format_arn(service=..., resource=..., resource_name=...)``; ``sep=":"`` is
    ``arn_format=ArnFormat.COLON_RESOURCE_NAME``."""
    stack = scope if isinstance(scope, Stack) else Stack.of(scope)
    env = _ENV.get(stack)
    if env is None:
        env = _ENV[stack] = (stack.partition, stack.region, stack.account)
    partition, region, account = env
    arn = f"arn:{partition}:{service}:{region}:{account}:{resource}"
    return arn if resource_name is None else f"{arn}{sep}{resource_name}"
