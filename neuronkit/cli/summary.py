"""``neuronkit summary [CDK_OUT]``: Markdown of what a synth holds, for a pull request comment.

neuronkit summary                    reads cdk.out (run `make synth` first)
neuronkit summary path/to/cdk.out    any synthesized cloud assembly
neuronkit summary -o summary.md      also write it to a file

``make diff ENV=name`` prints ``cdk diff`` and then this summary; docs/github-actions-pr.yml posts both on
every pull request. See :mod:`neuronkit.reports.summary` for what the Markdown holds.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from neuronkit.cli.errors import CliError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "summary",
        help="Markdown summary of a synthesized app (pools, storage, alarms, cost, a Mermaid diagram) for pull requests",
        description="Read a cdk.out folder and print Markdown: per environment a Mermaid flowchart, per stack pools, storage and alarms.",
    )
    p.add_argument("cdk_out", nargs="?", type=Path, default=None, metavar="CDK_OUT", help="the same as --cdk-out")
    p.add_argument("--cdk-out", dest="cdk_out_option", type=Path, metavar="DIR", help="the cdk.out folder (default: cdk.out)")
    p.add_argument("-o", "--output", type=Path, metavar="FILE", help="also write the Markdown to FILE")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from neuronkit.reports.summary import SummaryError, summarize

    if args.cdk_out is not None and args.cdk_out_option is not None and args.cdk_out != args.cdk_out_option:
        raise CliError("summary: give the cdk.out folder once, as --cdk-out DIR or as the argument")
    try:
        text = summarize(args.cdk_out_option or args.cdk_out or Path("cdk.out"))
    except SummaryError as err:
        raise CliError("summary: " + "\n".join(err.problems)) from None
    print(text, end="")
    if args.output is not None:
        try:
            args.output.write_text(text)
        except OSError as err:
            raise CliError(f"summary: cannot write {args.output} ({err.strerror})") from None
    return 0
