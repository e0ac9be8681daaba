"""``neuronkit assess``: inventory an account's GPU workloads and what moving them to Trainium/Inferentia saves.

Read-only (the policy is ``iam/neuronkit-assess-policy.json``). Per region it reads running EC2 GPU
instances, Auto Scaling groups of GPU types, SageMaker training jobs of the last months and in-service
endpoints on GPU types; from Cost Explorer the spend per instance type over the last full months. Each
workload gets the Neuron type the catalog pairs with it, the Neuron release that supports its kind, the
monthly saving at list prices and the adoption guide's verdict (thresholds in catalog/adoption.yaml).
"""

from __future__ import annotations

import datetime as dt
import json
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml

from neuronkit import catalog
from neuronkit.catalog import fit, pricing, releases

Kind = Literal["training", "inference"]
_HERE = Path(catalog.__file__).resolve().parent
RELEASE_WORKLOAD: dict[str, str] = {"training": "pytorch-training", "inference": "vllm-serving"}


@cache
def adoption_facts() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((_HERE / "adoption.yaml").read_text())
    return data


def threshold(name: str) -> float:
    return float(adoption_facts()["thresholds"][name]["value"])


# --------------------------------------------------------------------------------------------
# what was found
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Workload:
    """One GPU workload: where it was found, its GPU type, how many instances and what it does."""

    source: Literal["ec2", "auto-scaling-group", "sagemaker-training", "sagemaker-endpoint"]
    name: str
    region: str
    instance_type: str  # the EC2 type (SageMaker's ml. prefix removed)
    instances: float  # running now, or the average over the spend window for finished training jobs
    kind: Kind
    architecture: str | None = None  # from a `model-architecture` tag, when the account says


@dataclass(frozen=True)
class Proposal:
    workload: Workload
    neuron_type: str | None
    why: str
    release: str | None
    gpu_monthly: float | None  # what the workload costs a month on GPUs (Cost Explorer share, else list price)
    neuron_monthly: float | None
    spend_basis: str  # "cost-explorer" | "list-price"
    architecture_support: str  # "supported" | "unknown: ..." | "not in the Neuron model lists"
    model: str | None = None  # the catalog model a serving workload serves (fit.known_model)
    tensor_parallel: int | None = None  # the fit rule's TP on neuron_type (fit.best)
    lnc: int | None = None
    neuron_region: str | None = None  # where neuron_type is offered when the workload's region does not offer it

    @property
    def saving(self) -> float | None:
        if self.gpu_monthly is None or self.neuron_monthly is None:
            return None
        return self.gpu_monthly - self.neuron_monthly

    @property
    def saving_percent(self) -> float | None:
        if self.saving is None or not self.gpu_monthly:
            return None
        return self.saving / self.gpu_monthly * 100


@dataclass
class Assessment:
    account: str
    regions: list[str]
    months: list[str]
    proposals: list[Proposal] = field(default_factory=list)
    spend_by_type: dict[str, float] = field(default_factory=dict)  # average monthly, EC2 type -> USD
    unattributed: dict[str, float] = field(default_factory=dict)  # spend with no workload found for its type
    problems: list[str] = field(default_factory=list)  # what could not be read (permissions, APIs)

    def by_kind(self, kind: Kind) -> list[Proposal]:
        return [p for p in self.proposals if p.workload.kind == kind]

    def monthly(self, kind: Kind) -> float:
        return sum(p.gpu_monthly or 0.0 for p in self.by_kind(kind))

    def saving(self, kind: Kind) -> float:
        return sum(p.saving or 0.0 for p in self.by_kind(kind))

    def compared(self, kind: Kind) -> float:
        """The GPU cost of the workloads whose Neuron cost is known (the base of the saving's percentage)."""
        return sum(p.gpu_monthly or 0.0 for p in self.by_kind(kind) if p.neuron_monthly is not None)

    def verdict(self, kind: Kind) -> str:
        return verdict(kind, self.monthly(kind), self.saving(kind), self.compared(kind))

    def best(self) -> Proposal | None:
        """The pilot candidate: the largest saving of a workload whose Neuron type and release are known."""
        ranked = [p for p in self.proposals if p.neuron_type and p.release and (p.saving or 0) > 0]
        return max(ranked, key=lambda p: p.saving or 0.0, default=None)


def verdict(kind: Kind, monthly: float, saving: float, compared: float | None = None) -> str:
    """The adoption guide's verdict for ``kind`` given its monthly GPU cost and the saving at list prices
    (``compared``: the GPU cost the saving was computed on, when some workloads could not be priced)."""
    if monthly <= 0:
        return "no GPU spend found"
    base = monthly if compared is None else compared
    if base <= 0:
        return "open: no workload has a Neuron type with a list price; price it (Capacity Blocks) and run a pilot"
    percent = saving / base * 100
    if kind == "training":
        bar = threshold("training_saving_percent")
        if percent >= bar:
            return (
                f"migrate: a {percent:.0f}% saving is at or above the guide's {bar:.0f}% bar (30-50% justifies moving "
                "cost-sensitive transformer training at scale); run a pilot"
            )
        return f"hold: a {percent:.0f}% saving is below the guide's {bar:.0f}% bar for training"
    low, high = threshold("inference_monthly_usd"), threshold("inference_large_monthly_usd")
    large = threshold("inference_large_saving_percent")
    if monthly < low:
        return (
            f"hold: ${monthly:,.0f} a month of inference is below the guide's ${low:,.0f}; the engineering effort "
            "usually exceeds the savings"
        )
    if monthly >= high and percent >= large:
        return f"migrate: ${monthly:,.0f} a month with a {percent:.0f}% reduction is the guide's substantial return"
    if percent <= 0:
        return f"hold: ${monthly:,.0f} a month, but the Neuron equivalents cost no less at list prices"
    return f"migrate: ${monthly:,.0f} a month is above the guide's ${low:,.0f}, where moving inference pays off ({percent:.0f}% saving)"


