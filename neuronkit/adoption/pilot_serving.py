"""The serving pilot: what the load job measured on each side, the SLO operating point, its cost and a verdict.

A run is a folder (the load job uploads it to ``s3://ENV-artifacts-ACCOUNT-REGION/pilot/PILOT/RUN/``;
``neuronkit pilot report --from DIR`` reads a copy, ``--sample`` the one bundled in ``pilot_sample/``)::

    run.json                 pilot, kind, run id, region, each side's type, nodes, image and vLLM version (the
                             Neuron side's plugin version), the load job (its sweep resolution)
    bench/<side>/*.json      one `vllm bench serve --save-result` file per measured rate (vLLM's own keys);
                             random-inf.json: all requests at once, the side's saturation throughput
    quality/<side>.json      the kit's evaluation set scored on the side, per question (pilot_eval.py)
    quality/user/<side>.json optional: the user's JSONL evaluation set, scored the same way
    compile/neuron.json      optional: the compiled-artifact cache's _COMPLETE marker (compile start and end)
    steps/<side>.jsonl       optional: a training pilot's StepReporter lines

The load job sweeps each side adaptively (pilot_eval.py ``next-rate``): after the file's rates it bisects
between the highest rate that met the SLO and the lowest that did not, until they are ``resolution`` requests
per second apart. The operating point of a side is the highest measured rate whose p99 TTFT and p99 ITL stay
under the pilot's SLO with at most :data:`MAX_ERROR_RATE` of requests failed; its dollars per million output
tokens are the side's nodes at list price over the output tokens per hour it served there. A side is
**load-limited** when its limit was not found (every rate met the SLO, or the rates above its operating
point are further than the resolution): its throughput there is the load offered, not what it can serve.
The **saturation** throughput is the most output tokens per second a side served at any rate.
"""

from __future__ import annotations

import datetime as dt
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from neuronkit import catalog
from neuronkit.adoption import pilot_quality
from neuronkit.adoption.pilot_eval import next_rate
from neuronkit.adoption.pilot_metrics import SIDES
from neuronkit.catalog import pricing

# The inference stack's outputs that say where `neuronkit pilot start` runs the load job.
OUTPUT_SUBNET = "PilotLoadJobSubnet"
OUTPUT_SECURITY_GROUP = "PilotLoadJobSecurityGroup"
MAX_ERROR_RATE = 0.01  # an operating point may fail at most 1% of its requests
SAMPLE = Path(__file__).parent / "pilot_sample"
# The bundled sample runs (make_pilot_sample.py): `pilot report --sample [NAME]`.
SAMPLES = {"default": SAMPLE, "gpu-wins": Path(__file__).parent / "pilot_sample_gpu"}
EVALSET = Path(__file__).parent / "pilot_evalset.json"
_FACTS = Path(catalog.__file__).parent / "pilot.yaml"


@cache
def facts() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(_FACTS.read_text())
    return data


class RunError(ValueError):
    """A run folder that cannot be read: the message names the file and what is wrong."""


# --------------------------------------------------------------------------------------------
# one side's benchmark points
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Point:
    """One `vllm bench serve` run at one request rate (the keys of its --save-result file)."""

    request_rate: float
    dataset: str
    completed: int
    failed: int
    duration_s: float
    output_throughput: float  # output tokens per second
    p50_ttft_ms: float
    p99_ttft_ms: float
    p50_itl_ms: float
    p99_itl_ms: float
    source: str

    @property
    def error_rate(self) -> float:
        total = self.completed + self.failed
        return self.failed / total if total else 1.0

    def meets(self, slo_ttft_ms: float, slo_itl_ms: float) -> bool:
        return self.p99_ttft_ms < slo_ttft_ms and self.p99_itl_ms < slo_itl_ms and self.error_rate <= MAX_ERROR_RATE


def _number(doc: Mapping[str, Any], key: str, where: str, fallback: str | None = None) -> float:
    value = doc.get(key, doc.get(fallback) if fallback else None)
    if isinstance(value, bool) or not isinstance(value, int | float):
        also = f" (or {fallback})" if fallback else ""
        raise RunError(f"{where}: '{key}'{also} missing or not a number; is it a `vllm bench serve --save-result` file?")
    return float(value)


