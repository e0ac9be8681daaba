"""Stacks: each wires constructs together for one environment. ``build_environment`` makes them all."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aws_cdk import App

from neuronkit.config import Environment
from neuronkit.stacks.eks import EksStack
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
    eks: EksStack | None = None


def build_environment(app: App, env: Environment) -> EnvironmentStacks:
    """Create the stacks of one environment; stack names start with the environment name."""
    network = NetworkStack(app, f"{env.name}-network", config=env)
    storage = StorageStack(app, f"{env.name}-storage", config=env, network=network)
    if env.platform == "eks":
        # The pools are the EKS cluster's node groups (docs/eks.md); monitoring on EKS comes later.
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
]


def missing_lookups(assembly_dir: str, environments: list[Environment], file: str | None = None) -> list[str]:
    """One line per environment whose AMI lookups are not pinned in cdk.context.json yet, saying what fills them.

    Pools boot images found by CDK context lookups (neuronkit.constructs.launch_template.AmiSpec); the CDK CLI
    performs a missing lookup with the caller's credentials and writes it to cdk.context.json, where it stays
    pinned. Without the CLI (or without credentials) the synthesized templates carry CDK's dummy image id.
    ``file`` is the environment file given with ``-c file=PATH``, named instead of environments/NAME.yaml.
    """
    manifest = json.loads((Path(assembly_dir) / "manifest.json").read_text())
    by_target: dict[tuple[str, str], list[str]] = {}
    for m in manifest.get("missing", []):
        props = m.get("props", {})
        if m.get("provider") != "ami":
            continue
        name = next((f["values"][0] for f in _filters(props) if f["name"] == "name"), "?")
        desc = next((f["values"][0] for f in _filters(props) if f["name"] == "description"), None)
        by_target.setdefault((str(props.get("account")), str(props.get("region"))), []).append(
            f"{name}" + (f" [{desc.strip('*')}]" if desc else "")
        )
    out = []
    for env in environments:
        images = by_target.get((env.account, env.region))
        if not images:
            continue
        where = file or f"environments/{env.name}.yaml"
        synth = f"cdk synth -c file={file}" if file else f"make synth ENV={env.name}"
        out.append(
            f"{where}: {len(images)} AMI lookup(s) not pinned in cdk.context.json yet "
            f"({'; '.join(sorted(set(images)))}); run `{synth}` with read-only credentials for account "
            f"{env.account} to look them up and pin them (then commit cdk.context.json), or set ami.ami_id per pool"
        )
    return out


def _filters(props: dict[str, Any]) -> list[dict[str, Any]]:
    raw = props.get("filters", {})
    # The cloud assembly writes lookup filters as a mapping of filter name -> values.
    return [{"name": k, "values": v} for k, v in raw.items()] if isinstance(raw, dict) else list(raw)
