"""Phase 2 of the adoption path: start a pilot on both sides, then compare what each side reported.

``start`` submits the ``pilot:`` workload to the Neuron and the GPU queue of its cluster (AWS Batch, same
data, same step budget). ``read_runs`` reads the steps the jobs printed with :mod:`neuronkit.adoption.pilot_metrics`
back from CloudWatch Logs; ``compare`` lines the two up (loss at equal steps, throughput, cost per token,
total cost) and ``render`` writes the Markdown report and its PNG plots.
"""

from __future__ import annotations

import datetime as dt
import json
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronkit.adoption.pilot_metrics import SIDES
from neuronkit.catalog import pricing
from neuronkit.config import Environment, Pilot
from neuronkit.reports.pools import gpu_pool_name


# --------------------------------------------------------------------------------------------
# start
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Side:
    side: str  # neuron | gpu
    pool: str  # the Batch pool (queue, job definition, log group)
    instance_type: str
    command: str

    def queue(self, env: Environment) -> str:
        return f"{env.name}-{self.pool}"

    def log_group(self, env: Environment) -> str:
        return f"/neuronkit/{env.name}/batch/{self.pool}"


def sides(env: Environment) -> list[Side]:
    pilot = _pilot(env)
    cluster = next(c for c in env.training if c.name == pilot.cluster)
    assert cluster.gpu_pool is not None  # validated
    return [
        Side("neuron", cluster.name, cluster.instance_type, pilot.neuron_command),
        Side("gpu", gpu_pool_name(cluster.name), cluster.gpu_pool.instance_type, pilot.gpu_command),
    ]


def _pilot(env: Environment) -> Pilot:
    if env.pilot is None:
        raise ValueError(f"{env.name} has no pilot: section (docs/adoption.md)")
    return env.pilot


def new_run_id(now: dt.datetime | None = None) -> str:
    return (now or dt.datetime.now(dt.UTC)).strftime("run-%Y%m%dT%H%M%SZ")


def start(env: Environment, batch: Any, run_id: str) -> dict[str, str]:
    """Submit the workload to both queues; side -> job id."""
    pilot = _pilot(env)
    data = f"s3://{env.name}-datasets-{env.account}-{env.region}/{pilot.data_s3_prefix}"
    jobs: dict[str, str] = {}
    for s in sides(env):
        variables = {
            "NEURONKIT_TRAIN_COMMAND": s.command,
            "NEURONKIT_PILOT": pilot.name,
            "NEURONKIT_PILOT_SIDE": s.side,
            "NEURONKIT_PILOT_RUN": run_id,
            "NEURONKIT_PILOT_STEPS": str(pilot.steps),
            "NEURONKIT_PILOT_DATA": data,
        }
        answer = batch.submit_job(
            jobName=f"{pilot.name}-{s.side}-{run_id}",
            jobQueue=s.queue(env),
            jobDefinition=s.queue(env),  # the job definition carries the pool's name too
            nodeOverrides={
                "numNodes": pilot.nodes,
                "nodePropertyOverrides": [
                    {
                        "targetNodes": "0:",
                        "containerOverrides": {"environment": [{"name": k, "value": v} for k, v in sorted(variables.items())]},
                    }
                ],
            },
            tags={"neuronkit:pilot": pilot.name, "neuronkit:pilot-run": run_id, "neuronkit:pilot-side": s.side},
            propagateTags=True,
        )
        jobs[s.side] = answer["jobId"]
    return jobs


# --------------------------------------------------------------------------------------------
# report
# --------------------------------------------------------------------------------------------
@dataclass
class Series:
    side: str
    instance_type: str
    steps: list[int] = field(default_factory=list)
    loss: list[float] = field(default_factory=list)
    tokens_per_second: list[float] = field(default_factory=list)
    step_seconds: list[float] = field(default_factory=list)
    tokens: list[float] = field(default_factory=list)

    def add(self, doc: dict[str, Any]) -> None:
        self.steps.append(int(doc["Step"]))
        self.loss.append(float(doc["Loss"]))
        self.tokens_per_second.append(float(doc["TokensPerSecond"]))
        self.step_seconds.append(float(doc["StepTime"]))
        self.tokens.append(float(doc.get("Tokens", float(doc["TokensPerSecond"]) * float(doc["StepTime"]))))

    def sort(self) -> None:
        order = sorted(range(len(self.steps)), key=lambda i: self.steps[i])
        for name in ("steps", "loss", "tokens_per_second", "step_seconds", "tokens"):
            values = getattr(self, name)
            setattr(self, name, [values[i] for i in order])

    def loss_at(self, step: int) -> float | None:
        return next((loss for s, loss in zip(self.steps, self.loss, strict=True) if s == step), None)


