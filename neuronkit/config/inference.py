"""inference: Inferentia fleets with GPU fallback and their rules against the catalog."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import Field

from neuronkit import catalog
from neuronkit.catalog import fit, releases, serving
from neuronkit.config.base import AZ_ID_RE, CRON_RE, SERVE_COMMAND_MAX, Strict, _offered
from neuronkit.config.network import Network
from neuronkit.config.neuron import Workload, lnc_problem
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


class Model(Strict):
    """The model the fleet serves with the kit's pinned vLLM containers (docs/serving.md)."""

    id: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,127}$",
        description="The model's name as clients ask for it, e.g. its Hugging Face id meta-llama/Llama-3.1-8B-Instruct.",
    )
    s3_prefix: str = Field(description="Its weights (Hugging Face format) under the artifacts bucket, e.g. models/llama-3.1-8b/.")
    parameters_billion: float = Field(gt=0, le=2000, description="Parameter count in billions, e.g. 70.6 (sizes the fit check).")
    dtype: Literal["bfloat16", "float16", "float32", "fp8", "int8"] = Field(
        default="bfloat16", description="Weight type as served (bytes per parameter)."
    )
    max_model_len: int = Field(default=4096, ge=128, le=1048576, description="Context length vLLM serves (prompt + output).")
    max_num_seqs: int = Field(default=8, ge=1, le=1024, description="Sequences vLLM batches at once.")


class Profile(Strict):
    """Per-type overrides of what the kit derives (the tensor-parallel degree defaults to the type's NeuronCores or GPUs)."""

    tensor_parallel: int | None = Field(default=None, ge=1, le=512)
    max_model_len: int | None = Field(default=None, ge=128, le=1048576)
    max_num_seqs: int | None = Field(default=None, ge=1, le=1024)


class Images(Strict):
    """Where nodes pull the serving containers from."""

    registry: Literal["pull-through"] | str = Field(
        default="pull-through",
        pattern=r"^(pull-through|[0-9]{12}\.dkr\.ecr\.[a-z0-9-]+\.amazonaws\.com(/[a-z0-9._/-]+)?)$",
        description="pull-through: an ECR pull-through cache of ECR Public the stack creates; or your own ECR "
        "registry/prefix (ACCOUNT.dkr.ecr.REGION.amazonaws.com/mirror) holding the same repositories and tags.",
    )
    neuron: str | None = Field(default=None, description="Override the release matrix's Neuron vLLM container (pinned tag).")
    gpu: str | None = Field(default=None, description="Override the catalog's GPU vLLM container (pinned tag).")


