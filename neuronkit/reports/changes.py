"""The first section of ``neuronkit review``: what a pull request changes, per environment, in a reviewer's words.

Four parts, each from what the two revisions say:

- **Neuron software** (from the environment files): per pool the Neuron SDK, its driver floor, the pinned
  container and the AMI, with ``validate``'s warnings for the head;
- **model and serving** (files and :mod:`neuronkit.catalog.serving`): model id and weights prefix, and per
  instance type the profile (tensor parallelism, LNC, max_model_len, max_num_seqs) and compiled-artifact key;
- **access** (templates): identity policies (role policies, inline policies, trust) and resource policies
  (bucket, topic, queue and key policies) compared statement by statement: a statement added or removed, an
  action added, a resource widened (a wildcard, a broader prefix), a condition dropped, a principal added;
- **rollout** (templates): which groups roll (the compile groups first, with their budget, then every node at
  the rolling pace), and which resources are replaced (stateful ones in bold).

The cost against the budget is rendered by :func:`cost_lines`. Everything here is pure: the review feeds it
loaded environments and templates; tests feed it hand-made ones.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from neuronkit.reports.pools import COMPILE_METADATA_KEY, METADATA_KEY

Templates = dict[str, dict[str, Any]]  # stack name -> template


# --------------------------------------------------------------------------------------------
# Neuron software and model, from the environment files
# --------------------------------------------------------------------------------------------
def _ami_text(ami: Any, family: str | None, release: Any) -> str:
    if getattr(ami, "ami_id", None):
        return f"pinned {ami.ami_id}"
    if family is None:
        return "–"
    if getattr(ami, "track", "release") == "latest":
        return f"{family}, latest (re-resolved at every deploy)"
    lookup = release.dlami_lookup(family) if release is not None else None
    if lookup is not None:
        return f"{family}, the image of Neuron {release.version} (pinned in cdk.context.json)"
    return f"{family} (pinned in cdk.context.json)"


def _software(env: Any) -> dict[str, dict[str, str]]:
    """Per Neuron pool: what it runs (Neuron SDK, driver floor, container, AMI), as words."""
    from neuronkit.config import pool_releases
    from neuronkit.config.training import ami_family

    releases = pool_releases(env)
    amis: dict[str, str] = {}
    if getattr(env, "platform", "asg") == "eks":
        # EKS node groups boot amiType + releaseVersion (named with their driver by eks_lines); no DLAMI, no context.
        return {
            name: {
                "key": pool.key,
                "Neuron SDK": pool.release.version if pool.release else "none that works",
                "driver floor": pool.release.driver if pool.release else "–",
                "container": (pool.release.container(pool.workload) or "none pinned in the release matrix")
                if pool.release
                else "–",
            }
            for name, pool in releases.items()
        }
    for c in env.training:
        pr = releases.get(c.name)
        amis[c.name] = _ami_text(c.ami, ami_family(c), pr.release if pr else None)
    for f in env.inference:
        pr = releases.get(f.name)
        amis[f.name] = _ami_text(f.neuron_ami, f.neuron_ami.family, pr.release if pr else None)
    out: dict[str, dict[str, str]] = {}
    for name, pool in releases.items():
        rel = pool.release
        out[name] = {
            "key": pool.key,
            "Neuron SDK": rel.version if rel else "none that works",
            "driver floor": rel.driver if rel else "–",
            "container": (rel.container(pool.workload) or "none pinned in the release matrix") if rel else "–",
            "AMI": amis.get(name, "–"),
        }
    return out


def software_lines(base: Any | None, head: Any, warnings: list[str]) -> list[str]:
    """One line per Neuron pool whose software changes, then the head's warnings about those pools (or new ones)."""
    old = _software(base) if base is not None else {}
    new = _software(head)
    lines: list[str] = []
    changed_keys: set[str] = set()
    for name, after in new.items():
        before = old.get(name)
        if before is None:
            lines.append(f"{name} ({after['key']}): new pool on Neuron SDK {after['Neuron SDK']}, driver {after['driver floor']}")
            changed_keys.add(after["key"])
            continue
        diffs = [f"{what} {before[what]} → {after[what]}" for what in after if what != "key" and before[what] != after[what]]
        if diffs:
            lines.append(f"{name} ({after['key']}): " + "; ".join(diffs))
            changed_keys.add(after["key"])
    old_warnings = set(_warnings(base)) if base is not None else set()
    for w in warnings:
        if w.split(".", 1)[0].split(":", 1)[0] in changed_keys or w not in old_warnings:
            lines.append(f"warning (validate): {w}")
    return lines


