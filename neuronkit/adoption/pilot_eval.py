"""The serving pilot's probe: wait for endpoints, warm them up and score the evaluation set (standard library only).

The load job runs it in the pinned vLLM image (docs/adoption.md); it works against any OpenAI-compatible server::

    python3 pilot_eval.py wait   --url http://neuron-lb:8080 --url http://gpu-lb:8080 --timeout 7200
    python3 pilot_eval.py warmup --url http://neuron-lb:8080 --model M --requests 16
    python3 pilot_eval.py score  --url http://neuron-lb:8080 --model M --evalset pilot_evalset.json --out neuron.json

Scoring is the same on both sides: greedy decoding (temperature 0) through ``/v1/chat/completions``, the first
line of the answer normalized (lower case, punctuation and the articles a/an/the removed, whitespace
collapsed) and compared exactly with the expected answer or one of its accepted forms.
"""

from __future__ import annotations

import argparse
import json
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
    p.add_argument("action", choices=["wait", "warmup", "score"])
    p.add_argument("--url", action="append", required=True)
    p.add_argument("--model", default="")
    p.add_argument("--timeout", type=float, default=7200)
    p.add_argument("--requests", type=int, default=16)
    p.add_argument("--evalset", default="pilot_evalset.json")
    p.add_argument("--out", default="-")
    args = p.parse_args(argv)
    if args.action == "wait":
        return 0 if wait(args.url, args.timeout) else 1
    if args.action == "warmup":
        for url in args.url:
            for i in range(args.requests):
                ask(url, args.model, "You are a helpful assistant.", f"Count from 1 to {5 + i % 10}.")
            print(f"warmed up: {url} ({args.requests} requests)", flush=True)
        return 0
    with open(args.evalset, encoding="utf-8") as f:
        evalset = json.load(f)
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
