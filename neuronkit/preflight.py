"""Preflight: check an environment file against the real account before deploying it.

``run_checks(env, session)`` asks AWS, with the session's credentials, in the environment's region:

- account: the credentials belong to the file's ``account`` (otherwise nothing else is checked);
- offering: each cluster's instance type is offered in its AZ ID (DescribeInstanceTypeOfferings);
- quota: the On-Demand vCPU quotas (Service Quotas) cover every cluster at its ``max_size``;
- ami: each AMI family's public SSM parameter resolves; each pinned ``ami_id`` exists and fits;
- capacity: each referenced reservation (ODCR or Capacity Block) exists, matches, is big enough
  and is (or will be) active;
- network: an imported VPC and its subnets exist and sit in the AZ IDs the file names.

Each finding is a :class:`Check` (PASS, WARN or FAIL with a fix). Problems that stop every check
(no credentials, rejected credentials, unreachable region) raise :class:`PreflightAbort` with one
line; a denied permission fails only the checks that need it and names the IAM action.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

import boto3
from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConnectionError,
    CredentialRetrievalError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ProfileNotFound,
    SSOError,
    TokenRetrievalError,
)

from neuronkit import catalog
from neuronkit.catalog import quotas
from neuronkit.config import CapacityBlock, Environment, Odcr, TrainingCluster, ami_family

Status = Literal["PASS", "WARN", "FAIL"]
Client = Any  # boto3 clients are generated at run time and untyped here

QUOTA_WARN_RATIO = 0.8  # warn when the clusters' max sizes need more than this share of a quota

# The IAM action behind each AWS call preflight and `capacity offerings` make (docs/preflight.md).
IAM_ACTIONS = {
    "GetCallerIdentity": "sts:GetCallerIdentity",
    "DescribeInstanceTypeOfferings": "ec2:DescribeInstanceTypeOfferings",
    "GetServiceQuota": "servicequotas:GetServiceQuota",
    "GetAWSDefaultServiceQuota": "servicequotas:GetAWSDefaultServiceQuota",
    "GetParameter": "ssm:GetParameter",
    "DescribeImages": "ec2:DescribeImages",
    "DescribeCapacityReservations": "ec2:DescribeCapacityReservations",
    "DescribeVpcs": "ec2:DescribeVpcs",
    "DescribeSubnets": "ec2:DescribeSubnets",
    "DescribeAvailabilityZones": "ec2:DescribeAvailabilityZones",
    "DescribeCapacityBlockOfferings": "ec2:DescribeCapacityBlockOfferings",
}

DENIED_CODES = frozenset({"AccessDenied", "AccessDeniedException", "UnauthorizedOperation", "UnauthorizedAccess"})
CREDENTIAL_CODES = frozenset(
    {
        "AuthFailure",
        "ExpiredToken",
        "ExpiredTokenException",
        "InvalidClientTokenId",
        "InvalidAccessKeyId",
        "RequestExpired",
        "SignatureDoesNotMatch",
        "UnrecognizedClientException",
    }
)
# Reservation states in which instances can no longer launch, and states before a reservation starts.
ENDED_STATES = frozenset({"expired", "cancelled", "cancelling", "failed", "payment-failed", "unsupported", "unavailable"})
WAITING_STATES = frozenset({"scheduled", "pending", "payment-pending", "assessing", "delayed"})

_RANK = {"PASS": 0, "WARN": 1, "FAIL": 2}


@dataclass(frozen=True)
class Check:
    """One line of the preflight report."""

    status: Status
    name: str
    detail: str
    fix: str = ""


class PreflightAbort(Exception):
    """AWS cannot be asked at all (no or rejected credentials, unreachable region); one line."""


# --------------------------------------------------------------------------------------------
# sessions and errors (shared with `neuronkit capacity offerings`)
# --------------------------------------------------------------------------------------------
def aws_session(profile: str | None = None) -> boto3.session.Session:
    """A boto3 session on the default credential chain (or a named profile)."""
    try:
        return boto3.session.Session(profile_name=profile)
    except ProfileNotFound:
        raise PreflightAbort(f"AWS profile '{profile}' is not in your AWS config; run `aws configure list-profiles`") from None


def client_config() -> Config:
    return Config(retries={"max_attempts": 3, "mode": "standard"}, connect_timeout=10, read_timeout=30)


def abort_message(err: Exception, region: str) -> str | None:
    """A one-line message if ``err`` stops every AWS call (credentials, region, network), else None."""
    if isinstance(err, NoCredentialsError):
        return "no AWS credentials found: run `aws configure` or `aws sso login`, or set AWS_PROFILE (or pass --profile)"
    if isinstance(err, PartialCredentialsError):
        return f"incomplete AWS credentials ({err}); set both the access key id and the secret, or use a profile"
    if isinstance(err, SSOError | TokenRetrievalError | CredentialRetrievalError):
        return f"your AWS credentials could not be loaded ({err}); run `aws sso login` or refresh them"
    if isinstance(err, NoRegionError):
        return "no AWS region: set region: in the environment file (or pass --region / set AWS_REGION)"
    if isinstance(err, ConnectionError):
        return f"cannot reach AWS in region '{region}' ({err}); check that the region exists and is enabled, and your network"
    if isinstance(err, ClientError):
        code = err.response.get("Error", {}).get("Code", "")
        if code in CREDENTIAL_CODES:
            return f"AWS rejected your credentials ({code}): they are expired or invalid; refresh them (e.g. `aws sso login`)"
        if code == "OptInRequired":
            return f"region '{region}' is not enabled for this account; enable it in the account settings or use another region"
    return None


def iam_action(err: ClientError) -> str:
    op = err.operation_name
    return IAM_ACTIONS.get(op, op)


def _guard(name: str, region: str, run: Callable[[], list[Check]]) -> list[Check]:
    """Run one group of checks; turn an AWS error into a FAIL line, or abort if no call can work."""
    try:
        return run()
    except (ClientError, BotoCoreError) as err:
        message = abort_message(err, region)
        if message is not None:
            raise PreflightAbort(message) from None
        if not isinstance(err, ClientError):
            raise PreflightAbort(f"AWS call failed: {err}") from None
        error = err.response.get("Error", {})
        code, text = error.get("Code", ""), error.get("Message", "")
        if code in DENIED_CODES:
            return [
                Check(
                    "FAIL",
                    name,
                    f"access denied to {iam_action(err)}",
                    f"allow {iam_action(err)} for your role (see docs/preflight.md)",
                )
            ]
        return [Check("FAIL", name, f"{iam_action(err)} failed: {code}: {text}", "")]


# --------------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------------
def run_checks(env: Environment, session: boto3.session.Session, *, now: dt.datetime | None = None) -> list[Check]:
    """Check ``env`` against the account of ``session`` in ``env.region``; see the module docstring."""
    when = now or dt.datetime.now(dt.UTC)
    cfg = client_config()

    def client(service: str) -> Client:
        return session.client(service, region_name=env.region, config=cfg)

    ec2 = client("ec2")
    checks = _guard("account", env.region, lambda: check_account(env, client("sts")))
    if any(c.status == "FAIL" for c in checks):
        return checks  # every other answer would describe another account
    groups: list[tuple[str, Callable[[], list[Check]]]] = [
        ("offering", lambda: check_offerings(env, ec2)),
        ("quota", lambda: check_quotas(env, client("service-quotas"))),
        ("ami", lambda: check_amis(env, client("ssm"), ec2)),
        ("capacity", lambda: check_capacity(env, ec2, now=when)),
        ("network", lambda: check_network(env, ec2)),
    ]
    for name, run in groups:
        checks.extend(_guard(name, env.region, run))
    return checks


def worst(checks: Iterable[Check]) -> Status:
    status: Status = "PASS"
    for c in checks:
        if _RANK[c.status] > _RANK[status]:
            status = c.status
    return status


# --------------------------------------------------------------------------------------------
# account
# --------------------------------------------------------------------------------------------
def check_account(env: Environment, sts: Client) -> list[Check]:
    ident = sts.get_caller_identity()
    if ident["Account"] != env.account:
        return [
            Check(
                "FAIL",
                "account",
                f"your credentials are for account {ident['Account']} ({ident['Arn']}), the file is for {env.account}; "
                "other checks skipped",
                f"use credentials for {env.account} (AWS_PROFILE or --profile), or correct account: in the file",
            )
        ]
    return [Check("PASS", "account", f"credentials for {ident['Arn']}")]


# --------------------------------------------------------------------------------------------
# offerings
# --------------------------------------------------------------------------------------------
def offered_az_ids(ec2: Client, instance_types: Iterable[str]) -> dict[str, set[str]]:
    """AZ IDs of the client's region that offer each instance type."""
    types = sorted(set(instance_types))
    out: dict[str, set[str]] = {t: set() for t in types}
    if not types:
        return out
    pages = ec2.get_paginator("describe_instance_type_offerings").paginate(
        LocationType="availability-zone-id", Filters=[{"Name": "instance-type", "Values": types}]
    )
    for page in pages:
        for o in page["InstanceTypeOfferings"]:
            out.setdefault(o["InstanceType"], set()).add(o["Location"])
    return out


