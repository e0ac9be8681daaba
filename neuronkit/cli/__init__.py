"""The ``neuronkit`` command: what CDK lacks (validate, schema, catalog, cost, preflight, ...).

Each subcommand lives in its own module exposing ``register(subparsers)``; the module adds its parser
and sets ``func`` to a callable taking the parsed args and returning the exit code. User mistakes are
reported as :class:`neuronkit.config.ConfigError` lines or :class:`CliError`, never as tracebacks.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from neuronkit.config import ConfigError

# Subcommand modules, in the order `neuronkit --help` lists them.
COMMANDS = (
    "neuronkit.cli.validate",
    "neuronkit.cli.catalog_cmd",
    "neuronkit.cli.preflight",
    "neuronkit.cli.capacity",
    "neuronkit.cli.cost",
    "neuronkit.cli.summary",
    "neuronkit.cli.review_cmd",
    "neuronkit.cli.rehearse",
    "neuronkit.cli.pin",
    "neuronkit.cli.assess_cmd",
    "neuronkit.cli.pilot_cmd",
)


class CliError(Exception):
    """A user-facing failure: printed as one line, exit code 2 unless given."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


EXIT_CODES = """exit codes: 0 ok; 1 findings (validation problems, preflight FAILs); 2 usage or input error
(a wrong option, an unreadable file, AWS unreachable)."""


def version() -> str:
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as package_version

    try:
        return package_version("neuronkit")
    except PackageNotFoundError:  # pragma: no cover - running from a tree without `pip install -e .`
        return "unknown"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="neuronkit",
        description="Trainium/Inferentia environments on AWS CDK.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"neuronkit {version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    return parser


def _subparser(parser: argparse.ArgumentParser, path: Sequence[str]) -> argparse.ArgumentParser:
    """The parser of a (nested) subcommand, to report a wrong option with its own usage."""
    current = parser
    for name in path:
        actions = [a for a in current._actions if isinstance(a, argparse._SubParsersAction)]
        if not actions or name not in actions[0].choices:
            break
        current = actions[0].choices[name]
    return current


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        parser.print_help(sys.stderr)  # `neuronkit` alone: the commands, as a usage error
        return 2
    args, extra = parser.parse_known_args(argv)
    if extra:
        words = [w for w in argv if not w.startswith("-")]
        _subparser(parser, words[:2]).error(f"unrecognized arguments: {' '.join(extra)}")
    if getattr(args, "command", None) is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        code: int = args.func(args)
        return code
    except ConfigError as err:
        for line in err.problems:
            print(line, file=sys.stderr)
        return 1
    except CliError as err:
        print(f"neuronkit: {err}", file=sys.stderr)
        return err.code
    except BrokenPipeError:
        # The reader went away (`neuronkit catalog show | head`): stop quietly, as other command-line tools do.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
