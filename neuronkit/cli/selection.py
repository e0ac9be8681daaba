"""How every command chooses environments: ``--env NAME`` (repeatable), ``--file PATH`` (repeatable) or ``FILE``.

Without any, a command that can work on several environments takes every file under environments/;
preflight needs at least one and pilot exactly one (neuronkit/cli/grammar.py holds the whole grammar). The options, their help
and their errors are the same in every command (tests/unit/test_cli.py walks them).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from neuronkit import config
from neuronkit.cli.errors import CliError

ENVIRONMENTS_DIR = Path("environments")


HOW_MANY = {
    "all": "repeat for more (default: every file under environments/)",
    "some": "repeat for more (at least one --env, --file or FILE)",
    "one": "exactly one --env, --file or FILE",
}


def add(parser: argparse.ArgumentParser | argparse._ArgumentGroup, *, count: str = "all", one_file: bool = False) -> None:
    """Add ``--env``, ``--file`` and the positional ``FILE`` to a command; ``count`` is ``all`` (several, default
    every file), ``some`` (several, at least one) or ``one`` (exactly one); ``one_file``: several names but at
    most one file (rehearse). Their help says which (tests/unit/test_cli.py checks it against the grammar)."""
    how = HOW_MANY[count]
    parser.add_argument(
        "--env", metavar="NAME", action="append", default=None, help=f"an environment under environments/, e.g. prod; {how}"
    )
    single = count == "one" or one_file
    file_help = "one environment file, instead of --env" if one_file else f"an environment file; {how}"
    parser.add_argument("--file", metavar="PATH", type=Path, action="append", default=None, help=file_help)
    parser.add_argument(
        "files",
        metavar="FILE",
        nargs="?" if single else "*",
        type=Path,
        default=None,
        help="environment file" + ("" if single else "s") + ", the same as --file",
    )


def merge_files(args: argparse.Namespace, extra: list[str]) -> list[str]:
    """Positional FILE arguments join ``--file`` (first, in the order given). argparse leaves files given after an
    option (``cost --env dev a.yaml b.yaml``) in ``extra`` when FILE was matched before it; they join too.
    Returns what is left of ``extra``."""
    if not hasattr(args, "files"):
        return extra
    given = args.files if isinstance(args.files, list) else [args.files] if args.files is not None else []
    words = [w for w in extra if not w.startswith("-")]
    if words and len(words) == len(extra):
        given, extra = [*given, *map(Path, words)], []
    if given:
        args.file = [*given, *(args.file or [])]
    del args.files
    return extra


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
        raise CliError(f"{args.command}: name exactly one environment: --env NAME, --file PATH or FILE", code=2)
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


def paths(args: argparse.Namespace, directory: Path = ENVIRONMENTS_DIR) -> list[Path]:
    """The files the options name (names first, as :func:`load` reads them), or every file under ``directory``."""
    names: list[str] = list(getattr(args, "env", None) or [])
    files: list[Path] = list(getattr(args, "file", None) or [])
    named = list(check_names(names, directory).values())
    return [*named, *dict.fromkeys(files)] if names or files else config.environment_files(directory)
