"""Serving profiles: what each instance type of a fleet runs, derived from the model and the catalog.

A fleet describes its model once (id, weights location, parameter count, dtype, context length). For
every type in the fleet, Neuron and GPU alike, this module derives a :class:`ServingProfile`: the pinned
container (the release matrix's Neuron vLLM container, or the catalog's GPU vLLM container), the
tensor-parallel degree (the type's NeuronCores or GPUs), the vLLM arguments, the compiled-artifact key
(Neuron only), the root volume that holds AMI, image, weights and compiled artifacts, and the boot time
the health-check grace period, lifecycle-hook heartbeat and rolling-update pause follow from.
Facts come from ``neuronkit/catalog/serving.yaml``; docs/serving.md explains the choices.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml

from neuronkit import catalog
from neuronkit.catalog import releases

_FACTS = Path(catalog.__file__).parent / "serving.yaml"
_GIB = 1024**3


@cache
def facts() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(_FACTS.read_text())
    return data


def dtypes() -> list[str]:
    return list(facts()["dtype_bytes"])


@dataclass(frozen=True)
class ModelSpec:
    """The model a fleet serves: ``id`` (the name clients ask for, e.g. a Hugging Face id), ``s3_prefix``
    (its weights in Hugging Face format under the artifacts bucket), size and serving limits."""

    id: str
    s3_prefix: str
    parameters_billion: float
    dtype: str = "bfloat16"
    max_model_len: int = 4096
    max_num_seqs: int = 8

    @property
    def weights_gib(self) -> float:
        return self.parameters_billion * 1e9 * facts()["dtype_bytes"][self.dtype] / _GIB

    @property
    def slug(self) -> str:
        """The model id as one path segment of the compiled-artifact key."""
        return re.sub(r"[^a-z0-9._-]+", "-", self.id.lower()).strip("-")


@dataclass(frozen=True)
class ProfileOverride:
    """Per-type settings the file may override (``profiles.<type>``)."""

    tensor_parallel: int | None = None
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    lnc: int | None = None  # Trn2/Trn3: logical NeuronCore setting (default: the family's, catalog/trainium.yaml)


@dataclass(frozen=True)
class ServingProfile:
    """What one instance type of a fleet runs."""

    instance_type: str
    accelerator: Literal["neuron", "gpu"]
    tensor_parallel: int
    max_model_len: int
    max_num_seqs: int
    image: str  # the upstream image (public.ecr.aws/...); nodes pull it through the fleet's cache
    command: tuple[str, ...]  # the container's command before the model path and arguments (empty: entrypoint)
    env: dict[str, str] = field(default_factory=dict)
    cache_key: str | None = None  # Neuron: the compiled-artifact prefix under the artifacts bucket
    lnc: int | None = None  # Trn2/Trn3: the logical NeuronCore setting the node and container run
    accelerator_memory_gib: float = 0.0
    weights_gib: float = 0.0
    root_volume_gib: int = 0
    boot_seconds: int = 0

    def arguments(self, model: ModelSpec, port: int) -> list[str]:
        """vLLM's arguments after the model path (the container sees the weights at /model)."""
        return [
            "--served-model-name",
            model.id,
            "--tensor-parallel-size",
            str(self.tensor_parallel),
            "--max-model-len",
            str(self.max_model_len),
            "--max-num-seqs",
            str(self.max_num_seqs),
            "--host",
            "0.0.0.0",
            "--port",
            str(port),
        ]


def accelerator_of(instance_type: str) -> Literal["neuron", "gpu"] | None:
    it = catalog.instance_types().get(instance_type)
    if it is None:
        return None
    if it.is_neuron:
        return "neuron"
    return "gpu" if it.gpus > 0 else None


def accelerator_memory_gib(instance_type: str) -> float:
    it = catalog.get(instance_type)
    mib = it.neuron_memory_mib if it.is_neuron else it.gpu_memory_mib
    return mib / 1024


