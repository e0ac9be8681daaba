"""``neuronkit cost``: what an environment's pools cost On-Demand, against GPU equivalents, and a PR's cost change.

neuronkit cost                      every environment under environments/
neuronkit cost --env prod [--env dev] named environments, no synth needed
neuronkit cost path.yaml            any environment file (repeatable; the same as --file path.yaml)
neuronkit cost --cdk-out cdk.out    what was synthesized (reads the Auto Scaling groups' Metadata)
neuronkit cost --diff OLD NEW       the monthly cost change between two cdk.out folders (Markdown)

With environment files (not --cdk-out/--diff) the command is also the budget gate: it exits 1 when an
environment's estimate at ``budget.enforce`` (desired by default; max; off) exceeds ``budget.monthly_usd``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from neuronkit import config
from neuronkit.catalog.pricing import MissingPriceError
from neuronkit.cli import selection
from neuronkit.cli.errors import CliError
from neuronkit.reports import cost
from neuronkit.reports.pools import Pool, PoolError, pools_from_cdk_out, pools_from_environment


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "cost",
        help="On-Demand cost of the pools at min/desired/max, against GPU equivalents; or a PR's cost change",
        description="Price each pool (training cluster, inference fleet) from neuronkit/catalog/prices.json.",
    )
    selection.add(p)
    src = p.add_mutually_exclusive_group()
    src.add_argument("--cdk-out", type=Path, metavar="DIR", help="a synthesized cdk.out folder")
    src.add_argument(
        "--diff",
        nargs=2,
        type=Path,
        metavar=("OLD_CDK_OUT", "NEW_CDK_OUT"),
        help="print the monthly cost change between two synths, e.g. the base branch's and a pull request's",
    )
    p.add_argument("--environments-dir", type=Path, default=Path("environments"), help=argparse.SUPPRESS)
    p.add_argument(
        "--format",
        choices=cost.FORMATS,
        default=None,
        help="output format (default: text, or markdown with --diff, for a pull request comment)",
    )
    p.add_argument("-o", "--output", type=Path, metavar="FILE", default=None, help="also write the report to FILE")
    p.set_defaults(func=run)


def _read_cdk_out(path: Path) -> list[Pool]:
    try:
        return pools_from_cdk_out(path)
    except PoolError as err:
        raise CliError("\n".join(err.problems)) from None


def _environments(args: argparse.Namespace) -> list[config.Environment]:
    return selection.load(args, directory=args.environments_dir)


def _pools(args: argparse.Namespace) -> list[Pool]:
    return [pool for env in _environments(args) for pool in pools_from_environment(env)]


def run(args: argparse.Namespace) -> int:
    if selection.chosen(args) and (args.diff is not None or args.cdk_out is not None):
        raise CliError("cost: --env/--file/FILE price environment files; --cdk-out and --diff read synths; pick one")
    findings: list[str] = []
    try:
        if args.diff is not None:
            old_dir, new_dir = args.diff
            old, new = _read_cdk_out(old_dir), _read_cdk_out(new_dir)
            text = cost.diff_report(old, new, fmt=args.format or "markdown")
        elif args.cdk_out is not None:  # a synth carries the pools only (their Auto Scaling groups' metadata)
            text = cost.cost_report(_read_cdk_out(args.cdk_out), fmt=args.format or "text")
        else:
            envs = _environments(args)
            text = cost.environment_report(envs, fmt=args.format or "text")
            # The budget gate (budget.enforce): an environment over its budget at the enforced level is a finding.
            findings = cost.budget_problems(envs, _shown(args, envs))
    except MissingPriceError as err:
        raise CliError("\n".join(err.problems)) from None
    print(text, end="")
    if args.output is not None:
        try:
            args.output.write_text(text)
        except OSError as err:
            raise CliError(f"cost: cannot write {args.output} ({err.strerror})") from None
    for line in findings:
        print(line, file=sys.stderr)
    return 1 if findings else 0


def _shown(args: argparse.Namespace, envs: list[config.Environment]) -> dict[str, str]:
    """How each environment's file is named in a finding: the path given with --file, else environments/NAME.yaml."""
    files = {config.load_environment(f).name: str(f) for f in (args.file or [])} if args.file else {}
    return {e.name: files.get(e.name, f"{args.environments_dir}/{e.name}.yaml") for e in envs}
