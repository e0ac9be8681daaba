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
    "neuronkit.cli.rehearse",
    "neuronkit.cli.assess_cmd",
    "neuronkit.cli.pilot_cmd",
)


class CliError(Exception):
    """A user-facing failure: printed as one line, exit code 2 unless given."""

    def __init__(self, message: str, code: int = 2):
        super().__init__(message)
        self.code = code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="neuronkit", description="Trainium/Inferentia environments on AWS CDK.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
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


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
