"""``neuronkit rehearse --base BASE``: deploy BASE into the embedded mock, then the working tree over it (issue 47).

The day-two rehearsal. BASE is materialized as ``neuronkit review`` does it (a detached git worktree of that revision,
:func:`neuronkit.reports.review.base_worktree`); both revisions are synthesized with the pinned CDK CLI into one
:class:`~neuronkit.rehearsal.runner.Rehearsal`; per environment the base is deployed, the stacks' resources and
physical IDs are read back, the working tree is deployed over it (``cdk deploy``: CloudFormation ``UpdateStack``), and
read back again. Per stack the report says what was **updated** in place (same physical ID), **replaced** (a new
physical ID), **added** and **removed**, and, for each changed resource, what the mock cannot show:

- resource types moto does not model (every custom resource: the kubectl manifests and patches, Helm charts, the node
  group size function, ``Custom::AWS``; access entries, add-ons, pod identity associations) are neither created nor
  updated: a changed one is listed as "not run by the mock";
- types moto models without an update (a target group, a KMS key ...) keep their base state in the mock
  (:func:`neuronkit.rehearsal.moto_workarounds.mock_updates`): listed as "not updated by the mock";
- moto launches no instance: node replacement by a node group's or Auto Scaling group's update is never shown; the
  update plan's words (:mod:`neuronkit.reports.plan`) say what would happen, beside what the mock did.

The update fails the command (exit 1, one line per problem) when the CDK CLI's deploy over the base fails (moto refuses
it, e.g. a named node group CloudFormation would have to replace), and when the update plan says "cannot update" (a
Kubernetes object the mock does not apply would be refused by the cluster, or a fixed name CloudFormation must replace).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronkit.rehearsal.assembly import Assembly, StackInfo
from neuronkit.rehearsal.errors import RehearsalError
from neuronkit.rehearsal.report import physical_ids

Progress = Callable[[str], None]
UPDATED, REPLACED, ADDED, REMOVED = "updated", "replaced", "added", "removed"
NOT_RUN = "not run by the mock"
NOT_UPDATED = "not updated by the mock"
# CloudFormation updates a resource whose text is the same when a value it reads changes (a group reading its launch
# template's LatestVersionNumber); moto compares the template text only, so it leaves it as it was.
NOT_FOLLOWED = "not updated by the mock: same text, reads a changed value"


@dataclass(frozen=True)
class ResourceUpdate:
    """One resource the update touched, as the mock saw it, with the update plan's words beside it."""

    stack: str
    logical_id: str
    type: str
    action: str  # updated | replaced | added | removed
    mock: str = ""  # "" when the mock did it; NOT_RUN / NOT_UPDATED otherwise
    plan: str = ""  # the update plan's verdict and effect for this resource

    def line(self) -> str:
        shown = f"{self.logical_id} ({self.type}) {self.action}"
        if self.mock:
            shown += f" [{self.mock}]"
        return shown + (f"; plan: {self.plan}" if self.plan else "")


@dataclass
class StackUpdate:
    name: str
    status: str = ""  # the stack's status after the update (UPDATE_COMPLETE, CREATE_COMPLETE ...), or "not deployed"
    change: str = ""  # "" | "added" | "removed" (the whole stack)
    resources: list[ResourceUpdate] = field(default_factory=list)

    def count(self, action: str) -> int:
        return sum(1 for r in self.resources if r.action == action)

    def summary(self) -> str:
        if self.change:
            return f"{self.name}: stack {self.change} ({self.status})"
        if not self.resources:
            return f"{self.name}: no changes"
        parts = [f"{self.count(a)} {a}" for a in (UPDATED, REPLACED, ADDED, REMOVED) if self.count(a)]
        return f"{self.name}: {', '.join(parts)} ({self.status})"


@dataclass
class UpdateReport:
    """One environment's update over the base revision."""

    environment: str
    base: str
    stacks: list[StackUpdate] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)
    # The Kubernetes objects and Helm releases the update would add, alter or remove (neuronkit.kubernetes.report
    # .object_changes, as `review` lists them): the mock applies none of them.
    kubernetes: list[Any] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def resources(self, action: str | None = None, type_: str | None = None) -> list[ResourceUpdate]:
        return [
            r
            for s in self.stacks
            for r in s.resources
            if (action is None or r.action == action) and (type_ is None or r.type == type_)
        ]


# --------------------------------------------------------------------------------------------
# reading the mock before and after
# --------------------------------------------------------------------------------------------
def snapshot(client: Any, stacks: Sequence[StackInfo]) -> dict[str, dict[str, str]]:
    """Stack name -> logical ID -> physical ID, as the mock lists them now (a stack not there: absent)."""
    out: dict[str, dict[str, str]] = {}
    for stack in stacks:
        cfn = client("cloudformation", stack.account, stack.region)
        try:
            cfn.describe_stacks(StackName=stack.name)
        except cfn.exceptions.ClientError:
            continue
        out[stack.name] = physical_ids(client, stack)
    return out


