"""Reusable L3 constructs. Import them into your own CDK app::

    from neuronkit.constructs import AcceleratorNetwork, TrainingStorage, TrainingCluster

The package lives under ``neuronkit/`` on purpose: a top-level package named ``constructs`` would
shadow the ``constructs`` library that every CDK app imports.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

# Each name is imported from its module when first used (PEP 562): an app that builds no pilot, EKS cluster or
# Batch cluster does not import aws-cdk-lib's ECS, EKS or Batch modules (about 0.1 s each of a synth;
# docs/performance.md). Type checkers see the real imports below.
_EXPORTS: dict[str, tuple[str, str]] = {
    "Release": ("neuronkit.catalog.releases", "Release"),
    "neuron_release": ("neuronkit.catalog.releases", "release"),
    "ModelSpec": ("neuronkit.catalog.serving", "ModelSpec"),
    "ProfileOverride": ("neuronkit.catalog.serving", "ProfileOverride"),
    "BatchTrainingCluster": ("neuronkit.constructs.batch", "BatchTrainingCluster"),
    "BudgetNotification": ("neuronkit.constructs.budget", "BudgetNotification"),
    "CostBudget": ("neuronkit.constructs.budget", "CostBudget"),
    "CapacityBlockWatch": ("neuronkit.constructs.capacity_block", "CapacityBlockWatch"),
    "DayNightSchedule": ("neuronkit.constructs.day_night", "DayNightSchedule"),
    "ShiftCapacity": ("neuronkit.constructs.day_night", "ShiftCapacity"),
    "NeuronEksCluster": ("neuronkit.constructs.eks", "NeuronEksCluster"),
    "NeuronNodeGroup": ("neuronkit.constructs.eks", "NeuronNodeGroup"),
    "IdleScaleDown": ("neuronkit.constructs.idle_scale_down", "IdleScaleDown"),
    "HealthCheckSpec": ("neuronkit.constructs.inference_fleet", "HealthCheckSpec"),
    "InferenceFleet": ("neuronkit.constructs.inference_fleet", "InferenceFleet"),
    "ScheduleSpec": ("neuronkit.constructs.inference_fleet", "ScheduleSpec"),
    "ServeSpec": ("neuronkit.constructs.inference_fleet", "ServeSpec"),
    "ServingSpec": ("neuronkit.constructs.inference_fleet", "ServingSpec"),
    "TlsSpec": ("neuronkit.constructs.inference_fleet", "TlsSpec"),
    "AcceleratorLaunchTemplate": ("neuronkit.constructs.launch_template", "AcceleratorLaunchTemplate"),
    "AmiSpec": ("neuronkit.constructs.launch_template", "AmiSpec"),
    "efa_network_interfaces": ("neuronkit.constructs.launch_template", "efa_network_interfaces"),
    "AlarmThresholds": ("neuronkit.constructs.monitoring", "AlarmThresholds"),
    "EnvironmentMonitoring": ("neuronkit.constructs.monitoring", "EnvironmentMonitoring"),
    "LoadBalancerRef": ("neuronkit.constructs.monitoring", "LoadBalancerRef"),
    "LustreRef": ("neuronkit.constructs.monitoring", "LustreRef"),
    "WatchedPool": ("neuronkit.constructs.monitoring", "WatchedPool"),
    "AcceleratorNetwork": ("neuronkit.constructs.network", "AcceleratorNetwork"),
    "plan_subnets": ("neuronkit.constructs.network", "plan_subnets"),
    "FleetNodesSpec": ("neuronkit.constructs.node_pool", "FleetNodesSpec"),
    "NodePoolSpec": ("neuronkit.constructs.node_pool", "NodePoolSpec"),
    "NodeObservability": ("neuronkit.constructs.observability", "NodeObservability"),
    "ObservabilitySpec": ("neuronkit.constructs.observability", "ObservabilitySpec"),
    "LoadJobSpec": ("neuronkit.constructs.pilot", "LoadJobSpec"),
    "LoadSide": ("neuronkit.constructs.pilot", "LoadSide"),
    "PilotDashboard": ("neuronkit.constructs.pilot", "PilotDashboard"),
    "PilotLoadJob": ("neuronkit.constructs.pilot", "PilotLoadJob"),
    "Rebalancer": ("neuronkit.constructs.rebalancer", "Rebalancer"),
    "EfaSecurityGroup": ("neuronkit.constructs.security", "EfaSecurityGroup"),
    "TrainingStorage": ("neuronkit.constructs.storage", "TrainingStorage"),
    "CapacitySpec": ("neuronkit.constructs.training_cluster", "CapacitySpec"),
    "TrainingCluster": ("neuronkit.constructs.training_cluster", "TrainingCluster"),
}

if TYPE_CHECKING:
    from neuronkit.catalog.releases import Release
    from neuronkit.catalog.releases import release as neuron_release
    from neuronkit.catalog.serving import ModelSpec, ProfileOverride
    from neuronkit.constructs.batch import BatchTrainingCluster
    from neuronkit.constructs.budget import BudgetNotification, CostBudget
    from neuronkit.constructs.capacity_block import CapacityBlockWatch
    from neuronkit.constructs.day_night import DayNightSchedule, ShiftCapacity
    from neuronkit.constructs.eks import NeuronEksCluster, NeuronNodeGroup
    from neuronkit.constructs.idle_scale_down import IdleScaleDown
    from neuronkit.constructs.inference_fleet import (
        HealthCheckSpec,
        InferenceFleet,
        ScheduleSpec,
        ServeSpec,
        ServingSpec,
        TlsSpec,
    )
    from neuronkit.constructs.launch_template import AcceleratorLaunchTemplate, AmiSpec, efa_network_interfaces
    from neuronkit.constructs.monitoring import AlarmThresholds, EnvironmentMonitoring, LoadBalancerRef, LustreRef, WatchedPool
    from neuronkit.constructs.network import AcceleratorNetwork, plan_subnets
    from neuronkit.constructs.node_pool import FleetNodesSpec, NodePoolSpec
    from neuronkit.constructs.observability import NodeObservability, ObservabilitySpec
    from neuronkit.constructs.pilot import LoadJobSpec, LoadSide, PilotDashboard, PilotLoadJob
    from neuronkit.constructs.rebalancer import Rebalancer
    from neuronkit.constructs.security import EfaSecurityGroup
    from neuronkit.constructs.storage import TrainingStorage
    from neuronkit.constructs.training_cluster import CapacitySpec, TrainingCluster


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attribute = _EXPORTS[name]
    value = getattr(importlib.import_module(module), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


__all__ = [
    "ModelSpec",
    "ProfileOverride",
    "Release",
    "neuron_release",
    "AcceleratorLaunchTemplate",
    "AcceleratorNetwork",
    "AlarmThresholds",
    "AmiSpec",
    "BatchTrainingCluster",
    "BudgetNotification",
    "CapacityBlockWatch",
    "CapacitySpec",
    "CostBudget",
    "DayNightSchedule",
    "EfaSecurityGroup",
    "EnvironmentMonitoring",
    "HealthCheckSpec",
    "IdleScaleDown",
    "InferenceFleet",
    "LoadBalancerRef",
    "LustreRef",
    "NeuronEksCluster",
    "NeuronNodeGroup",
    "NodeObservability",
    "FleetNodesSpec",
    "NodePoolSpec",
    "ObservabilitySpec",
    "LoadJobSpec",
    "LoadSide",
    "PilotDashboard",
    "PilotLoadJob",
    "Rebalancer",
    "ScheduleSpec",
    "ServeSpec",
    "ServingSpec",
    "TlsSpec",
    "ShiftCapacity",
    "TrainingCluster",
    "TrainingStorage",
    "WatchedPool",
    "efa_network_interfaces",
    "plan_subnets",
]
