"""The ``pilot:`` section: one workload run side by side on a Trainium pool and a GPU pool (docs/adoption.md).

The two sides are the AWS Batch queues of one training cluster with ``scheduler: batch`` and a
``gpu_pool``: the same subnet, storage and data, each with its own image. ``neuronkit pilot start``
submits the workload to both with the same step budget; jobs report their steps with
``neuronkit.adoption.pilot_metrics``; ``neuronkit pilot report`` compares them.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from neuronkit.config.base import NAME_RE, Strict
from neuronkit.config.training import TrainingCluster


class Pilot(Strict):
    """A workload to compare on Trainium and on GPUs."""

    name: Annotated[str, Field(pattern=NAME_RE)] = Field(description="The workload under test, e.g. llama-finetune.")
    cluster: str = Field(description="The training cluster (scheduler: batch, with a gpu_pool) whose two queues run it.")
    steps: int = Field(ge=1, le=10_000_000, description="The same step budget on both sides.")
    nodes: int = Field(default=1, ge=1, description="Nodes per side (at most each pool's max_size).")
    data_s3_prefix: str = Field(default="pilot/", description="Where both sides read their data, under the datasets bucket.")
    neuron_command: str = Field(min_length=1, description="The training command in the Neuron image.")
    gpu_command: str = Field(min_length=1, description="The training command in the CUDA image.")
    max_loss_gap_percent: float = Field(
        default=2.0,
        gt=0,
        le=100,
        description="The pilot report accepts Trainium when its loss at the last common step is within this share of the GPU's.",
    )


def pilot_problems(pilot: Pilot | None, clusters: list[TrainingCluster]) -> list[tuple[str, str]]:
    if pilot is None:
        return []
    by_name = {c.name: c for c in clusters}
    c = by_name.get(pilot.cluster)
    if c is None:
        known = ", ".join(by_name) or "none"
        return [("pilot.cluster", f"'{pilot.cluster}' is not a training cluster of this file (clusters: {known})")]
    out: list[tuple[str, str]] = []
    if c.scheduler != "batch":
        out.append(("pilot.cluster", f"{c.name} runs scheduler: {c.scheduler}; a pilot submits jobs, so set scheduler: batch"))
    if c.gpu_pool is None:
        out.append(("pilot.cluster", f"{c.name} has no gpu_pool; add one (the GPU side of the pilot)"))
    sizes = [("training", c.max_size)] + ([("gpu_pool", c.gpu_pool.max_size)] if c.gpu_pool is not None else [])
    for side, size in sizes:
        if pilot.nodes > size:
            out.append(("pilot.nodes", f"{pilot.nodes} is more than {c.name}'s {side} max_size {size}; lower nodes or raise it"))
    if pilot.data_s3_prefix.startswith(("s3://", "/")) or not pilot.data_s3_prefix.endswith("/"):
        out.append(("pilot.data_s3_prefix", f"'{pilot.data_s3_prefix}' must be a key prefix ending in '/', e.g. pilot/"))
    return out