# --------------------------------------------------------------------------------------------
# matching a GPU type to a Neuron type
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Match:
    """The Neuron type proposed for a GPU workload, and each check that chose it (docs/adoption.md)."""

    gpu_type: str
    kind: Kind
    region: str
    neuron_type: str | None
    why: str  # the reason line: memory, TP, offering, release (and the model, when known)
    release: str | None = None
    az_ids: tuple[str, ...] = ()  # where the region offers the Neuron type
    tensor_parallel: int | None = None
    hourly: float | None = None  # the Neuron type's On-Demand list price in the region
    lnc: int | None = None
    line: str | None = None  # the serving line and its status (fit.Line.text)
    price_region: str | None = None  # where the type is priced when the region does not offer it
    price_basis: str = "On-Demand list price"
    elsewhere: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (region, AZ IDs) offering the type when the region does not
    alternatives: tuple[str, ...] = ()  # other families the model fits, each with its line's status


def _mib(x: int) -> str:
    return f"{x:,} MiB"


def _candidate_problem(t: catalog.InstanceType, need: int, kind: Kind, model: Any) -> str | None:
    """Why a Neuron type cannot take the workload on memory, release or model (offering is checked apart)."""
    if t.neuron_memory_mib < need:
        return f"{_mib(t.neuron_memory_mib)} < {_mib(need)}"
    if releases.default_release(t.family, RELEASE_WORKLOAD[kind]) is None:
        return f"no Neuron release supports {releases.workloads()[RELEASE_WORKLOAD[kind]]} on {t.family}"
    if model is not None:
        return fit.fit_problem(model, t.name)
    return None


def neuron_match(gpu_type: str, kind: Kind, region: str, model: Any = None) -> Match:
    """The cheapest Neuron type offered in ``region`` whose device memory holds what ``gpu_type``'s GPUs hold, on
    a release that supports the workload on its family, and (``model``, a serving.ModelSpec) whose serving
    profile holds the model with KV-cache headroom. Release support and regional offering are checked apart:
    a type that passes every check but is not offered in the region is named with the regions that offer it."""
    gpu = catalog.instance_types().get(gpu_type)
    if gpu is None or gpu.accelerator != "gpu":
        return Match(gpu_type, kind, region, None, f"{gpu_type} is not a GPU type the catalog knows")
    need = gpu.gpu_memory_mib
    table = pricing.load_prices()
    fitting = [
        t
        for t in catalog.instance_types().values()
        if t.is_neuron and t.family != "inf1" and _candidate_problem(t, need, kind, model) is None
    ]
    offered = [t for t in fitting if t.az_ids(region)]
    # Cheapest first; a type without an On-Demand price here (Capacity Blocks only) after the priced ones.
    offered.sort(
        key=lambda t: (table.hourly(t.name, region) is None, table.hourly(t.name, region) or 0.0, t.neuron_memory_mib, t.name)
    )
    what = releases.workloads()[RELEASE_WORKLOAD[kind]]
    if not offered:
        elsewhere = sorted(fitting, key=lambda t: (t.neuron_memory_mib, t.name))
        hint = "; ".join(f"{t.name} is offered in {', '.join(sorted(t.offerings)) or 'no scanned region'}" for t in elsewhere[:2])
        return Match(
            gpu_type, kind, region, None,
            f"no Neuron type offered in {region} holds {gpu_type}'s {_mib(need)} of GPU memory with a release that "
            f"supports {what} on its family" + (f" ({hint})" if hint else ""),
        )  # fmt: skip
    best = offered[0]
    rel = releases.default_release(best.family, RELEASE_WORKLOAD[kind])
    assert rel is not None
    tp = best.neuron_cores // (catalog.lnc_default(best.family) or 1)  # logical NeuronCores at the default LNC
    price = table.hourly(best.name, region)
    cost = f"${price:,.2f}/h On-Demand" if price is not None else "no On-Demand list price (Capacity Blocks)"
    runner_up = f"; next {offered[1].name}" if len(offered) > 1 else ""
    why = (
        f"memory: {_mib(best.neuron_memory_mib)} of Neuron device memory holds {gpu_type}'s {_mib(need)} of GPU memory; "
        f"TP {tp} (its logical NeuronCores); offering: {region} {', '.join(best.az_ids(region))}; release: Neuron {rel.version} "
        f"supports {what} on {best.family}; price: the cheapest such type, {cost}{runner_up}"
    )
    if model is not None:
        from neuronkit.catalog import serving

        why += (
            f"; model: {model.id} needs {serving.required_memory_gib(model):.0f} GiB with KV-cache headroom, "
            f"{best.name} has {serving.accelerator_memory_gib(best.name):.0f} GiB; {tp_check(tp, known_model(model.id))}"
        )
    return Match(gpu_type, kind, region, best.name, why, rel.version, best.az_ids(region), tp, price)


_LINE_RANK = {"current": 0, "beta": 1, "maintenance": 2}


