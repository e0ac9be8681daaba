"""``neuronkit assess --from PATH`` / ``--sample``: the assessment of a billing export, with fair prices.

Each GPU workload group of the export (adoption/billing.py) gets the Neuron type :func:`assess.neuron_match`
proposes. Prices are compared like for like: the group's On-Demand and commitment-covered hours at the GPU
type's On-Demand list price against the same node-hours at the Neuron type's On-Demand list price; Spot and
Capacity Block hours are not compared with On-Demand (the catalog holds On-Demand prices only). Where the export
shows commitments, the effective (billed) GPU cost is set against the Neuron list price too, saying which rows
were covered and that Neuron commitments are not priced. Fleets in the environment files whose GPU fallback
costs less per node than their Neuron primary are reported. Nothing here calls AWS.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from neuronkit import config
from neuronkit.adoption import assess
from neuronkit.adoption.billing import Export, SpendGroup
from neuronkit.catalog import pricing

LIKE_ON_DEMAND = ("on-demand", "savings-plan", "reserved", "unknown")  # hours priced against Neuron On-Demand
COVERED = ("savings-plan", "reserved")


@dataclass
class Priced:
    """One workload group with its Neuron proposal and its monthly figures (USD)."""

    group: SpendGroup
    match: assess.Match | None  # None for a group of unknown kind
    months: int
    gpu_hourly: float | None  # the GPU type's On-Demand list price in the region (catalog)
    notes: list[str] = field(default_factory=list)
    trn2: assess.Trainium2 | None = None  # the Trainium2 alternative (Capacity Blocks only)
    model: str | None = None  # the catalog model a serving group names (TP checked against its heads)
    model_basis: str | None = None  # how the model was told: --model, a model tag, the Name tag (the mapping shown)
    not_assessed: str | None = None  # why a serving group is not assessed (embeddings, encoders, non-LLM)

    def _monthly(self, x: float) -> float:
        return x / self.months

    @property
    def like_hours(self) -> float:
        return sum(self.group.hours.get(o, 0.0) for o in LIKE_ON_DEMAND)

    period_hours: float = 0.0  # the calendar hours of the export's billing periods (0: unknown)

    @property
    def nodes(self) -> float:
        """The average node count over the export's periods (else over 730-hour months, the price table's)."""
        if self.period_hours:
            return self.group.total_hours / self.period_hours
        return self._monthly(self.group.total_hours) / pricing.load_prices().hours_per_month

    @property
    def billed_monthly(self) -> float:
        return self._monthly(self.group.total_billed)

    @property
    def effective_monthly(self) -> float:
        """What the compared hours cost after commitments (the bill)."""
        return self._monthly(sum(self.group.billed.get(o, 0.0) for o in LIKE_ON_DEMAND))

    @property
    def gpu_list_monthly(self) -> float | None:
        """The compared hours at the GPU type's On-Demand list price (catalog), else the export's public price."""
        g = self.group
        if g.source == "cost-explorer" and not self.like_hours:
            return self._monthly(g.billed.get("unknown", 0.0))  # Cost Explorer without hours: its unblended cost
        if self.gpu_hourly is not None:
            return self._monthly(self.like_hours * self.gpu_hourly)
        return self._monthly(g.public_on_demand) if g.public_on_demand else None

    @property
    def neuron_list_monthly(self) -> float | None:
        if self.match is None or self.match.hourly is None:
            return None
        if self.group.source == "cost-explorer" and not self.like_hours:
            gpu = self.gpu_list_monthly
            return gpu * self.match.hourly / self.gpu_hourly if gpu is not None and self.gpu_hourly else None
        return self._monthly(self.like_hours * self.match.hourly)

    @property
    def saving_list(self) -> float | None:
        gpu, neuron = self.gpu_list_monthly, self.neuron_list_monthly
        return None if gpu is None or neuron is None else gpu - neuron

    @property
    def covered_hours(self) -> float:
        return sum(self.group.hours.get(o, 0.0) for o in COVERED)

    @property
    def trn2_block_monthly(self) -> float | None:
        """The compared node-hours at the Trainium2 Capacity Block price (what the same hours would cost reserved)."""
        if self.trn2 is None or self.trn2.price is None or not self.like_hours:
            return None
        return self._monthly(self.like_hours * self.trn2.price.per_instance_hour)


@dataclass
class BillingAssessment:
    export: Export
    priced: list[Priced]
    fleets: list[str] = field(default_factory=list)  # fleets whose GPU fallback is cheaper per node
    problems: list[str] = field(default_factory=list)

    def by_kind(self, kind: str) -> list[Priced]:
        return sorted(
            (p for p in self.priced if p.group.kind == kind and p.not_assessed is None), key=lambda p: -p.billed_monthly
        )

    def not_assessed(self) -> list[Priced]:
        return [p for p in self.priced if p.not_assessed is not None]

    def verdict(self, kind: assess.Kind) -> str:
        rows = self.by_kind(kind)
        compared = [p for p in rows if p.saving_list is not None]
        monthly = sum(p.billed_monthly for p in rows)
        return assess.verdict(
            kind, monthly, sum(p.saving_list or 0.0 for p in compared), sum(p.gpu_list_monthly or 0.0 for p in compared)
        )


def _period_hours(periods: set[str]) -> float:
    hours = 0.0
    for p in periods:
        try:
            start = dt.date(int(p[:4]), int(p[5:7]), 1)
        except ValueError:
            return 0.0
        end = dt.date(start.year + start.month // 12, start.month % 12 + 1, 1)
        hours += (end - start).days * 24
    return hours


def group_label(g: SpendGroup) -> str:
    """The group's name for --model GROUP=MODEL: its Name tag, else its model tag, else its description."""
    tags = dict(g.model_tags)
    return tags.get("user:Name") or next(iter(tags.values()), "") or g.name