def stack_status(client: Any, stack: StackInfo) -> str:
    cfn = client("cloudformation", stack.account, stack.region)
    try:
        return str(cfn.describe_stacks(StackName=stack.name)["Stacks"][0]["StackStatus"])
    except cfn.exceptions.ClientError:
        return "not deployed"


def compare(
    base: Sequence[StackInfo],
    head: Sequence[StackInfo],
    before: dict[str, dict[str, str]],
    after: dict[str, dict[str, str]],
    *,
    updates_in_mock: Callable[[str], bool],
    modelled: Callable[[str], bool],
    plan_words: dict[tuple[str, str], str] | None = None,
    status: Callable[[StackInfo], str] | None = None,
) -> list[StackUpdate]:
    """Per stack of either revision, what the update did to each resource: from the two templates (which resources
    changed) and the physical IDs read before and after (updated under the same ID, or replaced by a new one)."""
    words = plan_words or {}
    old = {s.name: s for s in base}
    new = {s.name: s for s in head}
    out: list[StackUpdate] = []
    for name in sorted(old.keys() | new.keys()):
        a = (old[name].template.get("Resources") or {}) if name in old else {}
        b = (new[name].template.get("Resources") or {}) if name in new else {}
        shown = new.get(name) or old[name]
        s = StackUpdate(name, status(shown) if status else "")
        if name not in old:
            s.change = ADDED
        elif name not in new:
            s.change = REMOVED
        ids_before, ids_after = before.get(name, {}), after.get(name, {})
        for lid in sorted(a.keys() | b.keys()):
            kind = str((b.get(lid) or a.get(lid) or {}).get("Type", ""))
            plan = words.get((name, lid), "")
            if lid not in a:
                mock = "" if modelled(kind) else NOT_RUN
                s.resources.append(ResourceUpdate(name, lid, kind, ADDED, mock, plan))
            elif lid not in b:
                mock = "" if modelled(kind) else NOT_RUN
                s.resources.append(ResourceUpdate(name, lid, kind, REMOVED, mock, plan))
            elif json.dumps(a[lid], sort_keys=True) != json.dumps(b[lid], sort_keys=True):
                was, now = ids_before.get(lid, ""), ids_after.get(lid, "")
                if not modelled(kind):
                    s.resources.append(ResourceUpdate(name, lid, kind, UPDATED, NOT_RUN, plan))
                elif was and now and was != now:
                    s.resources.append(ResourceUpdate(name, lid, kind, REPLACED, "", plan))
                else:
                    mock = "" if updates_in_mock(kind) else NOT_UPDATED
                    s.resources.append(ResourceUpdate(name, lid, kind, UPDATED, mock, plan))
            elif plan:  # the plan updates it through a reference (its text is the same)
                s.resources.append(ResourceUpdate(name, lid, kind, UPDATED, NOT_FOLLOWED if modelled(kind) else NOT_RUN, plan))
        out.append(s)
    return out


def _plan_words(base: Sequence[StackInfo], head: Sequence[StackInfo]) -> tuple[dict[tuple[str, str], str], list[str]]:
    """The update plan of the two revisions' templates (neuronkit review's): per resource its verdict and effect, and
    one line per "cannot update"."""
    from neuronkit.reports import plan
    from neuronkit.reports.review import compare_templates

    old = {s.name: s.template for s in base}
    new = {s.name: s.template for s in head}
    regions = {s.name: s.region for s in [*base, *head]}
    steps = plan.plan(old, new, compare_templates(old, new, regions), sorted(old.keys() | new.keys()))
    words = {(s.stack, s.logical_id): "; ".join(p for p in (s.verdict, s.effect) if p) for s in steps}
    return words, [f"plan: {s.line()}" for s in plan.cannot_update(steps)]


# --------------------------------------------------------------------------------------------
# the rehearsal
# --------------------------------------------------------------------------------------------
def rehearse_update(
    project_dir: Path,
    base: str,
    *,
    environments: Sequence[str] | None = None,
    env_file: Path | None = None,
    progress: Progress | None = None,
    verbose: bool = False,
) -> list[UpdateReport]:
    """Deploy ``base`` (a git revision of the repository holding ``project_dir``) into the mock, then the working tree
    over it, per environment; return what each update did. A failed base deploy raises :class:`RehearsalError`."""
    import time

    from neuronkit.rehearsal import moto_workarounds
    from neuronkit.rehearsal.runner import Rehearsal
    from neuronkit.reports.review import ReviewError, base_worktree

    emit = progress or (lambda _: None)
    project_dir = project_dir.resolve()
    try:
        with base_worktree(base, project_dir) as (tree, repo):
            base_dir = tree / project_dir.relative_to(repo)
            base_file = None
            if env_file is not None:
                env_file = env_file.resolve()
                base_file = base_dir / env_file.relative_to(project_dir) if env_file.is_relative_to(project_dir) else env_file
                if not base_file.is_file():
                    raise RehearsalError(
                        f"{env_file.relative_to(project_dir)} does not exist in {base}: nothing to update; rehearse it "
                        "without --base",
                        code=2,
                    )
            with Rehearsal(
                project_dir, environments=environments, env_file=env_file, base_dir=base_dir, base_env_file=base_file,
                progress=progress, verbose=verbose,
            ) as r:  # fmt: skip
                assert r.base_assembly is not None and r.assembly is not None
                reports = []
                for name in r.environment_names:
                    reports.append(_one(r, name, base, r.base_assembly, r.assembly, emit, moto_workarounds, time))
                return reports
    except ReviewError as err:
        raise RehearsalError(f"--base {base}: {err}", code=2) from None