def model_match(gpu_type: str, region: str, model_id: str, offered: Sequence[BlockPrice] = ()) -> Match:
    """The Neuron type for a serving workload whose model the catalog knows, by the one fit rule (catalog/fit.py): every
    Neuron type at the largest TP the model fits; forward family first (the serving line without an announced last
    release, then the line's status), then offered in ``region``, then price. A type the region does not offer names the
    regions and AZ IDs that do and is priced there (On-Demand, else Capacity Blocks). Fits nowhere: no type, saying why."""

    spec = fit.spec_for(model_id)
    table = pricing.load_prices()
    fitting: list[tuple[catalog.InstanceType, fit.Fit]] = []
    refused: list[str] = []
    for t in sorted(catalog.instance_types().values(), key=lambda t: (-t.neuron_memory_mib, t.name)):
        if not t.is_neuron or t.family == "inf1":
            continue
        answer, tried = fit.best(spec, t.name)
        if answer is None:
            refused.append(f"{t.name}: {fit.why_not(tried)}")
        elif releases.default_release(t.family, RELEASE_WORKLOAD["inference"]) is not None:
            fitting.append((t, answer))
    if not fitting:
        return Match(gpu_type, "inference", region, None, f"{model_id} fits no Neuron type: " + " | ".join(refused[:4]))

    def hourly(t: catalog.InstanceType, where: str) -> tuple[float | None, str]:
        price = table.hourly(t.name, where)
        if price is not None:
            return price, f"On-Demand list price in {where}"
        block = block_price(t.name, where, offered)
        return (block.per_instance_hour, f"Capacity Block price in {where} ({block.basis})") if block else (None, "")

    def rank(item: tuple[catalog.InstanceType, fit.Fit]) -> tuple[Any, ...]:
        t, answer = item
        line = answer.line
        ends = 1 if line is None or line.last_release else 0
        status = _LINE_RANK.get(line.status if line else "", 3)
        where = region if t.az_ids(region) else (sorted(t.offerings) or [region])[0]
        price = hourly(t, where)[0]
        return (ends, status, not t.az_ids(region), price is None, price or 0.0, t.neuron_memory_mib, t.name)

    fitting.sort(key=rank)
    t, answer = fitting[0]
    rel = releases.default_release(t.family, RELEASE_WORKLOAD["inference"])
    assert rel is not None
    here = bool(t.az_ids(region))
    geo = region.split("-")[0]
    elsewhere = () if here else tuple((r, t.az_ids(r)) for r in sorted(t.offerings, key=lambda r: (r.split("-")[0] != geo, r)))
    where = region if here else (elsewhere[0][0] if elsewhere else region)
    price, basis = hourly(t, where)
    offering = (
        f"offering: {region} {', '.join(t.az_ids(region))}"
        if here
        else f"offering: not offered in {region}; offered in "
        + "; ".join(f"{r} ({', '.join(z)})" for r, z in elsewhere)
        + f", priced in {where}"
    )
    cost = f"${price:,.2f}/h ({basis})" if price is not None else (
        f"unpriced: {t.name} has no On-Demand price and no Capacity Block price is known; pass --capacity-blocks FILE"
    )  # fmt: skip
    alternatives = tuple(
        f"{a.name} TP {f.tp}: {f.line.text() if f.line else 'no serving line'}"
        + (f", ${table.hourly(a.name, region):,.2f}/h in {region}" if table.hourly(a.name, region) is not None else "")
        for a, f in fitting[1:]
        if a.family != t.family
    )
    why = f"model: {answer.summary()}; {offering}; release: Neuron {rel.version}; price: {cost}" + (
        f"; does not fit: {'; '.join(refused[:2])}" if refused else ""
    )
    return Match(
        gpu_type, "inference", region, t.name, why, rel.version, t.az_ids(region) or (elsewhere[0][1] if elsewhere else ()),
        answer.tp, price, answer.lnc, answer.line.text() if answer.line else None, None if here else where, basis or "none",
        elsewhere, alternatives,
    )  # fmt: skip


def neuron_equivalent(gpu_type: str, kind: Kind, region: str) -> tuple[str | None, str]:
    """The Neuron type for a GPU workload and the reason line (see :func:`neuron_match`)."""
    m = neuron_match(gpu_type, kind, region)
    return m.neuron_type, m.why


def architecture_support(kind: Kind, architecture: str | None) -> str:
    if not architecture:
        return "unknown: tag the workload with model-architecture (e.g. llama3) to check it"
    entry = adoption_facts()["architectures"][kind]
    name = architecture.lower()
    if any(name == known or name.startswith(known) for known in entry["names"]):
        return "supported"
    return f"not in the Neuron {kind} model lists ({adoption_facts()['sources'][entry['source']]}): plan a port"


# --------------------------------------------------------------------------------------------
# reading the account
# --------------------------------------------------------------------------------------------
def _is_gpu(instance_type: str) -> bool:
    it = catalog.instance_types().get(instance_type)
    if it is not None:
        return it.accelerator == "gpu"
    return instance_type.split(".")[0][:1] in ("p", "g") and instance_type[:2] not in ("gr",)


def _kind(instance_type: str, tags: dict[str, str]) -> Kind:
    said = (tags.get("workload") or tags.get("neuronkit:workload") or "").lower()
    if said in ("training", "inference"):
        return said  # type: ignore[return-value]
    family = instance_type[:1]
    guessed: Kind = adoption_facts()["kind_by_family"].get(family, "training")
    return guessed


def _tags(items: Iterable[dict[str, str]] | None) -> dict[str, str]:
    return {t["Key"]: t["Value"] for t in items or [] if "Key" in t and "Value" in t}


def ec2_workloads(ec2: Any, region: str) -> list[Workload]:
    """Running GPU instances not in an Auto Scaling group, grouped by Name tag (or instance id) and type."""
    groups: dict[tuple[str, str, Kind, str | None], int] = defaultdict(int)
    paginator = ec2.get_paginator("describe_instances")
    for page in paginator.paginate(Filters=[{"Name": "instance-state-name", "Values": ["running"]}]):
        for reservation in page["Reservations"]:
            for inst in reservation["Instances"]:
                itype = inst["InstanceType"]
                tags = _tags(inst.get("Tags"))
                if not _is_gpu(itype) or "aws:autoscaling:groupName" in tags:
                    continue
                name = tags.get("Name") or inst["InstanceId"]
                groups[(name, itype, _kind(itype, tags), tags.get("model-architecture"))] += 1
    return [Workload("ec2", name, region, itype, float(n), kind, arch) for (name, itype, kind, arch), n in sorted(groups.items())]


def _group_types(asg: Any, ec2: Any, group: dict[str, Any]) -> list[str]:
    policy = group.get("MixedInstancesPolicy")
    if policy:
        overrides = policy["LaunchTemplate"].get("Overrides") or []
        types = [o["InstanceType"] for o in overrides if "InstanceType" in o]
        if types:
            return types
        spec = policy["LaunchTemplate"]["LaunchTemplateSpecification"]
    else:
        spec = group.get("LaunchTemplate")
    if spec:
        ident = (
            {"LaunchTemplateId": spec["LaunchTemplateId"]}
            if spec.get("LaunchTemplateId")
            else {"LaunchTemplateName": spec["LaunchTemplateName"]}
        )
        version = spec.get("Version") or "$Default"
        data = ec2.describe_launch_template_versions(**ident, Versions=[version])["LaunchTemplateVersions"]
        itype = data[0]["LaunchTemplateData"].get("InstanceType") if data else None
        return [itype] if itype else []
    if group.get("LaunchConfigurationName"):
        lc = asg.describe_launch_configurations(LaunchConfigurationNames=[group["LaunchConfigurationName"]])
        return [c["InstanceType"] for c in lc["LaunchConfigurations"]]
    return []


