"""What the reports say about a ``platform: eks`` environment, read from its synthesized templates: the cluster, its
node groups (the kit's pools) and what runs on them (Helm charts and EKS add-ons) with their pinned versions.

Used by ``neuronkit summary`` (a section per environment with a cluster) and ``neuronkit cost`` (the node groups as
pools and the control plane's hourly fee).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

CLUSTER = "AWS::EKS::Cluster"
NODEGROUP = "AWS::EKS::Nodegroup"
ADDON = "AWS::EKS::Addon"
HELM_CHART = "Custom::AWSCDK-EKS-HelmChart"
MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"
PATCH = "Custom::AWSCDK-EKS-KubernetesPatch"


class _Stack(Protocol):
    @property
    def name(self) -> str: ...

    def resources(self, *types: str) -> list[tuple[str, dict[str, Any]]]: ...


@dataclass(frozen=True)
class NodeGroupView:
    name: str
    instance_types: tuple[str, ...]
    min_size: Any
    desired_size: Any
    max_size: Any
    capacity_type: str
    ami_type: str
    release_version: str


@dataclass(frozen=True)
class Component:
    kind: str  # "Helm chart" | "EKS add-on"
    name: str
    version: str
    source: str  # the chart repository, or "EKS"
    notes: str = ""


@dataclass(frozen=True)
class ServingView:
    """One serving Deployment as applied: its replicas at deploy, image, tensor parallelism and compiled-artifact key."""

    deployment: str
    replicas: Any
    image: str
    tensor_parallel: str
    cache_key: str


@dataclass
class ClusterView:
    stack: str
    name: str
    version: str
    endpoint: str
    node_groups: list[NodeGroupView] = field(default_factory=list)
    components: list[Component] = field(default_factory=list)
    serving: list[ServingView] = field(default_factory=list)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else "(set at deploy)"


def _chart_notes(values: Any) -> str:
    """Device plugin or DRA and node recovery, from a Neuron chart's values (a JSON string in the template)."""
    try:
        doc = json.loads(values) if isinstance(values, str) else {}
    except json.JSONDecodeError:
        return ""
    if "npd" not in doc:
        return ""
    mode = "DRA driver" if (doc.get("draDriver") or {}).get("enabled") else "device plugin"
    recovery = "on" if ((doc.get("npd") or {}).get("nodeRecovery") or {}).get("enabled") else "off (monitor only)"
    return f"{mode}; node recovery {recovery}"


def clusters(stacks: Iterable[_Stack]) -> list[ClusterView]:
    """One view per EKS cluster in ``stacks`` (a stack holds at most one: the kit's ``ENV-eks``)."""
    out: list[ClusterView] = []
    for stack in stacks:
        found = stack.resources(CLUSTER)
        if not found:
            continue
        props = found[0][1].get("Properties") or {}
        access = props.get("ResourcesVpcConfig") or {}
        endpoint = "private" if access.get("EndpointPublicAccess") is False else "public-and-private"
        view = ClusterView(
            stack=stack.name, name=_text(props.get("Name")), version=_text(props.get("Version")), endpoint=endpoint
        )
        for _, group in stack.resources(NODEGROUP):
            p = group.get("Properties") or {}
            scaling = p.get("ScalingConfig") or {}
            view.node_groups.append(
                NodeGroupView(
                    name=_text(p.get("NodegroupName")), instance_types=tuple(map(_text, p.get("InstanceTypes") or [])),
                    min_size=scaling.get("MinSize"), desired_size=scaling.get("DesiredSize"), max_size=scaling.get("MaxSize"),
                    capacity_type=_text(p.get("CapacityType") or "ON_DEMAND"), ami_type=_text(p.get("AmiType")),
                    release_version=_text(p.get("ReleaseVersion")),
                )
            )  # fmt: skip
        for _, chart in stack.resources(HELM_CHART):
            p = chart.get("Properties") or {}
            view.components.append(
                Component("Helm chart", _text(p.get("Chart")), _text(p.get("Version")), _text(p.get("Repository")), _chart_notes(p.get("Values")))
            )  # fmt: skip
        for _, addon in stack.resources(ADDON):
            p = addon.get("Properties") or {}
            view.components.append(Component("EKS add-on", _text(p.get("AddonName")), _text(p.get("AddonVersion")), "EKS"))
        templates = _patched_templates(stack)
        for _, manifest in stack.resources(MANIFEST):
            view.serving.extend(_serving_views((manifest.get("Properties") or {}).get("Manifest"), templates))
        out.append(view)
    return out


