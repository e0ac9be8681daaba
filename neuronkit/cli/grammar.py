"""The command line's grammar, in one place: every command's arguments and options, and the old spellings.

README's grammar tables are generated from :data:`COMMANDS` and :data:`OLD_SPELLINGS` (``make docs`` runs
``python -m neuronkit.cli.grammar README.md``); ``tests/unit/test_cli.py`` walks every command's argparse
actions and usage against them, so a new option lands here first. The rules:

- environments: ``--env NAME`` / ``--file PATH``, both repeatable, and environment files also as
  positional ``FILE`` arguments in every command that reads them; without any, every file under
  environments/ (preflight needs at least one, pilot exactly one, rehearse at most one file);
- output: ``-o/--output PATH`` also writes the report to PATH (the terminal still shows it);
- formats: ``--format`` with choices among text, markdown, json;
- regions: ``--region R``, repeatable;
- instance types: positional ``TYPE``;
- an old spelling works for one release with a deprecation line on stderr (:func:`apply_old_spellings`),
  then goes.

Nothing here imports the commands' dependencies: building the parser stays free of CDK and boto3.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

# The release in which the old spellings below stopped working: they are refused with one line naming the new one.
REMOVED_IN = "0.3"

ENV_ALL = "`--env NAME` (repeatable), `--file PATH` (repeatable); default: every file under environments/"
ENV_SOME = "`--env NAME` (repeatable), `--file PATH` (repeatable); at least one"
ENV_ONE = "`--env NAME`, `--file PATH`: exactly one"
ENV_REHEARSE = "`--env NAME` (repeatable) or one `--file PATH`; default: every file under environments/"
ENV_NAMES = "`--env NAME` (repeatable): of either revision; default: the ones the change touches"
ENV_ASSESS = (
    "`--env NAME` (repeatable), `--file PATH` (repeatable); default: every file under environments/ online, none "
    "from a billing export"
)


@dataclass(frozen=True)
class Command:
    """One (sub)command as README's table shows it; each cell lists the option spellings it holds."""

    name: str
    arguments: str = ""  # the positional arguments, as usage shows them
    environments: str = ""  # one of the ENV_* rules above, or empty
    regions: str = ""
    output: str = ""
    format: str = ""
    options: tuple[str, ...] = ()  # the command's own options
    synth: bool = False  # starts the CDK's JavaScript runtime (jsii/Node): synthesizes or runs the CDK CLI
    hidden: tuple[str, ...] = ()  # suppressed options that are not old spellings, each with its reason in a comment


# The options `job render` and `job check` share (neuronkit/cli/job_cmd.py adds them to both).
_JOB_OPTIONS = ("`--nodes N`", "`--image IMAGE`", "`--image-release-window`", "`--name NAME`", "`--min-busbw-gbps GBPS`")

COMMANDS: tuple[Command, ...] = (
    Command("validate", arguments="`[FILE ...]`", environments=ENV_ALL, options=("`--now TIME`",)),
    Command("schema", format="`--format json|markdown`"),
    Command("catalog show", arguments="`[TYPE]`", regions="`--region R` (repeatable)"),
    Command(
        "catalog refresh",
        regions="`--region R` (repeatable)",
        options=("`--endpoint-url URL`", "`--prices`", "`--images`", "`--source TEXT`"),
    ),
    Command("preflight", arguments="`[FILE ...]`", environments=ENV_SOME, options=("`--profile PROFILE`",)),
    Command("pin", arguments="`[FILE ...]`", environments=ENV_ALL, options=("`--refresh`",)),
    Command(
        "capacity offerings",
        arguments="`[TYPE]`",
        regions="`--region R` (repeatable)",
        options=(
            "`--ultraserver-type TYPE`",
            "`--count N`",
            "`--hours N`",
            "`--start TIME`",
            "`--end TIME`",
            "`--profile PROFILE`",
        ),
    ),
    Command(
        "cost",
        arguments="`[FILE ...]`",
        environments=ENV_ALL,
        output="`-o/--output FILE`",
        format="`--format text|markdown`",
        options=("`--cdk-out DIR`", "`--diff OLD_CDK_OUT NEW_CDK_OUT`"),
        hidden=("--environments-dir",),  # tests price a folder of their own
    ),
    Command("summary", arguments="`[CDK_OUT]`", output="`-o/--output FILE`", options=("`--cdk-out DIR`",)),
    Command("review", arguments="`BASE`", environments=ENV_NAMES, output="`-o/--output FILE`", synth=True),
    Command(
        "rehearse",
        arguments="`[FILE]`",
        environments=ENV_REHEARSE,
        options=("`--destroy`", "`--cdk-out DIR`", "`--base REV`", "`--verbose/-v`"),
        synth=True,
    ),
    Command(
        "assess",
        arguments="`[FILE ...]`",
        environments=ENV_ASSESS,
        regions="`--region R` (repeatable)",
        output="`-o/--output FILE`",
        format="`--format text|markdown|json`",
        options=(
            "`--from PATH`",
            "`--sample`",
            "`--tag KEY` (repeatable)",
            "`--workload-tag KEY`",
            "`--profile PROFILE`",
            "`--pilot-output PATH`",
            "`--capacity-blocks FILE`",
            "`--model GROUP=MODEL` (repeatable)",
        ),
    ),
    Command("pilot start", arguments="`[FILE]`", environments=ENV_ONE, options=("`--profile PROFILE`", "`--run-id RUN`")),
    Command(
        "pilot report",
        arguments="`[FILE]`",
        environments=ENV_ONE,
        output="`-o/--output DIR`",
        options=("`--profile PROFILE`", "`--run-id RUN`", "`--from DIR`", "`--sample NAME`"),
    ),
    Command(
        "job render",
        arguments="`POOL [FILE]`",
        environments=ENV_ONE,
        output="`-o/--output FILE`",
        options=(
            *_JOB_OPTIONS,
            "`--deadline TIME`",
            "`--hold`",
            "`--command ARGS`",
        ),
    ),
    Command(
        "job check",
        arguments="`POOL [FILE]`",
        environments=ENV_ONE,
        output="`-o/--output FILE`",
        options=(
            *_JOB_OPTIONS,
            "`--calibrate`",
            "`--cordon`",
        ),
    ),
)