def lnc_of(instance_type: str, lnc: int | None = None) -> int | None:
    """The logical NeuronCore setting a type runs: ``lnc`` if given, else its family's default (Trn2/Trn3: 2);
    None for GPU types and Neuron families without the setting (Inf2, Trn1)."""
    it = catalog.get(instance_type)
    family = instance_type.split(".", 1)[0]
    if not it.is_neuron or not catalog.lnc_allowed(family):
        return None
    return lnc or catalog.lnc_default(family)


def accelerators(instance_type: str, lnc: int | None = None) -> int:
    """The tensor-parallel degree a type's server can use: its logical NeuronCores (physical cores / LNC, e.g. 64
    on trn2.48xlarge at the default LNC=2), or its GPUs. The one place TP is derived (fleets, pilot, EKS)."""
    it = catalog.get(instance_type)
    if not it.is_neuron:
        return it.gpus
    return it.neuron_cores // (lnc_of(instance_type, lnc) or 1)


def required_memory_gib(model: ModelSpec) -> float:
    """Accelerator memory a model needs: its weights plus the KV-cache headroom."""
    return model.weights_gib / (1 - facts()["kv_cache_headroom"])


def candidates(kind: Literal["neuron", "gpu"], region: str | None, az_ids: list[str]) -> list[str]:
    """Types of one accelerator kind offered in every one of ``az_ids``, smallest memory first."""
    out = []
    for name, it in catalog.instance_types().items():
        if accelerator_of(name) != kind or (kind == "neuron" and it.accelerator == "inferentia" and it.family == "inf1"):
            continue
        if region is not None and az_ids and not set(az_ids) <= set(it.az_ids(region)):
            continue
        out.append(name)
    return sorted(out, key=lambda t: (accelerator_memory_gib(t), t))


def root_volume_gib(model: ModelSpec, instance_type: str) -> int:
    """A root volume that holds the AMI, the container image, the weights and (Neuron) the compiled artifacts."""
    disk = facts()["disk"]
    kind = accelerator_of(instance_type) or "gpu"
    it = catalog.get(instance_type)
    weights = model.weights_gib if it.local_nvme_gb == 0 else 0.0  # weights go to instance-store NVMe when there is one
    compiled = model.weights_gib * disk["compiled_share_of_weights"] if kind == "neuron" else 0.0
    need = disk["ami_gib"][kind] + disk["image_gib"][kind] + weights + compiled + disk["margin_gib"]
    step = disk["round_to_gib"]
    minimum = catalog.min_root_volume_gib(it)
    return max(minimum, int(math.ceil(need / step) * step))


def boot_seconds(model: ModelSpec, instance_type: str) -> int:
    """How long a node may take from launch to serving: start, image pull, weights download and load."""
    boot = facts()["boot"]
    kind = accelerator_of(instance_type) or "gpu"
    image_mb = facts()["disk"]["image_gib"][kind] * 1024
    weights_mb = model.weights_gib * 1024
    seconds = (
        boot["overhead_seconds"]
        + image_mb / boot["image_pull_mb_per_second"]
        + weights_mb / boot["disk_mb_per_second"]
        + model.weights_gib / boot["load_gib_per_second"]
    )
    return int(math.ceil(seconds * boot["safety_factor"] / 60) * 60)


def neuron_image(release: releases.Release, instance_type: str | None = None) -> str | None:
    """The Neuron vLLM container of a release, for a type's family: the vLLM Neuron plugin image of the release where
    the catalog lists one for the family's engine (Trn2/Trn3 on 2.31), else the release matrix's container."""
    if instance_type is not None:
        family = releases.family_of(instance_type)
        for engine in facts()["engines"].values():
            if family in engine["families"] and release.version in engine.get("plugin", {}):
                return str(engine["plugin"][release.version])
    return release.container("vllm-serving")


def engine_of(image: str) -> str:
    """The serving engine of a Neuron vLLM image (``nxdi-vllm`` or ``vllm-neuron``), from its invocation; the image's
    repository name when the catalog does not know it (a user's own image: its key then names it)."""
    how = invocation(image)
    if how is None or "engine" not in how:
        return re.sub(r"[^a-z0-9.-]+", "-", image.rsplit("/", 1)[-1].split(":", 1)[0].lower())
    return str(how["engine"])


