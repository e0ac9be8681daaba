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
from neuronkit.adoption.pilot_serving import OUTPUT_SECURITY_GROUP, OUTPUT_SUBNET
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
    if pilot.cluster is None:
        raise ValueError(f"{env.name}: the pilot has no training side (cluster:)")
    cluster = next(c for c in env.training if c.name == pilot.cluster)
    assert cluster.gpu_pool is not None and pilot.neuron_command and pilot.gpu_command  # validated
    return [
        Side("neuron", cluster.name, cluster.instance_type, pilot.neuron_command),
        Side("gpu", gpu_pool_name(cluster.name), cluster.gpu_pool.instance_type, pilot.gpu_command),
    ]


def _pilot(env: Environment) -> Pilot:
    if env.pilot is None:
        raise ValueError(f"{env.name} has no pilot: section (docs/adoption.md)")
    return env.pilot


def new_run_id(now: dt.datetime | None = None) -> str:
    from neuronkit import clock

    return (now or clock.utc_now()).strftime("run-%Y%m%dT%H%M%SZ")


def run_started(run_id: str) -> dt.datetime | None:
    """When a run named by :func:`new_run_id` started (None for a name of your own)."""
    try:
        return dt.datetime.strptime(run_id, "run-%Y%m%dT%H%M%SZ").replace(tzinfo=dt.UTC)
    except ValueError:
        return None


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


def start_load_job(env: Environment, ecs: Any, cloudformation: Any, run_id: str) -> str:
    """Run the serving pilot's load job (an ECS task on Fargate) with ``run_id``; its task ARN."""
    pilot = _pilot(env)
    stack = f"{env.name}-inference"
    try:
        outputs = cloudformation.describe_stacks(StackName=stack)["Stacks"][0].get("Outputs", [])
    except cloudformation.exceptions.ClientError:
        raise ValueError(f"no stack {stack}: deploy the environment (its serving pilot) first") from None
    found = {o["OutputKey"]: o["OutputValue"] for o in outputs}
    if OUTPUT_SUBNET not in found or OUTPUT_SECURITY_GROUP not in found:
        raise ValueError(f"{stack} has no pilot load job: deploy the environment with its pilot.serving section first")
    overrides = [{"name": c, "environment": [{"name": "PILOT_RUN", "value": run_id}]} for c in ("bench", "upload")]
    answer = ecs.run_task(
        cluster=f"{env.name}-pilot",
        taskDefinition=f"{env.name}-pilot-{pilot.name}",
        launchType="FARGATE",
        count=1,
        networkConfiguration={
            "awsvpcConfiguration": {
                "subnets": [found[OUTPUT_SUBNET]],
                "securityGroups": [found[OUTPUT_SECURITY_GROUP]],
                "assignPublicIp": "DISABLED",
            }
        },
        overrides={"containerOverrides": overrides},
        tags=[{"key": "neuronkit:pilot", "value": pilot.name}, {"key": "neuronkit:pilot-run", "value": run_id}],
        propagateTags="TASK_DEFINITION",
    )
    if answer.get("failures") or not answer.get("tasks"):
        reasons = "; ".join(f"{f.get('arn', '')} {f.get('reason', '')}".strip() for f in answer.get("failures", []))
        raise ValueError(f"the load job did not start: {reasons or 'no task returned'}")
    return str(answer["tasks"][0]["taskArn"])


def results_prefix(env: Environment, run_id: str) -> tuple[str, str]:
    """(bucket, prefix) where the load job uploads a run."""
    return f"{env.name}-artifacts-{env.account}-{env.region}", f"pilot/{_pilot(env).name}/{run_id}/"


def download_run(env: Environment, s3: Any, run_id: str, folder: Path) -> int:
    """Copy a run's results from S3 into ``folder`` (the layout ``pilot_serving.read_run`` reads); files copied."""
    bucket, prefix = results_prefix(env, run_id)
    count = 0
    try:
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
            for obj in page.get("Contents", []):
                target = folder / obj["Key"][len(prefix) :]
                target.parent.mkdir(parents=True, exist_ok=True)
                s3.download_file(bucket, obj["Key"], str(target))
                count += 1
    except s3.exceptions.NoSuchBucket:
        raise ValueError(f"no bucket {bucket}: deploy the environment (its storage stack and serving pilot) first") from None
    if not count:
        raise ValueError(
            f"no results under s3://{bucket}/{prefix}: has the load job of {run_id} finished? (its log: /neuronkit/{env.name}/pilot/{_pilot(env).name})"
        )
    return count


