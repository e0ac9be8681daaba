"""Reusable L3 constructs. Import them into your own CDK app::

    from neuronkit.constructs import AcceleratorNetwork, TrainingStorage, TrainingCluster

The package lives under ``neuronkit/`` on purpose: a top-level package named ``constructs`` would
shadow the ``constructs`` library that every CDK app imports.
"""

from neuronkit.catalog.releases import Release
from neuronkit.catalog.releases import release as neuron_release
from neuronkit.catalog.serving import ModelSpec, ProfileOverride
from neuronkit.constructs.batch import BatchTrainingCluster
from neuronkit.constructs.budget import BudgetNotification, CostBudget
from neuronkit.constructs.capacity_block import CapacityBlockWatch
from neuronkit.constructs.day_night import DayNightSchedule, ShiftCapacity
from neuronkit.constructs.eks import NeuronEksCluster, NeuronNodeGroup
from neuronkit.constructs.idle_scale_down import IdleScaleDown
from neuronkit.constructs.inference_fleet import HealthCheckSpec, InferenceFleet, ScheduleSpec, ServeSpec, ServingSpec, TlsSpec
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
