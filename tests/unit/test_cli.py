"""The command line's grammar: every subcommand has help, wrong options get that subcommand's usage, bare
`neuronkit` lists the commands, `--version`, and the documented exit codes (0 ok, 1 findings, 2 usage/input)."""

from __future__ import annotations

import argparse

import pytest

from neuronkit.cli import build_parser, main, version


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


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out.strip() == f"neuronkit {version()}"
    assert version() != "unknown"


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
    extra = ["--run-id", "r1"] if path == ("pilot", "report") else []
    assert main([*path, "--env", "no-such-env", *extra]) == 2
    err = capsys.readouterr().err
    assert "no-such-env.yaml: no such environment; known environments: " in err and "Traceback" not in err


@pytest.mark.parametrize("path", [("preflight",), ("pilot", "start")], ids=" ".join)
def test_single_environment_commands_refuse_two(path: tuple[str, ...], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*path, "--env", "dev", "--env", "prod"]) == 2
    assert "name exactly one environment" in capsys.readouterr().err


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