# --------------------------------------------------------------------------------------------
# EKS: the node image and its driver, the Neuron chart, Capacity Block node replacement (templates)
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _NodeGroup:
    stack: str
    logical_id: str
    pool: str
    ami_type: str
    release_version: str
    capacity_type: str
    launch_template: str | None
    meta: dict[str, Any]


def _node_groups(templates: Templates, stacks: Iterable[str]) -> dict[str, _NodeGroup]:
    """The pools' EKS node groups of ``stacks`` (they carry the pool Metadata), by pool name."""
    out: dict[str, _NodeGroup] = {}
    for stack in sorted(stacks):
        for lid, r in (templates.get(stack, {}).get("Resources") or {}).items():
            meta = (r.get("Metadata") or {}).get(METADATA_KEY)
            if r.get("Type") != "AWS::EKS::Nodegroup" or not isinstance(meta, dict):
                continue
            props = r.get("Properties") or {}
            lt = (props.get("LaunchTemplate") or {}).get("Id")
            out[str(meta.get("pool"))] = _NodeGroup(
                stack=stack, logical_id=lid, pool=str(meta.get("pool")), ami_type=str(props.get("AmiType", "")),
                release_version=str(props.get("ReleaseVersion", "")), capacity_type=str(props.get("CapacityType", "")),
                launch_template=lt.get("Ref") if isinstance(lt, dict) else None, meta=meta,
            )  # fmt: skip
    return out


def _image_words(group: _NodeGroup) -> str:
    from neuronkit.catalog import eks_images

    row = eks_images.node_image("neuron" if group.ami_type.endswith("NEURON") else "gpu", group.release_version)
    if row is None:
        return f"{group.ami_type} {group.release_version} (driver not in the catalog's node image table)"
    driver = f"Neuron driver {row.neuron_driver}" if row.neuron_driver else f"NVIDIA driver {row.nvidia_driver}"
    return f"{group.ami_type} {group.release_version} ({driver}, built {row.date})"


def releases_window(version: str) -> str:
    from neuronkit.catalog import releases

    return releases.driver_window(version).describe()


def _chart_version(templates: Templates, stacks: Iterable[str]) -> str | None:
    from neuronkit.kubernetes.neuron_chart import chart_facts

    chart = str(chart_facts()["chart"])
    for stack in sorted(stacks):
        for r in (templates.get(stack, {}).get("Resources") or {}).values():
            props = r.get("Properties") or {}
            if r.get("Type") == "Custom::AWSCDK-EKS-HelmChart" and props.get("Chart") == chart:
                return str(props.get("Version"))
    return None


