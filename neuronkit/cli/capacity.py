"""``neuronkit capacity offerings``: find EC2 Capacity Blocks for ML to buy for a cluster.

The request is checked against the catalog (``capacity.yaml``: which types Capacity Blocks sell and
in which sizes) before AWS is asked; the answer is a table of offerings, the command that buys one
and the ``capacity:`` entry that references the bought block in an environment file.
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from neuronkit import catalog
from neuronkit.account.preflight import (
    DENIED_CODES,
    Client,
    PreflightAbort,
    abort_message,
    aws_session,
    client_config,
    iam_action,
)
from neuronkit.cli.errors import CliError
from neuronkit.config import CapacityBlock

PLATFORM = "Linux/UNIX"


@dataclass(frozen=True)
class Request:
    instance_type: str
    count: int
    hours: int
    start: dt.datetime | None = None
    end: dt.datetime | None = None
    ultraserver_type: str | None = None  # count is then UltraServers, not instances


@dataclass(frozen=True)
class Offering:
    offering_id: str
    instance_type: str
    count: int
    az: str
    az_id: str | None
    start: dt.datetime
    end: dt.datetime
    hours: int
    upfront_fee: str
    currency: str
    ultraserver_type: str | None = None
    ultraserver_count: int | None = None


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("capacity", help="EC2 Capacity Blocks for ML")
    csub = p.add_subparsers(dest="capacity_command", required=True, metavar="ACTION")
    o = csub.add_parser("offerings", help="list Capacity Block offerings (uses your AWS credentials)")
    o.add_argument("instance_type", nargs="?", metavar="TYPE", default=None, help="instance type, e.g. trn2.48xlarge")
    o.add_argument(
        "--ultraserver-type",
        metavar="TYPE",
        default=None,
        help="an UltraServer type instead of TYPE, e.g. u-trn2x64 (--count is then UltraServers)",
    )
    o.add_argument(
        "--count", metavar="N", type=int, required=True, help="instances in the block (UltraServers with --ultraserver-type)"
    )
    o.add_argument("--hours", metavar="N", type=int, required=True, help="block duration in hours")
    o.add_argument(
        "--region",
        metavar="R",
        action="append",
        default=None,
        help="an AWS region to search; repeat for more (default: your profile's or AWS_REGION)",
    )
    o.add_argument("--start", metavar="TIME", type=parse_time, default=None, help="earliest start, ISO 8601 (UTC if no offset)")
    o.add_argument("--end", metavar="TIME", type=parse_time, default=None, help="latest end, ISO 8601 (UTC if no offset)")
    o.add_argument("--profile", metavar="PROFILE", default=None, help="AWS profile (default: the default credential chain)")
    o.set_defaults(func=offerings_command)


def parse_time(text: str) -> dt.datetime:
    try:
        value = dt.datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not an ISO 8601 time, e.g. 2026-12-01T09:00Z") from None
    return value if value.tzinfo else value.replace(tzinfo=dt.UTC)


def check_request(req: Request, region: str) -> list[str]:
    """Problems with a request that the catalog can tell without asking AWS."""
    facts = catalog.capacity_facts()["capacity_blocks"]
    problems = []
    if req.ultraserver_type is not None:
        unit = catalog.ultraserver(req.ultraserver_type)
        known = ", ".join(catalog.trainium_facts()["ultraservers"])
        if unit is None:
            problems.append(
                f"--ultraserver-type: '{req.ultraserver_type}' is not an UltraServer type the catalog knows; use one of {known}"
            )
        if req.count < 1:
            problems.append(f"--count: give at least 1 UltraServer, not {req.count}")
        if req.hours < 1:
            problems.append(f"--hours: must be a positive number of hours, not {req.hours}")
        return problems
    if req.instance_type not in facts["instance_types"]:
        problems.append(
            f"TYPE: Capacity Blocks are not sold for {req.instance_type}; use one of {', '.join(facts['instance_types'])}"
        )
    elif region in catalog.metadata()["regions"] and not catalog.get(req.instance_type).az_ids(region):
        problems.append(f"TYPE: {req.instance_type} is not offered in {region}; try another --region")
    if req.count not in facts["sizes"]:
        problems.append(f"--count: a Capacity Block holds {', '.join(map(str, facts['sizes']))} instances, not {req.count}")
    if req.hours < 1:
        problems.append(f"--hours: must be a positive number of hours, not {req.hours}")
    if req.start and req.end and req.end <= req.start:
        problems.append("--end: must be after --start")
    return problems


def find_offerings(ec2: Client, req: Request) -> list[Offering]:
    """Capacity Block offerings for ``req`` in the client's region, earliest start first."""
    params: dict[str, Any] = (
        {"UltraserverType": req.ultraserver_type, "UltraserverCount": req.count, "CapacityDurationHours": req.hours}
        if req.ultraserver_type
        else {"InstanceType": req.instance_type, "InstanceCount": req.count, "CapacityDurationHours": req.hours}
    )
    if req.start:
        params["StartDateRange"] = req.start
    if req.end:
        params["EndDateRange"] = req.end
    pages = ec2.get_paginator("describe_capacity_block_offerings").paginate(**params)
    raw = [o for page in pages for o in page.get("CapacityBlockOfferings", [])]
    zones = az_ids_by_name(ec2) if raw else {}
    out = [
        Offering(
            offering_id=o["CapacityBlockOfferingId"],
            instance_type=o["InstanceType"],
            count=o["InstanceCount"],
            az=o["AvailabilityZone"],
            az_id=zones.get(o["AvailabilityZone"]),
            start=o["StartDate"],
            end=o["EndDate"],
            hours=o["CapacityBlockDurationHours"],
            upfront_fee=o.get("UpfrontFee", ""),
            currency=o.get("CurrencyCode", ""),
            ultraserver_type=o.get("UltraserverType"),
            ultraserver_count=o.get("UltraserverCount"),
        )
        for o in raw
    ]
    return sorted(out, key=lambda o: (o.start, _fee(o)))


