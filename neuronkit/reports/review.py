"""``neuronkit review BASE``: what a pull request changes in the deployed environments, from git alone.

Synthesizes the base revision (a temporary git worktree, run with the same Python) and the working tree,
then compares the templates: per stack, resources added, removed and modified, with **replacements**
called out. A modified resource is replaced when a property CloudFormation cannot update in place changed
(``createOnlyProperties`` of the resource type's provider schema, as bundled with cfn-lint); a removed
resource whose type reappears in the same stack under another logical ID is replaced too. Stateful types
(buckets, file systems, volumes, log groups, keys, repositories) are flagged: their data is lost unless
the old resource is retained. The cost change of the pools and each environment's new maximum against its
``budget.monthly_usd`` follow. No AWS credentials are used.

First of all, per environment the change touches, the **update plan** (:mod:`neuronkit.reports.plan`): per resource,
updates in place / replaced (and what that does) / cannot update (why, and how instead); a "cannot update" (a
fixed-name resource CloudFormation must replace, or a Kubernetes object whose immutable field changes under its name)
fails the command.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronkit.reports.pools import COMPILE_METADATA_KEY

STATEFUL = {
    "AWS::S3::Bucket": "bucket",
    "AWS::FSx::FileSystem": "file system",
    "AWS::EFS::FileSystem": "file system",
    "AWS::EC2::Volume": "volume",
    "AWS::Logs::LogGroup": "log group",
    "AWS::KMS::Key": "key (what it encrypted becomes unreadable)",
    "AWS::ECR::Repository": "image repository",
    "AWS::DynamoDB::Table": "table",
}
RETAINED = ("Retain", "RetainExceptOnCreate", "Snapshot")


class ReviewError(Exception):
    """A step of the review failed; the message says which and how to fix it."""


@dataclass(frozen=True)
class Change:
    stack: str
    logical_id: str
    type: str
    action: str  # added | removed | modified | replaced
    properties: tuple[str, ...] = ()
    why: str = ""
    retained: bool = False

    @property
    def stateful(self) -> bool:
        return self.type in STATEFUL


@dataclass
class EnvChanges:
    """The "what changes" section of one environment, each part a list of Markdown lines."""

    name: str
    note: str = ""  # e.g. "new environment", or why the files could not be compared
    capacity: list[str] = field(default_factory=list)
    software: list[str] = field(default_factory=list)
    model: list[str] = field(default_factory=list)
    access: list[str] = field(default_factory=list)
    rollout: list[str] = field(default_factory=list)
    replaced: list[str] = field(default_factory=list)
    cost: list[str] = field(default_factory=list)


@dataclass
class Review:
    base: str
    changes: list[Change] = field(default_factory=list)
    cost: str = ""
    budgets: list[str] = field(default_factory=list)
    environments: list[EnvChanges] = field(default_factory=list)
    pins_needed: list[str] = field(default_factory=list)  # image lookups the head needs pinned before it deploys
    cannot_update: list[str] = field(default_factory=list)  # resources and Kubernetes objects whose update would fail
    plan: list[Any] = field(default_factory=list)  # neuronkit.reports.plan.Step, per resource the deploy touches
    environment_of: dict[str, str] = field(default_factory=dict)  # stack -> environment, for the plan's sections
    kubernetes: list[Any] = field(default_factory=list)  # neuronkit.kubernetes.report.ObjectChange, per object changed


# The words app.py (neuronkit.stacks.missing_lookups) uses for a pool whose image lookup is not pinned yet.
PIN_NEEDED = "is not pinned"


# --------------------------------------------------------------------------------------------
# comparing templates
# --------------------------------------------------------------------------------------------
def create_only(resource_type: str, region: str = "us-east-1") -> tuple[str, ...]:
    """JSON pointers of the properties whose change replaces a resource (the provider schema cfn-lint bundles)."""
    try:
        from cfnlint.schema import PROVIDER_SCHEMA_MANAGER
    except ImportError as err:  # pragma: no cover - cfn-lint comes with requirements-dev (make setup)
        raise ReviewError("neuronkit review needs cfn-lint (requirements-dev.txt; `make setup` installs it)") from err
    try:
        schema = PROVIDER_SCHEMA_MANAGER.get_resource_schema(region, resource_type).schema
    except Exception:  # noqa: BLE001 - an unknown type (custom resources): nothing known to replace it
        return ()
    return tuple(schema.get("createOnlyProperties", ()))


def _at(value: Any, pointer: str) -> Any:
    for part in pointer.split("/")[2:]:  # "/properties/A/B" -> A, B
        if not isinstance(value, dict):
            return None
        value = value.get(part)
    return value


def _changed_properties(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    a, b = old.get("Properties", {}), new.get("Properties", {})
    return sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))


def compare_templates(
    old: dict[str, dict[str, Any]], new: dict[str, dict[str, Any]], regions: dict[str, str] | None = None
) -> list[Change]:
    """The changes between two sets of templates (stack name -> template)."""
    regions = regions or {}
    out: list[Change] = []
    for stack in sorted(old.keys() | new.keys()):
        a = old.get(stack, {}).get("Resources", {})
        b = new.get(stack, {}).get("Resources", {})
        region = regions.get(stack, "us-east-1")
        added = {k: v for k, v in b.items() if k not in a}
        for lid in sorted(a.keys() & b.keys()):
            before, after = a[lid], b[lid]
            if before.get("Type") != after.get("Type"):
                out.append(Change(stack, lid, after["Type"], "replaced", (), f"its type changed from {before['Type']}",
                                  before.get("DeletionPolicy") in RETAINED))  # fmt: skip
                continue
            props = _changed_properties(before, after)
            if not props:
                continue
            pointers = create_only(after["Type"], region)
            breaking = sorted(
                {p.split("/")[2] for p in pointers if _at(before.get("Properties", {}), p) != _at(after.get("Properties", {}), p)}
            )
            if breaking:
                why = f"{', '.join(breaking)} cannot change in place" + _subnet_note(after, breaking, before)
                out.append(
                    Change(stack, lid, after["Type"], "replaced", tuple(props), why, before.get("DeletionPolicy") in RETAINED)
                )  # fmt: skip
            else:
                out.append(Change(stack, lid, after["Type"], "modified", tuple(props), why=_eks_version_note(before, after)))
        for lid in sorted(k for k in a if k not in b):
            r = a[lid]
            twin = next((k for k, v in added.items() if v.get("Type") == r.get("Type")), None)
            if twin is not None and r.get("Type") in STATEFUL:
                added.pop(twin)
                out.append(Change(stack, lid, r["Type"], "replaced", (), f"its logical ID changed to {twin}",
                                  r.get("DeletionPolicy") in RETAINED))  # fmt: skip
            else:
                out.append(Change(stack, lid, r["Type"], "removed", why=_compile_note(r, "removed"),
                                  retained=r.get("DeletionPolicy") in RETAINED))  # fmt: skip
        out += [Change(stack, lid, v["Type"], "added", why=_compile_note(v, "added")) for lid, v in sorted(added.items())]
    return _cascade(out, new, regions)


def _subnet_note(after: dict[str, Any], breaking: list[str], before: dict[str, Any]) -> str:
    """A subnet of the kit's network moving to another CidrBlock: how to keep the deployed one (docs/network.md)."""
    if after.get("Type") != "AWS::EC2::Subnet" or "CidrBlock" not in breaking:
        return ""
    old = str(before.get("Properties", {}).get("CidrBlock", ""))
    prefix = old.rpartition("/")[2]
    return (
        f" (to keep {old}, set network.private_subnet_prefix: {prefix} in the file: docs/network.md)" if prefix.isdigit() else ""
    )


