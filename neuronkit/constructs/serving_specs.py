"""The specs a serving fleet takes on either platform: the model and its profiles (:class:`ServingSpec`) or your own
server commands (:class:`ServeSpec`), the target group's health check, TLS on the listener and size schedules.
``InferenceFleet`` (Auto Scaling) and ``EksServingFleet`` (EKS) both read them; both modules re-export them."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from neuronkit.catalog import releases, serving


@dataclass(frozen=True)
class HealthCheckSpec:
    """The target group's health check; ``port`` defaults to the fleet's serving port."""

    path: str = "/health"
    port: int | None = None
    protocol: Literal["HTTP", "TCP"] = "HTTP"
    interval_seconds: int = 15
    healthy_threshold: int = 2
    unhealthy_threshold: int = 3


@dataclass(frozen=True)
class ScheduleSpec:
    """A recurring change of the group's sizes (cron in UTC, e.g. ``0 8 * * 1-5``)."""

    name: str
    cron: str
    min_size: int | None = None
    max_size: int | None = None
    desired_size: int | None = None


@dataclass(frozen=True)
class ServeSpec:
    """Your own server commands per accelerator family (instead of :class:`ServingSpec`); ``$MODEL_DIR``,
    ``$PORT``, ``$ACCELERATOR`` and ``$TENSOR_PARALLEL`` (the type's NeuronCores or GPUs) are set for them."""

    neuron: str
    gpu: str | None = None


@dataclass(frozen=True)
class ServingSpec:
    """The model, served by the kit's pinned vLLM containers with a profile per instance type.

    ``neuron_release`` picks the Neuron vLLM container (the release matrix's ``vllm-serving`` container;
    required with Neuron types unless ``neuron_image`` names one); GPU types run the catalog's pinned GPU
    vLLM container (or ``gpu_image``). ``registry`` None (the default) creates an ECR pull-through cache
    rule for ECR Public and pulls through it; or name your own ECR registry/prefix holding the same
    repositories. ``profiles`` override the derived tensor-parallel degree and vLLM limits per type.
    ``precompile`` (the default) compiles every new compiled-artifact key on a one-node group of its own
    before the rolling update starts (docs/serving.md); False leaves the compile to the update's first node.
    ``lnc`` sets the logical NeuronCore setting of Trn2/Trn3 types (default: the family's, 2): their
    tensor-parallel degree counts logical cores (64 on trn2.48xlarge at LNC=2), the node and the container
    get the setting, and it is part of the compiled-artifact key.
    """

    model: serving.ModelSpec
    neuron_release: releases.Release | None = None
    profiles: Mapping[str, serving.ProfileOverride] = field(default_factory=dict)
    registry: str | None = None
    neuron_image: str | None = None
    gpu_image: str | None = None
    precompile: bool = True
    lnc: int | None = None


@dataclass(frozen=True)
class TlsSpec:
    """Terminate TLS on the listener with an ACM certificate (HTTPS on an ALB, TLS on an NLB)."""

    certificate_arn: str
    port: int = 443
