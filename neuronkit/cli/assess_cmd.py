"""``neuronkit assess``: GPU workloads, what Trainium/Inferentia would save, the guide's verdicts.

Two sources: a billing export read offline (``--from PATH``: CUR 2.0 or a Cost Explorer JSON; ``--sample``: the
kit's sample export), or the account itself (read-only, iam/neuronkit-assess-policy.json). Fleets of the
environment files are checked for a GPU fallback cheaper per node than their Neuron primary: online, those of
``--env``/``--file`` (default every file under environments/); from a billing export only those ``--env``/``--file``
name (the report speaks of the export, not of the kit's files). Exit codes: 0 report written, 2 usage or input error (a bad
export, AWS could not be asked).
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path
from typing import Any

from neuronkit import config
from neuronkit.account.preflight import PreflightAbort, abort_message, aws_session
from neuronkit.cli import selection
from neuronkit.cli.errors import CliError
from neuronkit.config.base import NAME_RE

FORMATS = ("text", "markdown", "json")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "assess", help="GPU spend and the savings on Trainium/Inferentia, from a billing export (offline) or the account"
    )
    src = p.add_mutually_exclusive_group()
    src.add_argument(
        "--from", dest="source", metavar="PATH", type=Path, default=None,
        help="a CUR 2.0 export (.csv.gz, .csv, .parquet; a folder of them; a billing period's manifest .json) or the "
        "JSON of `aws ce get-cost-and-usage` (docs/adoption.md); read offline",
    )  # fmt: skip
    src.add_argument("--sample", action="store_true", help="assess the sample export shipped with the kit (offline)")
    p.add_argument(
        "--tag", metavar="KEY", action="append", default=None, help="group spend by this cost-allocation tag; repeat for more"
    )
    p.add_argument(
        "--workload-tag", metavar="KEY", default=None,
        help="the tag whose value says training or inference (values: catalog/billing.yaml); default: workload with --sample",
    )  # fmt: skip
    selection.add(p)
    p.add_argument("--region", metavar="R", action="append", default=None, help="a region to inventory online; repeat for more")
    p.add_argument(
        "--profile",
        metavar="PROFILE",
        default=None,
        help="AWS profile for the online inventory (default: the default credential chain)",
    )
    p.add_argument("--format", choices=FORMATS, default=None, help="output format (default: markdown; text prints the same)")
    p.add_argument("-o", "--output", type=Path, metavar="FILE", default=None, help="also write the report to FILE")
    p.add_argument(
        "--pilot-output",
        type=Path,
        metavar="PATH",
        default=None,
        help="write a starter pilot environment file for the workload with the largest saving (training or serving) to "
        "PATH (online or --from)",
    )
    p.add_argument(
        "--capacity-blocks", type=Path, metavar="FILE", default=None,
        help="price Trainium2 from these Capacity Block offerings (the JSON of `aws ec2 describe-capacity-block-offerings`)",
    )  # fmt: skip
    p.add_argument(
        "--model", metavar="GROUP=MODEL", action="append", default=None,
        help="the model a serving group serves (GROUP: its Name tag or model tag; e.g. llama70b-serving="
        "meta-llama/Llama-3.1-70B-Instruct); repeat per group. A bare MODEL only when there is one serving group",
    )  # fmt: skip
    p.set_defaults(func=run)


def parse_models(values: list[str] | None, serving_groups: int) -> dict[str, str]:
    """``--model GROUP=MODEL`` (repeatable) as GROUP -> MODEL; a bare ``--model ID`` ('*') only with one serving group,
    else refused with one line naming the new spelling (cli/grammar.py)."""
    from neuronkit.cli import grammar

    out: dict[str, str] = {}
    for value in values or []:
        group, sep, model = value.partition("=")
        if sep:
            if not group or not model:
                raise CliError(
                    f"--model {value}: name both sides, GROUP=MODEL (e.g. llama70b-serving=meta-llama/Llama-3.1-70B-Instruct)"
                )
            out[group] = model
        elif serving_groups > 1:
            raise CliError(grammar.old_form("assess", "--model").message())
        else:
            out["*"] = value
    return out


def _environments(args: argparse.Namespace) -> tuple[list[config.Environment], list[str]]:
    """The chosen environments; without --env/--file every file under environments/, and a broken one is a line."""
    if selection.chosen(args):
        exports = [f for f in args.file or [] if f.suffix not in (".yaml", ".yml")]
        if exports:
            raise CliError(f"assess: {exports[0]} is not an environment file (.yaml); read a billing export with --from PATH")
        return selection.load(args), []
    if not selection.ENVIRONMENTS_DIR.is_dir() or not config.environment_files(selection.ENVIRONMENTS_DIR):
        return [], []
    try:
        return config.load_all(selection.ENVIRONMENTS_DIR), []
    except config.ConfigError as err:
        return [], [f"environments/ not read for the fleet check: {err.problems[0]}"]


def _offline(args: argparse.Namespace, envs: list[config.Environment], problems: list[str]) -> tuple[str, Any]:
    from neuronkit.adoption import assess, billing, offline

    path = billing.SAMPLE if args.sample else args.source
    workload_tag = args.workload_tag or ("workload" if args.sample else None)
    try:
        export = billing.read(
            path, tags=args.tag or [], workload_tag=workload_tag, regions=args.region or [], is_gpu=assess._is_gpu
        )
    except billing.BillingError as err:
        raise CliError(str(err)) from None
    try:
        blocks = assess.read_block_offerings(args.capacity_blocks) if args.capacity_blocks else []
    except ValueError as err:
        raise CliError(f"--capacity-blocks: {err}") from None
    serving_groups = sum(1 for g in export.groups.values() if g.kind == "inference")
    result = offline.assess_export(export, envs, blocks, parse_models(args.model, serving_groups))
    result.problems += problems
    text = offline.to_json(result) if args.format == "json" else offline.render(result)
    return text, offline.to_assessment(result)


def _online(args: argparse.Namespace, envs: list[config.Environment]) -> tuple[str, Any]:
    from neuronkit.adoption import assess, offline

    try:
        session = aws_session(args.profile)
    except PreflightAbort as err:
        raise CliError(str(err)) from None
    regions = list(dict.fromkeys(args.region or ([session.region_name] if session.region_name else [])))
    if not regions:
        raise CliError("no AWS region: pass --region R (repeatable), set AWS_REGION, or read a billing export with --from PATH")
    try:
        result = assess.assess(session, regions)
    except Exception as err:  # noqa: BLE001 - credentials, network: one line, never a traceback
        message = abort_message(err, regions[0])
        if message is None:
            raise
        raise CliError(message) from None
    if args.format == "json":
        return assess.to_json(result), result
    text = assess.render(result)
    fleets = offline.fleet_findings(envs)
    if fleets:
        text += "\n## Fleets whose GPU fallback is cheaper per node\n\n" + "".join(f"- {f}\n" for f in fleets)
    return text, result


def run(args: argparse.Namespace) -> int:
    offline_mode = args.sample or args.source is not None
    if offline_mode:
        # A billing export's report speaks of the bill: environment files only when --env/--file name them.
        envs = selection.load(args) if selection.chosen(args) else []
        text, result = _offline(args, envs, [])
    else:
        envs, _ = _environments(args)
        text, result = _online(args, envs)
    print(text, end="")
    if args.output is not None:
        args.output.write_text(text)
    if args.pilot_output is not None and result is not None:
        from neuronkit.adoption import assess

        try:
            stem = args.pilot_output.stem
            # validate requires name: to match the file name; a stem that is not a valid name keeps "pilot"
            name = stem if re.fullmatch(NAME_RE, stem) else "pilot"
            starter = assess.pilot_environment(result, name)
            if result.account == "000000000000":
                starter = (
                    "# account: the export names no single usage account (line_item_usage_account_id); replace "
                    "000000000000 with yours\n" + starter
                )
            args.pilot_output.write_text(starter)
        except ValueError as err:
            raise CliError(f"--pilot-output: {err}") from None
        print(f"wrote {args.pilot_output}: check it with `neuronkit validate {args.pilot_output}`", flush=True)
    return 0