def _eks_version_note(before: dict[str, Any], after: dict[str, Any]) -> str:
    """An EKS cluster's Kubernetes version bump: the order of an upgrade, and a jump EKS refuses (docs/eks.md); a
    Helm chart's or add-on's pinned version moving (neuronkit.kubernetes.report)."""
    from neuronkit.kubernetes.report import version_change

    if after.get("Type") != "AWS::EKS::Cluster":
        return version_change(before, after)
    old, new = before.get("Properties", {}).get("Version"), after.get("Properties", {}).get("Version")
    if not (isinstance(old, str) and isinstance(new, str)) or old == new:
        return ""
    try:
        step = int(new.split(".")[1]) - int(old.split(".")[1])
    except (IndexError, ValueError):
        return ""
    if step > 1:
        return (
            f"**Kubernetes {old} -> {new} skips {step - 1} minor version(s): EKS upgrades one minor at a time; "
            f"deploy {old.split('.')[0]}.{int(old.split('.')[1]) + 1} first** (docs/eks.md, Upgrades)"
        )
    if step < 1:
        return f"**Kubernetes {old} -> {new}: EKS cannot downgrade a cluster**"
    return (
        f"Kubernetes {old} -> {new}: the control plane upgrades in place first; then the node groups' release_version, "
        "then the add-ons (catalog/eks.yaml moves them together; docs/eks.md, Upgrades)"
    )


