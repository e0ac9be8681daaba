"""``neuronkit pin``: pin a new account's AMI lookups in cdk.context.json, with read-only credentials.

neuronkit pin --env lab              every lookup of environments/lab.yaml that cdk.context.json does not pin
neuronkit pin --file PATH            the same for any file (examples/environments/pilot.yaml ...)
neuronkit pin --env lab --refresh    look up every image again (moves pinned pools to the newest images)

Pools that pin an ``ami_id`` or float with ``track: latest`` make no lookup. The ids go into cdk.context.json
under CDK's own keys (as the CDK CLI would write them at a synth with credentials); commit the file. Needs
ec2:DescribeImages in the environment's account (iam/neuronkit-pin-policy.json). Exit codes: 0 pinned, 1 a
lookup found no image, 2 usage error or AWS unreachable.
"""

from __future__ import annotations

import argparse
from typing import Any

from neuronkit.cli import selection
from neuronkit.cli.errors import CliError
from neuronkit.config import lookups


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "pin",
        help="look up the AMIs of environment files with read-only credentials and pin them in cdk.context.json",
        description="Perform the AMI lookups that cdk.context.json does not pin yet (DescribeImages in each "
        "environment's account and region) and write them under CDK's context keys.",
    )
    selection.add(p)
    p.add_argument("--refresh", action="store_true", help="look up pinned images again too (the newest image wins)")
    p.set_defaults(func=run)


def _session_for(region: str) -> Any:
    import boto3

    return boto3.Session(region_name=region)


def run(args: argparse.Namespace) -> int:
    project = lookups.find_project()
    if project is None:
        raise CliError("pin: no cdk.json here or above; run neuronkit pin from the project folder")
    envs = selection.load(args)
    context = lookups.read_context(project)
    todo = [
        lookup
        for env in envs
        for lookup in (lookups.image_lookups(env) if args.refresh else lookups.unpinned_lookups(env, context))
    ]
    for env in envs:
        if not any(lookup.environment == env.name for lookup in todo):
            print(f"{env.name}: nothing to look up (every pool pins an ami_id or its lookup is in cdk.context.json)")
    if not todo:
        return 0
    from neuronkit.account.pin import PinError, resolve

    try:
        found = resolve(_session_for, todo)
    except PinError as err:
        raise CliError(f"pin: {err}") from None
    values = {f.lookup.context_key: f.image_id for f in found if f.image_id}
    for f in found:
        where = f"{f.lookup.environment} {f.lookup.key_path}"
        if f.image_id:
            print(f"{where}: {f.image_id} ({f.image_name}) for '{f.lookup.label}' in {f.lookup.account}/{f.lookup.region}")
        else:
            print(
                f"{where}: no image owned by {f.lookup.owner} matches '{f.lookup.label}' in {f.lookup.region}; "
                f"set {f.lookup.key_path}.ami_id and root_device_name"
            )
    if values:
        path = lookups.write_context(project, values)
        print(f"pinned {len(values)} lookup(s) in {path.name}; commit it")
    return 0 if all(f.image_id for f in found) else 1