def check_offerings(env: Environment, ec2: Client) -> list[Check]:
    offered = offered_az_ids(ec2, (c.instance_type for c in env.training))
    checks = []
    for i, c in enumerate(env.training):
        where = sorted(offered.get(c.instance_type, ()))
        name = f"offering {c.name}"
        if c.az_id in where:
            checks.append(
                Check("PASS", name, f"{c.instance_type} is offered in {c.az_id} ({env.region} offers it in {', '.join(where)})")
            )
        elif where:
            checks.append(
                Check(
                    "FAIL",
                    name,
                    f"{c.instance_type} is not offered in {c.az_id}; AZ IDs of {env.region} that offer it: {', '.join(where)}",
                    f"set training[{i}].az_id (and network.az_ids) to one of {', '.join(where)}",
                )
            )
        else:
            checks.append(
                Check(
                    "FAIL",
                    name,
                    f"{c.instance_type} is not offered in any AZ of {env.region}",
                    "use another region or instance type (see `neuronkit catalog show`)",
                )
            )
    return checks


# --------------------------------------------------------------------------------------------
# quotas
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class QuotaValue:
    value: float
    applied: bool  # False: only the AWS default is known


def quota_value(sq: Client, code: str) -> QuotaValue:
    """The applied value of an EC2 quota, or its AWS default when no applied value exists."""
    try:
        return QuotaValue(float(sq.get_service_quota(ServiceCode=quotas.service_code(), QuotaCode=code)["Quota"]["Value"]), True)
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") != "NoSuchResourceException":
            raise
    default = sq.get_aws_default_service_quota(ServiceCode=quotas.service_code(), QuotaCode=code)
    return QuotaValue(float(default["Quota"]["Value"]), False)