class Tls(Strict):
    certificate_arn: str = Field(
        pattern=r"^arn:aws[a-z-]*:acm:[a-z0-9-]+:[0-9]{12}:certificate/[0-9a-f-]{36}$",
        description="ACM certificate of the listener, e.g. arn:aws:acm:us-east-1:111111111111:certificate/<uuid>.",
    )
    port: int = Field(default=443, ge=1, le=65535, description="Listener port for HTTPS (TLS on an NLB).")


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
    idle_timeout_seconds: int | None = Field(
        default=None,
        ge=1,
        le=4000,
        description="ALB idle timeout (1 to 4000 s; default 600, long enough for a non-streaming LLM completion). "
        "The server's keep-alive is set longer. NLBs have a fixed 350 s.",
    )
    health_check: HealthCheck = HealthCheck()
    health_check_grace_seconds: int | None = Field(
        default=None, ge=60, le=7200, description="Defaults to the boot time derived from the model's size (serve: 900)."
    )
    warmup_seconds: int = Field(default=600, ge=0, description="Instance warm-up before a node counts for scaling.")
    model: Model | None = Field(
        default=None, description="The model, served by the kit's pinned vLLM containers (or give serve)."
    )
    profiles: dict[str, Profile] = Field(
        default_factory=dict, description="Per-type overrides, e.g. inf2.24xlarge: {max_model_len: 4096}."
    )
    images: Images = Images()
    precompile: bool = Field(
        default=True,
        description="With model: compile each Neuron type's new compiled-artifact key on a one-node group before the "
        "rolling update starts (docs/serving.md); false leaves the compile to the update's first node.",
    )
    tls: Tls | None = Field(
        default=None, description="Terminate TLS on the listener (prod); without it the listener is plain HTTP."
    )
    root_volume_gib: int | None = Field(
        default=None,
        ge=8,
        le=catalog.max_root_volume_gib(),
        description="Defaults to what AMI, image, weights and compiled artifacts need.",
    )
    model_s3_prefix: str | None = Field(default=None, description="With serve: your server's files under the artifacts bucket.")
    gpu_model_s3_prefix: str | None = Field(
        default=None, description="With serve: files for GPU nodes; defaults to model_s3_prefix."
    )
    serve: Serve | None = Field(default=None, description="Bring your own server commands instead of model (advanced).")
    p99_latency_seconds: float | None = Field(
        default=None,
        gt=0,
        description="The fleet's latency alarm (ALB only): p99 of the load balancer's target response time, in seconds, "
        "above which it fires after 5 minutes. A non-streaming completion counts whole, so take it from a benchmark "
        "of your prompts. Defaults to monitoring.alarms.p99_latency_ms when that is set, else to half the idle timeout "
        "(300 s), where completions start to be cut.",
    )
    requests_per_target: int = Field(
        default=100,
        ge=1,
        description="Requests per minute one serving replica takes: Auto Scaling target tracking on ALB requests per target; on EKS the KEDA trigger's target per Neuron replica.",
    )
    min_healthy_percentage: int = Field(default=90, ge=0, le=100, description="Instance refresh keeps this much in service.")
    scheduled_actions: list[ScheduledCapacity] = Field(default_factory=list)
    neuron_ami: Ami = Ami()
    gpu_ami: Ami = Ami()
    rebalance_minutes: int = Field(default=30, ge=5, description="How often the rebalancer moves GPU nodes back to Neuron.")
    lnc: Literal[1, 2] | None = Field(
        default=None,
        description="Logical NeuronCore setting of Trn2/Trn3 types (1 or 2; defaults to the catalog's, 2): the "
        "tensor-parallel degree counts logical cores (64 on trn2.48xlarge at 2), the node and container get it, and "
        "a change compiles a new key first.",
    )
    neuron_sdk: str | None = Field(
        default=None, description="Neuron SDK release of this fleet (overrides the top-level neuron_sdk), e.g. 2.28.1."
    )
    workload: Workload = Field(
        default="vllm-serving", description="What the fleet serves with (checked against the release matrix)."
    )
    spill_after_minutes: int = Field(
        default=5,
        ge=0,
        le=60,
        description="platform: eks: minutes Neuron pods stay unschedulable (or since a Neuron launch failed for "
        "capacity) before the GPU Deployment takes the shortfall; 0 spills at once, as the Auto Scaling group does.",
    )
    return_after_minutes: int | None = Field(
        default=None,
        ge=5,
        le=1440,
        description="platform: eks: minutes the Neuron shortfall must stay lower before the GPU replicas come down to "
        "it (zero once every Neuron replica is Ready); defaults to rebalance_minutes, as the rebalancer.",
    )

    @property
    def return_after(self) -> int:
        """Minutes before spilled GPU replicas come back down (return_after_minutes, else rebalance_minutes)."""
        return self.return_after_minutes if self.return_after_minutes is not None else self.rebalance_minutes


def _latency_problems(f: InferenceFleet) -> list[tuple[str, str]]:
    """The fleet's latency alarm threshold: only on an ALB, and below its idle timeout (a completion slower than that
    is cut with a 504 before its response time is measured)."""
    if f.p99_latency_seconds is None:
        return []
    if f.load_balancer == "nlb":
        return [
            ("p99_latency_seconds", "an NLB publishes no target response time to alarm on; remove it or use load_balancer: alb")
        ]
    idle = f.idle_timeout_seconds or int(serving.facts()["load_balancer"]["alb_idle_timeout_default_seconds"])
    if f.p99_latency_seconds < idle:
        return []
    return [
        (
            "p99_latency_seconds",
            f"{f.p99_latency_seconds:g} s is not below the listener's idle timeout of {idle} s, where the load balancer cuts "
            "a non-streaming completion (504) before it is measured; set it lower or raise idle_timeout_seconds",
        )
    ]


def latency_threshold_problems(environment_ms: int | None, fleets: list[tuple[int, InferenceFleet]]) -> list[tuple[str, str]]:
    """``monitoring.alarms.p99_latency_ms`` for the ALB fleets without their own threshold: below each one's idle
    timeout, as a fleet's own must be (one line per fleet it could never alarm for)."""
    if environment_ms is None:
        return []
    out = []
    for i, f in fleets:
        if f.load_balancer != "alb" or f.p99_latency_seconds is not None:
            continue
        idle = f.idle_timeout_seconds or int(serving.facts()["load_balancer"]["alb_idle_timeout_default_seconds"])
        if environment_ms / 1000 >= idle:
            out.append(
                (
                    "monitoring.alarms.p99_latency_ms",
                    f"{environment_ms} ms is not below inference[{i}]'s idle timeout of {idle} s, where the load balancer "
                    "cuts a non-streaming completion (504) before it is measured; lower it or set that fleet's "
                    "p99_latency_seconds",
                )
            )
    return out


