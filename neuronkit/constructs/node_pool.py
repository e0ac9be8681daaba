"""NodePoolSpec: what nodes a pool runs and how many, checked once where it is built."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from neuronkit import catalog
from neuronkit.constructs.launch_template import AmiSpec


def _check_sizes(min_size: int, max_size: int, desired_size: int | None) -> None:
    if min_size < 0:
        raise ValueError(f"min_size {min_size} is negative")
    if min_size > max_size:
        raise ValueError(f"min_size {min_size} is greater than max_size {max_size}")
    if desired_size is not None and not min_size <= desired_size <= max_size:
        raise ValueError(f"desired_size {desired_size} must lie between min_size and max_size")


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
        _check_sizes(self.min_size, self.max_size, self.desired_size)
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
        return catalog.min_root_volume_gib(self.facts)

    @property
    def root_gib(self) -> int:
        return self.root_volume_gib if self.root_volume_gib is not None else self.minimum_root_gib


@dataclass(frozen=True)
class FleetNodesSpec:
    """The nodes of an inference fleet (InferenceFleet).

    ``neuron_types`` (Inferentia or Trainium, at least one) in the order the group tries them, then the GPU
    ``fallback_types`` it launches only when no Neuron type has capacity. ``min_size`` (default 1) <=
    ``desired_size`` (default ``min_size``) <= ``max_size``. ``neuron_ami`` and ``gpu_ami`` default to the
    catalog's images; ``root_volume_gib`` defaults to what each type's AMI, image, weights and compiled
    artifacts need. Mistakes raise ValueError when the spec is made.
    """

    neuron_types: Sequence[str]
    max_size: int
    fallback_types: Sequence[str] = ()
    min_size: int = 1
    desired_size: int | None = None
    neuron_ami: AmiSpec | None = None
    gpu_ami: AmiSpec | None = None
    root_volume_gib: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "neuron_types", tuple(self.neuron_types))
        object.__setattr__(self, "fallback_types", tuple(self.fallback_types))
        types = catalog.instance_types()
        if not self.neuron_types:
            raise ValueError("neuron_types: give at least one Inferentia or Trainium type")
        for t in self.neuron_types:
            if t not in types or not types[t].is_neuron:
                raise ValueError(f"neuron_types: '{t}' is not an Inferentia or Trainium type")
        for t in self.fallback_types:
            if t not in types or types[t].gpus == 0:
                raise ValueError(f"fallback_types: '{t}' has no GPU; fallback types must be GPU types")
        _check_sizes(self.min_size, self.max_size, self.desired_size)
        largest = catalog.max_root_volume_gib()
        if self.root_volume_gib is not None and not 8 <= self.root_volume_gib <= largest:
            raise ValueError(f"root_volume_gib {self.root_volume_gib} must lie between 8 and {largest} GiB")
