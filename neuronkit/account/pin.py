"""``neuronkit pin``'s AWS side: perform an environment's AMI lookups, and read an existing EKS cluster's attributes
(``eks:DescribeCluster``, :mod:`neuronkit.config.cluster_pins`), with read-only credentials.

Each unpinned lookup (:mod:`neuronkit.config.lookups`) is asked of EC2 DescribeImages in the environment's
region, as the CDK CLI's AMI context provider does: the owner and filters of the lookup, the newest image by
creation date wins. The caller writes the ids into cdk.context.json under CDK's own keys, so `cdk synth` and
`cdk deploy` then read them without calling AWS. IAM actions: ``iam/neuronkit-pin-policy.json``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from neuronkit.config.cluster_pins import ClusterLookup, from_describe
from neuronkit.config.lookups import ImageLookup


class PinError(Exception):
    """AWS could not be asked (no credentials, another account, unreachable): a usage error, exit code 2."""


@dataclass(frozen=True)
class Found:
    lookup: ImageLookup
    image_id: str | None  # None: no image matches
    image_name: str = ""


def caller_account(session: Any) -> str:
    try:
        account: str = session.client("sts").get_caller_identity()["Account"]
    except Exception as err:  # botocore's NoCredentialsError, EndpointConnectionError, ClientError ...
        raise PinError(f"cannot ask AWS who the credentials belong to ({err}); configure read-only credentials") from None
    return account


def find_image(ec2: Any, lookup: ImageLookup) -> Found:
    """The newest image matching the lookup (CDK's AMI context provider picks the newest by CreationDate)."""
    filters = [{"Name": name, "Values": values} for name, values in lookup.filters.items()]
    try:
        images = ec2.describe_images(Owners=[lookup.owner], Filters=filters)["Images"]
    except Exception as err:
        raise PinError(f"DescribeImages failed in {lookup.region} ({err})") from None
    if not images:
        return Found(lookup, None)
    newest = max(images, key=lambda image: str(image.get("CreationDate") or ""))
    return Found(lookup, str(newest["ImageId"]), str(newest.get("Name") or ""))


def resolve(session_for: Any, lookups: list[ImageLookup]) -> list[Found]:
    """Ask EC2 for every lookup, one client per region; ``session_for(region)`` returns a boto3 session.

    The credentials must belong to each lookup's account: the images of another account's region may differ
    (and CDK keys them by account), so a mismatch is refused before anything is asked."""
    out: list[Found] = []
    accounts: dict[str, str] = {}
    clients: dict[str, Any] = {}
    for lookup in lookups:
        session = session_for(lookup.region)
        if lookup.region not in accounts:
            accounts[lookup.region] = caller_account(session)
        if accounts[lookup.region] != lookup.account:
            raise PinError(
                f"the credentials are for account {accounts[lookup.region]}, but {lookup.environment} deploys into "
                f"{lookup.account}; use read-only credentials of {lookup.account} (iam/neuronkit-pin-policy.json)"
            )
        if lookup.region not in clients:
            clients[lookup.region] = session.client("ec2")
        out.append(find_image(clients[lookup.region], lookup))
    return out


@dataclass(frozen=True)
class FoundCluster:
    lookup: ClusterLookup
    attributes: dict[str, str]  # empty: no such cluster


def describe_cluster(session_for: Any, lookup: ClusterLookup) -> FoundCluster:
    """``eks:DescribeCluster`` of one file's existing cluster, in its account (checked first) and region: the six
    attributes eks.existing names (:data:`neuronkit.config.cluster_pins.ATTRIBUTES`); none when it does not exist."""
    session = session_for(lookup.region)
    account = caller_account(session)
    if account != lookup.account:
        raise PinError(
            f"the credentials are for account {account}, but {lookup.environment} deploys into {lookup.account}; use "
            f"read-only credentials of {lookup.account} (iam/neuronkit-pin-policy.json)"
        )
    try:
        cluster = session.client("eks").describe_cluster(name=lookup.cluster_name)["cluster"]
    except Exception as err:
        if "ResourceNotFound" in type(err).__name__ or "ResourceNotFound" in str(err):
            return FoundCluster(lookup, {})
        raise PinError(f"DescribeCluster {lookup.cluster_name} failed in {lookup.region} ({err})") from None
    return FoundCluster(lookup, from_describe(cluster))
