"""Stacks: each wires constructs together for one environment. ``build_environment`` makes them all."""

from __future__ import annotations

from dataclasses import dataclass

from aws_cdk import App

from neuronkit.config import Environment
from neuronkit.stacks.inference import InferenceStack
from neuronkit.stacks.monitoring import MonitoringStack
from neuronkit.stacks.network import NetworkStack
from neuronkit.stacks.storage import StorageStack
from neuronkit.stacks.training import TrainingStack


@dataclass
class EnvironmentStacks:
    network: NetworkStack
    storage: StorageStack
    training: TrainingStack | None
    inference: InferenceStack | None = None
    monitoring: MonitoringStack | None = None


def build_environment(app: App, env: Environment) -> EnvironmentStacks:
    """Create the stacks of one environment; stack names start with the environment name."""
    network = NetworkStack(app, f"{env.name}-network", config=env)
    storage = StorageStack(app, f"{env.name}-storage", config=env, network=network)
    training = TrainingStack(app, f"{env.name}-training", config=env, network=network, storage=storage) if env.training else None
    inference = (
        InferenceStack(app, f"{env.name}-inference", config=env, network=network, storage=storage) if env.inference else None
    )
    # Last: the dashboard, alarms, budget and schedules read the other stacks' groups and load balancers.
    monitoring = MonitoringStack(
        app, f"{env.name}-monitoring", config=env, storage=storage, training=training, inference=inference
    )
    return EnvironmentStacks(network=network, storage=storage, training=training, inference=inference, monitoring=monitoring)


__all__ = [
    "EnvironmentStacks",
    "InferenceStack",
    "MonitoringStack",
    "NetworkStack",
    "StorageStack",
    "TrainingStack",
    "build_environment",
]
