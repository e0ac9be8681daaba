"""The ``pilot:`` section: a workload run side by side on Neuron and on GPUs (docs/adoption.md).

Training (``cluster:``): the two sides are the AWS Batch queues of one training cluster with ``scheduler:
batch`` and a ``gpu_pool``: the same subnet, storage and data, each with its own image. ``neuronkit pilot
start`` submits the workload to both with the same step budget; jobs report their steps with
``neuronkit.adoption.pilot_metrics``; ``neuronkit pilot report`` compares the mean loss of the last steps.

Serving (``serving:``): the named inference fleet is the Neuron side; the stack adds a GPU twin of it (fleet
``pilot-gpu``: the same model, the catalog's pinned GPU vLLM image and profile, a fixed size) and a load job
(an ECS task on Fargate in the VPC) that waits for both endpoints, warms them up, scores the evaluation set and
sweeps request rates with ``vllm bench serve``. The SLO (``slo_ttft_ms``, ``slo_itl_ms``) picks the operating
point the report prices.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from neuronkit.catalog import fit, serving
from neuronkit.config.base import NAME_RE, Strict
from neuronkit.config.inference import InferenceFleet, model_spec
from neuronkit.config.training import TrainingCluster

# The fleet name of the GPU twin the serving pilot adds beside the named fleet.
GPU_TWIN = "pilot-gpu"


class ServingPilot(Strict):
    """The same model served by a Neuron fleet and its GPU twin, measured by one load job."""

    fleet: str = Field(description="The inference fleet (with model:) whose first Neuron type is the Neuron side.")
    gpu_type: str | None = Field(
        default=None, description="The GPU side's type; defaults to the fleet's first fallback_types entry."
    )
    nodes: int = Field(default=1, ge=1, le=16, description="Nodes of the GPU twin; the fleet should run as many.")
    input_tokens: int | None = Field(
        default=None,
        ge=1,
        description="Prompt length of vLLM's random dataset (--random-input-len); defaults to the fleet's "
        "max_model_len minus output_tokens, at most 1024.",
    )
    output_tokens: int = Field(default=256, ge=1, description="Output length (--random-output-len).")
    request_rates: list[Annotated[float, Field(gt=0, le=10_000)]] = Field(
        default_factory=lambda: [1.0, 2.0, 4.0, 8.0, 16.0],
        min_length=1,
        description="Request rates (requests per second, Poisson arrivals) swept on both sides, in order.",
    )
    prompts_per_rate: int = Field(default=200, ge=10, le=100_000, description="Requests sent at each rate (--num-prompts).")
    seed: int = Field(
        default=0, ge=0, description="Seed of the random dataset and arrivals (--seed): same prompts on both sides."
    )
    warmup_requests: int = Field(default=16, ge=1, le=10_000, description="Requests each side serves before measuring.")
    dataset_s3_key: str | None = Field(
        default=None,
        description="Optional: your own prompts (JSON lines with a 'prompt' key, vLLM's custom dataset) under the "
        "datasets bucket, swept after the random dataset at the same rates.",
    )
    evalset_s3_key: str | None = Field(
        default=None,
        description="Optional: your own evaluation set (JSON lines: prompt, answer, optional also and id) under the "
        "datasets bucket, scored on both sides beside the kit's (docs/adoption.md).",
    )
    rate_resolution: float | None = Field(
        default=None,
        gt=0,
        le=100,
        description="The adaptive sweep bisects each side's highest rate within the SLO to this many requests per "
        "second (default: catalog/pilot.yaml sweep.resolution_rps).",
    )
    max_rate: float | None = Field(
        default=None,
        gt=0,
        le=10_000,
        description="The highest rate the adaptive sweep tries (default: catalog/pilot.yaml sweep.max_rate_rps, or the "
        "highest request_rates entry when that is higher).",
    )
    max_quality_drop_points: float = Field(
        default=5.0,
        ge=0,
        le=100,
        description="The report accepts Neuron when its score on the evaluation set is at most this many percentage "
        "points below the GPU's.",
    )


class Pilot(Strict):
    """A workload to compare on Neuron and on GPUs: training (cluster:), serving (serving:) or both."""

    name: Annotated[str, Field(pattern=NAME_RE)] = Field(description="The workload under test, e.g. llama-finetune.")
    cluster: str | None = Field(
        default=None, description="Training: the cluster (scheduler: batch, with a gpu_pool) whose two queues run it."
    )
    steps: int | None = Field(default=None, ge=1, le=10_000_000, description="Training: the same step budget on both sides.")
    nodes: int = Field(default=1, ge=1, description="Training: nodes per side (at most each pool's max_size).")
    data_s3_prefix: str = Field(default="pilot/", description="Where both sides read their data, under the datasets bucket.")
    neuron_command: str | None = Field(default=None, min_length=1, description="Training: the command in the Neuron image.")
    gpu_command: str | None = Field(default=None, min_length=1, description="Training: the command in the CUDA image.")
    max_loss_gap_percent: float = Field(
        default=2.0,
        gt=0,
        le=100,
        description="Training: the report accepts Trainium when its mean loss over the last loss_window_steps steps "
        "both sides reached is within this share of the GPU's.",
    )
    loss_window_steps: int = Field(
        default=50, ge=1, le=1_000_000, description="Training: how many of the last common steps the loss is averaged over."
    )
    serving: ServingPilot | None = Field(default=None, description="Serving: the fleet and the load to measure it with.")
    slo_ttft_ms: float = Field(
        default=2000.0, gt=0, description="Serving: p99 time to first token (ms) an operating point must stay under."
    )
    slo_itl_ms: float = Field(
        default=100.0, gt=0, description="Serving: p99 inter-token latency (ms) an operating point must stay under."
    )


def pilot_problems(
    pilot: Pilot | None, clusters: list[TrainingCluster], fleets: list[InferenceFleet] | None = None
) -> list[tuple[str, str]]:
    if pilot is None:
        return []
    if pilot.cluster is None and pilot.serving is None:
        return [("pilot", "name a training cluster (cluster:) or a serving fleet (serving.fleet:) to pilot")]
    out: list[tuple[str, str]] = []
    if pilot.cluster is not None:
        out += _training_problems(pilot, clusters)
    if pilot.serving is not None:
        out += _serving_problems(pilot.serving, fleets or [])
    return out


def _training_problems(pilot: Pilot, clusters: list[TrainingCluster]) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    for key in ("steps", "neuron_command", "gpu_command"):
        if getattr(pilot, key) is None:
            out.append((f"pilot.{key}", "required with cluster: (the training pilot)"))
    by_name = {c.name: c for c in clusters}
    c = by_name.get(pilot.cluster or "")
    if c is None:
        known = ", ".join(by_name) or "none"
        return [("pilot.cluster", f"'{pilot.cluster}' is not a training cluster of this file (clusters: {known})")] + out
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


def gpu_type(s: ServingPilot, fleet: InferenceFleet) -> str | None:
    return s.gpu_type or (fleet.fallback_types[0] if fleet.fallback_types else None)


def max_model_len(fleet: InferenceFleet, instance_type: str) -> int:
    assert fleet.model is not None
    override = fleet.profiles.get(instance_type)
    return (override.max_model_len if override and override.max_model_len else None) or fleet.model.max_model_len


def lengths(s: ServingPilot, fleet: InferenceFleet) -> tuple[int, int]:
    """(input, output) tokens of the load: the file's, or what the shorter context of the two sides leaves."""
    g = gpu_type(s, fleet)
    context = min(max_model_len(fleet, t) for t in [fleet.neuron_types[0]] + ([g] if g else []))
    return (s.input_tokens or max(1, min(1024, context - s.output_tokens)), s.output_tokens)


