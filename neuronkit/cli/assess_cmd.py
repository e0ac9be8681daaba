"""``neuronkit assess``: the account's GPU workloads, what Trainium/Inferentia would save, the guide's verdicts.

Read-only (iam/neuronkit-assess-policy.json). Exit codes: 0 report written, 2 AWS could not be asked.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from neuronkit.account.preflight import PreflightAbort, abort_message, aws_session
from neuronkit.adoption import assess
from neuronkit.cli import CliError


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("assess", help="inventory the account's GPU workloads and the savings on Trainium/Inferentia (read-only)")
    p.add_argument("--profile", default=None, help="AWS profile (default: the default credential chain)")
    p.add_argument("--regions", default=None, help="comma-separated regions to inventory (default: the profile's region)")
    p.add_argument("--json", action="store_true", help="print JSON instead of Markdown")
    p.add_argument("--out", type=Path, default=None, help="also write the report to this file")
    p.add_argument("--pilot-file", type=Path, default=None, help="write a starter pilot environment for the best candidate")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        session = aws_session(args.profile)
    except PreflightAbort as err:
        raise CliError(str(err)) from None
    regions = [r.strip() for r in (args.regions or session.region_name or "").split(",") if r.strip()]
    if not regions:
        raise CliError("no AWS region: pass --regions us-east-1,us-west-2 or set AWS_REGION (or a region in your profile)")
    try:
        result = assess.assess(session, regions)
    except Exception as err:  # noqa: BLE001 - credentials, network: one line, never a traceback
        message = abort_message(err, regions[0])
        if message is None:
            raise
        raise CliError(message) from None
    text = assess.to_json(result) if args.json else assess.render(result)
    print(text, end="")
    if args.out is not None:
        args.out.write_text(text)
    if args.pilot_file is not None:
        try:
            args.pilot_file.write_text(assess.pilot_environment(result))
        except ValueError as err:
            raise CliError(f"--pilot-file: {err}") from None
        print(f"wrote {args.pilot_file}: check it with `neuronkit validate {args.pilot_file}`", flush=True)
    return 0
