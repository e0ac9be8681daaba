"""``neuronkit validate [FILE ...]`` and ``neuronkit schema``: check environment files without synth."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from neuronkit import clock, config
from neuronkit.cli import selection
from neuronkit.config import cluster_pins, lookups


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("validate", help="check environment files without synthesizing")
    selection.add(p)
    p.add_argument(
        "--now",
        type=_time,
        default=None,
        metavar="TIME",
        help="check Capacity Blocks as of this time (ISO 8601, e.g. 2027-01-05T00:00:00Z) instead of the clock: a block "
        "whose scale-down has passed is refused",
    )
    p.set_defaults(func=validate)
    s = sub.add_parser("schema", help="print the JSON Schema of an environment file, or its Markdown reference")
    s.add_argument(
        "--format",
        choices=("json", "markdown"),
        default=None,
        help="json: the JSON Schema (default); markdown: docs/environment-file.md, one section per key with an example",
    )
    s.set_defaults(func=schema)


def validate(args: argparse.Namespace) -> int:
    named = selection.check_names(args.env or [])
    files = [*(args.file or []), *named.values()] or config.environment_files()
    if not files:
        print("neuronkit: no environment files found under environments/", file=sys.stderr)
        return 1
    problems: list[str] = []
    context = _pinned_context()
    now = getattr(args, "now", None) or clock.now()
    for f in files:
        try:
            env = config.load_environment(f)
            pools = (
                ", ".join(
                    [f"{c.name} ({c.instance_type} x{c.max_size})" for c in env.training]
                    + [f"{f.name} ({'/'.join(f.neuron_types)} x{f.max_size})" for f in env.inference]
                )
                or "no pools"
            )
            neuron = ", ".join(
                f"{name} {pool.workload} {pool.release.version}"
                for name, pool in config.pool_releases(env).items()
                if pool.release is not None
            )
            for line in config.neuron_warnings(env):
                print(f"warning: {f}: {line}", file=sys.stderr)
            if context is not None:
                for line in lookups.unpinned_warnings(env, context, _select(Path(f), env.name)):
                    print(f"warning: {f}: {line}", file=sys.stderr)
                disagree = [f"{f}: {key}: {msg}" for key, msg in cluster_pins.disagreements(env, context)]
                if disagree:
                    problems += disagree
                    continue
            ended = [f"{f}: {key}: {msg}" for key, msg in config.block_problems(list(env.training), now)]
            if ended:
                problems += ended
                continue
            over, budget = _budget_gate(env, f)
            if over:
                problems += over
                continue
            lines = "; ".join(f"{name} on {line}" for name, line in config.serving_lines(env).items())
            print(
                f"{f}: ok: {env.name} in {env.region}: {pools}"
                + (f"; Neuron SDK: {neuron}" if neuron else "")
                + (f"; serving lines: {lines}" if lines else "")
                + budget
            )
        except config.ConfigError as err:
            problems.extend(err.problems)
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0


def _time(value: str) -> Any:
    try:
        return clock.parse(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{value!r} is not an ISO 8601 time; use e.g. 2027-01-05T00:00:00Z") from None


def _budget_gate(env: config.Environment, path: Path) -> tuple[list[str], str]:
    """budget.enforce: the estimate at the enforced level (pools and fixed charges) must stay within monthly_usd.
    Returns the findings, and the ok line's budget suffix when there are none."""
    from neuronkit.reports import cost

    if env.budget is None or env.budget.enforce == "off":
        return [], ""
    found = cost.budget_problems([env], {env.name: str(path)})
    if found:
        return found, ""
    check = cost.budget_check(env)
    return [], (
        f"; budget {cost.usd(env.budget.monthly_usd)}: {check.levels()} (enforced at {check.enforce}; "
        f"{check.includes(check.enforce)})"
    )


def _pinned_context() -> dict[str, Any] | None:
    """cdk.context.json of the project around the working folder (None outside a project: nothing to compare)."""
    project = lookups.find_project()
    return lookups.read_context(project) if project is not None else None


def _select(path: Path, name: str) -> str:
    """How the other commands name this file: ``--env NAME`` under environments/, else ``--file PATH``."""
    under = path.parent.name == "environments" and path.stem == name and path.parent.resolve() == Path("environments").resolve()
    return f"--env {name}" if under else f"--file {path}"


def schema(args: argparse.Namespace) -> int:
    if args.format == "markdown":
        from neuronkit.config import reference

        root = Path.cwd()
        print(reference.render(config.json_schema(), reference.example_files(root), root), end="")
        return 0
    print(json.dumps(config.json_schema(), indent=2))
    return 0
