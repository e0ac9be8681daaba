"""The update plan of ``neuronkit review`` (issue 47): per resource of two synthesized assemblies, what a deploy of the
second over the first does: **updates in place**, **replaced**, **added**, **removed**, or **cannot update**, each
with what that does to the running environment (nodes of a group replaced, pods restarted) and, for "cannot update",
why and how to make the change instead, in one line.

Decided from the templates alone, offline:

- **replacement**: the create-only properties of the resource type's provider schema (``createOnlyProperties``, as
  cfn-lint bundles them; :func:`neuronkit.reports.review.create_only`), with the cascade through references that
  :func:`neuronkit.reports.review.compare_templates` already follows;
- **fixed physical names** (:data:`FIXED_NAMES`): CloudFormation creates a replacement before it deletes the old
  resource, so a replaced resource whose name the template fixes cannot be created while the old one holds the name.
  CloudFormation User Guide, "Name type": "You can't perform an update that causes a custom-named resource to be
  replaced. If you must replace the resource, specify a new name." (the stack fails with "CloudFormation cannot
  update a stack when a custom-named resource requires replacing");
- **immutable Kubernetes fields** of objects re-applied under the same name (:mod:`neuronkit.kubernetes.immutable`);
- resources whose text does not change but which read the new version of a changed launch template
  (``Fn::GetAtt ... LatestVersionNumber``): CloudFormation updates them too, and a node group or Auto Scaling group
  that does replaces its nodes.

Nothing here says an update succeeds on AWS; docs/eks.md ("Day two") lists what was checked only against
documentation.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from neuronkit.reports.pools import METADATA_KEY

IN_PLACE = "updates in place"
REPLACED = "replaced"
CANNOT = "cannot update"
ADDED = "added"
REMOVED = "removed"
ORDER = {CANNOT: 0, REPLACED: 1, REMOVED: 2, ADDED: 3, IN_PLACE: 4}

MANIFEST = "Custom::AWSCDK-EKS-KubernetesResource"
PATCH = "Custom::AWSCDK-EKS-KubernetesPatch"
HELM = "Custom::AWSCDK-EKS-HelmChart"

# Resource type -> (the property that fixes its physical name, as a path; how to make a replacing change instead).
# Every type the kit synthesizes with a create-only property ending in "Name" is either here or in NAME_REFERENCES
# (tests/unit/test_review_plan.py checks both lists against the synthesized examples).
_TWO_DEPLOYS = "two deploys: add the changed one under a new name beside this one, then remove this one"
FIXED_NAMES: dict[str, tuple[tuple[str, ...], str]] = {
    # The kit names a node group ENV-POOL-<digest of its create-only properties> (constructs/eks/nodegroup_name.py):
    # a change of one renames it and the replacement goes ahead. What stays "cannot update" is a replacement the
    # digest does not see: a referenced resource (a subnet, the node role) replaced under the same logical ID.
    "AWS::EKS::Nodegroup": (
        ("NodegroupName",),
        "two deploys (docs/eks.md, Day two): deploy the change that replaces what the group refers to with the pool "
        "removed, then add the pool back (its nodes are gone in between); or add a pool under a new name first",
    ),
    "AWS::EKS::Cluster": (("Name",), "a new environment (a cluster cannot be replaced in place): deploy it beside this one"),
    "AWS::EKS::Addon": (("AddonName",), "remove the add-on in one deploy and add it back in the next"),
    "AWS::AutoScaling::AutoScalingGroup": (("AutoScalingGroupName",), _TWO_DEPLOYS),
    "AWS::Budgets::Budget": (("Budget", "BudgetName"), "remove the budget in one deploy and add it back in the next"),
    "AWS::CloudWatch::Alarm": (("AlarmName",), _TWO_DEPLOYS),
    "AWS::CloudWatch::Dashboard": (("DashboardName",), _TWO_DEPLOYS),
    "AWS::Logs::LogGroup": (("LogGroupName",), _TWO_DEPLOYS),
    "AWS::S3::Bucket": (("BucketName",), _TWO_DEPLOYS + " (copy its objects first)"),
    "AWS::SSM::Parameter": (("Name",), _TWO_DEPLOYS),
    "AWS::EC2::LaunchTemplate": (("LaunchTemplateName",), _TWO_DEPLOYS),
    "AWS::ElasticLoadBalancingV2::TargetGroup": (("Name",), _TWO_DEPLOYS),
    "AWS::ElasticLoadBalancingV2::LoadBalancer": (("Name",), _TWO_DEPLOYS),
    "AWS::IAM::Role": (("RoleName",), _TWO_DEPLOYS),
    "AWS::Lambda::Function": (("FunctionName",), _TWO_DEPLOYS),
}
# Create-only properties ending in "Name" that name another resource (the one this belongs to), not this one.
NAME_REFERENCES: frozenset[tuple[str, str]] = frozenset(
    {
        ("AWS::AutoScaling::ScalingPolicy", "AutoScalingGroupName"),
        ("AWS::AutoScaling::ScheduledAction", "AutoScalingGroupName"),
        ("AWS::AutoScaling::LifecycleHook", "AutoScalingGroupName"),
        ("AWS::EC2::FlowLog", "LogGroupName"),
        ("AWS::EC2::VPCEndpoint", "ServiceName"),
        ("AWS::EKS::AccessEntry", "ClusterName"),
        ("AWS::EKS::PodIdentityAssociation", "ClusterName"),
        ("AWS::EKS::Nodegroup", "ClusterName"),
        ("AWS::EKS::Addon", "ClusterName"),
        ("AWS::Lambda::EventInvokeConfig", "FunctionName"),
        ("AWS::Lambda::Permission", "FunctionName"),
    }
)

# Node group properties whose in-place update replaces the group's nodes (UpdateNodegroupVersion: the AMI release,
# the Kubernetes version, the launch template version) against those EKS changes on the group alone
# (UpdateNodegroupConfig: scaling, labels, taints, update and repair configuration). EKS API reference.
NODE_ROLLING = ("ReleaseVersion", "Version", "LaunchTemplate")
ASG_ROLLING = ("LaunchTemplate", "MixedInstancesPolicy", "LaunchConfigurationName", "VPCZoneIdentifier")
WORKLOADS = ("apps/Deployment", "apps/DaemonSet", "apps/StatefulSet")


@dataclass(frozen=True)
class Step:
    """What a deploy does to one resource."""

    stack: str
    logical_id: str
    type: str
    verdict: str  # IN_PLACE | REPLACED | CANNOT | ADDED | REMOVED
    effect: str = ""  # what that does to the running environment
    why: str = ""
    instead: str = ""  # for CANNOT: how to make the change instead, one line

    def line(self) -> str:
        text = f"{self.stack}/{self.logical_id} ({self.type}): {self.verdict}"
        for part in (self.why, self.effect):
            if part:
                text += f"; {part}"
        return text + (f"; instead: {self.instead}" if self.instead else "")


def _get(value: Any, path: Iterable[str]) -> Any:
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def _props(template: dict[str, Any], lid: str) -> dict[str, Any]:
    r = (template.get("Resources") or {}).get(lid) or {}
    return r.get("Properties") or {}


def _group_words(resource: dict[str, Any]) -> str:
    props = resource.get("Properties") or {}
    meta = (resource.get("Metadata") or {}).get(METADATA_KEY)
    name = props.get("NodegroupName") or props.get("AutoScalingGroupName")
    pool = f" (pool {meta.get('pool')})" if isinstance(meta, dict) and meta.get("pool") else ""
    return f"{name if isinstance(name, str) else 'the group'}{pool}"


def _fixed_name(before: dict[str, Any], after: dict[str, Any]) -> str | None:
    """The fixed physical name the replacement of ``after`` would need while ``before`` holds it, or None."""
    row = FIXED_NAMES.get(str(after.get("Type")))
    if row is None:
        return None
    old, new = _get(before.get("Properties"), row[0]), _get(after.get("Properties"), row[0])
    if new is None or old != new:
        return None
    return new if isinstance(new, str) else json.dumps(new, sort_keys=True)


# --------------------------------------------------------------------------------------------
# what an update does, per type
# --------------------------------------------------------------------------------------------
def _nodegroup_update(before: dict[str, Any], after: dict[str, Any], changed: Iterable[str], via: list[str]) -> str:
    changed = set(changed)
    props = after.get("Properties") or {}
    if changed & set(NODE_ROLLING) or via:
        cfg = props.get("UpdateConfig") or {}
        pace = f"{cfg.get('MaxUnavailable', 1)} at a time" if cfg else "at EKS's default pace"
        strategy = f", strategy {cfg['UpdateStrategy']}" if cfg.get("UpdateStrategy") else ""
        what = ", ".join(sorted(changed & set(NODE_ROLLING)) or [f"launch template {via[0]} has a new version"])
        force = "" if props.get("ForceUpdateEnabled", True) else "; drains respect the PodDisruptionBudgets"
        return f"nodes of {_group_words(after)} replaced ({what}): {pace}{strategy}{force}; their pods restart elsewhere"
    if changed <= {"ScalingConfig"} and changed:
        return f"scaling bounds of {_group_words(after)} change; no node is replaced"
    return f"{_group_words(after)} updated ({', '.join(sorted(changed))}); no node is replaced"


def _asg_update(after: dict[str, Any], changed: Iterable[str], via: list[str]) -> str:
    changed = set(changed)
    rolling = (after.get("UpdatePolicy") or {}).get("AutoScalingRollingUpdate")
    if changed & set(ASG_ROLLING) or via:
        what = ", ".join(sorted(changed & set(ASG_ROLLING)) or [f"launch template {via[0]} has a new version"])
        if rolling:
            batch = rolling.get("MaxBatchSize", 1)
            return f"nodes of {_group_words(after)} replaced by a rolling update ({what}), {batch} at a time"
        return f"{_group_words(after)}: running nodes keep the old template ({what}); nodes launched later get the new one"
    words = f"{_group_words(after)} updated ({', '.join(sorted(changed))})"
    if "DesiredCapacity" in changed:
        return words + "; nodes are launched or terminated to the new desired capacity"
    return words + "; no node is replaced"


def _manifest_update(before: dict[str, Any], after: dict[str, Any], lid: str) -> str:
    from neuronkit.kubernetes import immutable

    old = immutable.applied_objects({"Resources": {lid: before}})
    new = immutable.applied_objects({"Resources": {lid: after}})
    words: list[str] = []
    for key in sorted(new.keys() - old.keys()):
        words.append(f"{_obj(key)} created" + (" (runs)" if key[0] == "batch/Job" else ""))
    for key in sorted(old.keys() - new.keys()):
        words.append(f"{_obj(key)} deleted (kubectl apply --prune)")
    for key in sorted(old.keys() & new.keys()):
        if old[key] == new[key]:
            continue
        if key[0] in WORKLOADS and _get(old[key], ("spec", "template")) != _get(new[key], ("spec", "template")):
            words.append(f"pods of {_obj(key)} restarted (rolling)")
        else:
            words.append(f"{_obj(key)} updated")
    return "kubectl apply: " + ("; ".join(words) if words else "deploy-time values change")


def _obj(key: tuple[str, str, str]) -> str:
    kind = key[0].rpartition("/")[2]
    return f"{kind} {key[1] + '/' if key[1] else ''}{key[2]}"


def _patch_update(after: dict[str, Any]) -> str:
    props = after.get("Properties") or {}
    target = f"{props.get('ResourceNamespace', '')}/{props.get('ResourceName', '')}".lstrip("/")
    if "/spec/template" in json.dumps(props.get("ApplyPatchJson")):
        return f"kubectl patch {target}: its pod template changes, its pods restart (rolling); replicas untouched"
    return f"kubectl patch {target}"


def _helm_update(before: dict[str, Any], after: dict[str, Any]) -> str:
    a, b = before.get("Properties") or {}, after.get("Properties") or {}
    version = f" {a.get('Version')} -> {b.get('Version')}" if a.get("Version") != b.get("Version") else ""
    return f"helm upgrade of release {b.get('Release')} ({b.get('Chart')}{version}): the chart's pods restart where their templates change"


def _in_place_effect(c: Any, before: dict[str, Any], after: dict[str, Any], via: list[str]) -> str:
    t = after.get("Type")
    if t == "AWS::EKS::Nodegroup":
        return _nodegroup_update(before, after, c.properties if c else (), via)
    if t == "AWS::AutoScaling::AutoScalingGroup":
        return _asg_update(after, c.properties if c else (), via)
    if t == MANIFEST:
        return _manifest_update(before, after, c.logical_id)
    if t == PATCH:
        return _patch_update(after)
    if t == HELM:
        return _helm_update(before, after)
    if t == "AWS::EC2::LaunchTemplate":
        return "a new launch template version; the groups that read its latest version roll (their rows)"
    if t == "AWS::EKS::Addon":
        return f"add-on {(after.get('Properties') or {}).get('AddonName')} updated in place; its pods restart"
    if t == "AWS::EKS::Cluster":
        return c.why if c and c.why else "the control plane updates in place"
    if via:
        return f"reads the new value of {via[0]}"
    return c.why if c and c.why else ""


def _replaced_effect(c: Any, after: dict[str, Any]) -> str:
    t = after.get("Type")
    if t == "AWS::EKS::Nodegroup":
        # CloudFormation creates the replacement (its new name) first, then deletes the old group, whose nodes EKS
        # drains (EKS User Guide, "Managed node groups": "Node updates and terminations automatically drain nodes").
        return (
            f"nodes of {_group_words(after)} replaced (new group created, then the old one's nodes drained/terminated); "
            "pods move to the new group; quota and reserved capacity must hold both groups while it runs"
        )
    if t == "AWS::AutoScaling::AutoScalingGroup":
        return f"nodes of {_group_words(after)} replaced: a new group is created, then the old one deleted"
    if t == "AWS::ElasticLoadBalancingV2::TargetGroup":
        return "a new target group: the listener moves to it, and serving waits until its targets pass health checks"
    if c.stateful:
        return "**the old one is retained (orphaned), the new one starts empty**" if c.retained else "**its data is lost**"
    return "a new one is created, then the old one deleted"


def _reads_new_version(resource: dict[str, Any], modified: set[str]) -> list[str]:
    """Modified launch templates (or custom resources) whose new attribute value ``resource`` reads by Fn::GetAtt."""
    found: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            att = v.get("Fn::GetAtt")
            if isinstance(att, list) and att and att[0] in modified and att[0] not in found:
                found.append(str(att[0]))
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(resource.get("Properties"))
    return sorted(found)


# --------------------------------------------------------------------------------------------
# the plan
# --------------------------------------------------------------------------------------------
def plan(
    old: dict[str, dict[str, Any]],
    new: dict[str, dict[str, Any]],
    changes: Iterable[Any],
    stacks: Iterable[str] | None = None,
) -> list[Step]:
    """One step per resource a deploy of ``new`` over ``old`` touches, for ``stacks`` (default: all).
    ``changes``: :func:`neuronkit.reports.review.compare_templates` of the same templates."""
    from neuronkit.kubernetes import immutable

    changes = list(changes)
    wanted = set(stacks) if stacks is not None else set(old) | set(new)
    steps: dict[tuple[str, str], Step] = {}
    for c in changes:
        if c.stack not in wanted:
            continue
        before = (old.get(c.stack, {}).get("Resources") or {}).get(c.logical_id) or {}
        after = (new.get(c.stack, {}).get("Resources") or {}).get(c.logical_id) or {}
        if c.action == "added":
            effect = f"nodes of {_group_words(after)} launched" if after.get("Type") == "AWS::EKS::Nodegroup" else "created"
            steps[(c.stack, c.logical_id)] = Step(c.stack, c.logical_id, c.type, ADDED, effect, c.why)
        elif c.action == "removed":
            effect = (
                f"nodes of {_group_words(before)} terminated"
                if c.type in ("AWS::EKS::Nodegroup", "AWS::AutoScaling::AutoScalingGroup")
                else "**the old one is retained (orphaned)**"
                if c.retained
                else "**its data is lost**"
                if c.stateful
                else "deleted"
            )
            steps[(c.stack, c.logical_id)] = Step(c.stack, c.logical_id, c.type, REMOVED, effect, c.why)
        elif c.action == "replaced":
            name = _fixed_name(before, after) if before and after else None
            if name is not None:
                steps[(c.stack, c.logical_id)] = Step(
                    c.stack, c.logical_id, c.type, CANNOT, _replaced_effect(c, after),
                    f"replaced ({c.why}) while its fixed name {name} is held by the old one (CloudFormation creates "
                    "the replacement first; CloudFormation User Guide, Name type)",
                    FIXED_NAMES[c.type][1],
                )  # fmt: skip
            else:
                steps[(c.stack, c.logical_id)] = Step(c.stack, c.logical_id, c.type, REPLACED, _replaced_effect(c, after), c.why)
        else:
            steps[(c.stack, c.logical_id)] = Step(
                c.stack, c.logical_id, c.type, IN_PLACE, _in_place_effect(c, before, after, []), ""
            )
    # Resources whose text is unchanged but read the new version of a changed launch template (or custom resource).
    for stack in sorted(wanted & set(new) & set(old)):
        modified = {c.logical_id for c in changes if c.stack == stack and c.action == "modified"}
        for lid, r in sorted((new[stack].get("Resources") or {}).items()):
            if (stack, lid) in steps or lid not in (old[stack].get("Resources") or {}):
                continue
            via = _reads_new_version(r, {m for m in modified if _rolls_readers(new[stack], m)})
            if via:
                before = old[stack]["Resources"][lid]
                steps[(stack, lid)] = Step(stack, lid, r["Type"], IN_PLACE, _in_place_effect(None, before, r, via))
    # Kubernetes objects re-applied under their name with an immutable field changed.
    for stack in sorted(wanted & set(new) & set(old)):
        replaced = frozenset(c.logical_id for c in changes if c.stack == stack and c.action == "replaced")
        owners = immutable.applied_by(new[stack])
        for conflict in immutable.conflicts(stack, old[stack], new[stack], replaced):
            lid = owners.get((conflict_kind(conflict), conflict.namespace, conflict.name), "?")
            steps[(stack, lid)] = Step(
                stack, lid, MANIFEST, CANNOT,
                f"kubectl apply of {conflict.kind} {conflict.name} is refused and the stack rolls back",
                f"{conflict.field} cannot change under the same name ({conflict.source})",
                conflict.how_instead,
            )  # fmt: skip
    return sorted(steps.values(), key=lambda s: (ORDER[s.verdict], s.stack, s.logical_id))


def conflict_kind(conflict: Any) -> str:
    """The group/Kind key of a conflict (``Conflict.kind`` drops the core group's leading slash)."""
    return conflict.kind if "/" in conflict.kind else f"/{conflict.kind}"


def _rolls_readers(template: dict[str, Any], lid: str) -> bool:
    t = ((template.get("Resources") or {}).get(lid) or {}).get("Type", "")
    return t == "AWS::EC2::LaunchTemplate" or t.startswith("Custom::")


def cannot_update(steps: Iterable[Step]) -> list[Step]:
    return [s for s in steps if s.verdict == CANNOT]


def render(steps: list[Step], env_of: Any) -> list[str]:
    """Markdown: per environment, one table row per step (``env_of``: stack -> environment name)."""
    if not steps:
        return []
    lines = ["### Update plan", ""]
    by_env: dict[str, list[Step]] = {}
    for s in steps:
        by_env.setdefault(env_of(s.stack) or "(no environment)", []).append(s)
    for env, mine in sorted(by_env.items()):
        counts = {v: sum(1 for s in mine if s.verdict == v) for v in ORDER}
        lines += [f"#### {env}", "", ", ".join(f"{n} {v}" for v, n in counts.items() if n) + ".", ""]
        lines += ["| resource | type | plan | what it does |", "| --- | --- | --- | --- |"]
        for s in mine:
            verdict = f"**{s.verdict}**" if s.verdict in (CANNOT, REPLACED) else s.verdict
            what = "; ".join(p for p in (s.why, s.effect) if p) + (f"; **instead**: {s.instead}" if s.instead else "")
            lines.append(f"| {s.stack}/{s.logical_id} | {s.type} | {verdict} | {what.replace('|', '/') or '–'} |")
        lines += [""]
    return lines


__all__ = [
    "ADDED", "CANNOT", "FIXED_NAMES", "IN_PLACE", "NAME_REFERENCES", "REMOVED", "REPLACED", "Step", "cannot_update",
    "plan", "render",
]  # fmt: skip