def eks_software_lines(old: Templates, new: Templates, stacks: Iterable[str], head: Any | None) -> list[str]:
    """Per EKS pool, the node image (amiType + release version) and the driver it carries, against the pool's Neuron
    release (its driver floor); then the Neuron Helm chart of the cluster and the release it is the chart of."""
    from neuronkit.catalog import eks_images
    from neuronkit.config import pool_releases

    stacks = list(stacks)
    before, after = _node_groups(old, stacks), _node_groups(new, stacks)
    if not after:
        return []
    releases = pool_releases(head) if head is not None else {}
    lines: list[str] = []
    for name, group in sorted(after.items()):
        was = before.get(name)
        image = _image_words(group)
        moved = was is not None and (was.ami_type, was.release_version) != (group.ami_type, group.release_version)
        text = (
            f"{name}: node image {_image_words(was)} → {image} (its nodes are replaced)"
            if moved and was
            else f"{name}: node image {image}"
        )
        pool = releases.get(name)
        rel = pool.release if pool is not None else None
        row = eks_images.node_image("neuron", group.release_version) if group.ami_type.endswith("NEURON") else None
        if rel is not None and row is not None and row.neuron_driver:
            fit = eks_images.fit(row, rel.version)  # the one decision (catalog.releases.driver_fit)
            if fit.ok:
                text += f"; in Neuron {rel.version}'s driver window ({releases_window(rel.version)})"
            else:
                text += f"; **{fit.reason}: its nodes fail the boot check**"

        lines.append(text)
    chart_before, chart_after = _chart_version(old, stacks), _chart_version(new, stacks)
    if chart_after is not None:
        newest = max((p.release.version for p in releases.values() if p.release), default=None, key=_version_key)
        of = f" (the chart of the pools' newest release, {newest})" if newest else ""
        if chart_before is not None and chart_before != chart_after:
            lines.append(f"Neuron Helm chart {chart_before} → {chart_after}{of}")
        else:
            lines.append(f"Neuron Helm chart {chart_after}{of}")
    return lines


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def capacity_block_lines(changes: Iterable[Any], new: Templates, stacks: Iterable[str], now: Any = None) -> list[str]:
    """A Capacity Block node group whose nodes EKS replaces (its launch template or release version changes): EKS
    updates such a group only at desired size 0 (Amazon EKS User Guide, "Create a managed node group with Capacity
    Blocks for ML"), so the update replaces every node; louder when the block is active at review time."""
    import datetime as dt

    from neuronkit import clock

    now = now or clock.utc_now()
    changes = list(changes)
    touched = {(c.stack, c.logical_id): c for c in changes if c.action in ("modified", "replaced")}
    lines: list[str] = []
    for name, group in sorted(_node_groups(new, stacks).items()):
        if group.capacity_type != "CAPACITY_BLOCK":
            continue
        own = touched.get((group.stack, group.logical_id))
        why = []
        if group.launch_template and (group.stack, group.launch_template) in touched:
            why.append("its launch template changes")
        if own is not None and "ReleaseVersion" in own.properties:
            why.append("its node image release changes")
        if own is not None and own.action == "replaced":
            why.append("the node group is replaced")
        if not why:
            continue
        text = (
            f"**{name} (Capacity Block node group {group.meta.get('environment')}-{name}): EKS replaces its nodes**: "
            f"{' and '.join(why)}; EKS updates a Capacity Block node group at desired size 0, so every running node "
            "goes and the jobs on them stop"
        )
        start, end = group.meta.get("block_start"), group.meta.get("block_end")
        if start and end:
            begin = dt.datetime.fromisoformat(str(start).replace("Z", "+00:00"))
            finish = dt.datetime.fromisoformat(str(end).replace("Z", "+00:00"))
            if begin <= now < finish:
                text += (
                    f". **THE BLOCK IS ACTIVE NOW (until {end}): deploying this replaces nodes you are paying for "
                    "mid-block; deploy after the block ends, or drain the jobs first**"
                )
            elif now < begin:
                text += f"; the block starts {start}: deploy before then and nothing running is lost"
        lines.append(text)
    return lines


def _warnings(env: Any) -> list[str]:
    from neuronkit.config import neuron_warnings

    return list(neuron_warnings(env))


def capacity_lines(base: Any | None, head: Any) -> list[str]:
    """Per pool whose size or types change: nodes min/desired/max and instance types, before and after."""
    from neuronkit.reports.pools import pools_from_environment

    old = {p.key: p for p in pools_from_environment(base)} if base is not None else {}
    lines: list[str] = []
    for p in pools_from_environment(head):
        was = old.pop(p.key, None)
        sizes = f"{p.min_size}/{p.desired_size}/{p.max_size}"
        if was is None:
            lines.append(f"{p.pool} ({p.role}): new, {', '.join(p.instance_types)}, nodes min/desired/max {sizes}")
            continue
        diffs = []
        if (was.min_size, was.desired_size, was.max_size) != (p.min_size, p.desired_size, p.max_size):
            diffs.append(f"nodes min/desired/max {was.min_size}/{was.desired_size}/{was.max_size} → {sizes}")
        if was.instance_types != p.instance_types:
            diffs.append(f"instance types {', '.join(was.instance_types)} → {', '.join(p.instance_types)}")
        if diffs:
            lines.append(f"{p.pool} ({p.role}): " + "; ".join(diffs))
    lines += [f"{p.pool} ({p.role}): removed ({', '.join(p.instance_types)})" for p in old.values()]
    return lines


@dataclass(frozen=True)
class _Serving:
    model: str
    weights: str
    profiles: dict[str, dict[str, str]]  # instance type -> TP, LNC, max_model_len, max_num_seqs, compiled key