def _compile_note(resource: dict[str, Any], action: str) -> str:
    """What an added or removed compile group (a fleet's one node per compiled-artifact key) means for a rollout."""
    meta = resource.get("Metadata") if isinstance(resource.get("Metadata"), dict) else {}
    found = meta.get(COMPILE_METADATA_KEY) if isinstance(meta, dict) else None
    if not isinstance(found, dict):
        return ""
    if action == "added":
        return (
            f"compiles {found.get('instance_type')}'s new key {found.get('cache_key')} on one node; "
            f"{found.get('group')}'s rolling update waits for it"
        )
    return f"the compile group of {found.get('instance_type')}'s previous key {found.get('cache_key')} (holds no node)"


def _refs(value: Any, exports: dict[str, tuple[str, str]], stack: str) -> set[tuple[str, str]]:
    """The resources ``value`` points at: Ref and GetAtt in its stack, ImportValue of another stack's export."""
    found: set[tuple[str, str]] = set()
    if isinstance(value, dict):
        if "Ref" in value and isinstance(value["Ref"], str):
            found.add((stack, value["Ref"]))
        if "Fn::GetAtt" in value:
            target = value["Fn::GetAtt"]
            found.add((stack, target[0] if isinstance(target, list) else str(target).split(".")[0]))
        if "Fn::ImportValue" in value and isinstance(value["Fn::ImportValue"], str) and value["Fn::ImportValue"] in exports:
            found.add(exports[value["Fn::ImportValue"]])
        for v in value.values():
            found |= _refs(v, exports, stack)
    elif isinstance(value, list):
        for v in value:
            found |= _refs(v, exports, stack)
    return found


def _cascade(changes: list[Change], new: dict[str, dict[str, Any]], regions: dict[str, str]) -> list[Change]:
    """A resource whose create-only property points at a replaced resource is replaced as well (a new subnet
    means a new file system in it), across stacks through exports. Repeats until nothing more is replaced."""
    exports: dict[str, tuple[str, str]] = {}
    for stack, template in new.items():
        for output in template.get("Outputs", {}).values():
            name = (output.get("Export") or {}).get("Name")
            targets = _refs(output.get("Value"), {}, stack)
            if isinstance(name, str) and len(targets) == 1:
                exports[name] = next(iter(targets))
    by_key = {(c.stack, c.logical_id): c for c in changes}
    replaced = {k for k, c in by_key.items() if c.action == "replaced"}
    grew = True
    while grew:
        grew = False
        for stack, template in new.items():
            for lid, resource in template.get("Resources", {}).items():
                key = (stack, lid)
                if key in replaced or (key in by_key and by_key[key].action == "added"):
                    continue
                props = resource.get("Properties", {})
                for pointer in create_only(resource.get("Type", ""), regions.get(stack, "us-east-1")):
                    hit = sorted(_refs(_at(props, pointer), exports, stack) & replaced)
                    if hit:
                        prop = pointer.split("/")[2]
                        old = by_key.get(key)
                        by_key[key] = Change(
                            stack, lid, resource["Type"], "replaced", old.properties if old else (),
                            f"{prop} refers to {hit[0][0]}/{hit[0][1]}, which is replaced",
                            resource.get("DeletionPolicy") in RETAINED,
                        )  # fmt: skip
                        replaced.add(key)
                        grew = True
                        break
    return list(by_key.values())