def saved_training(folder: Path) -> tuple[TrainingTerms, dict[str, Series], str] | None:
    """A training run saved in a run folder: run.json's ``training`` entry and steps/<side>.jsonl, or None."""
    meta_path = folder / "run.json"
    if not meta_path.is_file() or not (folder / "steps").is_dir():
        return None
    try:
        meta = json.loads(meta_path.read_text())
        t = meta["training"]
        terms = TrainingTerms(
            str(meta["pilot"]), str(meta["region"]), int(t.get("nodes", 1)), int(t["budget_steps"]),
            float(t.get("max_loss_gap_percent", 2.0)), int(t.get("loss_window_steps", 50)),
        )  # fmt: skip
        runs = {side: Series(side, str(t["instance_types"][side])) for side in SIDES}
    except (KeyError, TypeError, ValueError) as err:
        raise ValueError(f"{meta_path}: a training run needs training.budget_steps and training.instance_types ({err})") from None
    for side in SIDES:
        path = folder / "steps" / f"{side}.jsonl"
        for line in path.read_text().splitlines() if path.is_file() else []:
            doc = json.loads(line) if line.strip().startswith("{") else None
            if isinstance(doc, dict) and "Step" in doc:
                runs[side].add(doc)
        runs[side].sort()
    return terms, runs, str(meta["run_id"])


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
        # No filter pattern: the lines are filtered here, by their parsed fields (moto ignores quoted terms, and a
        # pattern would only save transfer). A run id from `pilot start` bounds the read to the run's start.
        kwargs: dict[str, Any] = {"logGroupName": s.log_group(env)}
        since = run_started(run_id)
        if since is not None:
            kwargs["startTime"] = int((since - dt.timedelta(minutes=5)).timestamp() * 1000)
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
class LossWindow:
    """The mean loss (and its spread) of each side over the last ``steps`` steps both sides reached."""

    first_step: int
    last_step: int
    steps: int
    mean: dict[str, float]
    std: dict[str, float]  # population standard deviation of the window's losses

    @property
    def gap_percent(self) -> float | None:
        g = self.mean["gpu"]
        return (self.mean["neuron"] - g) / abs(g) * 100 if g else None


def loss_window(runs: dict[str, Series], size: int) -> LossWindow | None:
    """The window of the last ``size`` steps both sides reported (fewer when they share fewer), or None."""
    common = sorted(set(runs["neuron"].steps) & set(runs["gpu"].steps))[-size:]
    if not common:
        return None
    losses = {side: [runs[side].loss_at(step) or 0.0 for step in common] for side in SIDES}
    return LossWindow(
        first_step=common[0],
        last_step=common[-1],
        steps=len(common),
        mean={side: statistics.fmean(v) for side, v in losses.items()},
        std={side: statistics.pstdev(v) for side, v in losses.items()},
    )


@dataclass(frozen=True)
class Comparison:
    pilot: str
    run_id: str
    region: str
    nodes: int
    budget_steps: int
    results: dict[str, SideResult]
    common_step: int | None
    loss_gap_percent: float | None  # (neuron - gpu) / gpu of the mean loss over the window
    max_loss_gap_percent: float
    verdict: str
    window: LossWindow | None = None


@dataclass(frozen=True)
class TrainingTerms:
    """What a training comparison needs besides the runs (from the file, or from a saved run's run.json)."""

    pilot: str
    region: str
    nodes: int
    budget_steps: int
    max_loss_gap_percent: float
    loss_window_steps: int


def terms(env: Environment) -> TrainingTerms:
    pilot = _pilot(env)
    return TrainingTerms(
        pilot.name, env.region, pilot.nodes, pilot.steps or 0, pilot.max_loss_gap_percent, pilot.loss_window_steps
    )


def compare(env: Environment, runs: dict[str, Series], run_id: str) -> Comparison:
    return compare_runs(terms(env), runs, run_id)


def compare_runs(t: TrainingTerms, runs: dict[str, Series], run_id: str) -> Comparison:
    table = pricing.load_prices()
    results: dict[str, SideResult] = {}
    for side in SIDES:
        s = runs[side]
        hourly_one = table.hourly(s.instance_type, t.region)
        hourly = hourly_one * t.nodes if hourly_one is not None else None
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
    window = loss_window(runs, t.loss_window_steps)
    gap = window.gap_percent if window is not None else None
    return Comparison(
        pilot=t.pilot, run_id=run_id, region=t.region, nodes=t.nodes, budget_steps=t.budget_steps, results=results,
        common_step=window.last_step if window else None, loss_gap_percent=gap,
        max_loss_gap_percent=t.max_loss_gap_percent,
        verdict=_verdict(results, gap, t.max_loss_gap_percent, t.budget_steps), window=window,
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
            f"not yet: Trainium's mean loss over the last common steps is {gap:.1f}% above the GPU's (tolerance "
            f"{tolerance:g}%); check precision settings and the compiler flags before production" + note
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
        f"# Fine-tuning pilot {c.pilot}: Trainium against GPU",
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
    w = c.window
    if w is not None and c.loss_gap_percent is not None:
        lines.append(
            f"Accuracy over a window: the mean loss of steps {w.first_step}-{w.last_step} ({w.steps} steps both sides "
            f"reached, the last at step {w.last_step}) is {w.mean['neuron']:.4f} ± {w.std['neuron']:.4f} on Trainium and "
            f"{w.mean['gpu']:.4f} ± {w.std['gpu']:.4f} on the GPU (mean ± standard deviation): Trainium's is "
            f"{c.loss_gap_percent:+.2f}% against the GPU's (tolerance {c.max_loss_gap_percent:g}%)."
        )
        lines += [
            "",
            "Verdict rules: *go* when the window's mean loss gap is within the tolerance and Trainium costs less per "
            "token; *hold* when it matches but costs more; *not yet* when the gap exceeds the tolerance; "
            "*incomplete* when a side reported no steps or the sides share none. Averaging a window keeps one noisy "
            "step from flipping the verdict; compare the gap with the spread before reading much into it.",
        ]
    else:
        lines.append("Accuracy over a window: not comparable (no common step).")
    lines += ["", "## Plots", ""]
    lines += [f"![{p.stem}]({p.relative_to(out).as_posix()})" for p in images]
    lines += [
        "",
        "Document what the migration required next to this report (code changes, compiler flags, precision), "
        "as docs/adoption.md asks; it is the input of phase 3.",
    ]
    return "\n".join(lines) + "\n"
