"""``neuronkit preflight --env NAME | --file PATH | FILE ...``: check environments against your AWS account.

The checks live in :mod:`neuronkit.account.preflight`; this module loads the files (one or more, checked one
after the other with the same credentials), prints a table per environment and turns the result into the exit
code: 0 without FAIL lines, 1 with any, 2 when AWS cannot be asked.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence

from neuronkit import config
from neuronkit.account.preflight import Check, PreflightAbort, aws_session, run_checks
from neuronkit.cli import selection
from neuronkit.cli.errors import CliError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("preflight", help="check environments against your AWS account before deploying (uses your credentials)")
    selection.add(p, count="some")
    p.add_argument("--profile", default=None, help="AWS profile (default: the default credential chain)")
    p.set_defaults(func=preflight)


def load(args: argparse.Namespace) -> list[config.Environment]:
    if not selection.chosen(args):
        raise CliError("preflight: name at least one environment: --env NAME, --file PATH or FILE (each repeatable)")
    return selection.load(args)


def preflight(args: argparse.Namespace) -> int:
    envs = load(args)
    failed = False
    for i, env in enumerate(envs):
        try:
            checks = run_checks(env, aws_session(args.profile))
        except PreflightAbort as err:
            raise CliError(str(err)) from None
        print(("\n" if i else "") + f"preflight {env.name}: account {env.account}, {env.region}")
        print(render(checks))
        failed = failed or any(c.status == "FAIL" for c in checks)
    return 1 if failed else 0


def render(checks: Sequence[Check]) -> str:
    """The report: one line per check, its fix indented below, then a count of each status."""
    width = max([len("CHECK")] + [len(c.name) for c in checks])
    lines = [f"{'STATUS':<6}  {'CHECK':<{width}}  DETAIL"]
    for c in checks:
        lines.append(f"{c.status:<6}  {c.name:<{width}}  {c.detail}")
        if c.fix and c.status != "PASS":
            lines.append(f"{'':<6}  {'':<{width}}  fix: {c.fix}")
    counts = {s: sum(1 for c in checks if c.status == s) for s in ("PASS", "WARN", "FAIL")}
    warnings = "warning" if counts["WARN"] == 1 else "warnings"
    lines.append(f"{counts['PASS']} passed, {counts['WARN']} {warnings}, {counts['FAIL']} failed")
    return "\n".join(lines)