def family_engine(instance_type: str) -> str | None:
    """The engine the catalog serves a Neuron family with (``nxdi-vllm`` for Inf2/Trn1, ``vllm-neuron`` for Trn2/Trn3)."""
    family = releases.family_of(instance_type)
    return next((name for name, e in facts()["engines"].items() if family in e["families"]), None)


def engine_problem(instance_type: str, release: releases.Release) -> str | None:
    """Why the family's engine cannot serve on this release (Inf2/Trn1 after the NxD Inference line ends), or None."""
    name = family_engine(instance_type)
    if name is None:
        return None
    last = facts()["engines"][name].get("last_release")
    if last and releases.version_key(release.version) > releases.version_key(str(last)):
        family = releases.family_of(instance_type)
        return f"{name}, the {family} serving engine, ends with Neuron {last}; pin neuron_sdk: {last} for this fleet"
    return None


def vllm_version(image: str) -> str:
    """The vLLM version of a Neuron vLLM image tag, e.g. 0.13.0 of ``...:0.13.0-neuronx-py312-sdk2.28.0-ubuntu24.04``."""
    return image.rsplit(":", 1)[-1].split("-", 1)[0]


def invocation(image: str) -> dict[str, Any] | None:
    """How to start vLLM in a Neuron image (command and environment), or None when the catalog does not know."""
    entry: dict[str, Any] | None = facts()["neuron_invocation"].get(vllm_version(image))
    return entry


def cache_key(
    model: ModelSpec,
    release: releases.Release,
    instance_type: str,
    tp: int,
    max_model_len: int,
    max_num_seqs: int,
    lnc: int | None = None,
    image: str | None = None,
) -> str:
    """The S3 prefix of a compiled model: model, Neuron SDK and compiler release, serving engine and its vLLM version
    (of ``image``, default the release's container for the type), type, parallelism and (Trn2/Trn3) the LNC setting,
    so that a change of any of them compiles first."""
    prefix = facts()["compiled_cache"]["prefix"]
    logical = f"-lnc{lnc}" if lnc else ""
    image = image or neuron_image(release, instance_type) or ""
    engine = f"/{engine_of(image)}-{vllm_version(image)}" if image else ""
    return (
        f"{prefix}{model.slug}/sdk{release.version}-neuronxcc{release.compiler}{engine}/{instance_type}/"
        f"tp{tp}{logical}-len{max_model_len}-seqs{max_num_seqs}/"
    )


def compile_budget_seconds() -> int:
    """How long a new compiled-artifact key may take to appear: the longest compile (the lock's timeout) plus the upload
    of the artifacts. Serving pods wait this long for it before they fail (and are retried)."""
    cache = facts()["compiled_cache"]
    return int(cache["lock_timeout_seconds"]) + int(cache["publish_seconds"])


def default_p99_latency_seconds(idle_timeout_seconds: int | None) -> float:
    """The latency alarm's threshold when neither the fleet nor the environment sets one: the catalog's share of the
    ALB idle timeout (the fleet's, else the kit's default), where non-streaming completions start to be cut."""
    f = facts()
    idle = idle_timeout_seconds or int(f["load_balancer"]["alb_idle_timeout_default_seconds"])
    return float(f["latency_alarm"]["default_share_of_idle_timeout"]) * idle


def keep_alive_env(idle_timeout_seconds: int) -> dict[str, str]:
    """The server keeps idle connections open longer than the balancer does, so the balancer closes them first."""
    lb = facts()["load_balancer"]
    return {lb["keep_alive_env"]: str(idle_timeout_seconds + int(lb["keep_alive_margin_seconds"]))}


def server_command(profile: ServingProfile, model: ModelSpec, port: int) -> list[str]:
    """The whole server command line of a type (the container's command, the weights at /model, vLLM's arguments): what
    the Auto Scaling path's node runs and what the EKS Deployment's container runs."""
    return [*profile.command, "/model", *profile.arguments(model, port)]