def asg_workloads(asg: Any, ec2: Any, region: str) -> list[Workload]:
    """Auto Scaling groups that launch a GPU type: the first GPU type, at the group's desired capacity."""
    out: list[Workload] = []
    for page in asg.get_paginator("describe_auto_scaling_groups").paginate():
        for group in page["AutoScalingGroups"]:
            types = [t for t in _group_types(asg, ec2, group) if _is_gpu(t)]
            if not types:
                continue
            tags = {t["Key"]: t["Value"] for t in group.get("Tags", [])}
            running = sum(1 for i in group.get("Instances", []) if i.get("LifecycleState") == "InService")
            count = float(max(running, group.get("DesiredCapacity", 0)))
            out.append(
                Workload(
                    "auto-scaling-group", group["AutoScalingGroupName"], region, types[0], count, _kind(types[0], tags),
                    tags.get("model-architecture"),
                )
            )  # fmt: skip
    return out


def _ec2_type(ml_type: str) -> str:
    return ml_type.removeprefix("ml.")


def sagemaker_workloads(sm: Any, region: str, since: dt.datetime, now: dt.datetime) -> list[Workload]:
    """Training jobs since ``since`` (as average instances over the window) and in-service endpoints."""
    hours = max((now - since).total_seconds() / 3600, 1.0)
    jobs: dict[tuple[str, str | None], float] = defaultdict(float)
    for page in sm.get_paginator("list_training_jobs").paginate(CreationTimeAfter=since):
        for summary in page["TrainingJobSummaries"]:
            job = sm.describe_training_job(TrainingJobName=summary["TrainingJobName"])
            resources = job.get("ResourceConfig", {})
            itype = _ec2_type(resources.get("InstanceType", ""))
            if not _is_gpu(itype):
                continue
            seconds = job.get("TrainingTimeInSeconds") or _elapsed(job, now)
            arch = (job.get("HyperParameters") or {}).get("model-architecture")
            jobs[(itype, arch)] += resources.get("InstanceCount", 1) * seconds / 3600
    out = [
        Workload("sagemaker-training", f"training jobs on ml.{itype}", region, itype, node_hours / hours, "training", arch)
        for (itype, arch), node_hours in sorted(jobs.items(), key=lambda kv: (kv[0][0], kv[0][1] or ""))
    ]
    for page in sm.get_paginator("list_endpoints").paginate(StatusEquals="InService"):
        for endpoint in page["Endpoints"]:
            described = sm.describe_endpoint(EndpointName=endpoint["EndpointName"])
            config = sm.describe_endpoint_config(EndpointConfigName=described["EndpointConfigName"])
            for variant in config.get("ProductionVariants", []):
                itype = _ec2_type(variant.get("InstanceType", ""))
                if _is_gpu(itype):
                    out.append(
                        Workload(
                            "sagemaker-endpoint", f"{endpoint['EndpointName']}/{variant['VariantName']}", region, itype,
                            float(variant.get("InitialInstanceCount", 1)), "inference",
                        )
                    )  # fmt: skip
    return out


def _elapsed(job: dict[str, Any], now: dt.datetime) -> float:
    start, end = job.get("TrainingStartTime"), job.get("TrainingEndTime") or now
    return (end - start).total_seconds() if start else 0.0


def month_window(now: dt.datetime, months: int) -> tuple[dt.date, dt.date, list[str]]:
    """The last ``months`` full calendar months before ``now``: start (inclusive), end (exclusive), labels."""
    first_this = now.date().replace(day=1)
    labels: list[str] = []
    start = first_this
    for _ in range(months):
        start = (start - dt.timedelta(days=1)).replace(day=1)
        labels.insert(0, start.strftime("%Y-%m"))
    return start, first_this, labels


def spend_by_type(ce: Any, now: dt.datetime) -> tuple[dict[str, float], list[str]]:
    """Average monthly spend per EC2 instance type (SageMaker's ml. types folded in) over the window."""
    facts = adoption_facts()["spend"]
    start, end, labels = month_window(now, int(facts["months"]))
    totals: dict[str, float] = defaultdict(float)
    token: str | None = None
    while True:
        kwargs: dict[str, Any] = {
            "TimePeriod": {"Start": start.isoformat(), "End": end.isoformat()},
            "Granularity": "MONTHLY",
            "Metrics": ["UnblendedCost"],
            "GroupBy": [{"Type": "DIMENSION", "Key": "INSTANCE_TYPE"}],
            "Filter": {"Dimensions": {"Key": "SERVICE", "Values": list(facts["services"])}},
        }
        if token:
            kwargs["NextPageToken"] = token
        answer = ce.get_cost_and_usage(**kwargs)
        for period in answer["ResultsByTime"]:
            for group in period.get("Groups", []):
                itype = _ec2_type(group["Keys"][0])
                if _is_gpu(itype):
                    totals[itype] += float(group["Metrics"]["UnblendedCost"]["Amount"])
        token = answer.get("NextPageToken")
        if not token:
            break
    return {t: v / len(labels) for t, v in sorted(totals.items())}, labels


# --------------------------------------------------------------------------------------------
# putting it together
# --------------------------------------------------------------------------------------------
def propose(workloads: Sequence[Workload], spend: dict[str, float]) -> tuple[list[Proposal], dict[str, float]]:
    """Price each workload: its share of its type's Cost Explorer spend (by instances), else list price."""
    table = pricing.load_prices()
    per_type: dict[str, float] = defaultdict(float)
    for w in workloads:
        per_type[w.instance_type] += w.instances
    proposals: list[Proposal] = []
    for w in workloads:
        neuron_type, why = neuron_equivalent(w.instance_type, w.kind, w.region)
        gpu_price = table.hourly(w.instance_type, w.region)
        if w.instance_type in spend:
            # The type's spend, shared by instances (or evenly, when none of its workloads runs right now).
            same = [x for x in workloads if x.instance_type == w.instance_type]
            share = w.instances / per_type[w.instance_type] if per_type[w.instance_type] else 1 / len(same)
            gpu_monthly: float | None = spend[w.instance_type] * share
            basis = "cost-explorer"
        else:
            gpu_monthly = w.instances * gpu_price * table.hours_per_month if gpu_price is not None else None
            basis = "list-price"
        neuron_price = table.hourly(neuron_type, w.region) if neuron_type else None
        neuron_monthly = None
        if gpu_monthly is not None and neuron_price is not None and gpu_price:
            # The same node count and hours as on GPUs, at the Neuron type's list price.
            neuron_monthly = gpu_monthly * neuron_price / gpu_price
        if neuron_type and neuron_monthly is None and gpu_monthly is not None:
            why = f"{why}; saving not computed: {table.missing_message(neuron_type, w.region)}"
        family = releases.family_of(neuron_type) if neuron_type else None
        rel = releases.default_release(family, RELEASE_WORKLOAD[w.kind]) if family else None
        note = release_note(family, w.kind, rel.version) if family and rel else None
        if note:
            why = f"{why}; {note}"
        if w.kind == "inference" and neuron_type:
            m = neuron_match(w.instance_type, w.kind, w.region)
            why = f"{why}; {tp_check(m.tensor_parallel, known_model(w.name, w.architecture))}"
        proposals.append(
            Proposal(
                workload=w, neuron_type=neuron_type, why=why, release=rel.version if rel else None,
                gpu_monthly=gpu_monthly, neuron_monthly=neuron_monthly, spend_basis=basis,
                architecture_support=architecture_support(w.kind, w.architecture),
            )
        )  # fmt: skip
    unattributed = {t: v for t, v in spend.items() if t not in per_type}
    return proposals, unattributed