def resolve_model(g: SpendGroup, models: dict[str, str]) -> tuple[str | None, str | None]:
    """(catalog model, how it was told) of a serving group: ``--model GROUP=MODEL``, else a model tag, else the Name
    tag, when it names a catalog model (catalog/adoption.yaml model_heads)."""
    from neuronkit.catalog import fit

    label = group_label(g)
    for group, model in models.items():
        if group in (label, g.name, "*"):
            named = fit.known_model(model)
            return named or model, f"--model {group}={model}" if group != "*" else f"--model {model}"
    for key, value in sorted(g.model_tags, key=lambda kv: kv[0] == "user:Name"):
        named = fit.known_model(value)
        if named:
            return named, f"tag {key.removeprefix('user:')}={value} names {named} ({fit.matched_by(named, value)})"
    return None, None


def price(export: Export, blocks: Sequence[assess.BlockPrice] = (), model: str | dict[str, str] | None = None) -> list[Priced]:
    """Each group with its proposal; ``blocks`` (the user's Capacity Block offerings) price Trainium2; ``model``: the
    --model values, GROUP -> MODEL ('*': the one serving group's)."""
    from neuronkit.catalog import fit

    models = {"*": model} if isinstance(model, str) else dict(model or {})
    table = pricing.load_prices()
    period_hours = _period_hours(export.periods)
    out: list[Priced] = []
    for g in export.groups.values():
        named, basis = resolve_model(g, models) if g.kind == "inference" else (None, None)
        facts = fit.models().get(named) if named else None
        p = Priced(g, None, export.months, table.hourly(g.instance_type, g.region), period_hours=period_hours)
        p.model, p.model_basis = named, basis
        if facts is not None and facts.get("kind", "llm") != "llm":
            p.not_assessed = (
                f"{named} is an {facts['kind']} model ({basis}): the vLLM serving lines (NxD Inference vLLM on Inf2/Trn1, "
                "vLLM Neuron on Trn2/Trn3) serve text generation, not embeddings or encoders; port it with the Neuron "
                "PyTorch inference path and price it yourself"
            )
            out.append(p)
            continue
        if g.kind == "inference" and facts is not None:
            match: assess.Match | None = assess.model_match(g.instance_type, g.region, named, blocks)  # type: ignore[arg-type]
        elif g.kind in ("training", "inference"):
            match = assess.neuron_match(g.instance_type, g.kind, g.region)  # type: ignore[arg-type]
        else:
            match = None
        p.match = match
        if match is not None:
            kind: assess.Kind = g.kind  # type: ignore[assignment]
            if facts is None:
                p.trn2 = assess.trainium2_option(g.instance_type, kind, g.region, blocks)
            if match.neuron_type:
                note = assess.release_note(catalog_family(match.neuron_type), kind, match.release)
                if note:
                    p.notes.append(note)
                p.notes += [f"also fits (not proposed: its line ends first or costs more): {a}" for a in match.alternatives]
            if kind == "inference" and match.neuron_type and facts is None:
                p.notes.append(assess.tp_check(match.tensor_parallel, named))
            if kind == "inference" and facts is None and named is None:
                p.notes.append(
                    "model: not told (no model or Name tag naming a catalog model); pass --model GROUP=MODEL to check the "
                    "fit, TP and serving line"
                )
        if g.source == "sagemaker":
            p.notes.append(
                "SageMaker usage: compared at the EC2 On-Demand list prices of both types (SageMaker's rates are not in the catalog)"
            )
        other = {o: h for o, h in g.hours.items() if o not in LIKE_ON_DEMAND and h}
        for option, hours in sorted(other.items()):
            p.notes.append(
                f"{hours:,.0f} {option} hours not compared: the catalog holds On-Demand prices only, and a {option} "
                "rate is compared with a Neuron rate of the same kind or not at all"
            )
        if match is not None and match.neuron_type and match.hourly is None:
            p.notes.append(f"no saving: {table.missing_message(match.neuron_type, match.price_region or g.region)}")
        out.append(p)
    return out


