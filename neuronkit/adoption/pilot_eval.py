"""The serving pilot's probe: wait for endpoints, warm them up and score the evaluation set (standard library only).

The load job runs it in the pinned vLLM image (docs/adoption.md); it works against any OpenAI-compatible server::

    python3 pilot_eval.py wait   --url http://neuron-lb:8080 --url http://gpu-lb:8080 --timeout 7200
    python3 pilot_eval.py warmup --url http://neuron-lb:8080 --model M --requests 16
    python3 pilot_eval.py score  --url http://neuron-lb:8080 --model M --evalset pilot_evalset.json --out neuron.json
    python3 pilot_eval.py score  --url http://neuron-lb:8080 --model M --evalset mine.jsonl --out neuron-user.json
    python3 pilot_eval.py next-rate --results results/bench/neuron --slo-ttft-ms 2000 --slo-itl-ms 100 \
        --resolution 0.25 --max-rate 64

An evaluation set is the kit's JSON (``pilot_evalset.json``: name, version, license, instructions, items) or
a user's **JSON Lines** file, one question a line: ``{"prompt": "...", "answer": "...", "also": ["..."],
"id": "..."}`` (``also`` and ``id`` optional; blank lines and lines starting with ``#`` skipped). A bad line
stops with ``FILE:LINE: what is wrong``.

``next-rate`` is the adaptive sweep: from the `vllm bench serve` results of one side so far it prints the
next request rate to measure, or nothing when that side's highest rate within the SLO is known to
``--resolution`` requests per second (bisection between the highest rate that met the SLO and the lowest that
did not; doubling while every rate met it, up to ``--max-rate``; halving while none did).

Scoring is the same on both sides: greedy decoding (temperature 0) through ``/v1/chat/completions``, the first
line of the answer normalized (lower case, punctuation and the articles a/an/the removed, whitespace
collapsed) and compared exactly with the expected answer or one of its accepted forms.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from typing import Any

_PUNCT = re.compile(r"[^\w\s]")
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize(text: str) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return " ".join(_ARTICLES.sub(" ", _PUNCT.sub(" ", first.lower())).split())


def correct(output: str, item: dict[str, Any]) -> bool:
    accepted = {normalize(a) for a in [item["answer"], *item.get("also", [])]}
    return normalize(output) in accepted


Post = Callable[[str, dict[str, Any]], dict[str, Any]]


class EvalSetError(ValueError):
    """An evaluation set that cannot be read: the message starts with FILE:LINE."""


def _item(doc: Any, where: str, seen: set[str], n: int) -> dict[str, Any]:
    if not isinstance(doc, dict):
        raise EvalSetError(f"{where}: a question must be a JSON object with prompt and answer")
    for key in ("prompt", "answer"):
        if not isinstance(doc.get(key), str) or not doc[key].strip():
            raise EvalSetError(f"{where}: '{key}' missing or not a non-empty string")
    also = doc.get("also", [])
    if not isinstance(also, list) or not all(isinstance(a, str) for a in also):
        raise EvalSetError(f"{where}: 'also' must be a list of strings (other accepted answers)")
    if not normalize(doc["answer"]):
        raise EvalSetError(f"{where}: the answer {doc['answer']!r} normalizes to nothing (only punctuation or articles)")
    ident = str(doc.get("id", f"line{n}"))
    if ident in seen:
        raise EvalSetError(f"{where}: id {ident!r} appears twice")
    seen.add(ident)
    return {"id": ident, "prompt": doc["prompt"], "answer": doc["answer"], "also": also}


def load_evalset(path: str) -> dict[str, Any]:
    """The kit's JSON evaluation set or a user's JSON Lines one (module docstring); EvalSetError names FILE:LINE."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as err:
        raise EvalSetError(f"{path}: cannot read it ({err.strerror})") from None
    seen: set[str] = set()
    if not path.endswith(".jsonl"):
        try:
            doc = json.loads(text)
        except ValueError as err:
            raise EvalSetError(f"{path}:{getattr(err, 'lineno', 1)}: not JSON ({err})") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("items"), list):
            raise EvalSetError(f"{path}:1: a .json evaluation set needs an items list (or name the file .jsonl)")
        items = [_item(x, f"{path}: items[{i}]", seen, i + 1) for i, x in enumerate(doc["items"])]
        return {**doc, "items": items}
    items = []
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        try:
            doc = json.loads(line)
        except json.JSONDecodeError as err:
            raise EvalSetError(f"{path}:{n}: not a JSON object ({err.msg})") from None
        items.append(_item(doc, f"{path}:{n}", seen, n))
    if not items:
        raise EvalSetError(f"{path}:1: no questions (one JSON object a line: prompt, answer)")
    name = os.path.basename(path)
    return {
        "name": name, "version": "user", "license": "yours",
        "instructions": "Answer with only the answer: a number, a word or a short name, with no explanation.",
        "items": items,
    }  # fmt: skip