def _inference_problems(
    region: str | None, network: Network | None, fleets: list[tuple[int, InferenceFleet]], platform: str = "asg"
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

        if platform != "eks":
            for key in sorted(f.model_fields_set & {"spill_after_minutes", "return_after_minutes"}):
                add(
                    key,
                    "only used with platform: eks (the Auto Scaling group falls back at once and the rebalancer "
                    "returns every rebalance_minutes); remove it",
                )
        if f.name in names:
            add("name", f"'{f.name}' is already the name of inference[{names[f.name]}]; give each fleet its own name")
        names.setdefault(f.name, i)
        for j, t in enumerate(f.neuron_types):
            it = types.get(t)
            named = catalog.named_types().get(t)
            if it is None and named is not None:
                add(
                    f"neuron_types[{j}]",
                    f"{t} is a {named['family']} type [{named['source']}] whose chips, memory and EFA are not in the "
                    "catalog (neuronkit/catalog/trainium.yaml named_types); run `neuronkit catalog refresh` with an "
                    f"account that offers it, or use e.g. {neuron_ok}",
                )
            elif it is None or not it.is_neuron:
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
        lnc = lnc_problem(list(f.neuron_types), f.lnc)
        if lnc:
            add("lnc", lnc)
        if f.serve is not None and f.fallback_types and not f.serve.gpu:
            add("serve.gpu", "required when fallback_types is set: the command that starts the server on GPU nodes")
        if f.load_balancer == "nlb" and f.idle_timeout_seconds is not None:
            add("idle_timeout_seconds", "an NLB's TCP idle timeout is fixed at 350 s; remove it or use load_balancer: alb")
        for key, msg in _latency_problems(f):
            add(key, msg)
        if f.load_balancer == "alb" and f.health_check.protocol != "HTTP":
            add("health_check.protocol", "an ALB checks health over HTTP; use protocol: HTTP or load_balancer: nlb")
        if not f.internal:
            add(
                "internal",
                "internet-facing load balancers are not supported (nodes sit in private subnets); "
                "set internal: true and front the fleet with your own edge (API Gateway, CloudFront)",
            )
        if f.model is not None and f.serve is not None:
            add(
                "serve", "give either model (the kit's pinned vLLM containers) or serve (your own commands), not both; remove one"
            )
        elif f.model is None and f.serve is None and platform != "eks":  # on EKS a fleet is a node group (for now)
            add(
                "model",
                "required: the model the fleet serves, e.g. {id: TinyLlama/TinyLlama-1.1B-Chat-v1.0, s3_prefix: models/tinyllama/, parameters_billion: 1.1}",
            )
        if f.serve is not None:
            out.extend(_serve_problems(loc, f))
        if f.model is not None:
            out.extend(_model_problems(loc, f, region))
        elif f.profiles:
            add("profiles", "per-type profiles need model; with serve, read $TENSOR_PARALLEL in your command instead")
        for t in f.profiles:
            if t not in f.neuron_types and t not in f.fallback_types:
                add(
                    f"profiles.{t}",
                    f"'{t}' is not one of the fleet's types ({', '.join(f.neuron_types + f.fallback_types)}); remove it",
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
        out.extend(_serve_port_problems(loc, f))
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


def _serve_problems(loc: str, f: InferenceFleet) -> list[tuple[str, str]]:
    """Checks of a fleet that brings its own server commands (serve)."""
    out: list[tuple[str, str]] = []
    assert f.serve is not None

    def add(key: str, msg: str) -> None:
        out.append((f"{loc}.{key}", msg))

    if f.model_s3_prefix is None:
        add("model_s3_prefix", "required with serve: your server's files under the artifacts bucket, e.g. models/my-model/")
    if "precompile" in f.model_fields_set:
        add(
            "precompile",
            "applies to a fleet served with model: (the kit compiles its keys); with serve: your server compiles nothing "
            "the kit knows of; remove precompile",
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
    for key, prefix in (("model_s3_prefix", f.model_s3_prefix or "x/"), ("gpu_model_s3_prefix", f.gpu_model_s3_prefix or "x/")):
        out.extend(_prefix_problem(f"{loc}.{key}", prefix))
    return out


def _serve_port_problems(loc: str, f: InferenceFleet) -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if f.serve is None:
        return out

    def add(key: str, msg: str) -> None:
        out.append((f"{loc}.{key}", msg))

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
    return out


def _prefix_problem(key: str, prefix: str) -> list[tuple[str, str]]:
    if not re.match(r"^[A-Za-z0-9!_.*()/-]+/$", prefix) or prefix.startswith("/"):
        return [
            (
                key,
                f"'{prefix}' is not a key prefix of the artifacts bucket; use e.g. models/llama-3-8b/neuron/ (no leading /, ends with /)",
            )
        ]
    return []


def model_spec(f: InferenceFleet) -> serving.ModelSpec | None:
    m = f.model
    if m is None:
        return None
    return serving.ModelSpec(
        id=m.id,
        s3_prefix=m.s3_prefix,
        parameters_billion=m.parameters_billion,
        dtype=m.dtype,
        max_model_len=m.max_model_len,
        max_num_seqs=m.max_num_seqs,
    )


def _tensor_parallel_problems(loc: str, f: InferenceFleet, t: str, kind: str) -> list[tuple[str, str]]:
    """A tensor-parallel override the type's server can use: at most its logical NeuronCores (physical / LNC) or
    GPUs, and a divisor of them (vLLM shards over equal groups of cores)."""
    override = f.profiles.get(t)
    if override is None or override.tensor_parallel is None:
        return []
    lnc = serving.lnc_of(t, f.lnc) if kind == "neuron" else None
    most = serving.accelerators(t, lnc)
    unit = (f"logical NeuronCores (LNC={lnc})" if lnc else "NeuronCores") if kind == "neuron" else "GPUs"
    key = f"{loc}.profiles.{t}.tensor_parallel"
    if override.tensor_parallel > most:
        return [(key, f"{override.tensor_parallel} exceeds the {most} {unit} of {t}; use at most {most}")]
    if most % override.tensor_parallel:
        fits = [d for d in range(1, most + 1) if most % d == 0]
        return [
            (key, f"{override.tensor_parallel} does not divide the {most} {unit} of {t}; use one of {', '.join(map(str, fits))}")
        ]
    return []


def _model_problems(loc: str, f: InferenceFleet, region: str | None) -> list[tuple[str, str]]:
    """The model fits every type of the fleet (accelerator memory, root volume); tensor-parallel overrides are possible."""
    out: list[tuple[str, str]] = []
    model = model_spec(f)
    assert model is not None and f.model is not None
    out.extend(_prefix_problem(f"{loc}.model.s3_prefix", f.model.s3_prefix))
    if f.model_s3_prefix or f.gpu_model_s3_prefix:
        out.append((f"{loc}.model_s3_prefix", "belongs to serve; with model, the weights are at model.s3_prefix: remove it"))
    types = catalog.instance_types()
    largest = ("", 0)  # the type needing the largest root volume above the file's root_volume_gib
    for key, kind, names in (("neuron_types", "neuron", f.neuron_types), ("fallback_types", "gpu", f.fallback_types)):
        others = serving.candidates(kind, region, list(f.az_ids))  # type: ignore[arg-type]
        for j, t in enumerate(names):
            it = types.get(t)
            if it is None or serving.accelerator_of(t) != kind:
                continue  # reported with the type
            tp_problems = _tensor_parallel_problems(loc, f, t, kind)
            if tp_problems:
                out.extend(tp_problems)
                continue
            o = f.profiles.get(t)
            problem = fit.fit_problem(
                model, t, others, tp=o.tensor_parallel if o else None, lnc=f.lnc if kind == "neuron" else None,
                max_model_len=o.max_model_len if o else None, max_num_seqs=o.max_num_seqs if o else None,
            )  # fmt: skip
            if problem:
                out.append((f"{loc}.{key}[{j}]", problem))
                continue
            need = serving.root_volume_gib(model, t)
            if f.root_volume_gib is not None and f.root_volume_gib < need and need > largest[1]:
                largest = (t, need)
    if largest[1]:
        t, need = largest
        compiled = " and the compiled artifacts" if serving.accelerator_of(t) == "neuron" else ""
        out.append(
            (
                f"{loc}.root_volume_gib",
                f"{f.root_volume_gib} GiB cannot hold the AMI, the container image, {model.weights_gib:.0f} GiB of weights{compiled} "
                f"on {t}; use at least {need} (or leave it out: the kit sizes it per type)",
            )
        )
    if f.images.gpu is None and f.fallback_types and serving.facts()["gpu_image"].endswith(":latest"):
        out.append((f"{loc}.images.gpu", "the catalog's GPU image is not pinned; name a tag"))
    for key, image in (("images.neuron", f.images.neuron), ("images.gpu", f.images.gpu)):
        if image is not None and (":" not in image.rsplit("/", 1)[-1] or image.endswith(":latest")):
            out.append((f"{loc}.{key}", f"'{image}' has no pinned tag; name one, e.g. {serving.facts()['gpu_image']}"))
        elif (
            image is not None
            and f.images.registry == "pull-through"
            and not image.startswith(serving.facts()["registry"]["upstream"] + "/")
        ):
            out.append(
                (
                    f"{loc}.{key}",
                    f"'{image}' is not on {serving.facts()['registry']['upstream']}, the only upstream of the pull-through cache; "
                    "set images.registry to your own ECR registry holding it",
                )
            )
    return out


def serving_image_problems(loc: str, release: releases.Release) -> list[tuple[str, str]]:
    """A model-served fleet needs its release's Neuron vLLM container, and the catalog must know how to start it."""
    image = serving.neuron_image(release)
    if image is None:
        with_image = [r.version for r in releases.releases() if serving.neuron_image(r) is not None]
        return [
            (
                f"{loc}.neuron_sdk",
                f"Neuron {release.version} has no vLLM container in the release matrix; use one of {', '.join(with_image)} "
                "or name a pinned image in images.neuron",
            )
        ]
    if serving.invocation(image) is None:
        return [(f"{loc}.images.neuron", f"the catalog does not say how to start {image}; add it to catalog/serving.yaml")]
    return []


def p99_latency_alarm_seconds(f: InferenceFleet, environment_ms: int | None) -> float:
    """The threshold of the fleet's latency alarm: its own ``p99_latency_seconds``, else the environment's
    ``monitoring.alarms.p99_latency_ms``, else the catalog's default from the idle timeout."""
    if f.p99_latency_seconds is not None:
        return f.p99_latency_seconds
    if environment_ms is not None:
        return environment_ms / 1000
    return serving.default_p99_latency_seconds(f.idle_timeout_seconds)


def default_latency_warnings(loc: str, f: InferenceFleet, environment_ms: int | None) -> list[str]:
    """A served ALB fleet (``model``) whose latency alarm falls back to the catalog's default, half the idle timeout:
    a guard against completions cut at the idle timeout, not latency monitoring (docs/monitoring.md)."""
    if f.model is None or f.load_balancer != "alb" or f.p99_latency_seconds is not None or environment_ms is not None:
        return []
    idle = f.idle_timeout_seconds or int(serving.facts()["load_balancer"]["alb_idle_timeout_default_seconds"])
    return [
        f"{loc}.p99_latency_seconds: not set, so the latency alarm fires only when p99 passes "
        f"{serving.default_p99_latency_seconds(f.idle_timeout_seconds):g} s (half the {idle} s idle timeout): a guard "
        "against cut completions, not latency monitoring; set it from a benchmark of the fleet's prompts"
    ]


def serving_warnings(loc: str, f: InferenceFleet) -> list[str]:
    """Plain-HTTP listeners and grace periods shorter than the model needs: allowed, visibly."""
    out: list[str] = []
    if f.tls is None:
        out.append(
            f"{loc}.tls: the listener is plain HTTP, so prompts and completions cross the VPC unencrypted; "
            "set tls.certificate_arn for anything beyond development"
        )
    model = model_spec(f)
    if model is not None and f.health_check_grace_seconds is not None:
        slowest = max(serving.boot_seconds(model, t) for t in f.neuron_types + f.fallback_types if serving.accelerator_of(t))
        if f.health_check_grace_seconds < slowest:
            out.append(
                f"{loc}.health_check_grace_seconds: {f.health_check_grace_seconds} s is shorter than the {slowest} s a node "
                f"needs to pull the image and load {model.weights_gib:.0f} GiB of weights; nodes may be replaced while loading"
            )
    return out


def eks_serving_warnings(loc: str, f: InferenceFleet) -> list[str]:
    """On EKS: a fleet without ``model`` is a node group nothing serves on; a served fleet warns as on the Auto Scaling
    path (plain HTTP) and when one replica is all it keeps (every node image update or repair drains the only pod)."""
    if f.model is None:
        return [
            f"{loc}.model: not set, so on EKS this fleet is a node group with nothing serving on it (no Deployment, "
            "load balancer or scaling); set model to serve one, or use a training pool for batch work"
        ]
    out = [w for w in serving_warnings(loc, f) if w.startswith(f"{loc}.tls:")]
    if f.min_size == 1:
        out.append(
            f"{loc}.min_size: 1 serving pod: each node image update, repair or rollout of its only node is an outage "
            "(the Deployment's PodDisruptionBudget allows one pod down); set min_size 2 for anything beyond development"
        )
    return out
