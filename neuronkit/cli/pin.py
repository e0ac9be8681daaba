"""``neuronkit pin``: pin a new account's AMI lookups in cdk.context.json, with read-only credentials.

neuronkit pin --env lab              every lookup of environments/lab.yaml that cdk.context.json does not pin
neuronkit pin --file PATH            the same for any file (examples/environments/pilot.yaml ...)
neuronkit pin --env lab --refresh    look up every image again (moves pinned pools to the newest images)

A ``platform: eks`` file that names its own cluster by ``eks.existing.cluster_name`` alone gets the cluster's endpoint,
certificate authority, service CIDR, cluster security group, Kubernetes version and authentication mode from
eks:DescribeCluster, recorded under one key per cluster (neuronkit/config/cluster_pins.py); attributes the file gives
win over pinned ones, and ``neuronkit validate`` names a pin that disagrees with the file.

Pools that pin an ``ami_id`` or float with ``track: latest`` make no lookup. The ids go into cdk.context.json
under CDK's own keys (as the CDK CLI would write them at a synth with credentials); commit the file. Needs
ec2:DescribeImages (and eks:DescribeCluster) in the environment's account (iam/neuronkit-pin-policy.json). Exit
codes: 0 pinned, 1 a lookup found no image or no cluster, 2 usage error or AWS unreachable.
"""

from __future__ import annotations

import argparse
from typing import Any

from neuronkit.cli import selection
from neuronkit.cli.errors import CliError
from neuronkit.config import ConfigError, cluster_pins, lookups


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "pin",
        help="look up the AMIs (and an existing EKS cluster's attributes) of environment files with read-only "
        "credentials and pin them in cdk.context.json",
        description="Perform the AMI lookups that cdk.context.json does not pin yet (DescribeImages in each "
        "environment's account and region) and write them under CDK's context keys; read eks.existing's cluster "
        "(DescribeCluster) when the file leaves its attributes out.",
    )
    selection.add(p)
    p.add_argument("--refresh", action="store_true", help="look up pinned images and clusters again too (the newest image wins)")
    p.set_defaults(func=run)


def _session_for(region: str) -> Any:
    import boto3

    return boto3.Session(region_name=region)


def run(args: argparse.Namespace) -> int:
    project = lookups.find_project()
    if project is None:
        raise CliError("pin: no cdk.json here or above; run neuronkit pin from the project folder")
    clusters = _pin_clusters(project, selection.paths(args), refresh=args.refresh)
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
        return clusters
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
    return clusters if all(f.image_id for f in found) else 1


def _pin_clusters(project: Any, paths: list[Any], *, refresh: bool) -> int:
    """Pin eks.existing's attributes for each file that leaves some out (every such file with ``refresh``); 0, or 1
    when a cluster does not exist. A file that cannot be read is left to the environment loading that follows."""
    from neuronkit.account.pin import PinError, describe_cluster
    from neuronkit.config.loader import read_data

    context = lookups.read_context(project)
    todo = []
    for path in paths:
        try:
            data, shown = read_data(path)
        except ConfigError:
            continue
        lookup = cluster_pins.cluster_lookup(data)
        if lookup is not None and (refresh or (lookup.missing and not cluster_pins.pinned(context, lookup))):
            todo.append((shown, lookup))
    values: dict[str, Any] = {}
    status = 0
    for shown, lookup in todo:
        try:
            found = describe_cluster(_session_for, lookup)
        except PinError as err:
            raise CliError(f"pin: {err}") from None
        if not found.attributes:
            print(f"{shown}: eks.existing.cluster_name: no cluster {lookup.cluster_name} in {lookup.account}/{lookup.region}")
            status = 1
            continue
        values[lookup.context_key] = found.attributes
        absent = [a for a in cluster_pins.ATTRIBUTES if a not in found.attributes]
        if absent:
            print(f"{shown}: DescribeCluster returned no {', '.join(absent)} for {lookup.cluster_name}; give them in the file")
        print(
            f"{shown}: cluster {lookup.cluster_name}: Kubernetes {found.attributes.get('kubernetes_version')}, "
            f"{found.attributes.get('authentication_mode')}, {found.attributes.get('endpoint')} in {lookup.account}/{lookup.region}"
        )
    if values:
        path = lookups.write_context(project, values)
        print(f"pinned {len(values)} cluster(s) in {path.name}; commit it")
    return status
