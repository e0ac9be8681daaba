"""``neuronkit pilot start | report``: run the ``pilot:`` workload on both sides, then compare them (docs/adoption.md)."""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

from neuronkit import config
from neuronkit.account.preflight import PreflightAbort, abort_message, aws_session, client_config
from neuronkit.adoption import pilot, pilot_serving
from neuronkit.cli import selection
from neuronkit.cli.errors import CliError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("pilot", help="start the pilot workload on Neuron and GPU, or report on a run")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, help_text in (
        ("start", "training: submit the workload to both Batch queues; serving: run the load job against both fleets"),
        ("report", "compare a run: serving throughput, latency and $ per million tokens at the SLO; training loss "
         "over a window; plots (PNG), pilot.json and a verdict"),
    ):  # fmt: skip
        a = actions.add_parser(name, help=help_text)
        selection.add(a, count="one")
        a.add_argument("--profile", metavar="PROFILE", default=None, help="AWS profile (default: the default credential chain)")
        if name == "start":
            a.add_argument("--run-id", metavar="RUN", default=None, help="name the run (default: run-<UTC time>)")
            a.set_defaults(func=start)
        else:
            a.add_argument(
                "--run-id", metavar="RUN", default=None, help="the run `neuronkit pilot start` printed (reads it from AWS)"
            )
            a.add_argument("--from", dest="from_dir", type=Path, default=None, metavar="DIR",
                           help="read a saved run folder instead of AWS (run.json, bench/, quality/, steps/)")  # fmt: skip
            a.add_argument(
                "--sample",
                nargs="?",
                const="default",
                default=None,
                metavar="NAME",
                help="report on a bundled sample run (no account needed): default, or gpu-wins (the GPU side wins)",
            )
            a.add_argument("-o", "--output", type=Path, default=None,
                           metavar="DIR", help="folder for report.md, pilot.json and the plots (default: pilot-report)")  # fmt: skip
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
    assert env.pilot is not None
    run_id = args.run_id or pilot.new_run_id()
    try:
        jobs = pilot.start(env, _client(args, env, "batch"), run_id) if env.pilot.cluster else {}
        task = (
            pilot.start_load_job(env, _client(args, env, "ecs"), _client(args, env, "cloudformation"), run_id)
            if env.pilot.serving
            else None
        )
    except ValueError as err:
        raise CliError(str(err)) from None
    except Exception as err:  # noqa: BLE001 - one line for credentials, region, permissions
        raise _aws(err, env) from None
    print(f"pilot {env.pilot.name}: run {run_id}")
    for side, job in jobs.items():
        print(f"  training, {side}: job {job} ({env.pilot.steps} steps)")
    if task:
        print(f"  serving: load job {task} (waits for both fleets to pass health, then warms up and sweeps)")
    where = f"--file {args.file[0]}" if args.file else f"--env {env.name}"
    print(f"when it finishes: neuronkit pilot report {where} --run-id {run_id}")
    return 0


def report(args: argparse.Namespace) -> int:
    args.output = args.output or Path("pilot-report")
    if args.sample is not None and args.sample not in pilot_serving.SAMPLES:
        raise CliError(f"pilot report: --sample {args.sample}: no such sample; use one of {', '.join(pilot_serving.SAMPLES)}")
    if args.sample is not None or args.from_dir is not None:
        if args.sample is not None and args.from_dir is not None:
            raise CliError("pilot report: give --sample or --from DIR, not both")
        env = _load(args) if selection.chosen(args) else None
        return _offline(pilot_serving.SAMPLES[args.sample] if args.sample else args.from_dir, env, args.output)
    if args.run_id is None:
        raise CliError("pilot report: give --run-id RUN (from `pilot start`), --from DIR or --sample")
    env = _load(args)
    assert env.pilot is not None
    out: Path = args.output
    written = 0
    if env.pilot.serving is not None:
        with tempfile.TemporaryDirectory() as tmp:
            try:
                pilot.download_run(env, _client(args, env, "s3"), args.run_id, Path(tmp))
            except ValueError as err:
                raise CliError(str(err)) from None
            except Exception as err:  # noqa: BLE001
                raise _aws(err, env) from None
            written += _serving(Path(tmp), env, out)
    if env.pilot.cluster is not None:
        try:
            runs = pilot.read_runs(env, _client(args, env, "logs"), args.run_id)
        except ValueError as err:
            raise CliError(str(err)) from None
        except Exception as err:  # noqa: BLE001
            raise _aws(err, env) from None
        written += _training(pilot.compare(env, runs, args.run_id), runs, out, "training.md" if written else "report.md")
    return 0


def _overrides(env: config.Environment | None) -> dict[str, float]:
    if env is None or env.pilot is None:
        return {}
    p = env.pilot
    terms = {"slo_ttft_ms": p.slo_ttft_ms, "slo_itl_ms": p.slo_itl_ms}
    if p.serving is not None:
        terms["max_quality_drop_points"] = p.serving.max_quality_drop_points
    return terms


def _serving(folder: Path, env: config.Environment | None, out: Path) -> int:
    try:
        run = pilot_serving.read_run(folder)
    except pilot_serving.RunError as err:
        raise CliError(str(err)) from None
    comparison = pilot_serving.compare(run, _overrides(env))
    text, images = pilot_serving.write(comparison, out)
    print(text, end="")
    print(f"wrote {out / 'report.md'}, {out / 'pilot.json'} and {len(images)} plot(s)")
    return 1


def _training(c: pilot.Comparison, runs: dict[str, pilot.Series], out: Path, name: str) -> int:
    images = pilot.plots(runs, c, out) if all(runs[s].steps for s in runs) else []
    text = pilot.render(c, images, out)
    out.mkdir(parents=True, exist_ok=True)
    (out / name).write_text(text)
    print(text, end="")
    print(f"wrote {out / name} and {len(images)} plot(s)")
    return 1


def _offline(folder: Path, env: config.Environment | None, out: Path) -> int:
    written = 0
    if (folder / "bench").is_dir():
        written += _serving(folder, env, out)
    training = pilot.saved_training(folder)
    if training is not None:
        terms, runs, run_id = training
        written += _training(pilot.compare_runs(terms, runs, run_id), runs, out, "training.md" if written else "report.md")
    if not written:
        raise CliError(f"{folder}: no bench/ results and no steps/ records; is it a pilot run folder?")
    return 0
