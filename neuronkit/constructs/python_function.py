"""The kit's small Python Lambda functions (rebalancer, idle scale-down), built one way."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from aws_cdk import CfnResource, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from constructs import Construct

from neuronkit.constructs import durations


def python_function(
    scope: Construct,
    id: str,
    *,
    code_dir: Path,
    role: iam.Role,
    log_group: logs.ILogGroup,
    description: str,
    environment: Mapping[str, str],
    retry_attempts: int,
    timeout_seconds: int = 60,
    memory_mib: int = 256,
    vpc: ec2.IVpc | None = None,
    vpc_subnets: ec2.SubnetSelection | None = None,
    security_groups: Sequence[ec2.ISecurityGroup] = (),
) -> lambda_.Function:
    """A ``handler.handler`` function from ``code_dir`` on the current Python runtime.

    The L2 makes the function depend on its role, which the role's GetAtt already implies (cfn-lint
    W3005); only the dependency on the role's policy, which nothing else orders, is kept (the L2 has no
    option for it). With ``vpc`` the function runs in ``vpc_subnets`` with ``security_groups``, and the role gets
    AWSLambdaVPCAccessExecutionRole here: aws-cdk-lib attaches it only to a role the Function creates itself, never to
    a role it is given, and Lambda "uses your function's permissions to create and manage network interfaces" (Lambda
    developer guide, "Giving Lambda functions access to resources in an Amazon VPC"); without it CreateFunction fails.
    """
    if vpc is not None:
        role.add_managed_policy(iam.ManagedPolicy.from_aws_managed_policy_name("service-role/AWSLambdaVPCAccessExecutionRole"))
    function = lambda_.Function(
        scope,
        id,
        runtime=lambda_.Runtime.PYTHON_3_14,
        handler="handler.handler",
        code=lambda_.Code.from_asset(str(code_dir), exclude=["__pycache__", "*.pyc", "__init__.py"]),
        role=role,
        timeout=durations.seconds(timeout_seconds),
        memory_size=memory_mib,
        log_group=log_group,
        description=description,
        retry_attempts=retry_attempts,
        environment=dict(environment),
        vpc=vpc,
        vpc_subnets=vpc_subnets,
        security_groups=list(security_groups) or None,
    )
    cfn_function = function.node.default_child
    policy = role.node.try_find_child("DefaultPolicy")
    assert isinstance(cfn_function, lambda_.CfnFunction) and isinstance(policy, iam.Policy)
    cfn_policy = policy.node.default_child
    assert isinstance(cfn_policy, iam.CfnPolicy)
    cfn_function.add_override("DependsOn", [Stack.of(scope).get_logical_id(cfn_policy)])
    return function


def drop_implied_role_dependency(function: Any) -> None:
    """Remove a Lambda function's DependsOn its own role, which its Role GetAtt already orders (cfn-lint W3005);
    the other dependencies (the role's policy) stay. aws-cdk-lib's L2 adds it and has no option against it."""
    cfn = function.node.default_child if function is not None else None
    if not isinstance(cfn, CfnResource):
        return
    role = function.node.try_find_child("ServiceRole")
    role_cfn = role.node.default_child if role is not None else None
    stack = Stack.of(cfn)
    keep = sorted(stack.get_logical_id(d) for d in cfn.obtain_dependencies() if d is not role_cfn and isinstance(d, CfnResource))
    if keep:
        cfn.add_override("DependsOn", keep)
    else:
        cfn.add_deletion_override("DependsOn")