def point(doc: Mapping[str, Any], where: str) -> Point:
    """A point from vLLM's --save-result JSON. ``p50_*`` falls back to ``median_*``; ``failed`` (vLLM 0.13+) to
    ``num_prompts - completed``; ``request_rate`` "inf" is infinity."""
    rate = doc.get("request_rate")
    if rate == "inf":
        rate = math.inf
    if isinstance(rate, str):
        try:
            rate = float(rate)
        except ValueError:
            rate = None
    if not isinstance(rate, int | float) or isinstance(rate, bool):
        raise RunError(f"{where}: 'request_rate' missing; is it a `vllm bench serve --save-result` file?")
    completed = int(_number(doc, "completed", where))
    failed = doc.get("failed")
    if not isinstance(failed, int):
        prompts = doc.get("num_prompts")
        failed = max(0, int(prompts) - completed) if isinstance(prompts, int) else 0
    return Point(
        request_rate=float(rate),
        dataset=str(doc.get("dataset", "random")),
        completed=completed,
        failed=failed,
        duration_s=_number(doc, "duration", where),
        output_throughput=_number(doc, "output_throughput", where),
        p50_ttft_ms=_number(doc, "p50_ttft_ms", where, "median_ttft_ms"),
        p99_ttft_ms=_number(doc, "p99_ttft_ms", where),
        p50_itl_ms=_number(doc, "p50_itl_ms", where, "median_itl_ms"),
        p99_itl_ms=_number(doc, "p99_itl_ms", where),
        source=where,
    )


def operating_point(points: Sequence[Point], slo_ttft_ms: float, slo_itl_ms: float) -> Point | None:
    """The highest finite request rate whose p99 TTFT and p99 ITL stay under the SLO (and errors under 1%), or None."""
    meeting = [p for p in points if math.isfinite(p.request_rate) and p.meets(slo_ttft_ms, slo_itl_ms)]
    return max(meeting, key=lambda p: p.request_rate) if meeting else None


def limit_rate(points: Sequence[Point], op: Point | None, slo_ttft_ms: float, slo_itl_ms: float) -> float | None:
    """The lowest finite measured rate above the operating point that missed the SLO (None: none missed)."""
    floor = op.request_rate if op is not None else 0.0
    above = [
        p.request_rate
        for p in points
        if math.isfinite(p.request_rate) and p.request_rate > floor and not p.meets(slo_ttft_ms, slo_itl_ms)
    ]
    return min(above) if above else None


def load_limited(points: Sequence[Point], slo_ttft_ms: float, slo_itl_ms: float, resolution: float) -> bool:
    """True when the sweep did not find the side's limit to ``resolution``: every rate met the SLO, or the
    bisection would still measure a rate above the operating point (the load offered was the bottleneck)."""
    op = operating_point(points, slo_ttft_ms, slo_itl_ms)
    if op is None:
        return False
    limit = limit_rate(points, op, slo_ttft_ms, slo_itl_ms)
    measured = [(p.request_rate, p.meets(slo_ttft_ms, slo_itl_ms)) for p in points]
    return limit is None or next_rate(measured, resolution, math.inf) is not None


def saturation(points: Sequence[Point]) -> Point | None:
    """The point where the side served the most output tokens per second (any latency), or None."""
    served = [p for p in points if p.output_throughput > 0 and p.error_rate <= MAX_ERROR_RATE]
    return max(served, key=lambda p: p.output_throughput) if served else None


def cost_per_million(hourly: float | None, p: Point | None) -> float | None:
    """Dollars per million output tokens: the side's hourly price over the output tokens it serves an hour."""
    if hourly is None or p is None or p.output_throughput <= 0:
        return None
    return hourly / (p.output_throughput * 3600) * 1e6


# --------------------------------------------------------------------------------------------
# a run folder
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SideInfo:
    side: str
    instance_type: str
    nodes: int
    image: str
    vllm_version: str
    plugin: str = ""  # the Neuron side's vLLM plugin (its version), when the run says


@dataclass
class Run:
    """Everything a run folder holds."""

    pilot: str
    run_id: str
    region: str
    sides: dict[str, SideInfo]
    sample: bool = False
    note: str = ""
    terms: dict[str, float] = field(default_factory=dict)  # slo_ttft_ms, slo_itl_ms, max_quality_drop_points, ...
    points: dict[str, dict[str, list[Point]]] = field(default_factory=dict)  # side -> dataset -> points by rate
    quality: dict[str, dict[str, Any]] = field(default_factory=dict)
    quality_user: dict[str, dict[str, Any]] = field(default_factory=dict)  # the user's JSONL evaluation set
    kind: str = "serving"
    compile: dict[str, Any] | None = None
    load_job: dict[str, Any] = field(default_factory=dict)
    steps: dict[str, list[dict[str, Any]]] = field(default_factory=dict)