def _post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    request = urllib.request.Request(url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as answer:  # noqa: S310 - the fleet's own endpoint
        doc: dict[str, Any] = json.loads(answer.read())
        return doc


def ask(base_url: str, model: str, system: str, prompt: str, post: Post = _post) -> str:
    doc = post(
        base_url.rstrip("/") + "/v1/chat/completions",
        {
            "model": model,
            "messages": [{"role": "system", "content": system}, {"role": "user", "content": prompt}],
            "temperature": 0,
            "max_tokens": 16,
        },
    )
    return str(doc["choices"][0]["message"]["content"] or "")


def score(base_url: str, model: str, evalset: dict[str, Any], post: Post = _post) -> dict[str, Any]:
    answers = []
    for item in evalset["items"]:
        try:
            output = ask(base_url, model, evalset["instructions"], item["prompt"], post)
        except (OSError, KeyError, ValueError) as err:
            output = f"<error: {err}>"
        answers.append({"id": item["id"], "output": output, "correct": correct(output, item)})
    right = sum(a["correct"] for a in answers)
    return {
        "evalset": f"{evalset['name']} v{evalset['version']} ({evalset['license']})",
        "correct": right,
        "total": len(answers),
        "score_percent": 100.0 * right / len(answers) if answers else 0.0,
        "answers": answers,
    }


def next_rate(measured: Sequence[tuple[float, bool]], resolution: float, max_rate: float) -> float | None:
    """The adaptive sweep's next rate from (rate, met the SLO) pairs of one side, or None when done (docstring)."""
    finite = [(r, ok) for r, ok in measured if math.isfinite(r) and r > 0]
    if not finite:
        return None
    met = [r for r, ok in finite if ok]
    missed = [r for r, ok in finite if not ok]
    if not met:
        low = min(missed) / 2
        return round(low, 3) if low >= resolution else None
    best = max(met)
    above = [r for r in missed if r > best]
    if not above:
        if best >= max_rate:
            return None
        return round(min(best * 2, max_rate), 3)
    limit = min(above)
    if limit - best <= resolution:
        return None
    return round((best + limit) / 2, 3)


def _meets(doc: dict[str, Any], slo_ttft_ms: float, slo_itl_ms: float, max_error_rate: float) -> bool:
    completed = int(doc.get("completed", 0))
    failed = doc.get("failed")
    if not isinstance(failed, int):
        failed = max(0, int(doc.get("num_prompts", completed)) - completed)
    total = completed + failed
    errors = failed / total if total else 1.0
    return (
        float(doc.get("p99_ttft_ms", math.inf)) < slo_ttft_ms
        and float(doc.get("p99_itl_ms", math.inf)) < slo_itl_ms
        and errors <= max_error_rate
    )


def measured(folder: str, slo_ttft_ms: float, slo_itl_ms: float, max_error_rate: float = 0.01) -> list[tuple[float, bool]]:
    """(rate, met the SLO) of each random-dataset result file in ``folder``."""
    out = []
    for name in sorted(os.listdir(folder)) if os.path.isdir(folder) else []:
        if not (name.startswith("random-") and name.endswith(".json")):
            continue
        with open(os.path.join(folder, name), encoding="utf-8") as f:
            doc = json.load(f)
        rate = doc.get("request_rate")
        rate = math.inf if rate in ("inf", None) else float(rate)
        out.append((rate, _meets(doc, slo_ttft_ms, slo_itl_ms, max_error_rate)))
    return out


def wait(urls: Sequence[str], timeout: float, path: str = "/health", sleep: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    pending = list(urls)
    while pending and time.monotonic() < deadline:
        for url in list(pending):
            try:
                with urllib.request.urlopen(url.rstrip("/") + path, timeout=10) as answer:  # noqa: S310
                    if answer.status == 200:
                        pending.remove(url)
                        print(f"healthy: {url}", flush=True)
            except (OSError, urllib.error.URLError):
                pass
        if pending:
            time.sleep(sleep)
    for url in pending:
        print(f"not healthy after {timeout:.0f} s: {url}", file=sys.stderr, flush=True)
    return not pending


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="pilot_eval.py")
    p.add_argument("action", choices=["wait", "warmup", "score", "next-rate"])
    p.add_argument("--url", action="append", default=[])
    p.add_argument("--results", default="")
    p.add_argument("--slo-ttft-ms", type=float, default=2000.0)
    p.add_argument("--slo-itl-ms", type=float, default=100.0)
    p.add_argument("--resolution", type=float, default=0.25)
    p.add_argument("--max-rate", type=float, default=64.0)
    p.add_argument("--model", default="")
    p.add_argument("--timeout", type=float, default=7200)
    p.add_argument("--requests", type=int, default=16)
    p.add_argument("--evalset", default="pilot_evalset.json")
    p.add_argument("--out", default="-")
    args = p.parse_args(argv)
    if args.action == "next-rate":
        rate = next_rate(measured(args.results, args.slo_ttft_ms, args.slo_itl_ms), args.resolution, args.max_rate)
        if rate is not None:
            print(f"{rate:g}")
        return 0
    if not args.url:
        p.error("--url is required")
    if args.action == "wait":
        return 0 if wait(args.url, args.timeout) else 1
    if args.action == "warmup":
        for url in args.url:
            for i in range(args.requests):
                ask(url, args.model, "You are a helpful assistant.", f"Count from 1 to {5 + i % 10}.")
            print(f"warmed up: {url} ({args.requests} requests)", flush=True)
        return 0
    try:
        evalset = load_evalset(args.evalset)
    except EvalSetError as err:
        print(str(err), file=sys.stderr)
        return 2
    result = score(args.url[0], args.model, evalset)
    text = json.dumps(result, indent=2)
    if args.out == "-":
        print(text)
    else:
        with open(args.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    print(f"{args.url[0]}: {result['correct']} of {result['total']} correct", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
