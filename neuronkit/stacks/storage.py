from __future__ import annotations

from typing import Any

from constructs import Construct

from neuronkit.config import Environment
from neuronkit.constructs.storage import LustreSpec, TrainingStorage
from neuronkit.stacks.base import NeuronkitStack, bucket_names
from neuronkit.stacks.network import NetworkStack


class StorageStack(NeuronkitStack):
    """Stateful resources only, so that no compute change can replace them."""

    def __init__(self, scope: Construct, id: str, *, config: Environment, network: NetworkStack, **kwargs: Any) -> None:
        super().__init__(scope, id, config=config, description="storage (retained on delete)", **kwargs)
        lustre = config.storage.lustre
        az = config.lustre_az_id
        self.storage = TrainingStorage(
            self,
            "Storage",
            vpc=network.network.vpc,
            subnet_id=network.network.subnet_ids[az] if az else None,
            lustre=(
                LustreSpec(
                    deployment_type=lustre.deployment_type,
                    size_gib=lustre.size_gib,
                    throughput_mbps_per_tib=lustre.throughput_mbps_per_tib,
                    link_checkpoints=lustre.link_checkpoints,
                )
                if lustre
                else None
            ),
            checkpoint_noncurrent_days=config.storage.checkpoint_noncurrent_days,
            datasets_versioned=config.storage.datasets_versioned,
            bucket_names=bucket_names(config),
        )