def _json(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as err:
        raise RunError(f"{path}: cannot read it ({err.strerror})") from None
    except ValueError as err:
        raise RunError(f"{path}: not JSON ({err})") from None


def read_run(folder: Path) -> Run:
    """Read a run folder (layout in the module docstring). Raises RunError naming the file at fault."""
    if not folder.is_dir():
        raise RunError(f"{folder}: no such folder; give the folder the load job uploaded (it holds run.json)")
    meta = _json(folder / "run.json")
    try:
        sides = {
            s: SideInfo(
                s,
                str(v["instance_type"]),
                int(v.get("nodes", 1)),
                str(v.get("image", "")),
                str(v.get("vllm_version", "")),
                str(v.get("plugin", "")),
            )
            for s, v in meta["sides"].items()
        }
        run = Run(
            pilot=str(meta["pilot"]), run_id=str(meta["run_id"]), region=str(meta["region"]), sides=sides,
            sample=bool(meta.get("sample", False)), note=str(meta.get("note", "")),
            terms={k: float(v) for k, v in meta.get("terms", {}).items()}, load_job=dict(meta.get("load_job", {})),
            kind=str(meta.get("kind", "serving")),
        )  # fmt: skip
    except (KeyError, TypeError, ValueError) as err:
        raise RunError(f"{folder / 'run.json'}: missing or bad {err}; it needs pilot, run_id, region and sides") from None
    if set(sides) != set(SIDES):
        raise RunError(f"{folder / 'run.json'}: sides must be {', '.join(SIDES)}, found {', '.join(sides) or 'none'}")
    for side in SIDES:
        by_dataset: dict[str, list[Point]] = {}
        for path in sorted((folder / "bench" / side).glob("*.json")):
            p = point(_json(path), str(path))
            by_dataset.setdefault(p.dataset, []).append(p)
        run.points[side] = {d: sorted(ps, key=lambda p: p.request_rate) for d, ps in by_dataset.items()}
        q = folder / "quality" / f"{side}.json"
        if q.is_file():
            run.quality[side] = _json(q)
        u = folder / "quality" / "user" / f"{side}.json"
        if u.is_file():
            run.quality_user[side] = _json(u)
        steps = folder / "steps" / f"{side}.jsonl"
        if steps.is_file():
            run.steps[side] = [json.loads(line) for line in steps.read_text().splitlines() if line.strip().startswith("{")]
    if (folder / "compile" / "neuron.json").is_file():
        run.compile = _json(folder / "compile" / "neuron.json")
    return run


# --------------------------------------------------------------------------------------------
# the comparison
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class SideReport:
    side: str
    info: SideInfo
    hourly: float | None  # the side's nodes at list price
    curve: list[Point]  # the random dataset's points, by rate
    operating: Point | None
    cost_per_million_output_tokens: float | None
    quality_percent: float | None
    quality_total: int
    dataset_curves: dict[str, list[Point]]  # the user's dataset, when swept
    limit: float | None = None  # the lowest rate above the operating point that missed the SLO
    load_limited: bool = False  # the sweep did not find this side's limit: its operating point is the load offered
    saturation: Point | None = None  # the most output tokens per second it served
    cost_at_saturation: float | None = None


@dataclass(frozen=True)
class ServingComparison:
    run: Run
    sides: dict[str, SideReport]
    slo_ttft_ms: float
    slo_itl_ms: float
    max_quality_drop_points: float
    compile_seconds: float | None
    load_job_hours: float | None
    load_job_cost: float | None
    pilot_cost: float | None
    verdict: str
    resolution: float = 0.0
    quality: list[pilot_quality.Quality] = field(default_factory=list)  # the kit's set, then the user's


DEFAULT_TERMS = {"slo_ttft_ms": 2000.0, "slo_itl_ms": 100.0, "max_quality_drop_points": 5.0}


def gpu_pairing(neuron_image: str) -> dict[str, Any] | None:
    """The upstream vLLM (and its GPU image, when ECR Public has one) a Neuron vLLM image is built on, and its
    plugin (catalog/pilot.yaml ``gpu_vllm_for_neuron``), or None when the catalog does not know the image."""
    from neuronkit.catalog import serving

    entry: dict[str, Any] | None = facts()["gpu_vllm_for_neuron"].get(serving.vllm_version(neuron_image))
    return entry


def quality_alpha() -> float:
    return float(facts()["quality"]["alpha"])


def default_resolution() -> float:
    return float(facts()["sweep"]["resolution_rps"])


def load_job_hourly() -> float:
    """The Fargate task's list price per hour (catalog/pilot.yaml)."""
    task, prices = facts()["task"], facts()["fargate_prices"]
    ephemeral = max(0, task["ephemeral_gib"] - prices["free_ephemeral_gib"])
    return float(
        task["cpu_units"] / 1024 * prices["vcpu_hour"]
        + task["memory_mib"] / 1024 * prices["gb_hour"]
        + ephemeral * prices["ephemeral_gb_hour"]
    )


def _compile_seconds(marker: Mapping[str, Any] | None) -> float | None:
    if not marker:
        return None
    if isinstance(marker.get("seconds"), int | float):
        return float(marker["seconds"])
    try:
        since = dt.datetime.fromisoformat(str(marker["since"]).replace("Z", "+00:00"))
        at = dt.datetime.fromisoformat(str(marker["at"]).replace("Z", "+00:00"))
    except (KeyError, ValueError):
        return None
    return (at - since).total_seconds()


def compare(run: Run, overrides: Mapping[str, float] | None = None) -> ServingComparison:
    """Line the two sides up; ``overrides`` (from the environment file) win over the run's own terms."""
    t = {**DEFAULT_TERMS, **run.terms, **(overrides or {})}
    table = pricing.load_prices()
    res = run.load_job.get("resolution")
    resolution = float(res) if isinstance(res, int | float) and res > 0 else default_resolution()
    reports: dict[str, SideReport] = {}
    for side in SIDES:
        info = run.sides[side]
        one = table.hourly(info.instance_type, run.region)
        hourly = one * info.nodes if one is not None else None
        curves = run.points.get(side, {})
        curve = curves.get("random", [])
        op = operating_point(curve, t["slo_ttft_ms"], t["slo_itl_ms"])
        q = run.quality.get(side) or {}
        total = int(q.get("total", 0) or 0)
        sat = saturation(curve)
        reports[side] = SideReport(
            side=side, info=info, hourly=hourly, curve=curve, operating=op,
            cost_per_million_output_tokens=cost_per_million(hourly, op),
            quality_percent=(100.0 * int(q.get("correct", 0)) / total) if total else None, quality_total=total,
            dataset_curves={d: ps for d, ps in curves.items() if d != "random"},
            limit=limit_rate(curve, op, t["slo_ttft_ms"], t["slo_itl_ms"]),
            load_limited=load_limited(curve, t["slo_ttft_ms"], t["slo_itl_ms"], resolution),
            saturation=sat, cost_at_saturation=cost_per_million(hourly, sat),
        )  # fmt: skip
    qualities = [
        pilot_quality.compare(sets["neuron"], sets["gpu"], quality_alpha())
        for sets in (run.quality, run.quality_user)
        if all(s in sets for s in SIDES)
    ]
    seconds = run.load_job.get("seconds")
    hours = float(seconds) / 3600 if isinstance(seconds, int | float) else None
    job_cost = load_job_hourly() * hours if hours is not None else None
    fleets = [r.hourly for r in reports.values()]
    pilot_cost = (
        sum(h for h in fleets if h is not None) * hours + (job_cost or 0.0) if hours is not None and None not in fleets else None
    )
    return ServingComparison(
        run=run, sides=reports, slo_ttft_ms=t["slo_ttft_ms"], slo_itl_ms=t["slo_itl_ms"],
        max_quality_drop_points=t["max_quality_drop_points"], compile_seconds=_compile_seconds(run.compile),
        load_job_hours=hours, load_job_cost=job_cost, pilot_cost=pilot_cost,
        verdict=verdict(reports, t["slo_ttft_ms"], t["slo_itl_ms"], t["max_quality_drop_points"], qualities),
        resolution=resolution, quality=qualities,
    )  # fmt: skip


def verdict(
    reports: Mapping[str, SideReport],
    slo_ttft_ms: float,
    slo_itl_ms: float,
    max_drop: float,
    quality: Sequence[pilot_quality.Quality] = (),
) -> str:
    """The serving verdict: quality first (a paired test), then the SLO, then $ per million output tokens at each
    side's own operating point; no winner when both sides are load-limited at the same rate."""
    n, g = reports["neuron"], reports["gpu"]
    missing = [s for s in SIDES if not reports[s].curve]
    if missing:
        return f"incomplete: no benchmark results from the {' and '.join(missing)} side; check the load job's log"
    unscored = [s for s in SIDES if reports[s].quality_percent is None]
    if unscored or not quality:
        return f"incomplete: the evaluation set was not scored on the {' and '.join(unscored) or 'neuron and gpu'} side"
    worse = [q for q in quality if q.better == "gpu" and q.drop_points > max_drop]
    if worse:
        q = worse[0]
        return (
            f"not yet: the GPU answers better on {q.evalset} ({q.sides['neuron'].percent:.0f}% against "
            f"{q.sides['gpu'].percent:.0f}%, paired p = {q.p_value:.2g}, more than {max_drop:g} points); check dtype and "
            "the compiled model"
        )
    slo = f"p99 TTFT < {slo_ttft_ms:g} ms and p99 ITL < {slo_itl_ms:g} ms"
    if n.operating is None:
        return f"not yet: Neuron meets the SLO ({slo}) at none of the measured rates; lower the rates or revisit the profile"
    if g.operating is None:
        return (
            f"go: Neuron meets the SLO ({slo}) up to {n.operating.request_rate:g} req/s and the GPU at none of the measured rates"
        )
    if n.load_limited and g.load_limited and n.operating.request_rate == g.operating.request_rate:
        above = (
            f"and miss it at {n.limit:g} and {g.limit:g} req/s" if n.limit is not None and g.limit is not None else
            "at every rate measured above it" if n.limit is None and g.limit is None else "and only one side missed it above"
        )  # fmt: skip
        return (
            f"no winner at this load: both sides meet the SLO at {n.operating.request_rate:g} req/s {above}, and neither "
            "side's limit was found to the sweep's resolution, so both served the load offered and a cost per token "
            "would only compare list prices; sweep again with the adaptive load job (or higher rates)"
        )
    nc, gc = n.cost_per_million_output_tokens, g.cost_per_million_output_tokens
    if nc is None or gc is None:
        return "quality and SLO met; cost not compared (a type has no list price in catalog/prices.json)"
    saving = (gc - nc) / gc * 100
    limited = [s for s in SIDES if reports[s].load_limited]
    caveat = f" (the {' and '.join(limited)} side's limit was not found: its cost there is an upper bound)" if limited else ""
    where = (
        f"at each side's own operating point ({n.operating.request_rate:g} req/s on Neuron, "
        f"{g.operating.request_rate:g} req/s on the GPU){caveat}"
    )
    same = "indistinguishable" if all(q.better is None for q in quality) else "within tolerance"
    if saving > 0:
        return (
            f"go: quality {same} and {saving:.0f}% lower cost per million output tokens on Neuron "
            f"{where}; move the fleet (phase 3) and keep GPU fallback"
        )
    return f"hold: Neuron costs {-saving:.0f}% more per million output tokens than the GPU {where}"


# --------------------------------------------------------------------------------------------
# outputs: JSON, plots, Markdown
# --------------------------------------------------------------------------------------------
def to_json(c: ServingComparison) -> dict[str, Any]:
    def pt(p: Point | None) -> dict[str, Any] | None:
        if p is None:
            return None
        doc = {k: v for k, v in asdict(p).items() if k != "source"} | {"error_rate": p.error_rate}
        return doc | ({"request_rate": "inf"} if not math.isfinite(p.request_rate) else {})

    return {
        "pilot": c.run.pilot,
        "run_id": c.run.run_id,
        "region": c.run.region,
        "sample": c.run.sample,
        "note": c.run.note,
        "slo": {"p99_ttft_ms": c.slo_ttft_ms, "p99_itl_ms": c.slo_itl_ms, "max_error_rate": MAX_ERROR_RATE},
        "max_quality_drop_points": c.max_quality_drop_points,
        "kind": c.run.kind,
        "verdict": c.verdict,
        "sweep_resolution_rps": c.resolution,
        "quality": [
            {
                "evalset": q.evalset,
                "paired_questions": q.paired,
                "right_only_on_neuron": q.neuron_only,
                "right_only_on_gpu": q.gpu_only,
                "p_value": q.p_value,
                "alpha": q.alpha,
                "better": q.better,
                "sides": {s: asdict(v) | {"percent": v.percent} for s, v in q.sides.items()},
            }
            for q in c.quality
        ],  # fmt: skip
        "compile_seconds": c.compile_seconds,
        "load_job": {"hours": c.load_job_hours, "cost_usd": c.load_job_cost, "hourly_usd": load_job_hourly()},
        "pilot_cost_usd": c.pilot_cost,
        "sides": {
            s: {
                **asdict(r.info),
                "hourly_usd": r.hourly,
                "operating_point": pt(r.operating),
                "usd_per_million_output_tokens": r.cost_per_million_output_tokens,
                "quality_percent": r.quality_percent,
                "quality_total": r.quality_total,
                "load_limited": r.load_limited,
                "limit_rate": r.limit,
                "saturation_point": pt(r.saturation),
                "usd_per_million_output_tokens_at_saturation": r.cost_at_saturation,
                "curve": [pt(p) for p in r.curve],
                "datasets": {d: [pt(p) for p in ps] for d, ps in r.dataset_curves.items()},
            }
            for s, r in c.sides.items()
        },
    }


COLORS = {"neuron": "#ff9900", "gpu": "#76b900"}


def _label(r: SideReport) -> str:
    return f"{r.side}: {r.info.nodes} x {r.info.instance_type}, vLLM {r.info.vllm_version}"


def title(run: Run) -> str:
    """The report's title, from the pilot's kind (a serving pilot is not a fine-tuning one)."""
    what = "Serving" if run.kind == "serving" else "Fine-tuning"
    return f"# {what} pilot {run.pilot}: Neuron against GPU" + (" (SAMPLE RUN)" if run.sample else "")


def plots(c: ServingComparison, out: Path) -> list[Path]:
    """throughput_latency.png (output tokens/s against p99 TTFT and p99 ITL, SLO lines) and cost_per_mtok.png."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out.mkdir(parents=True, exist_ok=True)
    sample = " (SAMPLE)" if c.run.sample else ""
    written: list[Path] = []
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
    for ax, attr, slo, name in (
        (axes[0], "p99_ttft_ms", c.slo_ttft_ms, "p99 TTFT (ms)"),
        (axes[1], "p99_itl_ms", c.slo_itl_ms, "p99 ITL (ms)"),
    ):
        for s, r in c.sides.items():
            xs = [p.output_throughput for p in r.curve]
            ax.plot(xs, [getattr(p, attr) for p in r.curve], marker="o", color=COLORS[s], label=_label(r))
            for p in r.curve:
                ax.annotate(f"{p.request_rate:g}/s", (p.output_throughput, getattr(p, attr)), fontsize=7)
            if r.operating is not None:
                ax.plot([r.operating.output_throughput], [getattr(r.operating, attr)], marker="*", markersize=14, color=COLORS[s])
        ax.axhline(slo, linestyle="--", color="grey", label=f"SLO {slo:g} ms")
        ax.set(xlabel="output tokens per second", ylabel=name, title=f"{name} against throughput{sample}")
        ax.legend(fontsize=7)
    path = out / "throughput_latency.png"
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    written.append(path)

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for s, r in c.sides.items():
        shown = [p for p in r.curve if math.isfinite(p.request_rate)]
        rates = [p.request_rate for p in shown]
        costs = [cost_per_million(r.hourly, p) or float("nan") for p in shown]
        ax.plot(rates, costs, marker="o", color=COLORS[s], label=_label(r))
        if r.operating is not None and r.cost_per_million_output_tokens is not None:
            ax.plot([r.operating.request_rate], [r.cost_per_million_output_tokens], marker="*", markersize=14, color=COLORS[s])
    ax.set(
        xlabel="request rate (requests per second)",
        ylabel="$ per million output tokens",
        title=f"$ per million output tokens (star: SLO operating point){sample}",
    )
    ax.legend(fontsize=7)
    path = out / "cost_per_mtok.png"
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    written.append(path)
    return written


def _money(x: float | None, digits: int = 2) -> str:
    return "–" if x is None else f"${x:,.{digits}f}"


def _ms(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:,.1f}"


def _versions(c: ServingComparison) -> str:
    n, g = c.sides["neuron"].info, c.sides["gpu"].info
    plugin = f" through the Neuron plugin {n.plugin}" if n.plugin else ""
    if n.vllm_version == g.vllm_version:
        return (
            f"Both sides run upstream vLLM {n.vllm_version} (the GPU side the version the Neuron image is built on); the "
            f"remaining software difference is the Neuron plugin: {n.plugin or 'its version was not recorded'}."
        )
    return (
        f"**The sides run different vLLM versions** (Neuron {n.vllm_version}{plugin}, GPU {g.vllm_version}): part of any "
        "difference below may be the version's; pilot with the GPU image catalog/pilot.yaml pairs with the Neuron image."
    )


def render(c: ServingComparison, images: Sequence[Path], out: Path) -> str:
    run = c.run
    table = pricing.load_prices()
    lines = [title(run), ""]
    if run.sample:
        lines += [f"> **Sample data, not a measurement of your model.** {run.note}", ""]
    lines += [
        f"Run `{run.run_id}` in {run.region}. Load: vLLM's `vllm bench serve`, random dataset at a fixed seed, the same "
        "prompts on both sides; each side swept adaptively to its own limit (bisection to "
        f"{c.resolution:g} req/s) and once with every request at once (saturation). Prices: catalog/prices.json "
        f"(On-Demand list, as of {table.as_of}). {_versions(c)}",
        "",
        f"**Verdict: {c.verdict}.**",
        "",
        "## Each side at its own operating point",
        "",
        "| side | type x nodes | image | vLLM | rate (req/s) | limit found | output tok/s | TTFT p50 / p99 (ms) | ITL p50 / p99 (ms) | errors | $/hour | $ per M output tokens | saturation tok/s | $ per M at saturation |",
        "| --- | --- | --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for s, r in c.sides.items():
        p = r.operating
        sat = f"{r.saturation.output_throughput:,.0f}" if r.saturation else "–"
        tail = f"{sat} | {_money(r.cost_at_saturation, 3)} |"
        common = f"| {s} | {r.info.instance_type} x {r.info.nodes} | `{r.info.image}` | {r.info.vllm_version} |"
        if p is None:
            lines.append(f"{common} none meets the SLO | – | – | – | – | – | {_money(r.hourly)} | – | {tail}")
        else:
            found = "no: load-limited" if r.load_limited else f"yes: {r.limit:g} req/s misses it"
            lines.append(
                f"{common} {p.request_rate:g} | {found} | {p.output_throughput:,.0f} | {_ms(p.p50_ttft_ms)} / "
                f"{_ms(p.p99_ttft_ms)} | {_ms(p.p50_itl_ms)} / {_ms(p.p99_itl_ms)} | {p.error_rate:.1%} | "
                f"{_money(r.hourly)} | {_money(r.cost_per_million_output_tokens, 3)} | {tail}"
            )
    n, g = c.sides["neuron"], c.sides["gpu"]
    if n.cost_at_saturation and g.cost_at_saturation and n.saturation and g.saturation:
        diff = (g.cost_at_saturation - n.cost_at_saturation) / g.cost_at_saturation * 100
        faster = (g.saturation.output_throughput / n.saturation.output_throughput - 1) * 100
        lines += [
            "",
            f"At saturation (what each side serves flat out, latency aside): Neuron costs {abs(diff):.0f}% "
            f"{'less' if diff > 0 else 'more'} per million output tokens; the GPU serves {abs(faster):.0f}% "
            f"{'more' if faster > 0 else 'fewer'} output tokens per second.",
        ]
    lines += ["", "## Quality", ""]
    if not c.quality:
        lines.append("Not compared: a side has no score file.")
    for q in c.quality:
        lines.append(f"- {q.evalset}: {q.summary()}.")
    lines += [
        "",
        "Verdict rules: a side's **operating point** is the highest measured rate whose p99 time to first token is under "
        f"{c.slo_ttft_ms:g} ms and p99 inter-token latency under {c.slo_itl_ms:g} ms (`pilot.slo_ttft_ms`, "
        f"`pilot.slo_itl_ms`) with at most {MAX_ERROR_RATE:.0%} of requests failed; its **$ per million output tokens** is "
        "the side's nodes at list price per hour over the output tokens per hour it served there. A side is "
        "**load-limited** when the sweep did not find a rate that misses the SLO within the resolution above it: "
        "its throughput there is the load offered. Quality is compared as pairs (the same questions on both sides, "
        f"exact McNemar test, {quality_alpha():g} level): *indistinguishable* unless the test says otherwise. *go*: "
        "quality not significantly worse on Neuron by more than "
        f"{c.max_quality_drop_points:g} points (`pilot.serving.max_quality_drop_points`) and Neuron costs less per "
        "million output tokens at its own operating point (or only Neuron meets the SLO); *hold*: the GPU costs less; "
        "*no winner at this load*: both sides are load-limited at the same rate; *not yet*: quality significantly "
        "worse, or Neuron meets the SLO at no rate; *incomplete*: a side has no results or no score.",
        "",
        "## The whole throughput-latency curve",
        "",
    ]
    for s, r in c.sides.items():
        lines += _curve(
            f"{s}: {r.info.instance_type} x {r.info.nodes}, `{r.info.image}` (vLLM {r.info.vllm_version})", r, r.curve
        )
        for dataset, curve in r.dataset_curves.items():
            lines += _curve(f"{s}, your dataset ({dataset}): `{r.info.image}` (vLLM {r.info.vllm_version})", r, curve)
    lines += _costs(c)
    lines += ["", "## Plots", ""]
    lines += [f"![{p.stem}]({p.relative_to(out).as_posix()})" for p in images]
    lines += [
        "",
        "The numbers are in `pilot.json` beside this report. Quality: the kit's evaluation set "
        "(neuronkit/adoption/pilot_evalset.json, CC0) and, when given, your JSONL set (`pilot.serving.evalset_s3_key`), "
        "greedy decoding through each side's OpenAI-compatible endpoint, answers normalized (case, punctuation, "
        "whitespace) and compared exactly.",
    ]
    return "\n".join(lines) + "\n"


def _curve(title: str, r: SideReport, curve: Sequence[Point]) -> list[str]:
    lines = [
        f"**{title}**",
        "",
        "| rate (req/s) | completed | failed | output tok/s | TTFT p50 | TTFT p99 | ITL p50 | ITL p99 | $ per M output tokens | meets SLO |",
        "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for p in curve:
        mark = "yes" if r.operating is not None and p == r.operating else ""
        if not math.isfinite(p.request_rate):
            mark = "saturation"
        lines.append(
            f"| {p.request_rate:g} | {p.completed} | {p.failed} | {p.output_throughput:,.0f} | {_ms(p.p50_ttft_ms)} | "
            f"{_ms(p.p99_ttft_ms)} | {_ms(p.p50_itl_ms)} | {_ms(p.p99_itl_ms)} | {_money(cost_per_million(r.hourly, p), 3)} | "
            f"{mark or ('–' if not _meets(r, p) else 'under')} |"
        )
    return lines + [""]


def _meets(r: SideReport, p: Point) -> bool:
    return r.operating is not None and p.request_rate <= r.operating.request_rate


def _costs(c: ServingComparison) -> list[str]:
    lines = ["## Compile time and the pilot's cost", ""]
    n = c.sides["neuron"].info
    if c.compile_seconds is not None:
        lines.append(
            f"Compile (reported apart: a one-time adoption cost per model, Neuron SDK and profile): {c.compile_seconds / 60:,.0f} "
            f"minutes for `{n.image}` on {n.instance_type}, from the compiled-artifact cache's marker."
        )
    else:
        lines.append("Compile: not recorded for this run (the compiled-artifact cache held the key already, or no marker).")
    task = facts()["task"]
    where = (
        f"The load job ran as an ECS task on Fargate ({task['cpu_units'] // 1024} vCPU, {task['memory_mib'] // 1024} GiB, "
        f"{task['ephemeral_gib']} GiB of storage) in a private subnet of the fleet's first AZ ID, "
        f"{_money(load_job_hourly(), 3)} an hour (catalog/pilot.yaml)"
    )
    if c.load_job_hours is not None:
        lines.append(
            f"{where}: {c.load_job_hours * 60:,.0f} minutes, {_money(c.load_job_cost)}. The pilot's cost over the job "
            f"(both sides' nodes at list price for its duration, plus the job): {_money(c.pilot_cost)}."
        )
    else:
        lines.append(where + "; its duration was not recorded.")
    return lines


def write(c: ServingComparison, out: Path) -> tuple[str, list[Path]]:
    """Write report.md, pilot.json and the plots into ``out``; return the Markdown and the plots."""
    out.mkdir(parents=True, exist_ok=True)
    images = plots(c, out) if all(r.curve for r in c.sides.values()) else []
    text = render(c, images, out)
    (out / "report.md").write_text(text)
    (out / "pilot.json").write_text(json.dumps(to_json(c), indent=2, allow_nan=False, default=str) + "\n")
    return text, images
