"""neuronkit.constructs.arns formats the ARN Stack.format_arn would, without a round trip per ARN."""

from __future__ import annotations

import pytest
from aws_cdk import App, ArnFormat, Aws, Environment, Stack

from neuronkit.constructs import arns


@pytest.mark.parametrize(
    "env",
    [
        Environment(account="111111111111", region="us-east-1"),
        Environment(account="222222222222", region="cn-north-1"),
        Environment(account="333333333333", region="us-gov-west-1"),
        None,  # environment-agnostic: partition, region and account stay tokens
    ],
)
@pytest.mark.parametrize("colon", [False, True])
@pytest.mark.parametrize("name", [None, "*", "group:*", "token"])
def test_same_arn_as_stack_format_arn(env: Environment | None, colon: bool, name: str | None) -> None:
    stack = Stack(App(), "S", env=env)
    resource_name = Aws.STACK_NAME if name == "token" else name
    theirs = stack.format_arn(
        service="logs",
        resource="log-group",
        resource_name=resource_name,
        arn_format=ArnFormat.COLON_RESOURCE_NAME if colon else ArnFormat.SLASH_RESOURCE_NAME,
    )
    ours = arns.format_arn(stack, service="logs", resource="log-group", resource_name=resource_name, sep=":" if colon else "/")
    assert ours == theirs
    assert stack.resolve(ours) == stack.resolve(theirs)
