"""Write the serving pilot's sample runs: ``python -m neuronkit.adoption.make_pilot_sample`` (a test checks they agree).

SAMPLE DATA, not measurements. Each side is a made-up server of capacity ``C`` requests per second (256 output
tokens a request): at an offered rate ``r`` below ``C`` it serves ``r``; p99 time to first token grows like a
queue, ``ttft0 / (1 - r/C)`` (at most 10 x ``ttft0``), and p99 inter-token latency with the batch,
``itl0 * (1 + 1.2 (r/C)^2)``; above ``C`` it serves ``C`` and the backlog of the run adds to TTFT. The sweep is the load job's: the file's rates,
then :func:`neuronkit.adoption.pilot_eval.next_rate` bisection to the resolution, then one run with every
request at once (saturation). Two cases:

- ``pilot_sample/`` (``neuronkit pilot report --sample``): inf2.xlarge against g5.xlarge; the GPU is faster
  (higher capacity), Neuron cheaper per token at each side's own operating point.
- ``pilot_sample_gpu/`` (``--sample gpu-wins``): the same pair where the GPU side's capacity is far higher, so
  it costs less per million output tokens.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuronkit.adoption.pilot_eval import next_rate

HERE = Path(__file__).resolve().parent
OUTPUT_LEN = 256
INPUT_LEN = 1024
PROMPTS = 200
RATES = (0.5, 1.0, 2.0, 4.0, 8.0)
RESOLUTION = 0.25
MAX_RATE = 64.0
SLO_TTFT_MS, SLO_ITL_MS = 2000.0, 100.0
NEURON_IMAGE = "public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.13.0-neuronx-py312-sdk2.28.0-ubuntu24.04"
GPU_IMAGE = "public.ecr.aws/deep-learning-containers/vllm:0.13.0-gpu-py312-cu129-ubuntu22.04-ec2"


@dataclass(frozen=True)
class Server:
    capacity: float  # requests per second it completes flat out
    ttft0_ms: float
    itl0_ms: float

    def result(self, rate: float, side: str, run_id: str, instance_type: str, image: str) -> dict[str, Any]:
        rho = rate / self.capacity if math.isfinite(rate) else math.inf
        served = min(rate, self.capacity)
        duration = PROMPTS / served
        # Queueing: TTFT grows like 1 / (1 - r/C), capped at 10 x near saturation; past it the backlog of the run
        # adds the wait of the last request. ITL grows with the batch up to its size at saturation.
        ttft99 = self.ttft0_ms / max(1 - rho, 0.1)
        if rho > 1:
            ttft99 += 1000 * PROMPTS * (1 - 1 / rho if math.isfinite(rho) else 1.0) / self.capacity
        itl99 = self.itl0_ms * (1 + 1.2 * min(rho, 1.0) ** 2)
        ttft50, itl50 = ttft99 * 0.45, itl99 * 0.6
        return {
            "date": "20261120-101500", "endpoint_type": "vllm", "backend": "vllm", "label": None,
            "model_id": "meta-llama/Llama-3.1-8B-Instruct", "tokenizer_id": "/work/tokenizer", "num_prompts": PROMPTS,
            "side": side, "dataset": "random", "instance_type": instance_type, "image": image, "vllm_version": "0.13.0",
            "pilot": "llama-serve", "run_id": run_id, "request_rate": rate if math.isfinite(rate) else "inf",
            "burstiness": 1.0, "max_concurrency": None, "duration": round(duration, 2), "completed": PROMPTS,
            "failed": 0, "total_input_tokens": PROMPTS * INPUT_LEN, "total_output_tokens": PROMPTS * OUTPUT_LEN,
            "request_throughput": round(served, 3), "output_throughput": round(served * OUTPUT_LEN, 2),
            "total_token_throughput": round(served * (OUTPUT_LEN + INPUT_LEN), 2),
            "mean_ttft_ms": round(ttft99 * 0.55, 2), "median_ttft_ms": round(ttft50, 2), "p50_ttft_ms": round(ttft50, 2),
            "p99_ttft_ms": round(ttft99, 2), "mean_itl_ms": round(itl99 * 0.65, 2), "median_itl_ms": round(itl50, 2),
            "p50_itl_ms": round(itl50, 2), "p99_itl_ms": round(itl99, 2),
        }  # fmt: skip


def _meets(doc: dict[str, Any]) -> bool:
    return bool(doc["p99_ttft_ms"] < SLO_TTFT_MS and doc["p99_itl_ms"] < SLO_ITL_MS)


def sweep(server: Server, side: str, run_id: str, instance_type: str, image: str) -> dict[str, dict[str, Any]]:
    """file name -> result, as the load job would write them (file rates, bisection, saturation)."""
    out: dict[str, dict[str, Any]] = {}
    measured: list[tuple[float, bool]] = []
    rates = list(RATES)
    while rates:
        rate = rates.pop(0)
        doc = server.result(rate, side, run_id, instance_type, image)
        out[f"random-{rate:g}.json"] = doc
        measured.append((rate, _meets(doc)))
        if not rates:
            nxt = next_rate(measured, RESOLUTION, MAX_RATE)
            if nxt is not None and f"random-{nxt:g}.json" not in out:
                rates.append(nxt)
    out["random-inf.json"] = server.result(math.inf, side, run_id, instance_type, image)
    return out


def _quality(wrong: set[str]) -> dict[str, Any]:
    items = json.loads((HERE / "pilot_evalset.json").read_text())["items"]
    answers = [
        {"id": i["id"], "output": "?" if i["id"] in wrong else i["answer"], "correct": i["id"] not in wrong} for i in items
    ]
    right = sum(a["correct"] for a in answers)
    return {
        "evalset": "neuronkit-pilot-eval v1 (CC0-1.0)", "correct": right, "total": len(answers),
        "score_percent": 100.0 * right / len(answers), "answers": answers,
    }  # fmt: skip


CASES: dict[str, dict[str, Any]] = {
    "pilot_sample": {
        "note": "SAMPLE DATA made up by the kit to show the report's shape (inf2.xlarge against g5.xlarge, Llama 3.1 8B "
        "Instruct, upstream vLLM 0.13.0 on both sides): a modelled throughput-latency curve, not a measurement. Run "
        "`neuronkit pilot start` for your own.",
        "neuron": Server(capacity=2.9, ttft0_ms=600, itl0_ms=42),
        "gpu": Server(capacity=3.3, ttft0_ms=450, itl0_ms=30),
        "wrong": {"neuron": {"q18", "q36"}, "gpu": {"q36"}},  # 38/40 against 39/40
    },
    "pilot_sample_gpu": {
        "note": "SAMPLE DATA made up by the kit: a second case where the GPU side serves far more at the SLO and wins on "
        "cost per token (inf2.xlarge against g5.xlarge, upstream vLLM 0.13.0 on both sides); not a measurement.",
        "neuron": Server(capacity=2.1, ttft0_ms=700, itl0_ms=48),
        "gpu": Server(capacity=4.4, ttft0_ms=420, itl0_ms=28),
        "wrong": {"neuron": {"q07", "q36"}, "gpu": {"q36"}},
    },
}


def write(name: str, root: Path = HERE) -> Path:
    case = CASES[name]
    folder = root / name
    run_id = "run-20261120T100000Z"
    types = {"neuron": "inf2.xlarge", "gpu": "g5.xlarge"}
    images = {"neuron": NEURON_IMAGE, "gpu": GPU_IMAGE}
    for side in ("neuron", "gpu"):
        bench = folder / "bench" / side
        bench.mkdir(parents=True, exist_ok=True)
        for old in bench.glob("*.json"):
            old.unlink()
        for file, doc in sweep(case[side], side, run_id, types[side], images[side]).items():
            (bench / file).write_text(json.dumps(doc, indent=1) + "\n")
        (folder / "quality").mkdir(exist_ok=True)
        (folder / "quality" / f"{side}.json").write_text(json.dumps(_quality(case["wrong"][side]), indent=1) + "\n")
    (folder / "compile").mkdir(exist_ok=True)
    (folder / "compile" / "neuron.json").write_text(
        json.dumps(
            {"instance": "i-0sample", "since": "2026-11-20T08:02:11Z", "at": "2026-11-20T08:49:37Z", "image": NEURON_IMAGE}
        )
        + "\n"
    )
    run = {
        "pilot": "llama-serve", "kind": "serving", "run_id": run_id, "region": "us-east-1", "sample": True,
        "note": case["note"],
        "sides": {
            "neuron": {"instance_type": types["neuron"], "nodes": 1, "image": NEURON_IMAGE, "vllm_version": "0.13.0",
                       "plugin": "vLLM on NxD Inference (Neuron SDK 2.28.0 image)"},
            "gpu": {"instance_type": types["gpu"], "nodes": 1, "image": GPU_IMAGE, "vllm_version": "0.13.0"},
        },
        "terms": {"slo_ttft_ms": SLO_TTFT_MS, "slo_itl_ms": SLO_ITL_MS, "max_quality_drop_points": 5},
        "load_job": {
            "seconds": 3300, "client_image": GPU_IMAGE, "seed": 0, "input_len": INPUT_LEN, "output_len": OUTPUT_LEN,
            "rates": [f"{r:g}" for r in RATES], "prompts_per_rate": PROMPTS, "resolution": RESOLUTION, "max_rate": MAX_RATE,
        },
    }  # fmt: skip
    (folder / "run.json").write_text(json.dumps(run, indent=2) + "\n")
    return folder


def main() -> None:
    for name in CASES:
        print(f"wrote {write(name)}")


if __name__ == "__main__":
    main()
