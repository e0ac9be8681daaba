"""Immutable aws-cdk-lib values made once per process: service principals, AWS-managed policies, ports, peers.

Each ``iam.ServicePrincipal(...)``, ``ManagedPolicy.from_aws_managed_policy_name(...)``, ``ec2.Port.tcp(...)`` or
``ec2.Peer.any_ipv4()`` is a round trip to the jsii kernel, and the kit asks for the same few of them about a
hundred times per whole-app synth. None of them holds state of the scope that uses it (a managed policy's ARN and
a principal's region-specific name resolve in the stack that renders them), so one object per value serves every
construct, as :mod:`neuronkit.constructs.durations` does for durations (docs/performance.md).
"""

from __future__ import annotations

from functools import cache

from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam


@cache
def service_principal(service: str) -> iam.ServicePrincipal:
    """``iam.ServicePrincipal(service)``, without conditions."""
    return iam.ServicePrincipal(service)


@cache
def any_principal() -> iam.AnyPrincipal:
    return iam.AnyPrincipal()


@cache
def aws_managed_policy(name: str) -> iam.IManagedPolicy:
    """``iam.ManagedPolicy.from_aws_managed_policy_name(name)``."""
    return iam.ManagedPolicy.from_aws_managed_policy_name(name)


@cache
def tcp(port: int) -> ec2.Port:
    return ec2.Port.tcp(port)


@cache
def tcp_range(start: int, end: int) -> ec2.Port:
    return ec2.Port.tcp_range(start, end)


def tcp_ports(low: int, high: int) -> ec2.Port:
    """One TCP port (``low == high``) or an inclusive range: the same ``ec2.Port`` (and rule ids) CDK makes for each."""
    return tcp(low) if low == high else tcp_range(low, high)


@cache
def all_traffic() -> ec2.Port:
    return ec2.Port.all_traffic()


@cache
def any_ipv4() -> ec2.IPeer:
    return ec2.Peer.any_ipv4()