def _read_region(session: Any, region: str, since: dt.datetime, now: dt.datetime, problems: list[str]) -> list[Workload]:
    """The GPU workloads of one region; what the credentials may not read becomes a line in ``problems``."""
    from botocore.exceptions import ClientError

    from neuronkit.account.preflight import client_config

    ec2 = session.client("ec2", region_name=region, config=client_config())
    out: list[Workload] = []
    for what, service in (("EC2 instances", "ec2"), ("Auto Scaling groups", "autoscaling"), ("SageMaker", "sagemaker")):
        try:
            if service == "ec2":
                out += ec2_workloads(ec2, region)
            elif service == "autoscaling":
                out += asg_workloads(session.client("autoscaling", region_name=region, config=client_config()), ec2, region)
            else:
                sm = session.client("sagemaker", region_name=region, config=client_config())
                out += sagemaker_workloads(sm, region, since, now)
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            problems.append(f"{region}: could not read {what} ({code}); see iam/neuronkit-assess-policy.json")
    return out


def assess(session: Any, regions: Sequence[str], now: dt.datetime | None = None) -> Assessment:
    """Read the account (read-only) and propose; an API the credentials may not call is a problem line."""
    from botocore.exceptions import ClientError

    from neuronkit import clock
    from neuronkit.account.preflight import client_config

    now = now or clock.utc_now()
    months = int(adoption_facts()["spend"]["months"])
    since, _, labels = month_window(now, months)
    since_dt = dt.datetime.combine(since, dt.time(), tzinfo=dt.UTC)
    account = session.client("sts", region_name=regions[0], config=client_config()).get_caller_identity()["Account"]
    result = Assessment(account=account, regions=list(regions), months=labels)
    workloads: list[Workload] = []
    for region in regions:
        workloads += _read_region(session, region, since_dt, now, result.problems)
    try:
        # Cost Explorer is global, served from us-east-1.
        result.spend_by_type, result.months = spend_by_type(
            session.client("ce", region_name="us-east-1", config=client_config()), now
        )
    except ClientError as err:
        code = err.response.get("Error", {}).get("Code", "")
        result.problems.append(
            f"could not read Cost Explorer ({code}); workloads are priced at list prices (enable Cost Explorer and "
            "allow ce:GetCostAndUsage)"
        )
    result.proposals, result.unattributed = propose(workloads, result.spend_by_type)
    return result


# --------------------------------------------------------------------------------------------
# output
# --------------------------------------------------------------------------------------------
def _usd(x: float | None) -> str:
    if x is None:
        return "–"
    return f"-${-x:,.0f}" if x < 0 else f"${x:,.0f}"


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{x:.0f}%"


def render(a: Assessment) -> str:
    table = pricing.load_prices()
    lines = [
        "# neuronkit assess",
        "",
        f"Account {a.account}, regions {', '.join(a.regions)}. Spend: Cost Explorer, average of {', '.join(a.months)} "
        f"(unblended, EC2 compute and SageMaker); list prices from catalog/prices.json as of {table.as_of}.",
        "",
    ]
    for kind in ("training", "inference"):
        rows = a.by_kind(kind)  # type: ignore[arg-type]
        lines += [f"## {kind.capitalize()}", ""]
        if not rows:
            lines += [f"No GPU {kind} workloads found.", ""]
            continue
        lines += [
            "| workload | found in | region | GPU type | instances | $/month on GPU | Neuron type | release | $/month on Neuron | saving | model |",
            "| --- | --- | --- | --- | ---: | ---: | --- | --- | ---: | ---: | --- |",
        ]
        for p in sorted(rows, key=lambda p: -(p.saving or 0)):
            w = p.workload
            lines.append(
                f"| {w.name} | {w.source} | {w.region} | {w.instance_type} | {w.instances:g} | {_usd(p.gpu_monthly)} "
                f"({p.spend_basis}) | {p.neuron_type or '–'} | {p.release or '–'} | {_usd(p.neuron_monthly)} | "
                f"{_usd(p.saving)} ({_pct(p.saving_percent)}) | {p.architecture_support} |"
            )
        lines += [""]
        lines += [f"- {p.workload.name}: {p.neuron_type or 'no Neuron type'}: {p.why}" for p in rows]
        total, saving = a.monthly(kind), a.saving(kind)  # type: ignore[arg-type]
        lines += [
            "",
            f"**{kind.capitalize()}: {_usd(total)} a month on GPUs, {_usd(saving)} saved on Neuron at list prices "
            "(workloads with a priced Neuron type). "
            f"Verdict: {a.verdict(kind)}.**",  # type: ignore[arg-type]
            "",
        ]
    if a.unattributed:
        lines += ["## Spend without a workload found", ""]
        lines += [
            f"- {t}: {_usd(v)} a month (no running instance, group, job or endpoint of this type now)"
            for t, v in a.unattributed.items()
        ]
        lines += [""]
    best = a.best()
    lines += ["## Pilot", ""]
    if best is None:
        lines += ["No candidate: no workload saves money on a Neuron type with a supporting release.", ""]
    else:
        lines += [
            f"Best candidate: {best.workload.name} ({best.workload.kind}, {best.workload.instance_type} → {best.neuron_type}, "
            f"Neuron SDK {best.release}), {_usd(best.saving)} a month. `--pilot-output PATH` writes a starter environment "
            "for it; see docs/adoption.md.",
            "",
        ]
    if a.problems:
        lines += ["## Not read", ""] + [f"- {p}" for p in a.problems] + [""]
    lines += [
        "Savings compare list prices of the same node count, not throughput: the pilot measures that "
        "(docs/adoption.md). Thresholds: catalog/adoption.yaml.",
    ]
    return "\n".join(lines) + "\n"


