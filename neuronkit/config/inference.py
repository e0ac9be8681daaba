"""inference: Inferentia fleets with GPU fallback and their rules against the catalog."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field

from neuronkit import catalog
from neuronkit.config.base import AZ_ID_RE, CRON_RE, SERVE_COMMAND_MAX, Strict, _offered
from neuronkit.config.network import Network
from neuronkit.config.neuron import Workload
from neuronkit.config.training import Ami, _family_problem, _gpu_types


class HealthCheck(Strict):
    path: str = Field(default="/health", pattern=r"^/")
    port: int = Field(default=8080, ge=1, le=65535)
    protocol: Literal["HTTP", "TCP"] = "HTTP"
    interval_seconds: int = Field(default=15, ge=5, le=300)
    healthy_threshold: int = Field(default=2, ge=2, le=10)
    unhealthy_threshold: int = Field(default=3, ge=2, le=10)


class Serve(Strict):
    """Commands that start the model server, per accelerator family (run as a systemd unit)."""

    neuron: str = Field(description="Server command on Inferentia/Trainium nodes; $MODEL_DIR holds the model.")
    gpu: str | None = Field(default=None, description="Server command on GPU fallback nodes (required with fallback_types).")
    gpu_port: int | None = Field(default=None, description="Only to state it: GPU nodes must serve on the fleet's port.")
    gpu_health_check_path: str | None = Field(default=None, description="Only to state it: must equal health_check.path.")


class ScheduledCapacity(Strict):
    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,31}$")]
    cron: str = Field(description="Recurrence in cron format, e.g. '0 8 * * 1-5'.")
    min_size: int | None = Field(default=None, ge=0)
    max_size: int | None = Field(default=None, ge=0)
    desired_size: int | None = Field(default=None, ge=0)


class InferenceFleet(Strict):
    """An Auto Scaling group of Inferentia instances behind a load balancer, with GPU fallback."""

    name: Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,15}$")] = "serve"
    neuron_types: list[str] = Field(min_length=1, description="Inferentia (or Trainium) types, in priority order.")
    fallback_types: list[str] = Field(default_factory=list, description="GPU types launched when Neuron capacity is short.")
    az_ids: list[Annotated[str, Field(pattern=AZ_ID_RE)]] = Field(min_length=2, description="At least two AZ IDs.")
    min_size: int = Field(default=1, ge=0)
    max_size: int = Field(ge=1)
    desired_size: int | None = None
    load_balancer: Literal["alb", "nlb"] = Field(default="alb", description="alb: HTTP servers; nlb: gRPC/TCP servers.")
    internal: bool = True
    port: int = Field(default=8080, ge=1, le=65535)
    health_check: HealthCheck = HealthCheck()
    health_check_grace_seconds: int = Field(default=900, ge=60, description="Neuron models can take minutes to load.")
    warmup_seconds: int = Field(default=600, ge=0, description="Instance warm-up before a node counts for scaling.")
    model_s3_prefix: str = Field(description="Compiled Neuron artifacts under the artifacts bucket, e.g. models/llama/neuron/.")
    gpu_model_s3_prefix: str | None = Field(default=None, description="Model for GPU nodes; defaults to model_s3_prefix.")
    serve: Serve
    requests_per_target: int = Field(default=100, ge=1, description="Target tracking on ALB requests per target per minute.")
    min_healthy_percentage: int = Field(default=90, ge=0, le=100, description="Instance refresh keeps this much in service.")
    scheduled_actions: list[ScheduledCapacity] = Field(default_factory=list)
    neuron_ami: Ami = Ami()
    gpu_ami: Ami = Ami()
    rebalance_minutes: int = Field(default=30, ge=5, description="How often the rebalancer moves GPU nodes back to Neuron.")
    neuron_sdk: str | None = Field(
        default=None, description="Neuron SDK release of this fleet (overrides the top-level neuron_sdk), e.g. 2.28.1."
    )
    workload: Workload = Field(
        default="vllm-serving", description="What the fleet serves with (checked against the release matrix)."
    )


def _inference_problems(
    region: str | None, network: Network | None, fleets: list[tuple[int, InferenceFleet]]
) -> list[tuple[str, str]]:
    """Checks of inference fleets against the catalog, the region and network.az_ids."""
    out: list[tuple[str, str]] = []
    types = catalog.instance_types()
    neuron_ok = ", ".join(sorted(n for n, t in types.items() if t.accelerator == "inferentia" and t.family != "inf1"))
    names: dict[str, int] = {}
    for i, f in fleets:
        loc = f"inference[{i}]"

        def add(key: str, msg: str, loc: str = loc) -> None:
            out.append((f"{loc}.{key}" if key else loc, msg))

        if f.name in names:
            add("name", f"'{f.name}' is already the name of inference[{names[f.name]}]; give each fleet its own name")
        names.setdefault(f.name, i)
        for j, t in enumerate(f.neuron_types):
            it = types.get(t)
            if it is None or not it.is_neuron:
                add(f"neuron_types[{j}]", f"'{t}' is not an Inferentia or Trainium type; use e.g. {neuron_ok}")
            else:
                problem = _family_problem(f.neuron_ami, "neuron", t)
                if problem:
                    add("neuron_ami.family", problem)
                _offered(add, f"neuron_types[{j}]", t, f.az_ids, region)
        for j, t in enumerate(f.fallback_types):
            it = types.get(t)
            if it is None or it.accelerator != "gpu" or it.gpus == 0:
                add(f"fallback_types[{j}]", f"'{t}' has no GPU; fallback types must be GPU types: {', '.join(_gpu_types())}")
            else:
                problem = _family_problem(f.gpu_ami, "gpu", t)
                if problem:
                    add("gpu_ami.family", problem)
                _offered(add, f"fallback_types[{j}]", t, f.az_ids, region)
        if f.fallback_types and not f.serve.gpu:
            add("serve.gpu", "required when fallback_types is set: the command that starts the server on GPU nodes")
        if f.load_balancer == "alb" and f.health_check.protocol != "HTTP":
            add("health_check.protocol", "an ALB checks health over HTTP; use protocol: HTTP or load_balancer: nlb")
        if not f.internal:
            add(
                "internal",
                "internet-facing load balancers are not supported (nodes sit in private subnets); "
                "set internal: true and front the fleet with your own edge (API Gateway, CloudFront)",
            )
        for key, command in (("serve.neuron", f.serve.neuron), ("serve.gpu", f.serve.gpu or "")):
            if "'" in command or "\n" in command:
                add(
                    key,
                    "may not contain single quotes or newlines (it is written into the node's environment file); "
                    "use double quotes, or put a start script in the model prefix and run that",
                )
            elif len(command) > SERVE_COMMAND_MAX:
                add(
                    key,
                    f"{len(command)} characters is too long (at most {SERVE_COMMAND_MAX}); put a start script in the model prefix",
                )
        for key, prefix in (("model_s3_prefix", f.model_s3_prefix), ("gpu_model_s3_prefix", f.gpu_model_s3_prefix or "x/")):
            if not re.match(r"^[A-Za-z0-9!_.*()/-]+/$", prefix) or prefix.startswith("/"):
                add(
                    key,
                    f"'{prefix}' is not a key prefix of the artifacts bucket; use e.g. models/llama-3-8b/neuron/ (no leading /, ends with /)",
                )
        seen_actions: set[str] = set()
        for j, action in enumerate(f.scheduled_actions):
            if action.name in seen_actions:
                add(f"scheduled_actions[{j}].name", f"'{action.name}' is used twice; give each scheduled action its own name")
            seen_actions.add(action.name)
            if not re.match(CRON_RE, action.cron):
                add(
                    f"scheduled_actions[{j}].cron",
                    f"'{action.cron}' is not a cron expression of 5 fields (minute hour day month weekday), e.g. '0 8 * * 1-5'",
                )
            if action.min_size is None and action.max_size is None and action.desired_size is None:
                add(f"scheduled_actions[{j}]", "sets no size; give min_size, max_size or desired_size")
        if f.serve.gpu_port is not None and f.serve.gpu_port != f.port:
            add(
                "serve.gpu_port",
                f"GPU nodes would serve on {f.serve.gpu_port} but Neuron nodes on {f.port}; one target group serves both, "
                "so start both servers on the same port",
            )
        if f.serve.gpu_health_check_path is not None and f.serve.gpu_health_check_path != f.health_check.path:
            add(
                "serve.gpu_health_check_path",
                f"'{f.serve.gpu_health_check_path}' differs from health_check.path '{f.health_check.path}'; one target group "
                "checks both families, so serve the same health path on both",
            )
        if f.health_check.port != f.port:
            add(
                "health_check.port",
                f"{f.health_check.port} differs from port {f.port}; Neuron and GPU nodes share one target group, "
                "so the server must answer health checks on its serving port",
            )
        if f.min_size > f.max_size:
            add("min_size", f"min_size {f.min_size} is greater than max_size {f.max_size}; raise max_size or lower min_size")
        elif f.desired_size is not None and not f.min_size <= f.desired_size <= f.max_size:
            add("desired_size", f"{f.desired_size} must lie between min_size {f.min_size} and max_size {f.max_size}")
        if network is not None:
            for j, az in enumerate(f.az_ids):
                if az not in network.az_ids:
                    add(f"az_ids[{j}]", f"'{az}' is not in network.az_ids; add it there")
    return out
