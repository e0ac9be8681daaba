"""The command line's grammar: every subcommand has help, wrong options get that subcommand's usage, bare
`neuronkit` lists the commands, `--version`, and the documented exit codes (0 ok, 1 findings, 2 usage/input)."""

from __future__ import annotations

import argparse
import json
import re
from importlib.metadata import version as installed
from pathlib import Path
from typing import Any

import pytest

from neuronkit.cli import build_parser, grammar, main, version
from neuronkit.config import environment_files

ROOT = Path(__file__).resolve().parents[2]


def _commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    out: list[tuple[str, ...]] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                out.append((*prefix, name))
                out += _commands(sub, (*prefix, name))
    return out


COMMANDS = _commands(build_parser())


def test_the_walk_finds_every_command_and_action() -> None:
    assert {("assess",), ("pilot", "start"), ("pilot", "report"), ("catalog", "show"), ("capacity", "offerings")} <= set(COMMANDS)


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_every_command_has_its_own_help(path: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([*path, "--help"])
    assert done.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: neuronkit {' '.join(path)}")
    assert "_command" not in out  # no internal names in usage lines


@pytest.mark.parametrize("path", [p for p in COMMANDS if p not in {("catalog",), ("capacity",), ("pilot",)}], ids=" ".join)
def test_a_wrong_option_shows_that_commands_usage_and_exits_2(path: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([*path, "--no-such-option"])
    assert done.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"usage: neuronkit {' '.join(path)}")
    # Either the wrong option is named, or (commands with required options) what is missing comes first.
    assert "unrecognized arguments: --no-such-option" in err or " is required" in err or "are required" in err


def test_bare_neuronkit_lists_the_commands_and_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    err = capsys.readouterr().err
    for (name,) in [p for p in COMMANDS if len(p) == 1]:
        assert f"    {name}" in err
    assert "exit codes: 0 ok; 1 findings" in err


def test_version_prints_the_kit_and_the_pinned_cdk(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0
    cli = json.loads((ROOT / "package.json").read_text())["devDependencies"]["aws-cdk"]
    assert capsys.readouterr().out.splitlines() == [
        f"neuronkit {installed('neuronkit')}",
        f"aws-cdk-lib {installed('aws-cdk-lib')} (installed)",
        f"aws-cdk (CDK CLI) {cli} (pinned in package.json)",
    ]
    assert version() != "unknown" and re.fullmatch(r"\d+\.\d+\.\d+", cli)  # pinned exactly, not a range


def test_catalog_show_one_type_lists_its_facts_and_az_ids(capsys: pytest.CaptureFixture[str]) -> None:
    from neuronkit import catalog

    assert main(["catalog", "show", "trn1.32xlarge", "--region", "us-east-1"]) == 0
    out = capsys.readouterr().out.splitlines()
    t = catalog.get("trn1.32xlarge")
    assert (
        out[0]
        == f"trn1.32xlarge: trainium, {t.neuron_devices} x Trainium, {t.neuron_cores} NeuronCores, {t.neuron_memory_mib // 1024} GiB HBM"
    )
    assert out[-1] == f"  us-east-1: {', '.join(t.az_ids('us-east-1'))}"
    assert main(["catalog", "show", "trn1.99xlarge"]) == 2
    assert "trn1.99xlarge is not in the instance catalog; the catalog has trn1.2xlarge, trn1.32xlarge" in capsys.readouterr().err
    assert main(["catalog", "show", "--region", "us-east-2"]) == 0
    listed = [line.split()[0] for line in capsys.readouterr().out.splitlines()[2:]]
    assert "trn2.48xlarge" in listed and all(catalog.get(n).az_ids("us-east-2") for n in listed)


def _option(path: tuple[str, ...], flag: str) -> argparse.Action | None:
    parser = build_parser()
    for name in path:
        (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = sub.choices[name]
    return next((a for a in parser._actions if flag in a.option_strings), None)


# The commands that read environment files; summary reads synths instead. review compares two git revisions of
# environments/, so it takes --env (an environment of either revision) but no --file. assess reads environment
# files for its fleet check (a GPU fallback cheaper per node than the Neuron primary).
ENVIRONMENT_COMMANDS = [
    ("validate",),
    ("cost",),
    ("preflight",),
    ("rehearse",),
    ("pin",),
    ("pilot", "start"),
    ("pilot", "report"),
    ("assess",),
    ("job", "render"),
    ("job", "check"),
]
REVISION_COMMANDS = [("review",)]


def test_the_environment_commands_are_all_the_ones_with_env_or_file() -> None:
    found = [p for p in COMMANDS if _option(p, "--env") or _option(p, "--file")]
    assert sorted(found) == sorted(ENVIRONMENT_COMMANDS + REVISION_COMMANDS)
    for path in REVISION_COMMANDS:
        env = _option(path, "--env")
        assert env is not None and isinstance(env, argparse._AppendAction) and env.metavar == "NAME"
        assert _option(path, "--file") is None


@pytest.mark.parametrize("path", ENVIRONMENT_COMMANDS, ids=" ".join)
def test_every_command_chooses_environments_with_repeatable_env_and_file(path: tuple[str, ...]) -> None:
    for flag in ("--env", "--file"):
        action = _option(path, flag)
        assert action is not None and isinstance(action, argparse._AppendAction), (path, flag)
        assert action.metavar == ("NAME" if flag == "--env" else "PATH")


@pytest.mark.parametrize("path", ENVIRONMENT_COMMANDS, ids=" ".join)
def test_an_unknown_environment_is_a_usage_error_naming_the_known_ones(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    extra = ["--run-id", "r1"] if path == ("pilot", "report") else ["pretrain"] if path[0] == "job" else []
    assert main([*path, "--env", "no-such-env", *extra]) == 2
    err = capsys.readouterr().err
    assert "no-such-env.yaml: no such environment; known environments: " in err and "Traceback" not in err


@pytest.mark.parametrize("path", [("pilot", "start"), ("pilot", "report")], ids=" ".join)
def test_single_environment_commands_refuse_two_and_their_help_says_so(
    path: tuple[str, ...], capsys: pytest.CaptureFixture[str]
) -> None:
    first = environment_files()[0]
    extra = ["--run-id", "r1"] if path == ("pilot", "report") else []
    assert main([*path, "--env", first.stem, str(first), *extra]) == 2
    assert "name exactly one environment: --env NAME, --file PATH or FILE" in capsys.readouterr().err
    for flag in ("--env", "--file"):
        action = _option(path, flag)
        assert action is not None and action.help is not None
        assert "exactly one" in action.help and "repeat" not in action.help


def test_preflight_checks_each_environment_it_is_given(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from neuronkit.account.preflight import Check

    seen: list[str] = []

    def checks(env: Any, session: Any) -> list[Check]:
        seen.append(env.name)
        return [Check("FAIL" if len(seen) == 2 else "PASS", "account", "stubbed")]

    monkeypatch.setattr("neuronkit.cli.preflight.aws_session", lambda profile: None)
    monkeypatch.setattr("neuronkit.cli.preflight.run_checks", checks)
    files = environment_files()
    assert main(["preflight", "--env", files[0].stem, str(files[-1])]) == 1  # the second one FAILs
    out = capsys.readouterr().out
    assert seen == [files[0].stem, files[-1].stem]
    assert [line.split(":")[0] for line in out.splitlines() if line.startswith("preflight ")] == [f"preflight {n}" for n in seen]
    assert main(["preflight"]) == 2
    assert "preflight: name at least one environment" in capsys.readouterr().err


def test_cost_and_validate_take_several_environments(capsys: pytest.CaptureFixture[str]) -> None:
    from neuronkit.config import environment_files

    names = [f.stem for f in environment_files()]
    args = [x for n in names for x in ("--env", n)]
    assert main(["validate", *args]) == 0
    assert [line.split(":")[0] for line in capsys.readouterr().out.splitlines()] == [f"environments/{n}.yaml" for n in names]
    assert main(["cost", *args]) == 0
    out = capsys.readouterr().out
    assert all(f"{n} (" in out for n in names)


def test_every_command_that_reads_a_synth_takes_cdk_out() -> None:
    for path in [("summary",), ("cost",), ("rehearse",)]:
        action = _option(path, "--cdk-out")
        assert action is not None and action.metavar == "DIR", path


# --------------------------------------------------------------------------------------------
# The grammar (neuronkit/cli/grammar.py, README's tables): every command's arguments and options
# --------------------------------------------------------------------------------------------
LEAVES = [p for p in COMMANDS if not any(q[: len(p)] == p and len(q) > len(p) for q in COMMANDS)]
FORMATS = {"text", "markdown", "json"}
RETIRED = re.compile(r"(?<![\w-])(--out|--json|--regions|--type|--pilot-file|--markdown)(?![\w-])")


def _parser(path: tuple[str, ...]) -> argparse.ArgumentParser:
    parser = build_parser()
    for name in path:
        (sub,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
        parser = sub.choices[name]
    return parser


def _shown(action: argparse.Action) -> str:
    """An option as the grammar table spells it: `-o/--output FILE`, `--format a|b`, `--tag KEY` (repeatable)."""
    if action.choices is not None:
        value = "|".join(action.choices)
    elif action.nargs == 0:
        value = ""
    else:
        metavar = action.metavar or action.dest.upper()
        value = " ".join(metavar) if isinstance(metavar, tuple) else str(metavar)
    text = f"`{'/'.join(action.option_strings)}{' ' + value if value else ''}`"
    # Repeatable: the help says so (single-environment commands collect --env/--file to refuse a second one).
    repeatable = isinstance(action, argparse._AppendAction) and "repeat" in str(action.help)
    return text + (" (repeatable)" if repeatable else "")


def _positional(action: argparse.Action) -> str:
    metavar = str(action.metavar or action.dest.upper())
    return {"?": f"[{metavar}]", "*": f"[{metavar} ...]", None: metavar}[action.nargs]  # type: ignore[index]


def test_the_grammar_names_every_command_once() -> None:
    assert len(LEAVES) >= 13
    assert sorted(c.name for c in grammar.COMMANDS) == sorted(" ".join(p) for p in LEAVES)


def test_readme_holds_the_grammar_tables_as_generated() -> None:
    assert grammar.render() in (ROOT / "README.md").read_text(), "run `make docs` to regenerate README's grammar tables"


@pytest.mark.parametrize("path", LEAVES, ids=" ".join)
def test_every_option_and_argument_is_in_the_grammar(path: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    row = grammar.command(" ".join(path))
    actions = [a for a in _parser(path)._actions if not isinstance(a, argparse._HelpAction)]
    visible = [a for a in actions if a.option_strings and a.help != argparse.SUPPRESS]
    hidden = {a.option_strings[0] for a in actions if a.option_strings and a.help == argparse.SUPPRESS}
    cells = " ".join([row.environments, row.regions, row.output, row.format, *row.options])
    shown = [_shown(a) for a in visible]
    assert all(s in cells for s in shown), (shown, cells)  # nothing the table does not list ...
    assert sorted(re.findall(r"`(-[^`]*)`", cells)) == sorted(s.split("`")[1] for s in shown)  # ... and nothing missing
    assert " ".join(_positional(a) for a in actions if not a.option_strings) == row.arguments.strip("`")
    assert hidden == {o.flag for o in grammar.old_spellings(row.name)} | set(row.hidden)
    for a in visible:
        if a.option_strings[-1] == "--format":
            assert a.choices is not None and set(a.choices) <= FORMATS and len(a.choices) >= 2
        if a.option_strings[-1] == "--region":
            assert isinstance(a, argparse._AppendAction) and a.metavar == "R"
        if a.option_strings[-1] == "--output":
            assert a.option_strings == ["-o", "--output"]
            assert "also write" in str(a.help) or "folder for" in str(a.help)
    # The help the user reads shows the same, and no retired spelling.
    with pytest.raises(SystemExit):
        main([*path, "--help"])
    out = capsys.readouterr().out
    assert not RETIRED.search(out), out
    usage = out.split("\n\n")[0]
    for a in visible:
        assert a.option_strings[-1] in out and a.option_strings[0] in usage
    for argument in re.findall(r"[A-Z_]+", row.arguments):
        assert argument in usage, (argument, usage)


@pytest.mark.parametrize("path", [p for p in LEAVES if grammar.command(" ".join(p)).environments], ids=" ".join)
def test_environment_help_says_how_many(path: tuple[str, ...]) -> None:
    rule = grammar.command(" ".join(path)).environments
    env = _option(path, "--env")
    assert env is not None and env.help is not None and isinstance(env, argparse._AppendAction)
    if rule == grammar.ENV_ONE:
        assert "exactly one" in env.help and "repeat" not in env.help
    elif rule == grammar.ENV_SOME:
        assert "repeat for more" in env.help and "at least one" in env.help
    else:
        assert "repeat for more" in env.help and "default: " in env.help


def _old_argv(path: tuple[str, ...], old: grammar.Old) -> list[str]:
    """A command line with the old spelling and whatever else the command needs."""
    needs = {("capacity", "offerings"): ["--count", "4", "--hours", "48"], ("review",): ["main"]}.get(path, [])
    if old.kind == "flag":
        return [*path, old.flag, *needs]
    if old.kind == "list":
        return [*path, old.flag, "us-east-1,us-west-2", "eu-west-1", *needs]
    return [*path, old.flag, "somewhere.md" if old.path else "trn1.32xlarge", *needs]


@pytest.mark.parametrize(
    ("path", "old"),
    [(tuple(c.split()), o) for o in grammar.OLD_SPELLINGS for c in o.commands if o.parsed],
    ids=lambda x: " ".join(x) if isinstance(x, tuple) else x.flag,
)
def test_spellings_removed_in_0_3_are_refused_with_the_new_one(
    path: tuple[str, ...], old: grammar.Old, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    assert main(_old_argv(path, old)) == 2
    captured = capsys.readouterr()
    assert captured.err == f"neuronkit: {old.flag} was removed in 0.3; use {old.new}\n" and captured.out == ""
    assert list(tmp_path.iterdir()) == []


def test_the_changelog_names_every_removed_spelling() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert grammar.OLD_SPELLINGS and grammar.REMOVED_IN == "0.3"
    for old in grammar.OLD_SPELLINGS:
        assert f"`{old.flag}`" in changelog and f"`{old.new}`" in changelog, old.flag


def test_environment_files_are_arguments_everywhere(capsys: pytest.CaptureFixture[str]) -> None:
    files = environment_files()
    # Positional files, before and after options, join --file in the order given.
    assert main(["validate", str(files[0]), "--env", files[-1].stem, *map(str, files)]) == 0
    shown = [line.split(":")[0] for line in capsys.readouterr().out.splitlines()]
    assert shown == [str(files[0]), *map(str, files), f"environments/{files[-1].stem}.yaml"]
    assert main(["cost", str(files[0])]) == 0
    assert f"{files[0].stem} (" in capsys.readouterr().out
    for path in [p for p in LEAVES if grammar.command(" ".join(p)).environments not in ("", grammar.ENV_NAMES)]:
        # job commands name their pool first: `job render POOL [FILE]`
        assert grammar.command(" ".join(path)).arguments.replace("POOL ", "") in ("`[FILE ...]`", "`[FILE]`"), path


def test_assess_says_a_billing_export_is_read_with_from(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["assess", "export.csv"]) == 2
    assert (
        "assess: export.csv is not an environment file (.yaml); read a billing export with --from PATH" in capsys.readouterr().err
    )


def test_output_also_writes_the_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "cost.md"
    assert main(["cost", "--env", environment_files()[0].stem, "--format", "markdown", "-o", str(out)]) in (0, 1)
    assert out.read_text() == capsys.readouterr().out != ""
