"""CloudFormation pseudo parameters (``AWS::Region``, ``AWS::AccountId``...), read from CDK once per process.

Each read of ``aws_cdk.Aws.REGION`` is a round trip to the jsii kernel, and the kit read them about 200
times per whole-app synth; the value is one token object, the same every time, which each stack resolves
to its own region or account. ``pseudo.REGION`` reads it once (docs/performance.md).
"""

from __future__ import annotations

from typing import Any

from aws_cdk import Aws

_NAMES = frozenset({"ACCOUNT_ID", "NOTIFICATION_ARNS", "NO_VALUE", "PARTITION", "REGION", "STACK_ID", "STACK_NAME", "URL_SUFFIX"})


def __getattr__(name: str) -> Any:
    if name not in _NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(Aws, name)
    globals()[name] = value
    return value