def _fleet_serving(env: Any) -> dict[str, _Serving]:
    from neuronkit import catalog
    from neuronkit.catalog import releases, serving
    from neuronkit.config import pool_releases
    from neuronkit.config.inference import model_spec

    rels = pool_releases(env)
    bucket = f"{env.name}-artifacts-{env.account}-{env.region}"
    out: dict[str, _Serving] = {}
    for f in env.inference:
        model = model_spec(f)
        if model is None:
            continue
        rel = rels.get(f.name)
        profiles: dict[str, dict[str, str]] = {}
        for t in [*f.neuron_types, *f.fallback_types]:
            o = f.profiles.get(t)
            override = serving.ProfileOverride(
                tensor_parallel=o.tensor_parallel if o else None,
                max_model_len=o.max_model_len if o else None,
                max_num_seqs=o.max_num_seqs if o else None,
            )
            try:
                p = serving.fleet_profile(
                    model, t, rel.release if rel else None, override, lnc=f.lnc, neuron_image=f.images.neuron,
                    gpu_image=f.images.gpu,
                )  # fmt: skip
            except ValueError as err:
                profiles[t] = {"profile": str(err)}
                continue
            lnc = getattr(f, "lnc", None) or catalog.lnc_default(releases.family_of(t))
            profiles[t] = {
                "TP": str(p.tensor_parallel),
                "LNC": str(lnc) if lnc and p.accelerator == "neuron" else "–",
                "max_model_len": str(p.max_model_len),
                "max_num_seqs": str(p.max_num_seqs),
                "compiled-artifact key": p.cache_key or "–",
            }
        out[f.name] = _Serving(
            f"{model.id} ({model.parameters_billion:g}B, {model.dtype})", f"s3://{bucket}/{model.s3_prefix}", profiles
        )
    return out


def model_lines(base: Any | None, head: Any) -> list[str]:
    """Per fleet: model and weights changes, then per type the profile values that change."""
    old = _fleet_serving(base) if base is not None else {}
    new = _fleet_serving(head)
    lines: list[str] = []
    for name, after in new.items():
        before = old.get(name)
        if before is None:
            lines.append(f"{name}: serves {after.model} from {after.weights}")
            continue
        if before.model != after.model:
            lines.append(f"{name}: model {before.model} → {after.model}")
        if before.weights != after.weights:
            lines.append(f"{name}: weights {before.weights} → {after.weights}")
        for t, prof in after.profiles.items():
            was = before.profiles.get(t)
            if was is None:
                lines.append(f"{name} on {t}: new type, " + ", ".join(f"{k} {v}" for k, v in prof.items()))
                continue
            diffs = [f"{k} {was.get(k, '–')} → {v}" for k, v in prof.items() if was.get(k) != v]
            if diffs:
                lines.append(f"{name} on {t}: " + "; ".join(diffs))
    for name in old.keys() - new.keys():
        lines.append(f"{name}: no longer serves {old[name].model}")
    return lines


# --------------------------------------------------------------------------------------------
# access: identity and resource policies, statement by statement
# --------------------------------------------------------------------------------------------
VERBS = {
    "s3:GetObject": "read",
    "s3:GetObjectVersion": "read versions of",
    "s3:ListBucket": "list",
    "s3:PutObject": "write",
    "s3:DeleteObject": "delete",
    "s3:AbortMultipartUpload": "abort uploads to",
    "kms:Decrypt": "decrypt with",
    "kms:Encrypt": "encrypt with",
    "kms:GenerateDataKey": "generate data keys with",
    "kms:GenerateDataKey*": "generate data keys with",
    "sns:Publish": "publish to",
    "sqs:SendMessage": "send messages to",
    "logs:PutLogEvents": "write logs to",
    "ecr:BatchGetImage": "pull images from",
    "sts:AssumeRole": "assume",
    "*": "do anything on",
}