def _fate(c: Change) -> str:
    if not c.stateful or c.action not in ("replaced", "removed"):
        return ""
    what = STATEFUL[c.type]
    if c.retained:
        return f"**the old {what} is retained (orphaned); the new one starts empty**"
    return f"**{what}: data lost unless retained**"


def render(review: Review) -> str:
    counts = {a: sum(1 for c in review.changes if c.action == a) for a in ("replaced", "removed", "added", "modified")}
    lines = [f"## neuronkit review against {review.base}", ""]
    if review.cannot_update:
        lines += [
            "### Cannot update",
            "",
            "The deploy would fail and roll back: a resource CloudFormation must replace keeps its fixed name, or a "
            "Kubernetes object keeps its name while a field an update cannot change does (each with the way instead):",
            "",
            *[f"- {line}" for line in review.cannot_update],
            "",
        ]
    if review.plan:
        from neuronkit.reports import plan

        lines += plan.render(review.plan, lambda stack: review.environment_of.get(stack))
    lines += _render_kubernetes(review)
    if review.pins_needed:
        lines += [
            "### Pin needed first",
            "",
            "This change needs an image pinned in cdk.context.json before it can deploy. The review below is complete, "
            "but those pools' launch templates carry CDK's stand-in image id until the pin is committed:",
            "",
            *[f"- {line}" for line in review.pins_needed],
            "",
        ]
    lines += _render_what_changes(review.environments)
    if review.environments:
        lines += ["### Resources", ""]
    if not review.changes:
        lines += ["No resource changes.", ""]
    else:
        lines += [", ".join(f"{n} {a}" for a, n in counts.items() if n) + ".", ""]
        danger = [c for c in review.changes if c.action in ("replaced", "removed") and c.stateful]
        if danger:
            lines += ["### Stateful resources replaced or removed", ""]
            lines += [f"- **{c.stack}/{c.logical_id}** ({c.type}) {c.action}: {c.why or 'removed'}; {_fate(c)}" for c in danger]
            lines += [""]
        lines += ["| stack | resource | type | change | properties | why |", "| --- | --- | --- | --- | --- | --- |"]
        order = {"replaced": 0, "removed": 1, "added": 2, "modified": 3}
        for c in sorted(review.changes, key=lambda c: (order[c.action], c.stack, c.logical_id)):
            name = f"**{c.logical_id}**" if c.stateful and c.action in ("replaced", "removed") else c.logical_id
            lines.append(
                f"| {c.stack} | {name} | {c.type} | {c.action} | {', '.join(c.properties) or '–'} | {c.why or _fate(c) or '–'} |"
            )
        lines += [""]
    if review.cost:
        lines += [review.cost.strip(), ""]
    if review.budgets:
        lines += ["### Against the budgets", ""] + [f"- {b}" for b in review.budgets] + [""]
    return "\n".join(lines)


def _render_kubernetes(review: Review) -> list[str]:
    """For a Kubernetes reviewer, after the plan: per environment the objects and Helm releases the change adds, alters
    or removes, with images, added capabilities, RBAC rules and subjects, and replicas (before -> after)."""
    from neuronkit.kubernetes.report import object_lines

    if not review.kubernetes:
        return []
    lines = [
        "### Kubernetes objects",
        "",
        "What the kubectl manifests, patches and Helm releases of the touched environments add, change and remove "
        "(deploy-time values compared as references):",
        "",
    ]
    by_env: dict[str, list[Any]] = {}
    for change in review.kubernetes:
        by_env.setdefault(review.environment_of.get(change.stack, change.stack), []).append(change)
    for env, changes in sorted(by_env.items()):
        lines += [f"#### {env}", "", *object_lines(changes), ""]
    return lines