def catalog_family(instance_type: str) -> str:
    from neuronkit.catalog import releases

    return releases.family_of(instance_type)


def fleet_findings(envs: Sequence[config.Environment]) -> list[str]:
    """Fleets whose GPU fallback costs less per node than their Neuron primary, at On-Demand list prices."""
    from neuronkit.config.inference import model_spec

    table = pricing.load_prices()
    out: list[str] = []
    for env in envs:
        for fleet in env.inference:
            if not fleet.neuron_types:
                continue
            primary = fleet.neuron_types[0]
            neuron = table.hourly(primary, env.region)
            for gpu_type in fleet.fallback_types:
                gpu = table.hourly(gpu_type, env.region)
                if neuron is None or gpu is None or gpu >= neuron:
                    continue
                line = (
                    f"{env.name}/{fleet.name}: its GPU fallback {gpu_type} (${gpu:,.2f}/h) costs less per node than its "
                    f"Neuron primary {primary} (${neuron:,.2f}/h) in {env.region}"
                )
                model = model_spec(fleet)
                m = assess.neuron_match(gpu_type, "inference", env.region, model)
                if m.neuron_type and m.neuron_type != primary and m.hourly is not None and m.hourly < neuron:
                    line += f"; {m.neuron_type} (${m.hourly:,.2f}/h) also takes what {gpu_type} holds: {m.why}"
                out.append(line + ". Per node is not per token: the pilot measures throughput.")
    return out


def assess_export(
    export: Export,
    envs: Sequence[config.Environment] = (),
    blocks: Sequence[assess.BlockPrice] = (),
    model: str | dict[str, str] | None = None,
) -> BillingAssessment:
    result = BillingAssessment(export=export, priced=price(export, blocks, model), fleets=fleet_findings(envs))
    for tag in export.missing_tags():
        seen = ", ".join(sorted(export.tag_keys_seen)) or "none"
        result.problems.append(
            f"tag '{tag}' was not found in the export's resource_tags (tags seen: {seen}): only activated cost-allocation "
            "tags appear there; activate it (Billing console, Cost allocation tags): exports show it from then on"
        )
    if not export.groups:
        result.problems.append("no EC2 or SageMaker GPU instance usage found in the export")
    return result


# --------------------------------------------------------------------------------------------
# output
# --------------------------------------------------------------------------------------------
_usd = assess._usd


def _header(a: BillingAssessment) -> list[str]:
    e, table = a.export, pricing.load_prices()
    what = "a Cost and Usage Report 2.0 export" if e.kind == "cur2" else "a Cost Explorer answer"
    periods = ", ".join(sorted(e.periods)) or "one period (no dates in the export)"
    lines = [
        "# neuronkit assess (billing export)",
        "",
        f"Read {what}: {', '.join(e.inputs)}; billing periods {periods}; figures are monthly averages. EC2 and SageMaker "
        f"GPU instance usage only. List prices: On-Demand, catalog/prices.json as of {table.as_of}.",
        "",
    ]
    if e.kind == "cur2":
        lines[-2] += f" {e.rows_read:,} rows read."
    if e.detected_workload_tag:
        counts = e.workload_candidates[e.detected_workload_tag]
        said = ", ".join(f"{n:,} {k}" for k, n in sorted(counts.items()))
        others = [c for c in sorted(e.workload_candidates) if c != e.detected_workload_tag]
        lines += [
            f"Workload tag detected: `{e.detected_workload_tag}` holds training or inference values on GPU rows ({said} "
            f"rows); it tells the kind below (pass --workload-tag KEY to name another"
            + (f"; also seen: {', '.join(others)}" if others else "")
            + ").",
            "",
        ]
    elif e.workload_tag is None and e.kind == "cur2":
        lines += ["No tag in the export holds training or inference values on GPU rows (catalog/billing.yaml words).", ""]
    return lines