def vcpu_needs(clusters: Iterable[TrainingCluster]) -> tuple[dict[str, list[tuple[TrainingCluster, int]]], list[TrainingCluster]]:
    """vCPUs each cluster needs at max_size, grouped by quota code; and clusters no quota maps."""
    needs: dict[str, list[tuple[TrainingCluster, int]]] = {}
    unmapped = []
    for c in clusters:
        it = catalog.get(c.instance_type)
        quota = quotas.quota_for_family(it.family)
        if quota is None:
            unmapped.append(c)
            continue
        needs.setdefault(quota.code, []).append((c, c.max_size * it.vcpus))
    return needs, unmapped


def check_quotas(env: Environment, sq: Client) -> list[Check]:
    needs, unmapped = vcpu_needs(env.training)
    checks = [
        Check(
            "WARN",
            f"quota {c.name}",
            f"no On-Demand vCPU quota is mapped for {c.instance_type}",
            "add its family to neuronkit/catalog/quotas.yaml",
        )
        for c in unmapped
    ]
    for code, parts in needs.items():
        quota = quotas.vcpu_quotas()[code]
        need = sum(v for _, v in parts)
        have = quota_value(sq, code)
        sums = ", ".join(f"{c.name}: {c.max_size} x {c.instance_type} = {v}" for c, v in parts)
        source = "" if have.applied else " (AWS default; no applied value)"
        detail = f"{quota.name} ({code}) is {have.value:g} vCPUs{source}; max sizes need {need} ({sums})"
        name = f"quota {code}"
        raise_to = (
            f"aws service-quotas request-service-quota-increase --region {env.region}"
            f" --service-code {quotas.service_code()} --quota-code {code} --desired-value {need}"
        )
        if need > have.value:
            checks.append(Check("FAIL", name, detail, f"request at least {need} vCPUs ({raise_to}) or lower max_size"))
        elif need > QUOTA_WARN_RATIO * have.value:
            share = f"{need / have.value:.0%}"
            checks.append(
                Check(
                    "WARN",
                    name,
                    f"{detail}: {share} of the quota, and running instances of the group count too",
                    f"consider {raise_to}",
                )
            )
        else:
            checks.append(Check("PASS", name, detail))
    return checks