def _serving_problems(s: ServingPilot, fleets: list[InferenceFleet]) -> list[tuple[str, str]]:
    by_name = {f.name: f for f in fleets}
    if GPU_TWIN in by_name:
        return [("pilot.serving", f"an inference fleet is named {GPU_TWIN}, the name of the pilot's GPU twin; rename it")]
    fleet = by_name.get(s.fleet)
    if fleet is None:
        known = ", ".join(by_name) or "none"
        return [("pilot.serving.fleet", f"'{s.fleet}' is not an inference fleet of this file (fleets: {known})")]
    if fleet.model is None:
        return [("pilot.serving.fleet", f"{fleet.name} brings its own server (serve:); a serving pilot needs model:")]
    out: list[tuple[str, str]] = []
    if fleet.tls is not None:
        out.append(
            (
                "pilot.serving.fleet",
                f"{fleet.name} has tls:; the load job calls the load balancer by its DNS name over HTTP, so pilot a fleet without tls (a pilot environment of its own)",
            )
        )
    g = gpu_type(s, fleet)
    if g is None:
        out.append(("pilot.serving.gpu_type", f"{fleet.name} has no fallback_types; name the GPU side's type"))
    elif serving.accelerator_of(g) != "gpu":
        out.append(
            (
                "pilot.serving.gpu_type",
                f"'{g}' is not a GPU type; name one, e.g. {fleet.fallback_types[0] if fleet.fallback_types else 'g6e.12xlarge'}",
            )
        )
    else:
        # The fit rule (catalog/fit.py) at the GPU twin's own profile, as validate checks the fleet's types and
        # assess proposed them: TP, context and batch from the fleet's profiles entry for the type.
        o = fleet.profiles.get(g)
        problem = fit.fit_problem(
            _model(fleet), g, tp=o.tensor_parallel if o else None, max_model_len=o.max_model_len if o else None,
            max_num_seqs=o.max_num_seqs if o else None,
        )  # fmt: skip
        if problem:
            out.append(("pilot.serving.gpu_type", problem))
    if s.nodes > fleet.max_size:
        out.append(
            ("pilot.serving.nodes", f"{s.nodes} is more than {fleet.name}'s max_size {fleet.max_size}; the two sides must match")
        )
    if not out:
        n_in, n_out = lengths(s, fleet)
        context = min(max_model_len(fleet, t) for t in (fleet.neuron_types[0], g or fleet.neuron_types[0]))
        if n_in + n_out > context:
            out.append(
                (
                    "pilot.serving.input_tokens",
                    f"{n_in} + output_tokens {n_out} exceed the {context}-token context the sides serve; lower them",
                )
            )
    if s.dataset_s3_key is not None and (s.dataset_s3_key.startswith(("s3://", "/")) or s.dataset_s3_key.endswith("/")):
        out.append(
            (
                "pilot.serving.dataset_s3_key",
                f"'{s.dataset_s3_key}' must be an object key under the datasets bucket, e.g. pilot/prompts.jsonl",
            )
        )
    if s.evalset_s3_key is not None and (s.evalset_s3_key.startswith(("s3://", "/")) or not s.evalset_s3_key.endswith(".jsonl")):
        out.append(
            (
                "pilot.serving.evalset_s3_key",
                f"'{s.evalset_s3_key}' must be a .jsonl object key under the datasets bucket, e.g. pilot/evalset.jsonl",
            )
        )
    if s.max_rate is not None and s.max_rate < max(s.request_rates):
        out.append(
            ("pilot.serving.max_rate", f"{s.max_rate:g} is below the highest request rate {max(s.request_rates):g}; raise it")
        )
    if list(s.request_rates) != sorted(set(s.request_rates)):
        out.append(("pilot.serving.request_rates", "give distinct rates in increasing order, e.g. [1, 2, 4, 8]"))
    return out


def _model(fleet: InferenceFleet) -> serving.ModelSpec:
    spec = model_spec(fleet)
    assert spec is not None
    return spec