def _table(rows: list[Priced]) -> list[str]:
    lines = [
        "| workload | told by | nodes | $/month billed | $/month GPU list (like for like) | Neuron type | $/month Neuron list | saving at list |",
        "| --- | --- | ---: | ---: | ---: | --- | ---: | ---: |",
    ]
    for p in rows:
        m = p.match
        saving = p.saving_list
        pct = f" ({saving / p.gpu_list_monthly * 100:.0f}%)" if saving is not None and p.gpu_list_monthly else ""
        lines.append(
            f"| {p.group.name} ({p.group.source}) | {p.group.kind_basis} | {p.nodes:.1f} | {_usd(p.billed_monthly)} | "
            f"{_usd(p.gpu_list_monthly)} | {(m.neuron_type if m else None) or '–'} | {_usd(p.neuron_list_monthly)} | "
            f"{_usd(saving)}{pct} |"
        )
    return lines


def _commitments(p: Priced) -> list[str]:
    if not p.covered_hours:
        return []
    g = p.group
    rows = ", ".join(f"{n:,} {t} rows" for t, n in sorted(g.covered_rows.items()))
    ids = f" (e.g. {', '.join(g.covered_resources)})" if g.covered_resources else ""
    neuron = p.neuron_list_monthly
    vs = f" against {_usd(neuron)} for the Neuron type at list" if neuron is not None else ""
    return [
        f"  - commitments: {p.covered_hours:,.0f} of {g.total_hours:,.0f} hours were covered: {rows}{ids}. Effective "
        f"against list: {_usd(p.effective_monthly)} a month billed on GPUs{vs}; Neuron commitments (Savings Plans, "
        "Reserved Instances) are not priced, so this comparison favours the GPU side."
    ]


def render(a: BillingAssessment) -> str:
    lines = _header(a)
    for kind in ("inference", "training"):
        rows = a.by_kind(kind)
        lines += [f"## {kind.capitalize()}", ""]
        if not rows:
            lines += [f"No GPU {kind} usage found.", ""]
            continue
        lines += [*_table(rows), ""]
        for p in rows:
            m = p.match
            head = f"- {p.group.name} → {m.neuron_type or 'no Neuron type'}" if m else f"- {p.group.name}"
            lines.append(f"{head}: {m.why if m else ''}")
            if p.model_basis:
                lines.append(f"  - model: {p.model} ({p.model_basis})")
            if m is not None and m.line:
                lines.append(f"  - serving line: {m.line}")
            lines += _commitments(p) + [f"  - {n}" for n in p.notes]
            if p.trn2 is not None:
                lines.append(f"  - {p.trn2.line(p.group.instance_type, p.group.region)}")
                block, gpu = p.trn2_block_monthly, p.gpu_list_monthly
                if block is not None and gpu is not None:
                    lines.append(
                        f"  - the same node-hours at that block price: {_usd(block)} a month against {_usd(gpu)} at the GPU "
                        "type's On-Demand list price (a block is paid for whether used or not: fill it, or compare per "
                        "reserved hour)"
                    )
        lines += ["", f"**{kind.capitalize()} verdict (list against list): {a.verdict(kind)}.**", ""]  # type: ignore[arg-type]
    skipped = a.not_assessed()
    if skipped:
        lines += ["## Not assessed", ""]
        lines += [
            f"- {p.group.name} ({p.group.source}): {_usd(p.billed_monthly)} a month; not assessed: {p.not_assessed}"
            for p in skipped
        ]
        lines += [""]
    unknown = a.by_kind("unknown")
    if unknown:
        lines += ["## Unknown workload kind", "", "Not classified, so not mapped (never guessed):", ""]
        lines += [f"- {p.group.name} ({p.group.source}): {_usd(p.billed_monthly)} a month; {p.group.kind_basis}" for p in unknown]
        lines += [
            "",
            "Tag these instances with a workload tag (training or inference), activate it as a cost-allocation tag and "
            "pass --workload-tag KEY.",
            "",
        ]
    if a.fleets:
        lines += ["## Fleets whose GPU fallback is cheaper per node", ""] + [f"- {f}" for f in a.fleets] + [""]
    if a.problems:
        lines += ["## Not read", ""] + [f"- {p}" for p in a.problems] + [""]
    lines.append(
        "Savings compare list prices of the same node-hours, not throughput: the pilot measures that (docs/adoption.md)."
    )
    return "\n".join(lines) + "\n"