def _fee(o: Offering) -> float:
    try:
        return float(o.upfront_fee)
    except ValueError:
        return float("inf")


def az_ids_by_name(ec2: Client) -> dict[str, str]:
    """AZ name -> AZ ID in this account (names map to different IDs in each account); {} if denied."""
    try:
        zones = ec2.describe_availability_zones()["AvailabilityZones"]
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") in DENIED_CODES:
            return {}
        raise
    return {z["ZoneName"]: z["ZoneId"] for z in zones}


def _ts(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M")


def _iso(value: dt.datetime) -> str:
    return value.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def render_table(offers: Sequence[Offering]) -> str:
    header = ("OFFERING ID", "AZ", "AZ ID", "START (UTC)", "END (UTC)", "HOURS", "UPFRONT FEE", "CURRENCY")
    rows = [
        (o.offering_id, o.az, o.az_id or "-", _ts(o.start), _ts(o.end), str(o.hours), o.upfront_fee, o.currency) for o in offers
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    right = {5, 6}  # numbers
    return "\n".join(
        "  ".join(
            cell.rjust(w) if i in right else cell.ljust(w) for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in [header, *rows]
    )


def capacity_entry(o: Offering) -> str:
    """The ``capacity:`` entry (the fields of config.CapacityBlock) that references a bought offering."""
    values = {
        "type": "capacity-block",
        "reservation_id": "cr-...  # CapacityReservationId printed by purchase-capacity-block",
        "instance_type": o.instance_type,
        "az_id": o.az_id or f"<AZ ID of {o.az}>",
        "instance_count": str(o.count),
        "start": _iso(o.start),
        "end": _iso(o.end),
    }
    if o.ultraserver_type:
        values["ultraserver_type"] = o.ultraserver_type
    try:
        values["upfront_fee_usd"] = f"{float(o.upfront_fee):g}"  # what `neuronkit cost` prices the block by
    except ValueError:
        pass
    return "\n".join(["capacity:"] + [f"  {key}: {values[key]}" for key in CapacityBlock.model_fields if key in values])


def how_to_buy(o: Offering, region: str) -> str:
    entry = "\n".join("      " + line for line in capacity_entry(o).splitlines())
    return (
        f"To buy an offering (the upfront fee is charged at purchase), e.g. the first:\n"
        f"  aws ec2 purchase-capacity-block --region {region} --capacity-block-offering-id {o.offering_id}"
        f" --instance-platform {PLATFORM}\n"
        f"Then reference the reservation it returns in the cluster of the environment file (max_size at most {o.count}):\n"
        f"  training:\n"
        f"    - instance_type: {o.instance_type}\n"
        + (f"      ultraserver: {o.ultraserver_type}\n" if o.ultraserver_type else "")
        + f"      az_id: {o.az_id or f'<AZ ID of {o.az}>'}\n"
        f"{entry}\n"
        f"and check it with `neuronkit preflight --env NAME`."
    )


def offerings_command(args: argparse.Namespace) -> int:
    try:
        session = aws_session(args.profile)
    except PreflightAbort as err:
        raise CliError(str(err)) from None
    regions = list(dict.fromkeys(args.region or ([session.region_name] if session.region_name else [])))
    if not regions:
        raise CliError("no AWS region: pass --region or set AWS_REGION (or a region in your AWS profile)")
    if (args.instance_type is None) == (args.ultraserver_type is None):
        raise CliError("give TYPE (instances) or --ultraserver-type (UltraServers), one of them")
    req = Request(args.instance_type or "", args.count, args.hours, args.start, args.end, args.ultraserver_type)
    problems = list(dict.fromkeys(p for region in regions for p in check_request(req, region)))
    if problems:
        raise CliError("; ".join(problems))
    for i, region in enumerate(regions):  # one block per region, in the order given
        if i:
            print()
        ec2 = session.client("ec2", region_name=region, config=client_config())
        try:
            offers = find_offerings(ec2, req)
        except (ClientError, BotoCoreError) as err:
            raise CliError(_explain(err, region)) from None
        _print_offers(req, region, offers)
    return 0


def _print_offers(req: Request, region: str, offers: list[Offering]) -> None:
    unit = f"{req.ultraserver_type} UltraServers" if req.ultraserver_type else req.instance_type
    what = f"{req.count} x {unit} for {req.hours} hours in {region}"
    if not offers:
        print(f"no Capacity Block offerings for {what}; try other --start/--end dates, --hours, --count or --region")
        return
    print(f"Capacity Block offerings for {what}:")
    print(render_table(offers))
    print()
    print(how_to_buy(offers[0], region))


def _explain(err: ClientError | BotoCoreError, region: str) -> str:
    message = abort_message(err, region)
    if message is not None:
        return message
    if isinstance(err, ClientError):
        error = err.response.get("Error", {})
        if error.get("Code") in DENIED_CODES:
            return f"access denied to {iam_action(err)}; allow it for your role (see docs/preflight.md)"
        return f"EC2 refused the request ({error.get('Code')}): {error.get('Message')}"
    return f"AWS call failed: {err}"