def _one(
    r: Any, name: str, base: str, base_assembly: Assembly, head: Assembly, emit: Progress, workarounds: Any, time: Any
) -> UpdateReport:
    old, new = base_assembly.environments()[name], head.environments()[name]
    report = UpdateReport(name, base)
    emit(f"[{name}] deploying the base revision {base}")
    start = time.monotonic()
    deployed = r.deploy([name], base=True)[0]
    report.seconds["base"] = time.monotonic() - start
    if not deployed.ok:
        report.problems += [f"base {base}: {p}" for p in deployed.problems]
    before = snapshot(r.client, old)
    emit(f"[{name}] deploying the working tree over it")
    start = time.monotonic()
    try:
        updated = r.deploy([name])[0]
        report.problems += [f"after the update: {p}" for p in updated.problems]
    except RehearsalError as err:
        r._keep_work_dir = True  # the server log and both assemblies stay for a look
        # One line: what failed, and the CLI's own error lines (❌ and ‣), where it printed them.
        said = [line.strip() for line in err.tail if line.lstrip().startswith(("❌", "‣"))]
        report.problems.append(
            f"the update over {base} failed: {err.message.split(';')[0]}"
            + (f": {' '.join(said)}" if said else "")
            + f" (work folder kept: {r.work_dir})"
        )
    report.seconds["update"] = time.monotonic() - start
    after = snapshot(r.client, new)
    words, blocked = _plan_words(old, new)
    report.problems += blocked
    from neuronkit.kubernetes.report import object_changes

    report.kubernetes = object_changes(
        {s.name: s.template for s in old}, {s.name: s.template for s in new}, {s.name for s in [*old, *new]}
    )

    def modelled(kind: str) -> bool:
        from moto.cloudformation.parsing import get_model_map

        return kind in get_model_map()

    report.stacks = compare(
        old, new, before, after, updates_in_mock=workarounds.mock_updates, modelled=modelled, plan_words=words,
        status=lambda s: stack_status(r.client, s),
    )  # fmt: skip
    return report


# --------------------------------------------------------------------------------------------
# the report
# --------------------------------------------------------------------------------------------
MOCK_CANNOT_SHOW = (
    "What the mock cannot show: moto launches no instance, so no node is replaced by a node group's or Auto Scaling "
    "group's update (the plan's words say which would be); custom resources are not run (kubectl manifests and "
    "patches, Helm charts, the node group size function, Custom::AWS calls), so nothing inside Kubernetes is applied "
    "and no webhook or immutable field is checked by the mock (the plan checks them offline); access entries, add-ons "
    "and pod identity associations are not modelled; resources marked 'not updated by the mock' keep their base state."
)


def render(report: UpdateReport) -> str:
    verdict = "OK" if report.ok else f"FAILED ({len(report.problems)} problem(s))"
    lines = [f"== {report.environment}: update over {report.base}: {verdict}"]
    for s in report.stacks:
        lines.append(f"  {s.summary()}")
        order = {REPLACED: 0, REMOVED: 1, ADDED: 2, UPDATED: 3}
        for res in sorted(s.resources, key=lambda x: (order[x.action], x.logical_id)):
            lines.append(f"    {res.line()}")
    if report.kubernetes:
        from neuronkit.kubernetes.report import object_lines

        lines.append("  Kubernetes objects the update would apply (the mock applies none):")
        lines += [f"    {line[2:]}" for line in object_lines(report.kubernetes)]
    shown = [r for r in report.resources() if r.mock]
    if shown:
        lines.append(f"  {len(shown)} change(s) the mock did not carry out (marked above). {MOCK_CANNOT_SHOW}")
    else:
        lines.append(f"  {MOCK_CANNOT_SHOW}")
    secs = ", ".join(f"{k} {v:.0f} s" for k, v in report.seconds.items())
    if secs:
        lines.append(f"  time: {secs}")
    lines += [f"  problem: {p}" for p in report.problems]
    return "\n".join(lines)


__all__ = ["ResourceUpdate", "StackUpdate", "UpdateReport", "compare", "rehearse_update", "render", "snapshot"]
