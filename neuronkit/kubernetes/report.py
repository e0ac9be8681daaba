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


# --------------------------------------------------------------------------------------------
# review: the Kubernetes objects a change adds, removes or alters (issue 47)
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class ObjectChange:
    """One Kubernetes object (or Helm release) the change adds, removes or alters, with what a Kubernetes reviewer
    looks at: images, added Linux capabilities, RBAC rules and subjects, replicas."""

    stack: str
    kind: str  # Kind, or "Helm chart"
    namespace: str
    name: str
    action: str  # added | removed | changed
    details: tuple[str, ...] = ()

    def line(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.kind} {where} {self.action}" + (f": {'; '.join(self.details)}" if self.details else "")


class _Template:
    """A template as a stack the readers above take (a name and its resources by type)."""

    def __init__(self, name: str, template: dict[str, Any]):
        self.name, self.template = name, template

    def resources(self, *types: str) -> list[tuple[str, dict[str, Any]]]:
        items = sorted((self.template.get("Resources") or {}).items())
        return [(k, v) for k, v in items if isinstance(v, dict) and (not types or v.get("Type") in types)]


def applied(stack: str, template: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(Kind, namespace, name) -> the object as the stack leaves it: the kubectl manifests' objects
    (neuronkit.kubernetes.immutable's reader), a Deployment's pod template as its patch sets it (the reader above), and
    each Helm release as a pseudo-object {"chart", "version", "repository", "values"}."""
    from neuronkit.kubernetes import immutable

    view = _Template(stack, template)
    patched = _patched_templates(view)
    out: dict[tuple[str, str, str], dict[str, Any]] = {}
    for (group_kind, namespace, name), doc in immutable.applied_objects(template).items():
        kind = group_kind.rpartition("/")[2]
        if kind == "Deployment" and name in patched:
            doc = {**doc, "spec": {**(doc.get("spec") or {}), "template": patched[name]}}
        out[(kind, namespace, name)] = doc
    for _, chart in view.resources(HELM_CHART):
        p = chart.get("Properties") or {}
        name = _text(p.get("Release") or p.get("Chart"))
        out[("Helm chart", _text(p.get("Namespace") or "default"), name)] = {
            "chart": _text(p.get("Chart")), "version": _text(p.get("Version")),
            "repository": _text(p.get("Repository")), "values": p.get("Values"),
        }  # fmt: skip
    return out


def _pod_specs(value: Any) -> list[dict[str, Any]]:
    """Every pod spec inside an object (a dict with a ``containers`` list), at any depth: Deployments, Jobs, JobSets'
    replicated jobs, Pods."""
    if isinstance(value, list):
        return [spec for v in value for spec in _pod_specs(v)]
    if not isinstance(value, dict):
        return []
    if isinstance(value.get("containers"), list):
        return [value]
    return [spec for v in value.values() for spec in _pod_specs(v)]


def _containers(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for spec in _pod_specs(doc.get("spec")):
        for c in [*(spec.get("initContainers") or []), *(spec.get("containers") or [])]:
            if isinstance(c, dict):
                out[str(c.get("name"))] = c
    return out


def _capabilities(container: dict[str, Any]) -> set[str]:
    caps = ((container.get("securityContext") or {}).get("capabilities") or {}).get("add") or []
    return {str(c) for c in caps}


def _rule(rule: dict[str, Any]) -> str:
    groups = ",".join(g or '""' for g in rule.get("apiGroups") or [""])
    what = ",".join(rule.get("resources") or rule.get("nonResourceURLs") or [])
    names = f" named {','.join(rule['resourceNames'])}" if rule.get("resourceNames") else ""
    return f"{','.join(rule.get('verbs') or [])} on {what}{names} ({groups})"


def _subject(subject: dict[str, Any]) -> str:
    ns = f"{subject['namespace']}/" if subject.get("namespace") else ""
    return f"{subject.get('kind')} {ns}{subject.get('name')}"


def _replicas(value: Any) -> str:
    return "unset (kept by its controller)" if value is None else str(value)


def _details(kind: str, before: dict[str, Any] | None, after: dict[str, Any] | None) -> list[str]:
    """What a Kubernetes reviewer reads of an object's change (``before``/``after`` None: added/removed)."""
    a, b = before or {}, after or {}
    out: list[str] = []
    if kind == "Helm chart":
        if a.get("version") != b.get("version"):
            out.append(f"chart {b.get('chart') or a.get('chart')} {a.get('version', '–')} -> {b.get('version', '–')}"
                       if before and after else f"chart {(b or a).get('chart')} {(b or a).get('version')}")  # fmt: skip
        if before and after and a.get("values") != b.get("values"):
            out.append("values changed")
        return out
    old_c, new_c = _containers(a), _containers(b)
    for name in sorted(old_c.keys() | new_c.keys()):
        was, now = old_c.get(name, {}).get("image"), new_c.get(name, {}).get("image")
        if was != now:
            if before is None or name not in old_c:
                out.append(f"image {name}: {now}")
            elif after is not None and name in new_c:
                out.append(f"image {name}: {was} -> {now}")
        added = _capabilities(new_c.get(name, {})) - _capabilities(old_c.get(name, {}))
        if added:
            out.append(f"capabilities added to {name}: {', '.join(sorted(added))}")
    if kind in ("Role", "ClusterRole"):
        old_r = {_rule(r) for r in a.get("rules") or [] if isinstance(r, dict)}
        new_r = {_rule(r) for r in b.get("rules") or [] if isinstance(r, dict)}
        out += [f"rule added: {r}" for r in sorted(new_r - old_r)]
        out += [f"rule removed: {r}" for r in sorted(old_r - new_r)] if after is not None else []
    if kind in ("RoleBinding", "ClusterRoleBinding"):
        old_s = {_subject(x) for x in a.get("subjects") or [] if isinstance(x, dict)}
        new_s = {_subject(x) for x in b.get("subjects") or [] if isinstance(x, dict)}
        out += [f"subject added: {x}" for x in sorted(new_s - old_s)]
        out += [f"subject removed: {x}" for x in sorted(old_s - new_s)] if after is not None else []
        ref_a, ref_b = a.get("roleRef") or {}, b.get("roleRef") or {}
        if ref_a != ref_b and after is not None:
            out.append(
                f"role: {ref_b.get('kind')} {ref_b.get('name')}"
                + (f" (was {ref_a.get('kind')} {ref_a.get('name')})" if before else "")
            )
    spec_a, spec_b = a.get("spec") or {}, b.get("spec") or {}
    if isinstance(spec_a, dict) and isinstance(spec_b, dict) and kind in ("Deployment", "StatefulSet", "ReplicaSet"):
        if before is not None and after is not None and spec_a.get("replicas") != spec_b.get("replicas"):
            out.append(f"replicas {_replicas(spec_a.get('replicas'))} -> {_replicas(spec_b.get('replicas'))}")
        elif before is None and after is not None:
            out.append(f"replicas {_replicas(spec_b.get('replicas'))}")
    if before is not None and after is not None and not out:
        keys = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
        parts = []
        for k in keys:
            if isinstance(a.get(k), dict) and isinstance(b.get(k), dict):
                parts += [f"{k}.{sub}" for sub in sorted(a[k].keys() | b[k].keys()) if a[k].get(sub) != b[k].get(sub)]
            else:
                parts.append(k)
        out.append(f"{', '.join(parts)} changed")
    return out


def object_changes(old: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]], stacks: Iterable[str]) -> list[ObjectChange]:
    """Per stack of ``stacks`` (in either set of templates), the Kubernetes objects and Helm releases the change adds,
    removes or alters, each with its images, added capabilities, RBAC rules and subjects, and replicas."""
    out: list[ObjectChange] = []
    for stack in sorted(stacks):
        a = applied(stack, old[stack]) if stack in old else {}
        b = applied(stack, new[stack]) if stack in new else {}
        for key in sorted(a.keys() | b.keys()):
            kind, namespace, name = key
            before, after = a.get(key), b.get(key)
            if before == after:
                continue
            action = "added" if before is None else "removed" if after is None else "changed"
            out.append(ObjectChange(stack, kind, namespace, name, action, tuple(_details(kind, before, after))))
    return out


def object_lines(changes: Sequence[ObjectChange]) -> list[str]:
    """Markdown lines: one per object, added first, then changed, then removed."""
    order = {"added": 0, "changed": 1, "removed": 2}
    return [
        f"- {c.stack}: {c.line()}" for c in sorted(changes, key=lambda c: (c.stack, order[c.action], c.kind, c.namespace, c.name))
    ]


__all__ = [
    "ClusterView",
    "Component",
    "NodeGroupView",
    "ObjectChange",
    "ServingView",
    "applied",
    "clusters",
    "markdown",
    "object_changes",
    "object_lines",
    "version_change",
]
