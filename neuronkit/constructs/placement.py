"""Where a construct's nodes go, in CDK's terms or the kit's: a ``SubnetSelection`` of the VPC (what a user's
app with an ``ec2.Vpc`` speaks) or subnet IDs keyed by AZ ID (what the kit's own stacks, built from environment
files that speak AZ IDs, pass). AZ IDs need an AWS call to learn from a subnet, so a selection is never
checked against AZ IDs at synth: ``neuronkit preflight`` does that for a deployed account.
"""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns

from neuronkit.constructs.notifications import arn_of


def subnets_by_label(
    vpc: ec2.IVpc, *, owner: str, subnet_ids: Mapping[str, str] | None, vpc_subnets: ec2.SubnetSelection | None
) -> dict[str, str]:
    """Placement label -> subnet ID: the given AZ IDs, or each selected subnet's Availability Zone (name)."""
    if (subnet_ids is None) == (vpc_subnets is None):
        raise ValueError(f"{owner}: give vpc_subnets (a SubnetSelection of the VPC) or subnet_ids (AZ ID -> subnet), not both")
    if subnet_ids is not None:
        return dict(subnet_ids)
    sel = vpc_subnets
    assert sel is not None
    selected = vpc.select_subnets(
        availability_zones=sel.availability_zones,
        one_per_az=sel.one_per_az,
        subnet_filters=sel.subnet_filters,
        subnet_group_name=sel.subnet_group_name,
        subnets=sel.subnets,
        subnet_type=sel.subnet_type,
    )
    out: dict[str, str] = {}
    for i, subnet in enumerate(selected.subnets):
        zone = subnet.availability_zone
        label = zone if zone and not Token.is_unresolved(zone) else f"subnet{i}"
        out[label if label not in out else f"{label}-{i}"] = subnet.subnet_id
    if not out:
        raise ValueError(f"{owner}: vpc_subnets selects no subnet of the VPC; select private subnets with a route out")
    return out


def bucket_name(bucket: str | s3.IBucket) -> str:
    """A bucket given as ``IBucket`` (CDK) or as its name (the kit's stacks name theirs)."""
    return bucket if isinstance(bucket, str) else bucket.bucket_name


def topic_arn(topic: sns.ITopic | None, arn: str | None, *, owner: str) -> str | None:
    if topic is not None and arn is not None:
        raise ValueError(f"{owner}: give notifications_topic or notifications_topic_arn, not both")
    return arn_of(topic) if topic is not None else arn