# --------------------------------------------------------------------------------------------
# AMIs
# --------------------------------------------------------------------------------------------
def check_amis(env: Environment, ssm: Client, ec2: Client) -> list[Check]:
    families: dict[str, list[TrainingCluster]] = {}
    pinned: dict[str, list[TrainingCluster]] = {}
    for c in env.training:
        # scheduler: batch clusters boot the ECS-optimized Neuron AMI, the others a Neuron DLAMI.
        family = ami_family(c)
        if family is None:
            pinned.setdefault(str(c.ami.ami_id), []).append(c)
        else:
            families.setdefault(family, []).append(c)
    checks = [_check_family(env.region, ssm, fam, users) for fam, users in families.items()]
    checks += [_check_pinned(env.region, ec2, ami_id, users) for ami_id, users in pinned.items()]
    return checks


def _users(clusters: list[TrainingCluster]) -> str:
    return ", ".join(c.name for c in clusters)


def _check_family(region: str, ssm: Client, family: str, users: list[TrainingCluster]) -> Check:
    parameter = catalog.ami_families()[family].ssm_parameter
    name = f"ami {family}"
    try:
        value = ssm.get_parameter(Name=parameter)["Parameter"]["Value"]
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") != "ParameterNotFound":
            raise
        return Check(
            "FAIL",
            name,
            f"{parameter} does not exist in {region} (used by {_users(users)})",
            "choose another ami.family from neuronkit/catalog/amis.yaml, or pin ami.ami_id",
        )
    return Check("PASS", name, f"{parameter} resolves to {value} in {region}")


def _check_pinned(region: str, ec2: Client, ami_id: str, users: list[TrainingCluster]) -> Check:
    name = f"ami {ami_id}"
    try:
        images = ec2.describe_images(ImageIds=[ami_id])["Images"]
    except ClientError as err:
        if not err.response.get("Error", {}).get("Code", "").startswith("InvalidAMIID"):
            raise
        images = []
    if not images:
        return Check(
            "FAIL",
            name,
            f"{ami_id} does not exist in {region} or is not shared with this account (used by {_users(users)})",
            f"AMI ids are per region: copy the image to {region} (aws ec2 copy-image) and pin the new id, or use ami.family",
        )
    image = images[0]
    problems: list[tuple[str, str]] = []
    if image.get("State") != "available":
        problems.append((f"its state is {image.get('State')}", "wait until it is available or pin another AMI"))
    for c in users:
        arch = catalog.get(c.instance_type).architecture
        if image.get("Architecture") and image["Architecture"] != arch:
            problems.append((f"it is {image.get('Architecture')}, {c.instance_type} needs {arch}", f"pin an {arch} AMI"))
        if c.ami.root_device_name and image.get("RootDeviceName") and image["RootDeviceName"] != c.ami.root_device_name:
            problems.append(
                (
                    f"its root device is {image.get('RootDeviceName')}, not {c.ami.root_device_name} ({c.name})",
                    f"set ami.root_device_name: {image.get('RootDeviceName')}",
                )
            )
    label = f"{ami_id} ({image.get('Name', 'no name')})"
    if problems:
        return Check(
            "FAIL", name, f"{label}: " + "; ".join(sorted({p for p, _ in problems})), "; ".join(sorted({f for _, f in problems}))
        )
    return Check("PASS", name, f"{label} is available, {image.get('Architecture')}, root device {image.get('RootDeviceName')}")


