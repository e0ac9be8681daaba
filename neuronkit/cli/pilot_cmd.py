"""``neuronkit pilot start | report``: run the ``pilot:`` workload on both sides, then compare them (docs/adoption.md)."""

from __future__ import annotations

import argparse
from pathlib import Path

from neuronkit import config
from neuronkit.account.preflight import PreflightAbort, abort_message, aws_session, client_config
from neuronkit.adoption import pilot
from neuronkit.cli import CliError, selection


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("pilot", help="start the pilot workload on Trainium and GPU, or report on a run")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, help_text in (
        ("start", "submit the pilot workload to the Neuron and the GPU queue (same data, same step budget)"),
        ("report", "compare a run: loss at equal steps, throughput, cost per token, plots (PNG) and a verdict"),
    ):
        a = actions.add_parser(name, help=help_text)
        selection.add(a, single=True)
        a.add_argument("--profile", default=None, help="AWS profile (default: the default credential chain)")
        if name == "start":
            a.add_argument("--run-id", default=None, help="name the run (default: run-<UTC time>)")
            a.set_defaults(func=start)
        else:
            a.add_argument("--run-id", required=True, help="the run `neuronkit pilot start` printed")
            a.add_argument("--out", type=Path, default=Path("pilot-report"), help="folder for report.md and the plots")
            a.set_defaults(func=report)


def _load(args: argparse.Namespace) -> config.Environment:
    env = selection.load(args, single=True)[0]
    if env.pilot is None:
        raise CliError(f"{env.name}: the file has no pilot: section (docs/adoption.md)")
    return env


def _client(args: argparse.Namespace, env: config.Environment, service: str):  # type: ignore[no-untyped-def]
    try:
        return aws_session(args.profile).client(service, region_name=env.region, config=client_config())
    except PreflightAbort as err:
        raise CliError(str(err)) from None


def _aws(err: Exception, env: config.Environment) -> CliError:
    message = abort_message(err, env.region)
    if message is None:
        raise err
    return CliError(message)


def start(args: argparse.Namespace) -> int:
    env = _load(args)
    run_id = args.run_id or pilot.new_run_id()
    try:
        jobs = pilot.start(env, _client(args, env, "batch"), run_id)
    except Exception as err:  # noqa: BLE001 - one line for credentials, region, permissions
        raise _aws(err, env) from None
    assert env.pilot is not None
    print(f"pilot {env.pilot.name}: run {run_id}, {env.pilot.steps} steps on each side")
    for side, job in jobs.items():
        print(f"  {side}: job {job}")
    where = f"--file {args.file}" if args.file is not None else f"--env {env.name}"
    print(f"when both finish: neuronkit pilot report {where} --run-id {run_id}")
    return 0


def report(args: argparse.Namespace) -> int:
    env = _load(args)
    try:
        runs = pilot.read_runs(env, _client(args, env, "logs"), args.run_id)
    except ValueError as err:
        raise CliError(str(err)) from None
    except Exception as err:  # noqa: BLE001
        raise _aws(err, env) from None
    comparison = pilot.compare(env, runs, args.run_id)
    out: Path = args.out
    images = pilot.plots(runs, comparison, out) if all(runs[s].steps for s in runs) else []
    text = pilot.render(comparison, images, out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.md").write_text(text)
    print(text, end="")
    print(f"wrote {out / 'report.md'} and {len(images)} plot(s)")
    return 0
