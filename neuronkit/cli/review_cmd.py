"""``neuronkit review BASE``: a pull request's changes (replacements called out), cost change and budgets, from git."""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

from neuronkit.cli import CliError
from neuronkit.reports import review


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "review", help="compare the working tree with a git revision: resources replaced, cost change, budgets (no AWS)"
    )
    p.add_argument("base", metavar="BASE", help="the revision the pull request goes into, e.g. origin/main")
    p.add_argument("--out", type=Path, default=None, help="also write the Markdown report to this file")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=False)
    if top.returncode != 0:
        raise CliError("neuronkit review runs inside the project's git checkout (git rev-parse --show-toplevel failed)")
    try:
        result = review.review(args.base, Path(top.stdout.strip()))
    except review.ReviewError as err:
        raise CliError(str(err)) from None
    text = review.render(result)
    print(text, end="")
    if args.out is not None:
        args.out.write_text(text)
    # Findings: a stateful resource replaced or removed without being retained.
    lost = [c for c in result.changes if c.stateful and c.action in ("replaced", "removed") and not c.retained]
    return 1 if lost else 0