def read_runs(env: Environment, logs: Any, run_id: str) -> dict[str, Series]:
    """The steps each side reported for ``run_id``, from its Batch log group (EMF lines of pilot_metrics)."""
    pilot = _pilot(env)
    out: dict[str, Series] = {}
    for s in sides(env):
        series = Series(s.side, s.instance_type)
        # A quoted term: CloudWatch Logs returns the lines that carry the run id; each is then parsed and checked.
        kwargs: dict[str, Any] = {"logGroupName": s.log_group(env), "filterPattern": f'"{run_id}"'}
        while True:
            try:
                page = logs.filter_log_events(**kwargs)
            except logs.exceptions.ResourceNotFoundException:
                raise ValueError(
                    f"no log group {s.log_group(env)}: deploy the environment (its {s.pool} Batch queue) first"
                ) from None
            for event in page.get("events", []):
                try:
                    doc = json.loads(event["message"])
                except (ValueError, KeyError):
                    continue  # the job's other output
                if (
                    isinstance(doc, dict)
                    and doc.get("RunId") == run_id
                    and doc.get("Pilot") == pilot.name
                    and doc.get("Side") == s.side
                    and "Step" in doc
                ):
                    series.add(doc)
            token = page.get("nextToken")
            if not token:
                break
            kwargs["nextToken"] = token
        series.sort()
        out[s.side] = series
    return out


@dataclass(frozen=True)
class SideResult:
    side: str
    instance_type: str
    steps: int
    wall_hours: float
    mean_tokens_per_second: float
    mean_step_seconds: float
    tokens: float
    hourly: float | None  # the side's nodes at list price
    total_cost: float | None
    cost_per_million_tokens: float | None


@dataclass(frozen=True)
class Comparison:
    pilot: str
    run_id: str
    region: str
    nodes: int
    budget_steps: int
    results: dict[str, SideResult]
    common_step: int | None
    loss_gap_percent: float | None  # (neuron - gpu) / gpu at the last step both reached
    max_loss_gap_percent: float
    verdict: str


def compare(env: Environment, runs: dict[str, Series], run_id: str) -> Comparison:
    pilot = _pilot(env)
    table = pricing.load_prices()
    results: dict[str, SideResult] = {}
    for side in SIDES:
        s = runs[side]
        hourly_one = table.hourly(s.instance_type, env.region)
        hourly = hourly_one * pilot.nodes if hourly_one is not None else None
        wall = sum(s.step_seconds) / 3600
        tokens = sum(s.tokens)
        total = hourly * wall if hourly is not None else None
        results[side] = SideResult(
            side=side, instance_type=s.instance_type, steps=len(s.steps), wall_hours=wall,
            mean_tokens_per_second=statistics.fmean(s.tokens_per_second) if s.steps else 0.0,
            mean_step_seconds=statistics.fmean(s.step_seconds) if s.steps else 0.0, tokens=tokens,
            hourly=hourly, total_cost=total,
            cost_per_million_tokens=(total / tokens * 1e6) if total is not None and tokens else None,
        )  # fmt: skip
    common = sorted(set(runs["neuron"].steps) & set(runs["gpu"].steps))
    step = common[-1] if common else None
    gap = None
    if step is not None:
        n, g = runs["neuron"].loss_at(step), runs["gpu"].loss_at(step)
        if n is not None and g:
            gap = (n - g) / abs(g) * 100
    return Comparison(
        pilot=pilot.name, run_id=run_id, region=env.region, nodes=pilot.nodes, budget_steps=pilot.steps, results=results,
        common_step=step, loss_gap_percent=gap, max_loss_gap_percent=pilot.max_loss_gap_percent,
        verdict=_verdict(results, gap, pilot.max_loss_gap_percent, pilot.steps),
    )  # fmt: skip


