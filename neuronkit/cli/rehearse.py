"""``neuronkit rehearse``: a local ``cdk deploy`` of every environment against an embedded moto server.

neuronkit rehearse                   every environment under environments/ (``make deploy-local``)
neuronkit rehearse --env prod        one environment (synthesized with ``-c env=prod``)
neuronkit rehearse --destroy         then ``cdk destroy``: retained buckets and their objects must survive
neuronkit rehearse --cdk-out DIR     deploy an already synthesized cloud assembly
neuronkit rehearse --base REV        deploy the git revision REV (as `neuronkit review` takes it), then the working tree
                                     over it: per stack what was updated, replaced, added, removed (docs/eks.md, Day two)

No AWS account is used or reachable: see :mod:`neuronkit.rehearsal`. Exit codes: 0 when every stack
deployed and every check passed, 1 when the CDK CLI or a check failed, 2 when the rehearsal refused to
start (an endpoint that is not loopback, a missing tool, an unknown environment).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from neuronkit import config
from neuronkit.cli import selection
from neuronkit.cli.errors import CliError
from neuronkit.rehearsal import RehearsalError, project_root, rehearse, render_verdict


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "rehearse",
        help="deploy every environment with the real CDK CLI into an embedded moto server (no AWS account needed)",
        description=(
            "Synthesize, then run `cdk bootstrap` and `cdk deploy` against a local moto server with dummy credentials, "
            "read the result back with boto3 and print what was deployed and what the mock could not model."
        ),
    )
    selection.add(p, one_file=True)
    p.add_argument("--destroy", action="store_true", help="then run `cdk destroy --force` and check what is kept and removed")
    p.add_argument("--cdk-out", type=Path, metavar="DIR", help="deploy this synthesized cloud assembly instead of synthesizing")
    p.add_argument(
        "--base",
        metavar="REV",
        help="day two: deploy this git revision first (e.g. HEAD, origin/main), then the working tree over it, and "
        "report per stack what was updated, replaced, added and removed, and what the mock cannot show",
    )
    p.add_argument("--verbose", "-v", action="store_true", help="show every line the CDK CLI prints")
    p.set_defaults(func=run)


def _print(line: str) -> None:
    print(line, flush=True)


def run(args: argparse.Namespace) -> int:
    try:
        root = project_root()
        files = args.file or []
        if len(files) > 1 or (files and (args.env or args.cdk_out)):
            raise CliError("rehearse: --file takes one environment file, without --env or --cdk-out (app.py -c file=PATH)")
        names = [config.load_environment(files[0]).name] if files else list(dict.fromkeys(args.env or []))
        if args.cdk_out is None and not files:
            selection.check_names(names, root / "environments")  # an unknown name fails here, with the known ones
        if args.base is not None:
            if args.cdk_out or args.destroy:
                raise CliError("rehearse: --base synthesizes both revisions itself; it takes neither --cdk-out nor --destroy")
            return _update(root, args.base, names, Path(files[0]) if files else None, args.verbose)
        result = rehearse(
            root,
            environments=names or None,
            env_file=files[0] if files else None,
            destroy=args.destroy,
            cdk_out=args.cdk_out,
            progress=_print,
            verbose=args.verbose,
        )
    except RehearsalError as err:
        raise CliError(f"rehearse: {err}", code=err.code) from None
    except KeyboardInterrupt:
        print("neuronkit: rehearse interrupted; the embedded server is stopped", file=sys.stderr)
        return 130
    print(render_verdict(result))
    return 0 if result.ok else 1


def _update(root: Path, base: str, names: list[str], env_file: Path | None, verbose: bool) -> int:
    """``--base``: the base revision deployed, the working tree over it; exit 1 on any problem, one line each."""
    from neuronkit.rehearsal import update

    try:
        reports = update.rehearse_update(
            root, base, environments=names or None, env_file=env_file, progress=_print, verbose=verbose
        )
    except RehearsalError as err:
        raise CliError(f"rehearse --base {base}: {err}", code=err.code) from None
    except KeyboardInterrupt:
        print("neuronkit: rehearse interrupted; the embedded server is stopped", file=sys.stderr)
        return 130
    for report in reports:
        print(update.render(report))
    problems = [f"{r.environment}: {p}" for r in reports for p in r.problems]
    for line in problems:
        print(f"neuronkit: rehearse --base {base}: {line}", file=sys.stderr)
    print(f"update rehearsal {'FAILED' if problems else 'OK'} over {base}: {len(reports)} environment(s)")
    return 1 if problems else 0