def to_json(a: BillingAssessment) -> str:
    def row(p: Priced) -> dict[str, Any]:
        g, m = p.group, p.match
        return {
            "source": g.source, "instance_type": g.instance_type, "region": g.region, "kind": g.kind,
            "kind_basis": g.kind_basis, "tags": dict(g.tags), "hours": dict(g.hours), "nodes": p.nodes,
            "billed_monthly": p.billed_monthly, "effective_monthly": p.effective_monthly,
            "gpu_list_monthly": p.gpu_list_monthly, "neuron_list_monthly": p.neuron_list_monthly,
            "saving_list": p.saving_list, "covered_hours": p.covered_hours, "covered_rows": dict(g.covered_rows),
            "covered_resources": g.covered_resources, "neuron_type": m.neuron_type if m else None,
            "release": m.release if m else None, "az_ids": list(m.az_ids) if m else [], "why": m.why if m else None,
            "notes": p.notes, "model": p.model, "model_basis": p.model_basis, "not_assessed": p.not_assessed,
            "tp": m.tensor_parallel if m else None, "lnc": m.lnc if m else None, "line": m.line if m else None,
            "offered_elsewhere": {r: list(z) for r, z in m.elsewhere} if m else {}, "price_region": m.price_region if m else None,
            "trainium2": None if p.trn2 is None else {
                "instance_type": p.trn2.instance_type, "regions": list(p.trn2.regions), "release": p.trn2.release,
                "capacity_blocks_only": True, "tp": p.trn2.tp,
                "block_price_per_instance_hour": p.trn2.price.per_instance_hour if p.trn2.price else None,
                "block_price_basis": p.trn2.price.basis if p.trn2.price else None,
                "block_monthly": p.trn2_block_monthly,
            },
        }  # fmt: skip

    doc = {
        "inputs": a.export.inputs,
        "workload_tag_detected": a.export.detected_workload_tag,
        "kind": a.export.kind,
        "periods": sorted(a.export.periods),
        "verdicts": {k: a.verdict(k) for k in ("training", "inference")},  # type: ignore[arg-type]
        "workloads": [row(p) for p in a.priced],
        "fleets": a.fleets,
        "problems": a.problems,
        "neuron_commitments_priced": False,
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


PLACEHOLDER_ACCOUNT = "000000000000"


def to_assessment(a: BillingAssessment) -> assess.Assessment:
    """The billing assessment in the online one's shape, for ``--pilot-output`` (the starter pilot file): each
    training or inference group with a Neuron type becomes a workload at its average node count, priced at list."""
    accounts = sorted(a.export.accounts)
    out = assess.Assessment(
        account=accounts[0] if len(accounts) == 1 else PLACEHOLDER_ACCOUNT,
        regions=sorted({p.group.region for p in a.priced}),
        months=sorted(a.export.periods),
    )
    for p in a.priced:
        m = p.match
        if m is None or p.group.kind not in ("training", "inference"):
            continue
        w = assess.Workload(
            "ec2" if p.group.source != "sagemaker" else "sagemaker-training", p.group.name, p.group.region,
            p.group.instance_type, round(p.nodes, 2), p.group.kind,  # type: ignore[arg-type]
        )  # fmt: skip
        out.proposals.append(
            assess.Proposal(
                workload=w, neuron_type=m.neuron_type, why=m.why, release=m.release, gpu_monthly=p.gpu_list_monthly,
                neuron_monthly=p.neuron_list_monthly, spend_basis="billing-export",
                architecture_support=assess.architecture_support(w.kind, None), model=p.model,
                tensor_parallel=m.tensor_parallel, lnc=m.lnc,
                neuron_region=m.price_region if m.price_region and m.price_region != w.region else None,
            )
        )  # fmt: skip
    return out