# --------------------------------------------------------------------------------------------
# capacity reservations
# --------------------------------------------------------------------------------------------
def _utc(value: dt.datetime) -> dt.datetime:
    """Environment files may give times without an offset; they mean UTC."""
    return value.astimezone(dt.UTC) if value.tzinfo else value.replace(tzinfo=dt.UTC)


def _ts(value: dt.datetime) -> str:
    return _utc(value).strftime("%Y-%m-%d %H:%M UTC")


def check_capacity(env: Environment, ec2: Client, *, now: dt.datetime) -> list[Check]:
    checks: list[Check] = []
    for i, c in enumerate(env.training):
        cap = c.capacity
        if isinstance(cap, Odcr) and cap.create:
            until = f"until {_ts(cap.end_date)}" if cap.end_date else "until the stack deletes it"
            checks.append(
                Check(
                    "PASS",
                    f"capacity {c.name}",
                    f"the stack creates an On-Demand Capacity Reservation for {cap.instance_count} x {c.instance_type} "
                    f"in {c.az_id}; it bills from creation, used or not, {until}",
                )
            )
        elif isinstance(cap, Odcr | CapacityBlock) and cap.reservation_id:
            checks.extend(_check_reservation(env, f"training[{i}]", c, cap, ec2, now))
    return checks


def _describe_reservation(ec2: Client, reservation_id: str) -> dict[str, Any] | None:
    try:
        found = ec2.describe_capacity_reservations(CapacityReservationIds=[reservation_id])["CapacityReservations"]
    except ClientError as err:
        if not err.response.get("Error", {}).get("Code", "").startswith("InvalidCapacityReservationId"):
            raise
        return None
    return found[0] if found else None


def _check_reservation(
    env: Environment, loc: str, c: TrainingCluster, cap: Odcr | CapacityBlock, ec2: Client, now: dt.datetime
) -> list[Check]:
    rid = cap.reservation_id
    assert rid is not None
    kind = "Capacity Block" if isinstance(cap, CapacityBlock) else "On-Demand Capacity Reservation"
    res = _describe_reservation(ec2, rid)
    if res is None:
        return [
            Check(
                "FAIL",
                f"capacity {c.name}",
                f"{kind} {rid} does not exist in account {env.account}, {env.region}",
                f"check {loc}.capacity.reservation_id (reservations are per account and region)",
            )
        ]
    return [
        _reservation_match(loc, c, cap, res),
        _reservation_size(loc, c, cap, res),
        _reservation_window(loc, c, cap, res, now),
    ]


def _combine(name: str, findings: list[tuple[Status, str, str]]) -> Check:
    status = worst(Check(s, name, d, f) for s, d, f in findings)
    detail = "; ".join(d for _, d, _ in findings)
    fix = "; ".join(f for s, _, f in findings if s != "PASS" and f)
    return Check(status, name, detail, fix)