@dataclass(frozen=True)
class Old:
    """An old spelling, removed in :data:`REMOVED_IN`: still parsed (hidden from help) so that using it gives one line
    naming the new spelling instead of argparse's "unrecognized arguments".

    ``kind`` says how argparse reads it (``value``, ``list`` of values, ``flag``); ``dest`` is the new option's."""

    spelling: str  # as README shows it
    flag: str
    new: str  # the new spelling, as the deprecation line says it
    dest: str
    kind: str = "value"
    const: str | None = None
    path: bool = False  # the value is a file or folder
    commands: tuple[str, ...] = field(default=())
    parsed: bool = True  # False: the flag lives on with a new value form; the command refuses the old form itself
    when: str = ""  # when the old form is refused, for a value form that still works in some cases

    def message(self) -> str:
        when = f" {self.when}" if self.when else ""
        what = self.flag if self.parsed else self.spelling.strip("`")
        return f"{what} was removed in {REMOVED_IN}{when}; use {self.new}"


OLD_SPELLINGS: tuple[Old, ...] = (
    Old("`--regions a,b`, `--regions a b`", "--regions", "--region R (repeatable)", "region", kind="list",
        commands=("assess", "catalog refresh")),
    Old("`--json`", "--json", "--format json", "format", kind="flag", const="json", commands=("assess",)),
    Old("`--markdown`", "--markdown", "--format markdown", "format", kind="flag", const="markdown", commands=("schema",)),
    Old("`--out PATH`", "--out", "-o/--output PATH", "output", path=True, commands=("assess", "review", "pilot report")),
    Old("`--pilot-file PATH`", "--pilot-file", "--pilot-output PATH", "pilot_output", path=True, commands=("assess",)),
    Old("`--type TYPE`", "--type", "capacity offerings TYPE", "instance_type",
        commands=("capacity offerings",)),
    Old("`--model ID`", "--model", "--model GROUP=MODEL (repeatable)", "model", commands=("assess",), parsed=False,
        when="where the export or account has more than one serving group"),
)  # fmt: skip


def old_form(name: str, flag: str) -> Old:
    """The old value form of ``flag`` that command ``name`` refuses itself (``parsed=False``)."""
    return next(o for o in OLD_SPELLINGS if name in o.commands and o.flag == flag and not o.parsed)


def command(name: str) -> Command:
    return next(c for c in COMMANDS if c.name == name)


def old_spellings(name: str) -> list[Old]:
    return [o for o in OLD_SPELLINGS if name in o.commands and o.parsed]


def add_old_spellings(parser: argparse.ArgumentParser, name: str) -> None:
    """The old spellings of command ``name``, hidden from its help (dest ``old_<flag>``)."""
    for old in old_spellings(name):
        dest = "old_" + old.flag.lstrip("-").replace("-", "_")
        if old.kind == "flag":
            parser.add_argument(old.flag, dest=dest, action="store_true", help=argparse.SUPPRESS)
        elif old.kind == "list":
            parser.add_argument(old.flag, dest=dest, nargs="+", default=None, help=argparse.SUPPRESS)
        else:
            parser.add_argument(old.flag, dest=dest, type=Path if old.path else str, default=None, help=argparse.SUPPRESS)


def apply_old_spellings(args: argparse.Namespace, name: str) -> None:
    """Refuse an old spelling of command ``name`` with one line naming the new one (:class:`CliError`)."""
    from neuronkit.cli.errors import CliError

    for old in old_spellings(name):
        dest = "old_" + old.flag.lstrip("-").replace("-", "_")
        if getattr(args, dest, None):
            raise CliError(old.message())


# --------------------------------------------------------------------------------------------
# README
# --------------------------------------------------------------------------------------------
BEGIN = "<!-- grammar: generated by `make docs` from neuronkit/cli/grammar.py; do not edit -->"
END = "<!-- end of grammar -->"


def render() -> str:
    """README's two tables: every command's arguments and options, then the old spellings and their fate."""
    lines = [
        BEGIN,
        "| command | arguments | environments | regions | output | format | its own options | starts Node |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for c in COMMANDS:
        cells = [c.arguments, c.environments, c.regions, c.output, c.format, ", ".join(c.options), "yes" if c.synth else ""]
        lines.append(f"| `{c.name}` | " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    lines += [
        "",
        f"Old spellings removed in {REMOVED_IN} (each is refused with one line naming its new spelling; CHANGELOG.md):",
        "",
        "| old spelling | commands | new spelling |",
        "|---|---|---|",
    ]
    for o in OLD_SPELLINGS:
        lines.append(f"| {o.spelling} | {', '.join(f'`{c}`' for c in o.commands)} | `{o.new}` |")
    lines.append(END)
    return "\n".join(lines) + "\n"


def rewrite(readme: Path) -> bool:
    """Put :func:`render` between the markers of ``readme``; True when the file changed."""
    text = readme.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END) + 1
    new = text[:start] + render() + text[end:]
    if new != text:
        readme.write_text(new)
    return new != text


if __name__ == "__main__":  # pragma: no cover - `make docs`
    for name in sys.argv[1:]:
        print(f"{name}: {'rewritten' if rewrite(Path(name)) else 'up to date'}")
