"""The serving pilot's quality comparison: the same questions on both sides, compared as pairs.

Each side's score comes with its Wilson score interval (95%); the two sides are compared with the exact
McNemar test, a two-sided binomial test on the discordant pairs (the questions exactly one side answered
right): under "no difference" each discordant pair is a fair coin. The verdict is *indistinguishable* unless
the test's p-value is under ``alpha`` (catalog/pilot.yaml ``quality.alpha``); then it names the better side.
Standard library only (scipy is not a dependency of the kit).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Z95 = 1.959963984540054  # the standard normal's 97.5% quantile: a two-sided 95% interval


def wilson(correct: int, total: int, z: float = Z95) -> tuple[float, float]:
    """The Wilson score interval of a proportion ``correct``/``total`` (as fractions)."""
    if total <= 0:
        return (0.0, 1.0)
    p = correct / total
    denom = 1 + z * z / total
    centre = (p + z * z / (2 * total)) / denom
    half = z * math.sqrt(p * (1 - p) / total + z * z / (4 * total * total)) / denom
    return (max(0.0, centre - half), min(1.0, centre + half))


def mcnemar_exact(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value for ``b`` and ``c`` discordant pairs (binomial, p = 1/2)."""
    n = b + c
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(b, c) + 1)) / 2**n
    return min(1.0, 2 * tail)


@dataclass(frozen=True)
class SideScore:
    correct: int
    total: int
    low: float  # Wilson 95% interval, in percent
    high: float

    @property
    def percent(self) -> float:
        return 100.0 * self.correct / self.total if self.total else 0.0


@dataclass(frozen=True)
class Quality:
    """One evaluation set scored on both sides."""

    evalset: str
    sides: dict[str, SideScore]
    paired: int  # questions both sides answered (matched by id)
    neuron_only: int  # discordant: Neuron right, GPU wrong
    gpu_only: int  # discordant: GPU right, Neuron wrong
    p_value: float | None  # None: no per-question answers to pair
    alpha: float

    @property
    def better(self) -> str | None:
        """The side the paired test finds better, or None (indistinguishable, or not paired)."""
        if self.p_value is None or self.p_value >= self.alpha:
            return None
        return "neuron" if self.neuron_only > self.gpu_only else "gpu"

    @property
    def drop_points(self) -> float:
        return self.sides["gpu"].percent - self.sides["neuron"].percent

    def summary(self) -> str:
        n, g = self.sides["neuron"], self.sides["gpu"]
        scores = (
            f"Neuron {n.correct}/{n.total} ({n.percent:.1f}%, 95% interval {n.low:.0f}-{n.high:.0f}%), GPU {g.correct}/"
            f"{g.total} ({g.percent:.1f}%, {g.low:.0f}-{g.high:.0f}%)"
        )
        if self.p_value is None:
            return f"{scores}: not paired (the score files carry no per-question answers), so no difference is claimed"
        test = (
            f"exact McNemar test on {self.paired} paired questions: {self.neuron_only} right only on Neuron, "
            f"{self.gpu_only} right only on the GPU, p = {self.p_value:.3g}"
        )
        if self.better is None:
            return f"{scores}; {test}: indistinguishable at the {self.alpha:g} level"
        name = "Neuron" if self.better == "neuron" else "the GPU"
        return f"{scores}; {test}: {name} is better (significant at the {self.alpha:g} level)"


def compare(neuron: Mapping[str, Any], gpu: Mapping[str, Any], alpha: float) -> Quality:
    """Compare two score files of pilot_eval.score (``correct``, ``total``, ``answers`` with id and correct)."""
    sides: dict[str, SideScore] = {}
    for side, doc in (("neuron", neuron), ("gpu", gpu)):
        k, n = int(doc.get("correct", 0) or 0), int(doc.get("total", 0) or 0)
        lo, hi = wilson(k, n)
        sides[side] = SideScore(k, n, 100 * lo, 100 * hi)
    a = {str(x["id"]): bool(x["correct"]) for x in neuron.get("answers", []) if isinstance(x, dict) and "id" in x}
    b = {str(x["id"]): bool(x["correct"]) for x in gpu.get("answers", []) if isinstance(x, dict) and "id" in x}
    common = sorted(set(a) & set(b))
    if not common:
        return Quality(str(neuron.get("evalset", "")), sides, 0, 0, 0, None, alpha)
    n_only = sum(1 for i in common if a[i] and not b[i])
    g_only = sum(1 for i in common if b[i] and not a[i])
    return Quality(str(neuron.get("evalset", "")), sides, len(common), n_only, g_only, mcnemar_exact(n_only, g_only), alpha)