def _json(value: Any) -> Any:
    """A JSON string of the template (or a join of strings and deploy-time values), parsed; None when it is not."""
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        value = sep.join(p if isinstance(p, str) else "(set at deploy)" for p in parts)
    try:
        return json.loads(value) if isinstance(value, str) else None
    except json.JSONDecodeError:
        return None


def _patched_templates(stack: _Stack) -> dict[str, Any]:
    """Deployment name -> the pod template its JSON patch sets (a Deployment a controller scales is created once from a
    stand-in and kept by a patch: neuronkit.kubernetes.serving.template_patch)."""
    out: dict[str, Any] = {}
    for _, patch in stack.resources(PATCH):
        p = patch.get("Properties") or {}
        kind, _, name = str(p.get("ResourceName", "")).partition("/")
        ops = _json(p.get("ApplyPatchJson"))
        if kind != "deployment" or not isinstance(ops, list):
            continue
        for op in ops:
            if isinstance(op, dict) and op.get("path") == "/spec/template":
                out[name] = op.get("value")
    return out


def _serving_views(manifest: Any, templates: dict[str, Any] | None = None) -> list[ServingView]:
    """The serving Deployments of an applied manifest (a JSON string, or a join of strings and deploy-time values), each
    with the template its patch sets when it has one (``templates``)."""
    docs = _json(manifest) or []
    out = []
    for d in docs if isinstance(docs, list) else []:
        if not isinstance(d, dict) or d.get("kind") != "Deployment":
            continue
        template = (templates or {}).get(str(d.get("metadata", {}).get("name")), d.get("spec", {}).get("template", {}))
        pod = (template or {}).get("spec", {})
        server = next((c for c in pod.get("containers", []) if c.get("name") == "server"), None)
        if server is None:
            continue
        line = [*server.get("command", []), *server.get("args", [])]
        tp = line[line.index("--tensor-parallel-size") + 1] if "--tensor-parallel-size" in line else "?"
        env = {e.get("name"): e.get("value") for c in pod.get("initContainers", []) for e in c.get("env", [])}
        out.append(
            ServingView(
                deployment=str(d.get("metadata", {}).get("name")), replicas=d.get("spec", {}).get("replicas"),
                image=str(server.get("image", "")).rsplit("/", 1)[-1], tensor_parallel=str(tp),
                cache_key=str(env.get("CACHE_PREFIX") or "–"),
            )
        )  # fmt: skip
    return out


def version_change(before: dict[str, Any], after: dict[str, Any]) -> str:
    """``review``'s note when a Helm chart or EKS add-on of the cluster moves to another pinned version."""
    kind = after.get("Type")
    keys = {HELM_CHART: ("Chart", "Version", "Helm chart"), ADDON: ("AddonName", "AddonVersion", "EKS add-on")}
    if kind not in keys or before.get("Type") != kind:
        return ""
    name_key, version_key, label = keys[kind]
    old, new = (before.get("Properties") or {}).get(version_key), (after.get("Properties") or {}).get(version_key)
    if old == new or not isinstance(old, str) or not isinstance(new, str):
        return ""
    name = (after.get("Properties") or {}).get(name_key)
    return f"{label} {name} {old} -> {new} (pinned in neuronkit/catalog/eks.yaml; Helm upgrades the release in place)"


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return lines


def markdown(views: Sequence[ClusterView]) -> list[str]:
    """The summary's "Kubernetes (EKS)" section: the cluster, node groups, and charts and add-ons with versions."""
    out: list[str] = []
    for v in views:
        out += ["", "#### Kubernetes (EKS)", ""]
        out.append(f"Cluster **{v.name}** ({v.stack}): Kubernetes {v.version}, {v.endpoint} endpoint.")
        out.append("")
        out += _table(
            ["node group", "instance types", "min/desired/max", "capacity", "image", "release"],
            [
                [g.name, ", ".join(g.instance_types), f"{g.min_size}/{g.desired_size}/{g.max_size}", g.capacity_type,
                 g.ami_type, g.release_version]
                for g in v.node_groups
            ],
        )  # fmt: skip
        out.append("")
        out += _table(
            ["kind", "name", "version (pinned)", "from", "runs"],
            [[c.kind, c.name, c.version, c.source, c.notes] for c in sorted(v.components, key=lambda c: (c.kind, c.name))],
        )
        if v.serving:
            out.append("")
            out += _table(
                ["serving Deployment", "replicas at deploy", "image", "TP", "compiled-artifact key"],
                [
                    [x.deployment, "scaler" if x.replicas is None else str(x.replicas), x.image, x.tensor_parallel, x.cache_key]
                    for x in v.serving
                ],
            )
    return out


__all__ = ["ClusterView", "Component", "NodeGroupView", "ServingView", "clusters", "markdown", "version_change"]
