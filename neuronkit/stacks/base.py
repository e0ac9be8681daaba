"""What every neuronkit stack shares: account/region from the file and cost-allocation tags."""

from __future__ import annotations

from typing import Any

from aws_cdk import Environment as CdkEnvironment
from aws_cdk import Stack, Tags
from constructs import Construct

from neuronkit.config import Environment
from neuronkit.config.storage import bucket_names as storage_bucket_names


class NeuronkitStack(Stack):
    def __init__(self, scope: Construct, id: str, *, config: Environment, description: str, **kwargs: Any) -> None:
        super().__init__(
            scope,
            id,
            env=CdkEnvironment(account=config.account, region=config.region),
            description=f"neuronkit {config.name}: {description}",
            # Stack tags (CloudFormation applies them to every resource it creates, and the rehearsal and
            # summary find a stack's environment by them) given explicitly, as
            # @aws-cdk/core:explicitStackTags requires; Tags.of below tags the template's resources.
            tags=environment_tags(config),
            **kwargs,
        )
        self.config = config
        tags = Tags.of(self)  # one Tags object for all of them: each Tags.of is a round trip to the jsii kernel
        for key, value in environment_tags(config).items():
            tags.add(key, value)


def environment_tags(config: Environment) -> dict[str, str]:
    """Cost-allocation tags on every resource (activate them in the billing console)."""
    return {**config.tags, "neuronkit:environment": config.name, "cost-center": config.cost_center}


def bucket_names(config: Environment) -> dict[str, str]:
    """Deterministic bucket names (globally unique through account and region; at most 63 chars)."""
    return storage_bucket_names(config.name, config.account, config.region)