def to_json(a: Assessment) -> str:
    doc = {
        "account": a.account,
        "regions": a.regions,
        "months": a.months,
        "spend_by_type": a.spend_by_type,
        "unattributed": a.unattributed,
        "problems": a.problems,
        "verdicts": {k: a.verdict(k) for k in ("training", "inference")},  # type: ignore[arg-type]
        "workloads": [
            {**asdict(p), "workload": asdict(p.workload), "saving": p.saving, "saving_percent": p.saving_percent}
            for p in a.proposals
        ],
    }
    return json.dumps(doc, indent=2, sort_keys=True) + "\n"


# --------------------------------------------------------------------------------------------
# the starter pilot file
# --------------------------------------------------------------------------------------------
def best_training(a: Assessment) -> Proposal | None:
    ranked = [p for p in a.by_kind("training") if p.neuron_type and p.release and (p.saving or 0) > 0]
    return max(ranked, key=lambda p: p.saving or 0.0, default=None)


def pilot_environment(a: Assessment, name: str = "pilot") -> str:
    """A starter environment file that pilots the workload with the largest saving (Assessment.best, training or
    inference; docs/adoption.md): a training workload runs a job on both sides through AWS Batch, a serving workload
    runs its model on a Neuron fleet and the GPU twin at the TP and LNC the fit rule (catalog/fit.py) gave assess."""
    best = a.best()
    if best is None:
        raise ValueError(
            "no workload saves money on a Neuron type with a supporting release: no pilot to write (an unpriced "
            "Trainium2 proposal: pass --capacity-blocks FILE)"
        )
    if best.workload.kind == "inference":
        return _serving_pilot(a, best, name)
    return _training_pilot(a, best, name)


