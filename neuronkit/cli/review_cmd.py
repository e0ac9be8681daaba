"""``neuronkit review BASE [--env NAME]... [-o FILE]``: what a pull request changes, from git alone.

First what cannot update and the update plan (per resource: updates in place, replaced and what that does, cannot
update and how instead); then, per environment (the ones named, or those the change touches), what changes in a
reviewer's words:
Neuron software, model and serving profiles, access (IAM), rollout and replacements, cost against the
budget; then the resource table, the cost change and the budgets of those environments.
"""

from __future__ import annotations

import argparse
import subprocess
from pathlib import Path

from neuronkit.cli.errors import CliError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "review",
        help="compare the working tree with a git revision: what changes per environment, resources, cost and budget (no AWS)",
    )
    p.add_argument("base", metavar="BASE", help="the revision the pull request goes into, e.g. origin/main")
    p.add_argument(
        "--env",
        metavar="NAME",
        action="append",
        default=None,
        help="an environment to review, e.g. prod; repeat for more (default: the environments the change touches)",
    )
    p.add_argument("-o", "--output", type=Path, metavar="FILE", default=None, help="also write the Markdown report to FILE")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from neuronkit.reports import review

    top = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=False)
    if top.returncode != 0:
        raise CliError("neuronkit review runs inside the project's git checkout (git rev-parse --show-toplevel failed)")
    try:
        result = review.review(args.base, Path(top.stdout.strip()), envs=args.env)
    except review.ReviewError as err:
        raise CliError(str(err)) from None
    text = review.render(result)
    print(text, end="")
    if args.output is not None:
        try:
            args.output.write_text(text)
        except OSError as err:
            raise CliError(f"review: cannot write {args.output} ({err.strerror})") from None
    # Findings: a stateful resource replaced or removed without being retained; an image the change needs pinned; a
    # Kubernetes object whose update would be refused.
    lost = [c for c in result.changes if c.stateful and c.action in ("replaced", "removed") and not c.retained]
    return 1 if lost or result.pins_needed or result.cannot_update else 0