def _text(value: Any) -> str:
    """A CloudFormation value as text: Fn::Join joined, the partition as aws, other references as <Name>."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if "Fn::Join" in value:
            sep, parts = value["Fn::Join"]
            return str(sep).join(_text(p) for p in parts)
        if "Ref" in value:
            ref = value["Ref"]
            return "aws" if ref == "AWS::Partition" else f"${{{ref}}}" if str(ref).startswith("AWS::") else f"<{ref}>"
        if "Fn::GetAtt" in value:
            att = value["Fn::GetAtt"]
            return f"<{'.'.join(att) if isinstance(att, list) else att}>"
        if "Fn::Sub" in value:
            sub = value["Fn::Sub"]
            return str(sub[0] if isinstance(sub, list) else sub)
        if "Fn::ImportValue" in value:
            return f"<import {_text(value['Fn::ImportValue'])}>"
    return str(value)


def show_resource(arn: str) -> str:
    """An ARN as a reader says it: ``arn:aws:s3:::b/models/x/*`` is ``s3://b/models/x/``."""
    m = re.match(r"^arn:[^:]*:s3:::(.+)$", arn)
    if m:
        path = m.group(1)
        return "s3://" + (path[:-1] if path.endswith("/*") else path if "/" in path else path + "/")
    return arn


def _listed(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [] if value is None else [value]


def _principals(value: Any) -> frozenset[str]:
    if value is None:
        return frozenset()
    if value == "*" or not isinstance(value, dict):
        return frozenset({_text(value)})
    return frozenset(f"{kind} {_text(p)}" if kind != "AWS" else _text(p) for kind, ps in value.items() for p in _listed(ps))


@dataclass(frozen=True)
class Statement:
    sid: str
    effect: str
    principals: frozenset[str]
    actions: frozenset[str]
    resources: frozenset[str]
    conditions: dict[tuple[str, str], frozenset[str]]

    @classmethod
    def of(cls, raw: dict[str, Any]) -> Statement:
        conditions = {
            (op, key): frozenset(_text(v) for v in _listed(values))
            for op, block in (raw.get("Condition") or {}).items()
            for key, values in block.items()
        }
        actions = [*(_listed(raw.get("Action"))), *(f"not {a}" for a in _listed(raw.get("NotAction")))]
        resources = [*(_listed(raw.get("Resource"))), *(f"not {r}" for r in _listed(raw.get("NotResource")))]
        return cls(
            sid=str(raw.get("Sid") or ""),
            effect=str(raw.get("Effect", "Allow")),
            principals=_principals(raw.get("Principal")),
            actions=frozenset(_text(a) for a in actions),
            resources=frozenset(_text(r) for r in resources),
            conditions=conditions,
        )


@dataclass(frozen=True)
class Policy:
    """One policy document and who it speaks for: ``subject`` (the roles of an identity policy), ``kind``."""

    kind: str  # "identity", "trust", or a resource policy: "bucket policy of X", "key policy of Y" ...
    subject: str
    statements: tuple[Statement, ...]


def _role_name(template: dict[str, Any], ref: Any) -> str:
    lid = ref.get("Ref") if isinstance(ref, dict) else None
    role = template.get("Resources", {}).get(lid) if lid else None
    if isinstance(role, dict):
        desc = (role.get("Properties") or {}).get("Description")
        return f"{desc} (role {lid})" if desc else f"role {lid}"
    return _text(ref)


def _doc(value: Any) -> tuple[Statement, ...]:
    statements = (value or {}).get("Statement", []) if isinstance(value, dict) else []
    return tuple(Statement.of(s) for s in _listed(statements) if isinstance(s, dict))


def policies(template: dict[str, Any]) -> dict[str, Policy]:
    """Every policy document of a template, keyed by logical ID (and inline policy name)."""
    out: dict[str, Policy] = {}
    for lid, r in template.get("Resources", {}).items():
        kind, props = r.get("Type"), r.get("Properties") or {}
        if kind in ("AWS::IAM::Policy", "AWS::IAM::ManagedPolicy"):
            who = ", ".join(_role_name(template, ref) for ref in _listed(props.get("Roles"))) or lid
            out[lid] = Policy("identity", who, _doc(props.get("PolicyDocument")))
        elif kind == "AWS::IAM::Role":
            me = _role_name(template, {"Ref": lid})
            out[f"{lid} trust"] = Policy("trust", me, _doc(props.get("AssumeRolePolicyDocument")))
            for inline in _listed(props.get("Policies")):
                out[f"{lid} {inline.get('PolicyName')}"] = Policy("identity", me, _doc(inline.get("PolicyDocument")))
        elif kind == "AWS::S3::BucketPolicy":
            out[lid] = Policy(f"bucket policy of {_text(props.get('Bucket'))}", "", _doc(props.get("PolicyDocument")))
        elif kind == "AWS::SNS::TopicPolicy":
            topics = ", ".join(_text(t) for t in _listed(props.get("Topics")))
            out[lid] = Policy(f"topic policy of {topics}", "", _doc(props.get("PolicyDocument")))
        elif kind == "AWS::SQS::QueuePolicy":
            queues = ", ".join(_text(q) for q in _listed(props.get("Queues")))
            out[lid] = Policy(f"queue policy of {queues}", "", _doc(props.get("PolicyDocument")))
        elif kind == "AWS::KMS::Key":
            name = props.get("Description") or lid
            out[lid] = Policy(f"key policy of {name}", "", _doc(props.get("KeyPolicy")))
    return out


def _verbs(actions: Iterable[str]) -> str:
    words = sorted({VERBS.get(a, f"use {a} on") for a in actions})
    return " and ".join(words) if len(words) < 3 else ", ".join(words[:-1]) + " and " + words[-1]


def _things(resources: Iterable[str]) -> str:
    shown = sorted(show_resource(r) for r in resources)
    return ", ".join(f"**{r}** (every resource)" if r == "*" else r for r in shown) or "–"


def _when(conditions: dict[tuple[str, str], frozenset[str]]) -> str:
    if not conditions:
        return ""
    return " when " + "; ".join(f"{key} {op} {', '.join(sorted(v))}" for (op, key), v in sorted(conditions.items()))


def _covers(wide: str, narrow: str) -> bool:
    return wide != narrow and (wide == "*" or (wide.endswith("*") and narrow.startswith(wide[:-1])))


def _who(policy: Policy, st: Statement) -> str:
    if policy.kind in ("identity", "trust"):
        return policy.subject
    return ", ".join(sorted(st.principals)) or "anyone the statement names"


def _may(st: Statement, now: bool = True) -> str:
    if st.effect == "Deny":
        return "is now denied" if now else "is no longer denied"
    return "may now" if now else "may no longer"


def _match(
    old: tuple[Statement, ...], new: tuple[Statement, ...]
) -> tuple[list[tuple[Statement, Statement]], list[Statement], list[Statement]]:
    """Pairs of the same statement (by Sid, then by effect and actions, then by effect and resources), the added, the removed."""
    left, right = list(old), list(new)
    pairs: list[tuple[Statement, Statement]] = []
    for same in (
        lambda s: s.sid or None,
        lambda s: (s.effect, s.actions, s.principals),
        lambda s: (s.effect, s.resources, s.principals),
    ):
        for n in list(right):
            key = same(n)
            o = next((o for o in left if key is not None and same(o) == key), None)
            if o is not None:
                pairs.append((o, n))
                left.remove(o)
                right.remove(n)
    return pairs, right, left


def _pair_lines(policy: Policy, o: Statement, n: Statement) -> list[str]:
    where = "" if policy.kind in ("identity", "trust") else f" ({policy.kind})"
    who = _who(policy, n)
    out: list[str] = []
    for p in sorted(n.principals - o.principals):
        wide = " — **any principal**" if p == "*" else ""
        out.append(f"principal added{where}: {p} {_may(n)} {_verbs(n.actions)} {_things(n.resources)}{wide}")
    added = n.actions - o.actions
    if added:
        star = "**" if any("*" in a for a in added) else ""
        out.append(f"action added: {who} {_may(n)} {star}{_verbs(added)}{star} {_things(n.resources)}{where}")
    if o.actions - n.actions:
        out.append(f"action removed: {who} {_may(n, False)} {_verbs(o.actions - n.actions)} {_things(n.resources)}{where}")
    gained, lost = n.resources - o.resources, o.resources - n.resources
    for r in sorted(gained):
        covered = sorted(x for x in o.resources if _covers(r, x))
        if covered:
            out.append(
                f"**resource widened**: {who} {_may(n)} {_verbs(n.actions)} {_things([r])}, wider than {_things(covered)}{where}"
            )
        else:
            out.append(f"{who} {_may(n)} {_verbs(n.actions)} {_things([r])}{_when(n.conditions)}{where}")
    for r in sorted(x for x in lost if not any(_covers(g, x) for g in gained)):
        out.append(f"{who} {_may(n, False)} {_verbs(o.actions)} {_things([r])}{where}")
    for key in sorted(o.conditions.keys() - n.conditions.keys()):
        op, name = key
        out.append(
            f"**condition dropped**: {who} {_may(n)} {_verbs(n.actions)} {_things(n.resources)} without "
            f"{name} {op} {', '.join(sorted(o.conditions[key]))}{where}"
        )
    for key in sorted(o.conditions.keys() & n.conditions.keys()):
        if o.conditions[key] != n.conditions[key]:
            op, name = key
            out.append(
                f"{who} {_may(n)} {_verbs(n.actions)} {_things(n.resources)} when {name} {op} "
                f"{', '.join(sorted(n.conditions[key]))} (was {', '.join(sorted(o.conditions[key]))}){where}"
            )
    for key in sorted(n.conditions.keys() - o.conditions.keys()):
        op, name = key
        out.append(
            f"condition added: {who} {_verbs(n.actions)} only when {name} {op} {', '.join(sorted(n.conditions[key]))}{where}"
        )
    return out


def _statement_line(policy: Policy, st: Statement, added: bool) -> str:
    where = "" if policy.kind in ("identity", "trust") else f" ({policy.kind})"
    broad = any(r == "*" for r in st.resources) or any("*" in a.split(":")[-1] and a.split(":")[-1] == "*" for a in st.actions)
    mark = "**statement added**" if added and broad else "statement added" if added else "statement removed"
    principal = "" if policy.kind in ("identity", "trust") else f"{', '.join(sorted(st.principals)) or 'anyone'} "
    subject = principal or f"{policy.subject} "
    return f"{mark}{where}: {subject}{_may(st, added)} {_verbs(st.actions)} {_things(st.resources)}{_when(st.conditions)}"


def access_lines(old: Templates, new: Templates, stacks: Iterable[str]) -> list[str]:
    """IAM in words for the given stacks: identity, trust and resource policies compared statement by statement."""
    lines: list[str] = []
    for stack in sorted(stacks):
        a, b = policies(old.get(stack, {})), policies(new.get(stack, {}))
        for key in sorted(a.keys() | b.keys()):
            before, after = a.get(key), b.get(key)
            if after is None and before is not None:
                lines += [_statement_line(before, st, added=False) for st in before.statements]
                continue
            assert after is not None
            if before is None:
                if after.kind in ("identity", "trust"):
                    lines.append(f"new role policy: {after.subject} gets {len(after.statements)} statement(s)")
                else:
                    lines += [_statement_line(after, st, added=True) for st in after.statements]
                continue
            pairs, added, removed = _match(before.statements, after.statements)
            for o, n in pairs:
                if o != n:
                    lines += _pair_lines(after, o, n)
            lines += [_statement_line(after, st, added=True) for st in added]
            lines += [_statement_line(before, st, added=False) for st in removed]
    return lines


# --------------------------------------------------------------------------------------------
# rollout: groups that roll, compile groups first, resources replaced
# --------------------------------------------------------------------------------------------
def iso_seconds(text: str) -> int:
    """Seconds of an ISO 8601 duration such as PT1H30M (CloudFormation's PauseTime and signal timeouts)."""
    m = re.fullmatch(r"P(?:(\d+)D)?T?(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)S)?", text or "")
    if not m:
        return 0
    d, h, mi, s = (int(x) if x else 0 for x in m.groups())
    return ((d * 24 + h) * 60 + mi) * 60 + s


def duration(seconds: float) -> str:
    minutes = int(math.ceil(seconds / 60))
    hours, rest = divmod(minutes, 60)
    return f"{hours} h {rest} min" if hours and rest else f"{hours} h" if hours else f"{rest} min"


def _refs_in(value: Any) -> set[str]:
    found: set[str] = set()
    if isinstance(value, dict):
        if isinstance(value.get("Ref"), str):
            found.add(value["Ref"])
        att = value.get("Fn::GetAtt")
        if att:
            found.add(att[0] if isinstance(att, list) else str(att).split(".")[0])
        for v in value.values():
            found |= _refs_in(v)
    elif isinstance(value, list):
        for v in value:
            found |= _refs_in(v)
    return found


ROLLING_PROPERTIES = ("LaunchTemplate", "MixedInstancesPolicy", "LaunchConfigurationName", "VPCZoneIdentifier")


def rollout_lines(changes: Iterable[Any], new: Templates, stacks: Iterable[str], lock_seconds: int) -> list[str]:
    """Which groups roll and how long it may take; the compile groups of new keys first. ``changes`` are
    :class:`neuronkit.reports.review.Change` values."""
    changes = list(changes)
    touched = {(c.stack, c.logical_id) for c in changes if c.action in ("modified", "replaced")}
    by_key = {(c.stack, c.logical_id): c for c in changes}
    lines: list[str] = []
    for stack in sorted(stacks):
        resources = new.get(stack, {}).get("Resources", {})
        compiles: dict[str, list[str]] = {}
        for lid, r in resources.items():
            meta = (r.get("Metadata") or {}).get(COMPILE_METADATA_KEY)
            c = by_key.get((stack, lid))
            if isinstance(meta, dict) and c is not None and c.action == "added":
                timeout = iso_seconds(((r.get("CreationPolicy") or {}).get("ResourceSignal") or {}).get("Timeout", ""))
                compiles.setdefault(str(meta.get("group")), []).append(
                    f"one {meta.get('instance_type')} node compiles {meta.get('cache_key')} (a compile may take up to "
                    f"{duration(lock_seconds)}; CloudFormation waits up to {duration(timeout)} for it)"
                )
        for lid, r in sorted(resources.items()):
            if r.get("Type") != "AWS::AutoScaling::AutoScalingGroup":
                continue
            meta = (r.get("Metadata") or {}).get(METADATA_KEY)
            if not isinstance(meta, dict):
                continue
            props = r.get("Properties") or {}
            c = by_key.get((stack, lid))
            own = c is not None and c.action == "modified" and any(p in ROLLING_PROPERTIES for p in c.properties)
            templates = {x for p in ROLLING_PROPERTIES for x in _refs_in(props.get(p))}
            via = sorted(t for t in templates if (stack, t) in touched)
            if not own and not via:
                continue
            name = f"{meta.get('environment')}/{meta.get('pool')}"
            group = props.get("AutoScalingGroupName") or lid
            rolling = ((r.get("UpdatePolicy") or {}).get("AutoScalingRollingUpdate")) or None
            what = (
                f"launch template {via[0]} changes"
                if len(via) == 1
                else f"its {len(via)} launch templates change"
                if via
                else "the group's launch settings change"
            )
            if rolling is None:
                lines.append(
                    f"{name} ({group}): {what}; no rolling update: running nodes keep the old template, nodes launched "
                    "after the deploy get the new one"
                )
                continue
            nodes = int(meta.get("desired_size") or meta.get("min_size") or 0)
            batch = max(1, int(rolling.get("MaxBatchSize", 1)))
            pause = iso_seconds(str(rolling.get("PauseTime", "")))
            batches = math.ceil(nodes / batch) if nodes else 0
            first = compiles.pop(str(group), [])
            steps = (f"first {'; '.join(first)}; then " if first else "") + (
                f"**every node is replaced**: {nodes} node(s) at desired, {batch} at a time, each batch waiting up to "
                f"{duration(pause)} for its nodes to serve: up to {duration(batches * pause)}"
                if nodes
                else "no node runs at desired capacity, so nothing is replaced now; new nodes launch on the new template"
            )
            lines.append(f"{name} ({group}) rolls: {what}; {steps}")
        for group, first in compiles.items():
            lines.append(f"{group}: " + "; ".join(first))
    return lines


def replaced_lines(changes: Iterable[Any], stacks: Iterable[str], stateful: dict[str, str]) -> list[str]:
    """Resources CloudFormation replaces, stateful ones in bold with what happens to their data."""
    mine = set(stacks)
    out = []
    for c in sorted(changes, key=lambda c: (c.type not in stateful, c.stack, c.logical_id)):
        if c.action != "replaced" or c.stack not in mine:
            continue
        if c.type in stateful:
            fate = "the old one is retained (orphaned), the new one starts empty" if c.retained else "its data is lost"
            out.append(f"**{c.stack}/{c.logical_id}** ({c.type}, {stateful[c.type]}) is replaced: {c.why}; **{fate}**")
        else:
            out.append(f"{c.stack}/{c.logical_id} ({c.type}) is replaced: {c.why}")
    return out


# --------------------------------------------------------------------------------------------
# cost against the budget, for one environment
# --------------------------------------------------------------------------------------------
def cost_lines(base: Any | None, head: Any) -> list[str]:
    """A table of the environment's month at min, desired and max (pools and fixed charges), before and after,
    then the head's budget verdict (the gate ``validate`` and ``cost`` apply)."""
    from neuronkit.catalog.pricing import MissingPriceError
    from neuronkit.reports import cost

    try:
        after = cost.budget_check(head)
        before = cost.budget_check(base) if base is not None else None
    except MissingPriceError as err:
        return [f"Cost not computed: {err.problems[0] if err.problems else err}"]
    lines = ["| capacity | before $/month | after $/month | change |", "| --- | ---: | ---: | ---: |"]
    for level in cost.LEVELS:
        old = before.totals[level] if before else 0.0
        new = after.totals[level]
        change = cost.signed_usd(new - old) + (f" ({cost.percent(new - old, old, signed=True)})" if old else "")
        lines.append(f"| {level} | {cost.usd(old) if before else '–'} | {cost.usd(new)} | {change} |")
    return [*lines, "", after.verdict()]