def fleet_profile(
    model: ModelSpec,
    instance_type: str,
    release: releases.Release | None,
    override: ProfileOverride | None = None,
    *,
    lnc: int | None = None,
    neuron_image: str | None = None,
    gpu_image: str | None = None,
    idle_timeout_seconds: int | None = None,
) -> ServingProfile:
    """The profile of one type of a fleet, the same on both platforms (Auto Scaling and EKS): :func:`profile` with the
    fleet's LNC, its image overrides (their own invocation and engine, hence their own key) and the server keep-alive
    longer than the balancer's idle timeout."""
    o = override or ProfileOverride()
    if lnc is not None and o.lnc is None:
        o = replace(o, lnc=lnc)
    p = profile(model, instance_type, release, o, image=neuron_image if accelerator_of(instance_type) == "neuron" else gpu_image)
    if idle_timeout_seconds is not None:
        p = replace(p, env={**p.env, **keep_alive_env(idle_timeout_seconds)})
    return p


def profile(
    model: ModelSpec,
    instance_type: str,
    release: releases.Release | None,
    override: ProfileOverride | None = None,
    image: str | None = None,
) -> ServingProfile:
    """The serving profile of one type (``image`` overrides the pinned container). Raises ValueError when the release
    has no vLLM container."""
    o = override or ProfileOverride()
    kind = accelerator_of(instance_type)
    if kind is None:
        raise ValueError(f"{instance_type} has no Neuron device or GPU")
    lnc = lnc_of(instance_type, o.lnc) if kind == "neuron" else None
    tp = o.tensor_parallel or accelerators(instance_type, lnc)
    length = o.max_model_len or model.max_model_len
    seqs = o.max_num_seqs or model.max_num_seqs
    common = {
        "instance_type": instance_type,
        "tensor_parallel": tp,
        "max_model_len": length,
        "max_num_seqs": seqs,
        "accelerator_memory_gib": accelerator_memory_gib(instance_type),
        "weights_gib": model.weights_gib,
        "root_volume_gib": root_volume_gib(model, instance_type),
        "boot_seconds": boot_seconds(model, instance_type),
    }
    if kind == "gpu":
        gpu_image = image or str(facts()["gpu_image"])
        return ServingProfile(accelerator="gpu", image=gpu_image, command=tuple(facts()["gpu_command"]), **common)  # type: ignore[arg-type]
    if release is None:
        raise ValueError(f"{instance_type}: no Neuron release to pick a vLLM container from")
    pinned = neuron_image(release, instance_type)
    if pinned is None and image is None:
        raise ValueError(f"{instance_type}: Neuron {release.version} has no vLLM container in the release matrix")
    image = image or pinned
    assert image is not None
    how = invocation(image)
    if how is None:
        if pinned is None or invocation(pinned) is None:
            raise ValueError(f"{instance_type}: the catalog does not say how to start {image}")
        how = invocation(pinned)  # a user's own image of the pinned line: started as the pinned one
        assert how is not None
    env = {**how["env"], facts()["compiled_artifacts_env"]: "/compiled"}
    if lnc is not None:
        env[catalog.trainium_facts()["lnc_env"]] = str(lnc)
    return ServingProfile(
        accelerator="neuron",
        image=image,
        command=tuple(how["command"]),
        env=env,
        lnc=lnc,
        cache_key=cache_key(model, release, instance_type, tp, length, seqs, lnc, image),
        **common,  # type: ignore[arg-type]
    )


def pull_through_uri(image: str, registry: str, prefix: str) -> str:
    """The pull-through cache URI of an ECR Public image: ``<registry>/<prefix>/<path>:<tag>``."""
    upstream = facts()["registry"]["upstream"]
    if not image.startswith(upstream + "/"):
        raise ValueError(f"{image} is not on {upstream}; name a repository of your own in images")
    return f"{registry}/{prefix}/{image[len(upstream) + 1 :]}"