def _verdict(results: dict[str, SideResult], gap: float | None, tolerance: float, budget: int) -> str:
    n, g = results["neuron"], results["gpu"]
    if not n.steps or not g.steps:
        missing = " and ".join(s for s in SIDES if not results[s].steps)
        return f"incomplete: no steps reported by the {missing} side; check its job and that it calls StepReporter"
    unfinished = [s for s in SIDES if results[s].steps < budget]
    note = f" (the {' and '.join(unfinished)} side stopped before the {budget}-step budget)" if unfinished else ""
    if gap is None:
        return "incomplete: the two sides share no step to compare the loss at" + note
    if gap > tolerance:
        return (
            f"not yet: Trainium's loss is {gap:.1f}% above the GPU's at the last common step (tolerance {tolerance:g}%); "
            "check precision settings and the compiler flags before production" + note
        )
    if n.cost_per_million_tokens is None or g.cost_per_million_tokens is None:
        return "accuracy matches; cost not compared (a type has no list price in catalog/prices.json)" + note
    saving = (g.cost_per_million_tokens - n.cost_per_million_tokens) / g.cost_per_million_tokens * 100
    if saving > 0:
        return (
            f"go: accuracy within {tolerance:g}% and {saving:.0f}% lower cost per token on Trainium; migrate the "
            "workload (phase 3) and keep the GPU pool as fallback" + note
        )
    return f"hold: accuracy matches but Trainium costs {-saving:.0f}% more per token at list prices" + note


def plots(runs: dict[str, Series], comparison: Comparison, out: Path) -> list[Path]:
    """Loss curves overlaid, throughput, cost per million tokens and total cost, as PNG files in ``out``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    colors = {"neuron": "#ff9900", "gpu": "#76b900"}
    labels = {s: f"{s} ({runs[s].instance_type})" for s in SIDES}
    written: list[Path] = []

    def save(fig: Any, name: str) -> None:
        path = out / name
        fig.tight_layout()
        fig.savefig(path, dpi=100)
        plt.close(fig)
        written.append(path)

    fig, ax = plt.subplots(figsize=(7, 4))
    for s in SIDES:
        ax.plot(runs[s].steps, runs[s].loss, label=labels[s], color=colors[s])
    ax.set(title=f"Loss by step: {comparison.pilot}", xlabel="step", ylabel="loss")
    ax.legend()
    save(fig, "loss.png")

    fig, ax = plt.subplots(figsize=(7, 4))
    for s in SIDES:
        ax.plot(runs[s].steps, runs[s].tokens_per_second, label=labels[s], color=colors[s])
    ax.set(title="Throughput", xlabel="step", ylabel="tokens per second")
    ax.legend()
    save(fig, "throughput.png")

    for name, attr, title in (
        ("cost_per_token.png", "cost_per_million_tokens", "$ per million tokens"),
        ("total_cost.png", "total_cost", "total cost of the run ($)"),
    ):
        fig, ax = plt.subplots(figsize=(5, 4))
        values = [getattr(comparison.results[s], attr) or 0.0 for s in SIDES]
        ax.bar([labels[s] for s in SIDES], values, color=[colors[s] for s in SIDES])
        ax.set(title=title)
        save(fig, name)
    return written


def render(comparison: Comparison, images: Sequence[Path], out: Path) -> str:
    c = comparison
    table = pricing.load_prices()

    def money(x: float | None) -> str:
        return "–" if x is None else f"${x:,.2f}"

    lines = [
        f"# Pilot {c.pilot}: Trainium against GPU",
        "",
        f"Run `{c.run_id}` in {c.region}, {c.nodes} node(s) per side, a budget of {c.budget_steps} steps. "
        f"Prices: catalog/prices.json (On-Demand list, as of {table.as_of}); cost = nodes x hourly price x the "
        "summed step time.",
        "",
        f"**Verdict: {c.verdict}.**",
        "",
        "| side | instance type | steps | hours | tokens/s (mean) | step time (s, mean) | tokens | $/hour | total | $ per million tokens |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for s in SIDES:
        r = c.results[s]
        lines.append(
            f"| {s} | {r.instance_type} | {r.steps} | {r.wall_hours:.2f} | {r.mean_tokens_per_second:,.0f} | "
            f"{r.mean_step_seconds:.3f} | {r.tokens:,.0f} | {money(r.hourly)} | {money(r.total_cost)} | "
            f"{money(r.cost_per_million_tokens)} |"
        )
    lines += [""]
    if c.common_step is not None and c.loss_gap_percent is not None:
        lines.append(
            f"Accuracy at equal steps: at step {c.common_step}, the last both reached, Trainium's loss is "
            f"{c.loss_gap_percent:+.2f}% against the GPU's (tolerance {c.max_loss_gap_percent:g}%)."
        )
    else:
        lines.append("Accuracy at equal steps: not comparable (no common step).")
    lines += ["", "## Plots", ""]
    lines += [f"![{p.stem}]({p.relative_to(out).as_posix()})" for p in images]
    lines += [
        "",
        "Document what the migration required next to this report (code changes, compiler flags, precision), "
        "as docs/adoption.md asks; it is the input of phase 3.",
    ]
    return "\n".join(lines) + "\n"