def _reservation_match(loc: str, c: TrainingCluster, cap: Odcr | CapacityBlock, res: dict[str, Any]) -> Check:
    rid = res["CapacityReservationId"]
    findings: list[tuple[Status, str, str]] = []
    is_block = res.get("ReservationType") == "capacity-block"
    if isinstance(cap, CapacityBlock) and not is_block:
        findings.append(
            ("FAIL", f"{rid} is an On-Demand Capacity Reservation, not a Capacity Block", f"set {loc}.capacity.type: odcr")
        )
    if isinstance(cap, Odcr) and is_block:
        findings.append(
            (
                "FAIL",
                f"{rid} is a Capacity Block, not an On-Demand Capacity Reservation",
                f"set {loc}.capacity.type: capacity-block",
            )
        )
    if res["InstanceType"] != c.instance_type:
        findings.append(
            (
                "FAIL",
                f"{rid} holds {res['InstanceType']}, the cluster runs {c.instance_type}",
                f"set {loc}.instance_type: {res['InstanceType']} or reference another reservation",
            )
        )
    if res.get("AvailabilityZoneId") != c.az_id:
        findings.append(
            (
                "FAIL",
                f"{rid} is in {res.get('AvailabilityZoneId')} ({res.get('AvailabilityZone')}), the cluster in {c.az_id}",
                f"set {loc}.az_id to {res.get('AvailabilityZoneId')} (and add it to network.az_ids)",
            )
        )
    platform = res.get("InstancePlatform", "")
    if platform and platform != "Linux/UNIX":
        findings.append(
            ("FAIL", f"{rid} reserves {platform}, the cluster boots Linux/UNIX AMIs", "reference a Linux/UNIX reservation")
        )
    if not findings:
        group = res.get("PlacementGroupArn")
        where = f", placement group {group.rsplit('/', 1)[-1]}" if group else ""
        findings.append(("PASS", f"{rid} holds {c.instance_type} in {c.az_id}{where}", ""))
    return _combine(f"capacity {c.name}: match", findings)


def _reservation_size(loc: str, c: TrainingCluster, cap: Odcr | CapacityBlock, res: dict[str, Any]) -> Check:
    total = int(res.get("TotalInstanceCount", 0))
    available = int(res.get("AvailableInstanceCount", 0))
    findings: list[tuple[Status, str, str]] = []
    if total < c.max_size:
        findings.append(
            (
                "FAIL",
                f"holds {total} instances, max_size is {c.max_size}",
                f"lower {loc}.max_size to {total} or reference a larger reservation",
            )
        )
    elif res.get("State") == "active" and available < c.max_size:
        findings.append(
            (
                "WARN",
                f"{available} of {total} instances free, max_size is {c.max_size} (other instances use it)",
                "stop what runs in it, or lower max_size",
            )
        )
    else:
        findings.append(("PASS", f"holds {total} instances ({available} free) for max_size {c.max_size}", ""))
    if cap.instance_count != total:
        findings.append(
            ("WARN", f"the file says instance_count {cap.instance_count}", f"set {loc}.capacity.instance_count: {total}")
        )
    return _combine(f"capacity {c.name}: size", findings)


def _reservation_window(loc: str, c: TrainingCluster, cap: Odcr | CapacityBlock, res: dict[str, Any], now: dt.datetime) -> Check:
    state = res.get("State", "")
    start: dt.datetime | None = res.get("StartDate")
    end: dt.datetime | None = res.get("EndDate")
    ends = f"ends {_ts(end)}" if end else "has no end date"
    if isinstance(cap, CapacityBlock) and end:
        reclaim = catalog.capacity_facts()["capacity_blocks"]["reclaim_minutes_before_end"]
        ends += f" (EC2 reclaims instances {reclaim} minutes before)"
    findings: list[tuple[Status, str, str]] = []
    renew = (
        "buy a new block (neuronkit capacity offerings) and update reservation_id, start and end"
        if isinstance(cap, CapacityBlock)
        else "reference an active reservation, or set create: true"
    )
    if state in ENDED_STATES or (end is not None and end <= now):
        when = f" at {_ts(end)}" if end is not None and end <= now else ""
        findings.append(("FAIL", f"is {state or 'ended'}{when}; instances cannot launch into it", f"{renew} in {loc}.capacity"))
    elif state in WAITING_STATES or (start is not None and start > now):
        begins = f"starts {_ts(start)}" if start else "has not started"
        findings.append(
            (
                "WARN",
                f"is {state}: {begins}, {ends}; instances cannot launch before the start",
                "keep min_size and desired_size at 0 until it starts",
            )
        )
    else:
        since = f" since {_ts(start)}" if start else ""
        findings.append(("PASS", f"is {state}{since}, {ends}", ""))
    if isinstance(cap, CapacityBlock):
        findings.extend(_window_drift(loc, cap, start, end))
    return _combine(f"capacity {c.name}: window", findings)