_PARTS = (
    ("Capacity", "capacity"),
    ("Neuron software", "software"),
    ("Model and serving", "model"),
    ("Access (IAM)", "access"),
    ("Rollout", "rollout"),
    ("Replaced", "replaced"),
)


def _render_what_changes(envs: list[EnvChanges]) -> list[str]:
    if not envs:
        return []
    lines = ["### What changes", ""]
    for e in envs:
        lines += [f"#### {e.name}" + (f" ({e.note})" if e.note else ""), ""]
        empty = True
        for title, attr in _PARTS:
            items: list[str] = getattr(e, attr)
            if items:
                empty = False
                lines += [f"**{title}**", ""] + [f"- {item}" for item in items] + [""]
        if empty:
            lines += ["Nothing in the capacity, Neuron software, models, access or rollout changes.", ""]
        if e.cost:
            lines += ["**Cost against the budget** (pools at that capacity plus fixed charges)", "", *e.cost, ""]
    return lines


# --------------------------------------------------------------------------------------------
# synthesizing two revisions
# --------------------------------------------------------------------------------------------
def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, check=False)


def synth(tree: Path, outdir: Path) -> dict[str, dict[str, Any]]:
    """Run ``tree``'s app.py with this Python into ``outdir``; stack name -> template (a missing pin fails it)."""
    templates, pins = synth_with_pins(tree, outdir)
    if pins:
        raise ReviewError(f"synthesizing {tree} failed:\n  " + "\n  ".join(pins))
    return templates