def _pilot_budget(region: str, types: Sequence[str], hours: float) -> int:
    table = pricing.load_prices()
    hourly = sum(table.hourly(t, region) or 0.0 for t in types)
    return int(-(-hourly * hours // 1000) * 1000) or 1000


def _training_pilot(a: Assessment, best: Proposal, name: str) -> str:
    w = best.workload
    assert best.neuron_type is not None
    neuron, gpu = catalog.get(best.neuron_type), catalog.get(w.instance_type)
    both = [z for z in neuron.az_ids(w.region) if z in gpu.az_ids(w.region)]
    if not both:
        raise ValueError(f"no AZ of {w.region} offers both {best.neuron_type} and {w.instance_type}: pilot in another region")
    others = [z for z in gpu.az_ids(w.region) if z != both[0]] or [z for z in neuron.az_ids(w.region) if z != both[0]]
    az_ids = [both[0], *others[:1]]
    facts = adoption_facts()["pilot"]
    budget = _pilot_budget(w.region, (best.neuron_type, w.instance_type), float(facts["budget_hours"]))
    cluster = "candidate"
    doc = {
        "name": name,
        "account": a.account,
        "region": w.region,
        "neuron_sdk": best.release,
        "network": {"az_ids": az_ids},
        "training": [
            {
                "name": cluster,
                "instance_type": best.neuron_type,
                "az_id": both[0],
                "min_size": 0,
                "max_size": 1,
                "scheduler": "batch",
                "gpu_pool": {"instance_type": w.instance_type, "max_size": 1, "container_image": facts["gpu_training_image"]},
            }
        ],
        "pilot": {
            "name": _slug(w.name),
            "cluster": cluster,
            "steps": int(facts["steps"]),
            "nodes": 1,
            "data_s3_prefix": f"pilot/{_slug(w.name)}/",
            "neuron_command": facts["neuron_command"],
            "gpu_command": facts["gpu_command"],
        },
        "budget": {"monthly_usd": budget},
    }
    head = (
        "# yaml-language-server: $schema=../schema/environment.schema.json\n"
        f"# Written by `neuronkit assess` for account {a.account}: pilots {w.name} ({w.instance_type}, {w.region}) against "
        f"{best.neuron_type}\n# (Neuron SDK {best.release}); at list prices it saves {_usd(best.saving)} a month "
        f"({_pct(best.saving_percent)}). Replace the commands with your\n# training entry point (it calls "
        "neuronkit.adoption.pilot_metrics.StepReporter each step) and the GPU image with the one it runs today.\n"
        "# Then: neuronkit validate, cdk deploy -c file=THIS, neuronkit pilot start --file THIS (docs/adoption.md).\n"
    )
    return head + yaml.safe_dump(doc, sort_keys=False, width=1000)


def _serving_budget(region: str, best: Proposal) -> int:
    """A week of both sides (adoption.yaml pilot.budget_hours): the GPU type's list price in ``region`` and the Neuron
    type's hourly price assess used (On-Demand or a Capacity Block), rounded up to $1,000."""
    table = pricing.load_prices()
    w = best.workload
    neuron = table.hourly(best.neuron_type or "", region)
    if neuron is None and best.neuron_monthly is not None and w.instances:
        neuron = best.neuron_monthly / w.instances / table.hours_per_month
    hourly = (table.hourly(w.instance_type, region) or 0.0) + (neuron or 0.0)
    return int(-(-hourly * float(adoption_facts()["pilot"]["budget_hours"]) // 1000) * 1000) or 1000


def _serving_pilot(a: Assessment, best: Proposal, name: str) -> str:
    """The serving pilot: one fleet on the proposed Neuron type (the fit rule's TP and LNC) with the workload's GPU type
    as its first fallback (the GPU twin), in the workload's region or, when that does not offer the Neuron type, the
    region assess priced it in."""
    w = best.workload
    assert best.neuron_type is not None
    if best.model is None:
        raise ValueError(
            f"{w.name}: the model it serves is unknown, so the fit rule has no answer to pilot; name it with "
            "--model GROUP=MODEL on a billing export (--from PATH or --sample; the account inventory reads no model), "
            "or a model or Name tag the export carries"
        )
    region = best.neuron_region or w.region
    neuron, gpu = catalog.get(best.neuron_type), catalog.get(w.instance_type)
    both = [z for z in neuron.az_ids(region) if z in gpu.az_ids(region)]
    if len(both) < 2:
        raise ValueError(
            f"fewer than two AZs of {region} offer both {best.neuron_type} and {w.instance_type} "
            f"({', '.join(both) or 'none'}): a fleet spans two; pilot in another region"
        )
    spec = fit.spec_for(best.model)
    answer = fit.check(spec, best.neuron_type, best.tensor_parallel, best.lnc)
    if not answer.fits:  # the proposal came from the same rule: this is a bug, not a user error
        raise ValueError(f"{w.name}: {answer.summary()}")
    gpu_fit, tried = fit.best(spec, w.instance_type)
    if gpu_fit is None:
        raise ValueError(f"{w.name}: {best.model} fits {w.instance_type} at no TP ({fit.why_not(tried)}): no GPU twin to pilot")
    facts = fit.models()[best.model]
    fleet = "candidate"
    slug = _slug(best.model.split("/")[-1])
    model = {
        "id": best.model,
        "s3_prefix": f"models/{slug}/",
        "parameters_billion": float(facts["parameters_billion"]),
        "max_model_len": spec.max_model_len,
        "max_num_seqs": spec.max_num_seqs,
    }
    doc: dict[str, Any] = {
        "name": name,
        "account": a.account,
        "region": region,
        "neuron_sdk": best.release,
        "network": {"az_ids": both[:2]},
        "inference": [
            {
                "name": fleet,
                "neuron_types": [best.neuron_type],
                "fallback_types": [w.instance_type],
                "az_ids": both[:2],
                "min_size": 1,
                "max_size": 1,
                "model": model,
                "profiles": {
                    best.neuron_type: {"tensor_parallel": answer.tp},
                    w.instance_type: {"tensor_parallel": gpu_fit.tp},
                },
                **({"lnc": answer.lnc} if answer.lnc else {}),
            }
        ],
        "pilot": {"name": slug, "serving": {"fleet": fleet, "nodes": 1}},
        "budget": {"monthly_usd": _serving_budget(region, best)}
        | ({} if pricing.load_prices().hourly(best.neuron_type, region) is not None else {"enforce": "off"}),
    }
    moved = f" (the Neuron type is not offered in {w.region}; both are in {region})" if region != w.region else ""
    head = (
        "# yaml-language-server: $schema=../schema/environment.schema.json\n"
        f"# Written by `neuronkit assess` for account {a.account}: pilots {w.name} ({w.instance_type}, {w.region}) against "
        f"{best.neuron_type}{moved}\n# (Neuron SDK {best.release}); at list prices it saves {_usd(best.saving)} a month "
        f"({_pct(best.saving_percent)}).\n# The fit rule (catalog/fit.py), as in the report: {answer.summary()}\n"
        f"# GPU twin: {gpu_fit.summary()}\n"
        + (
            f"# budget.enforce: off: {best.neuron_type} has no On-Demand price in {region} (Capacity Blocks), so the kit "
            "cannot price the environment; the budget covers a week of both sides at the price assess used.\n"
            if pricing.load_prices().hourly(best.neuron_type, region) is None
            else ""
        )
        + f"# Copy the weights (Hugging Face format) to models/{slug}/ in the artifacts bucket.\n"
        "# Then: neuronkit validate, cdk deploy -c file=THIS, neuronkit pilot start --file THIS (docs/adoption.md).\n"
    )
    return head + yaml.safe_dump(doc, sort_keys=False, width=1000)


def _slug(text: str) -> str:
    out = "".join(ch if ch.isalnum() else "-" for ch in text.lower()).strip("-")
    while "--" in out:
        out = out.replace("--", "-")
    out = out[:24].strip("-") or "workload"
    return out if out[0].isalpha() else f"w-{out}"[:24]


# --------------------------------------------------------------------------------------------
# what a proposal must say: the release line, the model's heads, Trainium2 on Capacity Blocks
# --------------------------------------------------------------------------------------------
def release_note(family: str, kind: Kind, version: str | None) -> str | None:
    """A line when ``version`` is the last release of its line for ``kind`` on ``family`` (later ones drop it)."""
    if not version:
        return None
    workload = RELEASE_WORKLOAD[kind]
    later = [r for r in releases.releases() if releases.version_key(r.version) > releases.version_key(version)]
    if not later or any(releases.support(r, family, workload) == "supported" for r in later):
        return None
    what = releases.workloads()[workload]
    status = releases.support(later[0], family, workload)
    return (
        f"release: Neuron {version} is the last release with {what} on {family} (from {later[0].version} it is "
        f"{status}; the newest release is {later[-1].version}): pin the {version.rsplit('.', 1)[0]} line and plan the "
        "move to a newer family before it ages out"
    )


def _squash(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def model_heads() -> dict[str, dict[str, Any]]:
    heads: dict[str, dict[str, Any]] = adoption_facts()["model_heads"]
    return heads


def known_model(*texts: str | None) -> str | None:
    """The catalog model (``model_heads``) an id, tag value or group name names, or None."""
    for text in texts:
        if not text:
            continue
        t = _squash(text)
        for model, entry in model_heads().items():
            if t == _squash(model) or _squash(model.split("/")[-1]) in t:
                return model
            if any(_squash(a) in t for a in entry.get("aliases", [])):
                return model
    return None


def tp_fits(tp: int, heads: int, kv_heads: int) -> bool:
    return heads % tp == 0 and (kv_heads % tp == 0 or tp % kv_heads == 0)


def tp_check(tp: int | None, model: str | None) -> str:
    """The tensor-parallel line of a serving proposal: checked against a known model's heads, else the rule."""
    if tp is None:
        return ""
    if model is None or model not in model_heads():
        return (
            f"TP {tp}: the model is not known here (tag it, pass --model, or name it like a catalog model), so check "
            "that TP divides its attention heads and divides (or is a multiple of) its KV heads"
        )
    e = model_heads()[model]
    heads, kv = int(e["attention_heads"]), int(e["kv_heads"])
    if tp_fits(tp, heads, kv):
        return f"TP {tp} fits {model}: it divides its {heads} attention heads and {kv} KV heads ({e['source']})"
    best = max((t for t in range(1, tp + 1) if tp_fits(t, heads, kv)), default=1)
    return (
        f"TP {tp} does not fit {model}: TP must divide its {heads} attention heads and divide or be a multiple of its "
        f"{kv} KV heads ({e['source']}); use TP {best} on this type (or a type whose core count fits)"
    )


@dataclass(frozen=True)
class BlockPrice:
    instance_type: str
    region: str
    per_instance_hour: float
    basis: str  # "your offerings FILE (offering id ...)" or "catalog ... as of ..."


def read_block_offerings(path: Path) -> list[BlockPrice]:
    """Per-instance-hour prices of Capacity Block offerings: the JSON of ``aws ec2 describe-capacity-block-offerings``
    (UpfrontFee over InstanceCount x CapacityBlockDurationHours). ValueError names the file and what is wrong."""
    try:
        doc = json.loads(path.read_text())
    except OSError as err:
        raise ValueError(f"{path}: cannot read it ({err.strerror})") from None
    except ValueError as err:
        raise ValueError(f"{path}: not JSON ({err})") from None
    offers = doc.get("CapacityBlockOfferings") if isinstance(doc, dict) else doc
    if not isinstance(offers, list):
        raise ValueError(
            f"{path}: no CapacityBlockOfferings list; save `aws ec2 describe-capacity-block-offerings --output json`"
        )
    out: list[BlockPrice] = []
    for i, o in enumerate(offers):
        try:
            fee = float(o["UpfrontFee"])
            count, hours = int(o["InstanceCount"]), int(o["CapacityBlockDurationHours"])
            itype, zone = str(o["InstanceType"]), str(o["AvailabilityZone"])
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(
                f"{path}: offering {i} lacks {err} (UpfrontFee, InstanceCount, CapacityBlockDurationHours, InstanceType, "
                "AvailabilityZone)"
            ) from None
        if count <= 0 or hours <= 0:
            raise ValueError(f"{path}: offering {i} has no instances or hours")
        ident = o.get("CapacityBlockOfferingId", f"#{i}")
        out.append(BlockPrice(itype, zone.rstrip("abcdefghijklmnopqrstuvwxyz") or zone, fee / (count * hours),
                              f"your offerings {path.name} ({ident}, {count} x {hours} h for ${fee:,.2f})"))  # fmt: skip
    return out


def block_price(instance_type: str, region: str, offered: Sequence[BlockPrice] = ()) -> BlockPrice | None:
    """The cheapest per-instance-hour Capacity Block price of a type: the user's offerings in ``region`` first, then
    theirs elsewhere, then the catalog's published price (adoption.yaml ``block_prices``), else None."""
    mine = sorted(
        (o for o in offered if o.instance_type == instance_type), key=lambda o: (o.region != region, o.per_instance_hour)
    )
    if mine:
        return mine[0]
    published = adoption_facts()["block_prices"]
    entry = (published.get("per_instance_hour") or {}).get(instance_type, {})
    rate = entry.get(region) if isinstance(entry, dict) else None
    if rate is None:
        return None
    return BlockPrice(
        instance_type, region, float(rate), f"catalog block price as of {published['as_of']} ({published['source']})"
    )


@dataclass(frozen=True)
class Trainium2:
    """The Trainium2 alternative of a GPU workload: sold through Capacity Blocks only."""

    instance_type: str
    regions: tuple[str, ...]  # where the catalog's offerings have it
    release: str | None
    price: BlockPrice | None
    tp: int

    def line(self, gpu_type: str, region: str) -> str:
        where = (
            f"offered in {region}"
            if region in self.regions
            else f"not offered in {region}; offered in {', '.join(self.regions) or 'no scanned region'}"
        )
        cost = (
            f"${self.price.per_instance_hour:,.2f} per instance-hour at Capacity Block prices ({self.price.basis})"
            if self.price
            else "unpriced: pass --capacity-blocks FILE (the JSON of `aws ec2 describe-capacity-block-offerings "
            f"--instance-type {self.instance_type} ...`) to price it"
        )
        return (
            f"Trainium2: {self.instance_type} holds what {gpu_type} holds on Neuron {self.release}; block-only (EC2 Capacity "
            f"Blocks for ML, reserved for 1 to 182 days and paid up front; no On-Demand price); {where}; {cost}"
        )


def capacity_block_types() -> list[str]:
    data: dict[str, Any] = yaml.safe_load((_HERE / "capacity.yaml").read_text())
    return list(data["capacity_blocks"]["instance_types"])


def trainium2_option(gpu_type: str, kind: Kind, region: str, offered: Sequence[BlockPrice] = ()) -> Trainium2 | None:
    """Trainium2 where the workload fits: memory and a supporting release (catalog), priced at block prices."""
    gpu = catalog.instance_types().get(gpu_type)
    if gpu is None or gpu.accelerator != "gpu":
        return None
    # Instances sold as Capacity Blocks (capacity.yaml); UltraServer nodes are bought four at a time, apart.
    block_types = {t for t in capacity_block_types() if not t.startswith("trn2u.")}
    fits = sorted(
        (
            t
            for t in catalog.instance_types().values()
            if t.is_neuron
            and t.family == "trn2"
            and t.name in block_types
            and _candidate_problem(t, gpu.gpu_memory_mib, kind, None) is None
        ),
        key=lambda t: (region not in t.offerings, t.neuron_memory_mib, t.name),
    )
    fits = [t for t in fits if t.offerings] or fits
    if not fits:
        return None
    t = fits[0]
    rel = releases.default_release(t.family, RELEASE_WORKLOAD[kind])
    where = region if region in t.offerings else (sorted(t.offerings) or [region])[0]
    tp = t.neuron_cores // (catalog.lnc_default(t.family) or 1)
    return Trainium2(t.name, tuple(sorted(t.offerings)), rel.version if rel else None, block_price(t.name, where, offered), tp)
