"""NodePoolSpec: what nodes a pool runs and how many, checked once where it is built."""

from __future__ import annotations

from dataclasses import dataclass

from neuronkit import catalog
from neuronkit.constructs.launch_template import AmiSpec


@dataclass(frozen=True)
class NodePoolSpec:
    """The nodes of a training pool (TrainingCluster, BatchTrainingCluster).

    ``instance_type`` must be in the catalog; ``min_size`` (default 0) <= ``desired_size`` (default
    ``min_size``) <= ``max_size``. ``ami`` defaults to the construct's choice (the Neuron DLAMI of the
    newest release that supports training on the type, the GPU DLAMI, or the ECS image on Batch).
    ``root_volume_gib`` defaults to, and may not be below, the catalog's minimum for the accelerator
    (512 GiB on Trainium: DLAMI plus compiler cache). Mistakes raise ValueError when the spec is made.
    """

    instance_type: str
    max_size: int
    min_size: int = 0
    desired_size: int | None = None
    ami: AmiSpec | None = None
    root_volume_gib: int | None = None

    def __post_init__(self) -> None:
        facts = self.facts
        if self.min_size < 0:
            raise ValueError(f"min_size {self.min_size} is negative")
        if self.min_size > self.max_size:
            raise ValueError(f"min_size {self.min_size} is greater than max_size {self.max_size}")
        if self.desired_size is not None and not self.min_size <= self.desired_size <= self.max_size:
            raise ValueError(f"desired_size {self.desired_size} must lie between min_size and max_size")
        if self.root_volume_gib is not None and self.root_volume_gib < self.minimum_root_gib:
            raise ValueError(
                f"root_volume_gib {self.root_volume_gib} GiB is below the {self.minimum_root_gib} GiB "
                f"a {facts.accelerator} node needs"
            )

    @property
    def facts(self) -> catalog.InstanceType:
        return catalog.get(self.instance_type)

    @property
    def minimum_root_gib(self) -> int:
        minimum: int = catalog.capacity_facts()["min_root_volume_gib"].get(self.facts.accelerator, 100)
        return minimum

    @property
    def root_gib(self) -> int:
        return self.root_volume_gib if self.root_volume_gib is not None else self.minimum_root_gib