def _window_drift(
    loc: str, cap: CapacityBlock, start: dt.datetime | None, end: dt.datetime | None
) -> list[tuple[Status, str, str]]:
    out: list[tuple[Status, str, str]] = []
    for key, mine, theirs in (("start", cap.start, start), ("end", cap.end, end)):
        if theirs is None:
            continue
        mine_utc = _utc(mine)
        if abs((mine_utc - theirs).total_seconds()) >= 60:
            out.append(
                (
                    "WARN",
                    f"the file says {key} {_ts(mine_utc)}",
                    f"set {loc}.capacity.{key}: {theirs.astimezone(dt.UTC).isoformat()}",
                )
            )
    return out


# --------------------------------------------------------------------------------------------
# network
# --------------------------------------------------------------------------------------------
def _subnets(ec2: Client, name: str, values: list[str]) -> list[dict[str, Any]]:
    pages = ec2.get_paginator("describe_subnets").paginate(Filters=[{"Name": name, "Values": values}])
    return [s for page in pages for s in page["Subnets"]]


def check_network(env: Environment, ec2: Client) -> list[Check]:
    existing = env.network.existing
    if existing is None:
        return []
    vpcs = ec2.describe_vpcs(Filters=[{"Name": "vpc-id", "Values": [existing.vpc_id]}])["Vpcs"]
    if vpcs:
        checks = [Check("PASS", "network vpc", f"{existing.vpc_id} ({vpcs[0].get('CidrBlock')}) exists in {env.region}")]
    else:
        checks = [
            Check(
                "FAIL",
                "network vpc",
                f"{existing.vpc_id} does not exist in {env.region}",
                "correct network.existing.vpc_id (VPC ids are per region)",
            )
        ]
    found = {s["SubnetId"]: s for s in _subnets(ec2, "subnet-id", sorted(set(existing.subnet_ids.values())))}
    in_vpc = _subnets(ec2, "vpc-id", [existing.vpc_id]) if vpcs else []
    for az_id, subnet_id in existing.subnet_ids.items():
        checks.append(_check_subnet(env, existing.vpc_id, az_id, subnet_id, found.get(subnet_id), in_vpc))
    return checks


def _check_subnet(
    env: Environment, vpc_id: str, az_id: str, subnet_id: str, subnet: dict[str, Any] | None, in_vpc: list[dict[str, Any]]
) -> Check:
    name = f"network subnet {az_id}"
    key = f"network.existing.subnet_ids.{az_id}"
    candidates = sorted(s["SubnetId"] for s in in_vpc if s.get("AvailabilityZoneId") == az_id)
    hint = f" ({vpc_id} has {', '.join(candidates)} there)" if candidates else ""
    if subnet is None:
        return Check(
            "FAIL", name, f"{subnet_id} does not exist in {env.region}", f"set {key} to a subnet of {vpc_id} in {az_id}{hint}"
        )
    if subnet.get("VpcId") != vpc_id:
        return Check(
            "FAIL",
            name,
            f"{subnet_id} belongs to {subnet.get('VpcId')}, not {vpc_id}",
            f"set {key} to a subnet of {vpc_id} in {az_id}{hint}",
        )
    actual = subnet.get("AvailabilityZoneId")
    if actual != az_id:
        return Check(
            "FAIL",
            name,
            f"{subnet_id} is in {actual} ({subnet.get('AvailabilityZone')}), not {az_id}",
            f"set {key} to a subnet in {az_id}{hint}",
        )
    free = subnet.get("AvailableIpAddressCount")
    return Check(
        "PASS", name, f"{subnet_id} ({subnet.get('CidrBlock')}, {free} free IPs) is in {az_id} ({subnet.get('AvailabilityZone')})"
    )
