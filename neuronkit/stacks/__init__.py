"""Stacks: each wires constructs together for one environment. ``build_environment`` makes them all."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from aws_cdk import App

from neuronkit.config import Environment
from neuronkit.config.lookups import image_lookups, unpinned_line
from neuronkit.stacks.inference import InferenceStack
from neuronkit.stacks.monitoring import MonitoringStack
from neuronkit.stacks.network import NetworkStack
from neuronkit.stacks.storage import StorageStack
from neuronkit.stacks.training import TrainingStack

if TYPE_CHECKING:
    from neuronkit.stacks.eks import EksStack


def __getattr__(name: str) -> Any:
    # The EKS stack (aws-cdk-lib's EKS module, the charts) is imported when an environment runs on EKS.
    if name == "EksStack":
        from neuronkit.stacks.eks import EksStack

        return EksStack
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass
class EnvironmentStacks:
    network: NetworkStack
    storage: StorageStack
    training: TrainingStack | None
    inference: InferenceStack | None = None
    monitoring: MonitoringStack | None = None
    eks: EksStack | None = None


def build_environment(app: App, env: Environment) -> EnvironmentStacks:
    """Create the stacks of one environment; stack names start with the environment name."""
    network = NetworkStack(app, f"{env.name}-network", config=env)
    storage = StorageStack(app, f"{env.name}-storage", config=env, network=network)
    if env.platform == "eks":
        # The pools are the EKS cluster's node groups (docs/eks.md); monitoring on EKS comes later.
        from neuronkit.stacks.eks import EksStack

        eks = EksStack(app, f"{env.name}-eks", config=env, network=network, storage=storage)
        return EnvironmentStacks(network=network, storage=storage, training=None, eks=eks)
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
    "EksStack",
    "EnvironmentStacks",
    "InferenceStack",
    "MonitoringStack",
    "NetworkStack",
    "StorageStack",
    "TrainingStack",
    "build_environment",
    "failed_lookups",
    "missing_lookups",
]


def missing_lookups(assembly_dir: str, environments: list[Environment], file: str | None = None) -> list[str]:
    """One line per pool whose AMI lookup cdk.context.json does not pin yet, naming its key and the fixes.

    Pools boot images found by CDK context lookups (neuronkit.constructs.launch_template.AmiSpec); the CDK CLI
    performs a missing lookup with the caller's credentials and writes it to cdk.context.json, where it stays
    pinned; `neuronkit pin` does the same without a synth. Without either the templates would carry CDK's dummy
    image id. ``file`` is the environment file given with ``-c file=PATH``, named instead of environments/NAME.yaml.
    """
    manifest = json.loads((Path(assembly_dir) / "manifest.json").read_text())
    keys = {m.get("key") for m in manifest.get("missing", []) if m.get("provider") == "ami"}
    return _lines(environments, file, lambda key: key in keys, "is not pinned")


def failed_lookups(app: App, environments: list[Environment], file: str | None = None) -> list[str]:
    """Under the CDK CLI: one line per pool whose lookup the CLI tried and could not perform (no credentials,
    another account, no match). The CLI runs the app again after its lookups; only that run names them, once."""

    def failed(key: str) -> bool:
        value = app.node.try_get_context(key)
        return isinstance(value, dict) and "$providerError" in value

    return _lines(environments, file, failed, "could not be looked up")


def _lines(environments: list[Environment], file: str | None, wanted: Callable[[str], bool], why: str) -> list[str]:
    out = []
    for env in environments:
        where, select = (file, f"--file {file}") if file else (f"environments/{env.name}.yaml", f"--env {env.name}")
        seen = set()
        for lookup in image_lookups(env):
            if wanted(lookup.context_key) and lookup.key_path not in seen:
                seen.add(lookup.key_path)
                out.append(f"{where}: {unpinned_line(lookup, select, why)}")
    return out