def synth_with_pins(tree: Path, outdir: Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Like :func:`synth`, but a synth that stops only because an image lookup is not pinned in cdk.context.json yet
    (app.py names each one: "... is not pinned ...") still gives its templates (CDK writes them, with its stand-in
    image id, before app.py exits), with those lines: the review goes on and names the pins at the top."""
    env = {**os.environ, "CDK_OUTDIR": str(outdir), "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1"}
    env.pop("CDK_CLI_VERSION", None)
    done = _run([sys.executable, "app.py"], tree, env)
    templates = {p.name.removesuffix(".template.json"): json.loads(p.read_text()) for p in sorted(outdir.glob("*.template.json"))}
    if done.returncode == 0:
        return templates, []
    lines = done.stderr.strip().splitlines()
    pins = [line for line in lines if PIN_NEEDED in line]
    if pins and templates:
        return templates, pins
    last = (lines or ["(no output)"])[-5:]
    raise ReviewError(f"synthesizing {tree} failed:\n  " + "\n  ".join(last))


def _regions(tree: Path) -> dict[str, str]:
    from neuronkit.config import ConfigError, load_all

    try:
        envs = load_all(tree / "environments")
    except ConfigError:
        return {}
    return {f"{e.name}-{part}": e.region for e in envs for part in ("network", "storage", "training", "inference", "monitoring")}


def _budgets(envs: list[Any], new_out: Path) -> list[str]:
    from neuronkit.catalog.pricing import MissingPriceError
    from neuronkit.reports import cost
    from neuronkit.reports.pools import PoolError, pools_from_cdk_out

    try:
        pools = pools_from_cdk_out(new_out)
        priced = cost.price_pools(p for p in pools if p.environment in {e.name for e in envs})
    except (PoolError, MissingPriceError) as err:
        return [f"not compared: {str(err).splitlines()[0]}"]
    out = []
    for e in envs:
        mine = [c for c in priced if c.pool.environment == e.name]
        top = sum(c.monthly("max") for c in mine)
        if e.budget is None:
            out.append(f"{e.name}: {cost.usd(top)} a month at max capacity (pools only); no budget in the file")
            continue
        share = top / e.budget.monthly_usd * 100
        verdict = "**over the budget**" if top > e.budget.monthly_usd else "within the budget"
        out.append(
            f"{e.name}: {cost.usd(top)} a month at max capacity (pools only) against a budget of "
            f"{cost.usd(e.budget.monthly_usd)} ({share:.0f}%): {verdict}"
        )
    return out


def _load(tree: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """A tree's environments (name -> Environment), their parsed files (name -> data), and why a file does not
    load (name -> first problem). Each file is read on its own, so one bad file leaves the others compared."""
    import yaml

    from neuronkit.config import ConfigError, environment_files, load_environment

    envs: dict[str, Any] = {}
    data: dict[str, Any] = {}
    why: dict[str, str] = {}
    for f in environment_files(tree / "environments"):
        try:
            data[f.stem] = yaml.safe_load(f.read_text())
        except (OSError, yaml.YAMLError):
            data[f.stem] = f.read_text(errors="replace")
        try:
            env = load_environment(f)
            envs[f.stem] = env
        except ConfigError as err:
            why[f.stem] = err.problems[0] if err.problems else str(err)
    return envs, data, why


def env_of(stack: str, names: Iterable[str]) -> str | None:
    """The environment a stack belongs to (stacks are named ENV-PART; the longest matching name wins)."""
    hits = [n for n in names if stack.startswith(f"{n}-")]
    return max(hits, key=len) if hits else None


def touched(old_data: dict[str, Any], new_data: dict[str, Any], changes: Iterable[Change]) -> list[str]:
    """Environments the change touches: its file differs (added, removed or edited) or one of its stacks changes."""
    names = set(old_data) | set(new_data)
    out = {n for n in names if old_data.get(n) != new_data.get(n)}
    out |= {e for c in changes if (e := env_of(c.stack, names)) is not None}
    return sorted(out)


def what_changes(
    name: str, base: Any | None, head: Any | None, old: dict[str, Any], new: dict[str, Any], changes: list[Change]
) -> EnvChanges:
    """The first section for one environment (``base``/``head``: its Environment in each revision, or None)."""
    from neuronkit.catalog import serving
    from neuronkit.reports import changes as words

    section = EnvChanges(name)
    stacks = sorted({s for s in old.keys() | new.keys() if env_of(s, [name]) == name})
    if head is None:
        section.note = "removed by this change" if base is not None else "its file does not load in the head"
    else:
        section.note = "new environment" if base is None else ""
        section.capacity = words.capacity_lines(base, head)
        section.software = words.software_lines(base, head, words._warnings(head))
        section.model = words.model_lines(base, head)
        section.cost = words.cost_lines(base, head)
    section.software += words.eks_software_lines(old, new, stacks, head)
    section.access = words.access_lines(old, new, stacks)
    lock = int(serving.facts()["compiled_cache"]["lock_timeout_seconds"])
    section.rollout = words.capacity_block_lines(changes, new, stacks) + words.rollout_lines(changes, new, stacks, lock)
    section.replaced = words.replaced_lines(changes, stacks, STATEFUL)
    return section


def review(base: str, repo: Path, work: Path | None = None, envs: list[str] | None = None) -> Review:
    """Synthesize ``base`` and the working tree of ``repo`` and compare them, for ``envs`` (default: the
    environments the change touches)."""
    from neuronkit.catalog.pricing import MissingPriceError
    from neuronkit.reports import cost
    from neuronkit.reports.pools import PoolError, pools_from_cdk_out

    with base_worktree(base, repo, work) as (tree, _):
        scratch = tree.parent
        old_envs, old_data, old_why = _load(tree)
        new_envs, new_data, new_why = _load(repo)
        known = sorted(set(old_data) | set(new_data))
        unknown = [n for n in envs or [] if n not in known]
        if unknown:
            raise ReviewError(
                "; ".join(f"--env {n}: no such environment in either revision" for n in unknown)
                + f"; known environments: {', '.join(known) or 'none'}"
            )
        old, _ = synth_with_pins(tree, scratch / "base.out")
        new, pins = synth_with_pins(repo, scratch / "new.out")
        every = compare_templates(old, new, _regions(repo))
        chosen = list(dict.fromkeys(envs)) if envs else touched(old_data, new_data, every)
        mine = [c for c in every if env_of(c.stack, known) in chosen or env_of(c.stack, known) is None]
        from neuronkit.reports import plan

        stacks = sorted(s for s in set(old) | set(new) if env_of(s, known) in chosen)
        steps = plan.plan(old, new, every, stacks)
        blocked = [s.line() for s in plan.cannot_update(steps)]
        from neuronkit.kubernetes.report import object_changes

        result = Review(
            base=base, changes=mine, pins_needed=pins, cannot_update=blocked, plan=steps,
            environment_of={s: str(env_of(s, known)) for s in stacks}, kubernetes=object_changes(old, new, stacks),
        )  # fmt: skip
        for name in chosen:
            section = what_changes(name, old_envs.get(name), new_envs.get(name), old, new, mine)
            if name in new_why:
                section.note = f"not compared: {new_why[name]}"
            elif name in old_why:
                section.note = f"base not compared: {old_why[name]}"
            result.environments.append(section)
        try:
            result.cost = cost.diff_report(
                [p for p in pools_from_cdk_out(scratch / "base.out") if p.environment in chosen],
                [p for p in pools_from_cdk_out(scratch / "new.out") if p.environment in chosen],
            )
        except (PoolError, MissingPriceError) as err:
            result.cost = f"Cost change not computed: {str(err).splitlines()[0]}"
        result.budgets = _budgets([new_envs[n] for n in chosen if n in new_envs], scratch / "new.out")
        return result


@contextlib.contextmanager
def base_worktree(base: str, repo: Path, work: Path | None = None) -> Iterator[tuple[Path, Path]]:
    """The revision ``base`` of the git repository holding ``repo``, checked out as a detached worktree in a scratch
    folder (removed afterwards): yields (the worktree's top folder, the repository's top folder). ``review`` and
    ``rehearse --base`` materialize BASE this way."""
    if _run(["git", "rev-parse", "--verify", f"{base}^{{commit}}"], repo).returncode != 0:
        raise ReviewError(f"{base} is not a commit of {repo}; fetch it first (e.g. git fetch origin main)")
    top = _run(["git", "rev-parse", "--show-toplevel"], repo)
    if top.returncode != 0:
        raise ReviewError(f"{repo} is not in a git checkout (git rev-parse --show-toplevel failed)")
    scratch = Path(tempfile.mkdtemp(prefix="neuronkit-review-", dir=work))
    tree = scratch / "base"
    try:
        added = _run(["git", "worktree", "add", "--detach", str(tree), base], repo)
        if added.returncode != 0:
            raise ReviewError(f"git worktree add {base} failed: {added.stderr.strip()}")
        yield tree, Path(top.stdout.strip()).resolve()
    finally:
        _run(["git", "worktree", "remove", "--force", str(tree)], repo)
        shutil.rmtree(scratch, ignore_errors=True)


def cannot_update(
    old: dict[str, dict[str, Any]],
    new: dict[str, dict[str, Any]],
    chosen: Iterable[str],
    known: Iterable[str],
    changes: Iterable[Change] = (),
) -> list[str]:
    """One line per Kubernetes object of the chosen environments' stacks that keeps its name while an immutable field
    changes (neuronkit.kubernetes.immutable), values read from a replaced resource (``changes``) counted as new: the
    re-apply would be refused and the stack roll back."""
    from neuronkit.kubernetes import immutable

    envs, names, every = set(chosen), list(known), list(changes)
    out = []
    for stack in sorted(old.keys() & new.keys()):
        if env_of(stack, names) not in envs:
            continue
        replaced = frozenset(c.logical_id for c in every if c.stack == stack and c.action == "replaced")
        out += [c.line() for c in immutable.conflicts(stack, old[stack], new[stack], replaced)]
    return out


def stacks_of(changes: Iterable[Change]) -> set[str]:
    return {c.stack for c in changes}
