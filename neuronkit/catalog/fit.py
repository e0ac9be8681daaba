"""The one fit rule: does a model fit an instance type at a tensor-parallel degree (TP) and LNC?

``assess`` (online and from a billing export), ``validate`` (Auto Scaling and EKS fleets) and the pilot all ask
:func:`check` (or :func:`best`, which tries the TPs a type allows), so the three never disagree. The rule, each part
with its source in the catalog:

- cores: TP is at most the type's logical NeuronCores (physical / LNC) or GPUs and divides them (a server shards over
  equal groups of cores);
- heads: TP divides the model's attention heads and divides, or is a multiple of, its KV heads (adoption.yaml
  ``model_heads``, each from the model's config.json);
- memory per core: the weights' share (weights / TP) plus the KV cache a core holds at ``max_model_len`` x
  ``max_num_seqs`` (2 x layers x KV heads per core x head_dim x dtype bytes per token; above TP = KV heads each core
  holds one replicated KV head) within ``usable_memory_share`` of a core's memory (vLLM's gpu_memory_utilization).
  A model the catalog does not know is held to the older whole-node rule: weights within (1 - kv_cache_headroom);
- line: the serving line of the type's family (serving.yaml ``engines``) serves the model's architecture, and the
  model is a text-generation model (embeddings and encoders are not served by the vLLM lines).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from neuronkit import catalog

_GIB = 1024**3
_HERE = Path(catalog.__file__).resolve().parent


@cache
def _adoption() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((_HERE / "adoption.yaml").read_text())
    return data


def models() -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = _adoption()["model_heads"]
    return out


def _squash(text: str) -> str:
    return "".join(ch for ch in text.lower() if ch.isalnum())


def known_model(*texts: str | None) -> str | None:
    """The catalog model an id, tag value or group name names (exact id, its last part, or an alias), or None."""
    for text in texts:
        if not text:
            continue
        t = _squash(text)
        for model in models():
            if t == _squash(model) or _squash(model.split("/")[-1]) in t:
                return model
        for model, entry in models().items():
            if any(_squash(a) in t for a in entry.get("aliases", [])):
                return model
    return None


def matched_by(model: str, text: str) -> str:
    """How ``text`` names ``model`` (for the report's mapping line)."""
    t = _squash(text)
    if t == _squash(model) or _squash(model.split("/")[-1]) in t:
        return "its id"
    alias = next((a for a in models()[model].get("aliases", []) if _squash(a) in t), None)
    return f"alias {alias}" if alias else "its id"


def usable_share() -> float:
    from neuronkit.catalog import serving

    return float(serving.facts()["usable_memory_share"])


@dataclass(frozen=True)
class Line:
    """The serving line a type's family runs: name, title, status and what ends when (serving.yaml ``engines``)."""

    name: str
    title: str
    status: str
    ends: str
    last_release: str | None
    architectures: tuple[str, ...]
    source: str
    since: str | None = None  # the release from which the status holds (serving.yaml ``status_since``)

    def text(self) -> str:
        last = f", last release {self.last_release}" if self.last_release else ""
        return f"{self.title} ({self.status}{last}; {self.ends})"

    def short(self) -> str:
        """The line and its status, without what ends when (validate's ok line, the summary's table)."""
        since = f" since Neuron {self.since}" if self.since else ""
        last = f", last release {self.last_release}" if self.last_release else ""
        return f"{self.title} ({self.status}{since}{last})"

    @property
    def ending(self) -> bool:
        """In maintenance or at its end: a pool on it should plan its move (validate warns)."""
        return self.status in ENDING


# The statuses of a line a pool should move off (serving.yaml engines.*.status).
ENDING = ("maintenance", "end-of-support", "ended")


def line_warning(instance_type: str) -> str | None:
    """One line for a Neuron type whose serving line is in maintenance or ended: the line, since when, its last
    release, what ends when (serving.yaml ``engines``), and the forward line to plan for; None otherwise."""
    line = line_of(instance_type)
    if line is None or not line.ending:
        return None
    from neuronkit.catalog import serving

    forward = [
        (name, e) for name, e in serving.facts()["engines"].items()
        if name != line.name and e["status"] not in ENDING and not e.get("last_release")
    ]  # fmt: skip
    move = f"; plan the move to {forward[0][1]['title']} on {'/'.join(forward[0][1]['families'])}" if forward else ""
    return f"{instance_type} serves on {line.short()}: {line.ends} [{line.source}]{move}"


def line_of(instance_type: str) -> Line | None:
    """The serving line of a type: its Neuron family's engine, or the GPU vLLM line."""
    from neuronkit.catalog import serving

    kind = serving.accelerator_of(instance_type)
    if kind == "gpu":
        g = serving.facts()["gpu_engine"]
        return Line("vllm-gpu", g["title"], g["status"], "no end announced", None, (), g["source"])
    name = serving.family_engine(instance_type)
    if name is None:
        return None
    e = serving.facts()["engines"][name]
    return Line(
        name, e["title"], e["status"], " ".join(str(e["ends"]).split()), e.get("last_release"),
        tuple(e.get("architectures", [])), e["source"], e.get("status_since"),
    )  # fmt: skip


@dataclass(frozen=True)
class Fit:
    """The rule's answer for one model, type, TP and LNC: ``problems`` empty when it fits."""

    model: str
    instance_type: str
    tp: int
    lnc: int | None
    cores: int
    core_gib: float  # memory per logical core (or GPU)
    weights_gib: float  # per core
    kv_gib: float  # per core
    line: Line | None
    problems: tuple[str, ...] = field(default_factory=tuple)

    @property
    def fits(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        head = f"{self.instance_type} TP {self.tp}" + (f" LNC {self.lnc}" if self.lnc else "")
        mem = (
            f"{self.weights_gib:.1f} GiB of weights + {self.kv_gib:.2f} GiB of KV cache a core of "
            f"{self.core_gib:.0f} GiB ({usable_share():.0%} usable)"
        )
        if self.fits:
            line = f"; line: {self.line.text()}" if self.line else ""
            return f"{head} fits {self.model}: {mem}{line}"
        return f"{head} does not fit {self.model}: " + "; ".join(self.problems)


def check(
    model: Any,
    instance_type: str,
    tp: int | None = None,
    lnc: int | None = None,
    max_model_len: int | None = None,
    max_num_seqs: int | None = None,
) -> Fit:
    """Whether ``model`` (a serving.ModelSpec) fits ``instance_type`` at ``tp`` (default: every logical core) and
    ``lnc`` (default: the family's), with the KV cache at ``max_model_len`` x ``max_num_seqs`` (default: the model's)."""
    from neuronkit.catalog import serving

    kind = serving.accelerator_of(instance_type)
    lnc = serving.lnc_of(instance_type, lnc) if kind == "neuron" else None
    cores = serving.accelerators(instance_type, lnc)
    tp = tp or cores
    total = serving.accelerator_memory_gib(instance_type)
    core_gib = total / cores if cores else 0.0
    length = max_model_len or model.max_model_len
    seqs = max_num_seqs or model.max_num_seqs
    name = known_model(model.id)
    facts = models().get(name) if name else None
    line = line_of(instance_type)
    problems: list[str] = []
    unit = "GPUs" if kind == "gpu" else (f"logical NeuronCores (LNC={lnc})" if lnc else "NeuronCores")
    if tp > cores:
        problems.append(f"TP {tp} exceeds the {cores} {unit} of {instance_type}")
    elif cores % tp:
        problems.append(f"TP {tp} does not divide the {cores} {unit} of {instance_type}")
    weights = model.weights_gib / tp
    kv = 0.0
    if facts is not None:
        heads, kvh = int(facts["attention_heads"]), int(facts["kv_heads"])
        if heads % tp or not (kvh % tp == 0 or tp % kvh == 0):
            problems.append(
                f"TP {tp} must divide {name}'s {heads} attention heads and divide or be a multiple of its {kvh} KV heads "
                f"({facts['source']})"
            )
        per_core_heads = max(math.ceil(kvh / tp), 1)
        dtype_bytes = serving.facts()["dtype_bytes"][model.dtype]
        kv = 2 * int(facts["layers"]) * per_core_heads * int(facts["head_dim"]) * dtype_bytes * length * seqs / _GIB
        usable = core_gib * usable_share()
        if weights + kv > usable:
            problems.append(
                f"memory: {weights:.1f} GiB of {model.dtype} weights + {kv:.2f} GiB of KV cache ({length} tokens x "
                f"{seqs} sequences) a core > {usable:.1f} GiB usable of its {core_gib:.0f} GiB"
            )
        if facts.get("kind", "llm") != "llm":
            problems.append(f"{name} is an {facts['kind']} model: the vLLM serving lines serve text generation")
        elif line is not None and line.architectures and facts["architecture"] not in line.architectures:
            problems.append(f"line: {line.title} does not list the {facts['architecture']} architecture")
    else:
        need = serving.required_memory_gib(model)
        if total < need:
            headroom = int(serving.facts()["kv_cache_headroom"] * 100)
            problems.append(
                f"memory: {instance_type} has {total:.0f} GiB; {model.id} needs {model.weights_gib:.0f} GiB of "
                f"{model.dtype} weights plus {headroom}% for the KV cache ({need:.0f} GiB) (not a catalog model: "
                "its heads and KV cache are unknown)"
            )
    return Fit(model.id, instance_type, tp, lnc, cores, core_gib, weights, kv, line, tuple(problems))


def tps(instance_type: str, lnc: int | None = None) -> list[int]:
    """The TPs a type allows, largest first: the divisors of its logical cores or GPUs."""
    from neuronkit.catalog import serving

    kind = serving.accelerator_of(instance_type)
    cores = serving.accelerators(instance_type, serving.lnc_of(instance_type, lnc) if kind == "neuron" else None)
    return [d for d in range(cores, 0, -1) if cores % d == 0]


def best(model: Any, instance_type: str, lnc: int | None = None) -> tuple[Fit | None, list[Fit]]:
    """The largest TP at which ``model`` fits ``instance_type`` (None when none does) and every TP tried."""
    tried = [check(model, instance_type, tp, lnc) for tp in tps(instance_type, lnc)]
    return next((f for f in tried if f.fits), None), tried


def why_not(tried: list[Fit]) -> str:
    """One line for a type the model fits at no TP: the reason at each TP that divides the heads, else the largest."""
    shown = [f for f in tried if not any("attention heads" in p for p in f.problems)][:2] or tried[:1]
    rest = [f for f in tried if f not in shown and f.tp > (shown[0].tp if shown else 0)]
    parts = [f"TP {f.tp}: {'; '.join(f.problems)}" for f in shown]
    if rest:
        parts.append(f"TP {', '.join(str(f.tp) for f in rest)}: not a divisor of the heads")
    return " | ".join(parts)


def spec_for(model_id: str, max_model_len: int = 4096, max_num_seqs: int = 8) -> Any:
    """A serving.ModelSpec of a catalog model (parameters from the catalog), for assess and the pilot."""
    from neuronkit.catalog import serving

    facts = models()[model_id]
    return serving.ModelSpec(
        id=model_id, s3_prefix="models/", parameters_billion=float(facts["parameters_billion"]),
        max_model_len=max_model_len, max_num_seqs=max_num_seqs,
    )  # fmt: skip


def fit_problem(
    model: Any,
    instance_type: str,
    candidates: list[str] | None = None,
    *,
    tp: int | None = None,
    lnc: int | None = None,
    max_model_len: int | None = None,
    max_num_seqs: int | None = None,
) -> str | None:
    """Why ``instance_type`` cannot serve ``model`` at ``tp``/``lnc`` (naming what would), or None when it fits: the one
    fit rule of catalog/fit.py, which assess, validate and the pilot share."""
    answer = check(model, instance_type, tp, lnc, max_model_len, max_num_seqs)
    if answer.fits:
        return None
    fits = [t for t in (candidates or []) if t != instance_type and best(model, t)[0] is not None]
    instead = f"; it fits {', '.join(fits[:4])}" if fits else ""
    return answer.summary() + instead + ", or use a smaller model or dtype"
