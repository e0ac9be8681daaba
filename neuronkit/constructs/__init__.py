"""Reusable L3 constructs. Import them into your own CDK app::

    from neuronkit.constructs import AcceleratorNetwork, TrainingStorage, TrainingCluster

The package lives under ``neuronkit/`` on purpose: a top-level package named ``constructs`` would
shadow the ``constructs`` library that every CDK app imports.
"""

# ruff: noqa: F401 -- the imports under TYPE_CHECKING are what type checkers see of the names in __all__
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Each name is imported from its module when first used (PEP 562): an app that builds no pilot, EKS cluster or
# Batch cluster does not import aws-cdk-lib's ECS, EKS or Batch modules (about 0.1 s each of a synth;
# docs/performance.md). Type checkers see the real imports below; a test requires both lists to agree.
_MODULES: dict[str, tuple[str, ...]] = {
    "neuronkit.catalog.releases": ("Release", "neuron_release"),
    "neuronkit.catalog.serving": ("ModelSpec", "ProfileOverride"),
    "neuronkit.constructs.batch": ("BatchTrainingCluster",),
    "neuronkit.constructs.budget": ("BudgetNotification", "CostBudget"),
    "neuronkit.constructs.capacity_block": ("CapacityBlockWatch",),
    "neuronkit.constructs.day_night": ("DayNightSchedule", "ShiftCapacity"),
    "neuronkit.constructs.eks": (
        "ClusterSpec",
        "ExistingClusterSpec",
        "ExistingEksCluster",
        "LustreVolume",
        "NeuronEksCluster",
        "NeuronNodeGroup",
        "NeuronWorkloads",
        "NodeGroupSpec",
        "SystemNodesSpec",
        "WorkloadsSpec",
    ),
    "neuronkit.constructs.idle_scale_down": ("IdleScaleDown",),
    "neuronkit.constructs.inference_fleet": ("InferenceFleet",),
    "neuronkit.constructs.launch_template": ("AcceleratorLaunchTemplate", "AmiSpec", "efa_network_interfaces"),
    "neuronkit.constructs.monitoring": (
        "AlarmThresholds",
        "EnvironmentMonitoring",
        "LoadBalancerRef",
        "LustreRef",
        "WatchedPool",
    ),
    "neuronkit.constructs.network": ("AcceleratorNetwork", "plan_subnets"),
    "neuronkit.constructs.node_pool": ("FleetNodesSpec", "NodePoolSpec"),
    "neuronkit.constructs.observability": ("NodeObservability", "ObservabilitySpec"),
    "neuronkit.constructs.pilot": ("LoadJobSpec", "LoadSide", "PilotDashboard", "PilotLoadJob"),
    "neuronkit.constructs.rebalancer": ("Rebalancer",),
    "neuronkit.constructs.serving_specs": ("HealthCheckSpec", "ScheduleSpec", "ServeSpec", "ServingSpec", "TlsSpec"),
    "neuronkit.constructs.security": ("EfaSecurityGroup",),
    "neuronkit.constructs.storage": ("TrainingStorage",),
    "neuronkit.constructs.training_cluster": ("CapacitySpec", "TrainingCluster"),
}
_RENAMED = {"neuron_release": "release"}  # exported name -> the module's own name
_EXPORTS = {name: module for module, names in _MODULES.items() for name in names}

if TYPE_CHECKING:
    from neuronkit.catalog.releases import Release
    from neuronkit.catalog.releases import release as neuron_release
    from neuronkit.catalog.serving import ModelSpec, ProfileOverride
    from neuronkit.constructs.batch import BatchTrainingCluster
    from neuronkit.constructs.budget import BudgetNotification, CostBudget
    from neuronkit.constructs.capacity_block import CapacityBlockWatch
    from neuronkit.constructs.day_night import DayNightSchedule, ShiftCapacity
    from neuronkit.constructs.eks import (
        ClusterSpec,
        ExistingClusterSpec,
        ExistingEksCluster,
        LustreVolume,
        NeuronEksCluster,
        NeuronNodeGroup,
        NeuronWorkloads,
        NodeGroupSpec,
        SystemNodesSpec,
        WorkloadsSpec,
    )
    from neuronkit.constructs.idle_scale_down import IdleScaleDown
    from neuronkit.constructs.inference_fleet import InferenceFleet
    from neuronkit.constructs.launch_template import AcceleratorLaunchTemplate, AmiSpec, efa_network_interfaces
    from neuronkit.constructs.monitoring import AlarmThresholds, EnvironmentMonitoring, LoadBalancerRef, LustreRef, WatchedPool
    from neuronkit.constructs.network import AcceleratorNetwork, plan_subnets
    from neuronkit.constructs.node_pool import FleetNodesSpec, NodePoolSpec
    from neuronkit.constructs.observability import NodeObservability, ObservabilitySpec
    from neuronkit.constructs.pilot import LoadJobSpec, LoadSide, PilotDashboard, PilotLoadJob
    from neuronkit.constructs.rebalancer import Rebalancer
    from neuronkit.constructs.security import EfaSecurityGroup
    from neuronkit.constructs.serving_specs import HealthCheckSpec, ScheduleSpec, ServeSpec, ServingSpec, TlsSpec
    from neuronkit.constructs.storage import TrainingStorage
    from neuronkit.constructs.training_cluster import CapacitySpec, TrainingCluster


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), _RENAMED.get(name, name))
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__all__ = list(_EXPORTS)
