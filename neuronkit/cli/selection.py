"""How every command chooses environments: ``--env NAME`` (repeatable) or ``--file PATH`` (repeatable).

Without either, a command that can work on several environments takes every file under environments/;
one that works on a single environment (preflight, pilot) requires exactly one. The options, their help
and their errors are the same in every command (tests/unit/test_cli.py walks them).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from neuronkit import config
from neuronkit.cli import CliError

ENVIRONMENTS_DIR = Path("environments")


def add(parser: argparse.ArgumentParser | argparse._ArgumentGroup, *, single: bool = False) -> None:
    """Add ``--env`` and ``--file`` to a command (its help says what happens without them)."""
    default = "one of --env or --file is required" if single else "default: every file under environments/"
    parser.add_argument(
        "--env",
        metavar="NAME",
        action="append",
        default=None,
        help=f"an environment under environments/, e.g. prod; repeat for more ({default})",
    )
    parser.add_argument(
        "--file", metavar="PATH", type=Path, action="append", default=None, help="an environment file; repeat for more"
    )


def chosen(args: argparse.Namespace) -> bool:
    return bool(getattr(args, "env", None) or getattr(args, "file", None))


def check_names(names: list[str], directory: Path = ENVIRONMENTS_DIR) -> dict[str, Path]:
    """The files of the named environments; an unknown name is a usage error (exit 2), not a file problem."""
    known = {f.stem: f for f in config.environment_files(directory)}
    unknown = [n for n in dict.fromkeys(names) if n not in known]
    if unknown:
        listed = ", ".join(known) or "none"
        raise CliError("\n".join(f"{directory}/{n}.yaml: no such environment; known environments: {listed}" for n in unknown))
    return {n: known[n] for n in dict.fromkeys(names)}


def load(args: argparse.Namespace, *, single: bool = False, directory: Path = ENVIRONMENTS_DIR) -> list[config.Environment]:
    """The environments the options name, in the order given (files after names), or every file."""
    names: list[str] = list(getattr(args, "env", None) or [])
    files: list[Path] = list(getattr(args, "file", None) or [])
    if single and len(names) + len(files) != 1:
        raise CliError(f"{args.command}: name exactly one environment: --env NAME or --file PATH", code=2)
    check_names(names, directory)
    envs: list[config.Environment] = []
    problems: list[str] = []
    for name in dict.fromkeys(names):
        try:
            envs += config.load_all(directory, only=name)
        except config.ConfigError as err:
            problems += err.problems
    for f in dict.fromkeys(files):
        try:
            envs.append(config.load_environment(f))
        except config.ConfigError as err:
            problems += err.problems
    if problems:
        raise config.ConfigError(problems)
    if not names and not files:
        envs = config.load_all(directory)
        if not envs:
            raise CliError(f"no environment files under {directory}/; add one or pass --file PATH", code=2)
    return envs
