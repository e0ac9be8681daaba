"""Preflight: check an environment file against the real account before deploying it.

``run_checks(env, session)`` asks AWS, with the session's credentials, in the environment's region:

- account: the credentials belong to the file's ``account`` (otherwise nothing else is checked);
- offering: each training cluster's and GPU pool's instance type is offered in its AZ ID, and each
  inference fleet's Neuron and fallback types in the fleet's AZ IDs (DescribeInstanceTypeOfferings);
- quota: the On-Demand vCPU quotas (Service Quotas) cover every pool at its ``max_size``: clusters,
  GPU pools, and fleets at their worst case per quota (all on the largest Neuron type, or all GPU);
- ami: each AMI family's public SSM parameter resolves (once per family, whichever pools boot it);
  each pinned ``ami_id`` exists and fits every pool that boots it;
- capacity: each referenced reservation (ODCR or Capacity Block) exists, matches, is big enough
  and is (or will be) active;
- network: an imported VPC and its subnets exist and sit in the AZ IDs the file names.

Each finding is a :class:`Check` (PASS, WARN or FAIL with a fix). Problems that stop every check
(no credentials, rejected credentials, unreachable region) raise :class:`PreflightAbort` with one
line; a denied permission fails only the checks that need it and names the IAM action.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

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
from neuronkit.account.check import Check, Status  # re-exported: callers import them from here
from neuronkit.catalog import quotas
from neuronkit.config import (
    Ami,
    CapacityBlock,
    Environment,
    InferenceFleet,
    Odcr,
    TrainingCluster,
    ami_family,
    gpu_ami_family,
)
from neuronkit.config.training import _sold_outside_offerings
from neuronkit.reports.pools import gpu_pool_name, pools_from_environment

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
    "DescribeRouteTables": "ec2:DescribeRouteTables",
    "DescribeVpcEndpoints": "ec2:DescribeVpcEndpoints",
    "DescribeNatGateways": "ec2:DescribeNatGateways",
    "DescribeVpcAttribute": "ec2:DescribeVpcAttribute",
    "DescribeCluster": "eks:DescribeCluster",
    "ListAddons": "eks:ListAddons",
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
    from neuronkit import clock

    when = now or clock.utc_now()
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
    if env.platform == "eks":
        from neuronkit.kubernetes.preflight import check_eks_addons, check_existing_cluster

        groups.append(("eks", lambda: check_eks_addons(env, client("eks"))))
        groups.append(("eks cluster", lambda: check_existing_cluster(env, client("eks"))))
        from neuronkit.kubernetes.cluster_api import check_cluster_api

        groups.append(("eks kubernetes api", lambda: check_cluster_api(env, session)))
        from neuronkit.account.reachability import check_handler_network

        groups.append(("eks network", lambda: check_handler_network(env, ec2, client("eks"))))
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


def _env_types(env: Environment) -> list[str]:
    """Every instance type the environment launches: clusters, GPU pools, fleets' Neuron and fallback types."""
    types = [c.instance_type for c in env.training]
    types += [c.gpu_pool.instance_type for c in env.training if c.gpu_pool is not None]
    types += [t for f in env.inference for t in (*f.neuron_types, *f.fallback_types)]
    return types


def check_offerings(env: Environment, ec2: Client) -> list[Check]:
    offered = offered_az_ids(ec2, _env_types(env))
    checks = []
    for i, c in enumerate(env.training):
        check = _offering_in(env, c.name, c.instance_type, c.az_id, offered, f"training[{i}].az_id")
        if check.status == "FAIL" and _sold_outside_offerings(c):
            # One offering rule (neuronkit.config): a Capacity Block or UltraServer pool is sold apart from the
            # on-demand offerings; its reservation is checked for real by the capacity check (type, AZ ID, size, window).
            how = "its Capacity Block" if isinstance(c.capacity, CapacityBlock) else f"{c.ultraserver} UltraServers"
            check = Check(
                "WARN",
                check.name,
                f"{c.instance_type} is not in {env.region}'s on-demand offerings for {c.az_id}; the cluster runs on {how}, "
                "which the capacity checks verify in the account",
            )
        checks.append(check)
        gpu = c.gpu_pool
        if gpu is not None:
            az_id = gpu.az_id or c.az_id
            checks.append(
                _offering_in(env, gpu_pool_name(c.name), gpu.instance_type, az_id, offered, f"training[{i}].gpu_pool.az_id")
            )
    for i, f in enumerate(env.inference):
        checks.extend(_fleet_offerings(env, i, f, offered))
    return checks


def _offering_in(env: Environment, pool: str, instance_type: str, az_id: str, offered: dict[str, set[str]], key: str) -> Check:
    """A pool of one instance type in one AZ ID (a training cluster or its GPU pool)."""
    where = sorted(offered.get(instance_type, ()))
    name = f"offering {pool}"
    if az_id in where:
        return Check("PASS", name, f"{instance_type} is offered in {az_id} ({env.region} offers it in {', '.join(where)})")
    if where:
        return Check(
            "FAIL",
            name,
            f"{instance_type} is not offered in {az_id}; AZ IDs of {env.region} that offer it: {', '.join(where)}",
            f"set {key} (and network.az_ids) to one of {', '.join(where)}",
        )
    return Check(
        "FAIL",
        name,
        f"{instance_type} is not offered in any AZ of {env.region}",
        "use another region or instance type (see `neuronkit catalog show`)",
    )


def _fleet_offerings(env: Environment, i: int, f: InferenceFleet, offered: dict[str, set[str]]) -> list[Check]:
    """One line per type of an inference fleet, across all of its AZ IDs, and one per AZ ID where none launches.

    The group launches, in each AZ ID, the types offered there (Neuron types first, then the GPU
    fallback types). A Neuron type offered in none of the fleet's AZ IDs is a FAIL; a type missing
    from some AZ IDs (or a fallback type missing from all) is a WARN, since the group still launches
    its other types; an AZ ID that offers none of the fleet's types is a FAIL: nothing launches there.
    """
    loc = f"inference[{i}]"
    fleet_azs = ", ".join(f.az_ids)
    every = [*f.neuron_types, *f.fallback_types]
    launchable = {a: [t for t in every if a in offered.get(t, set())] for a in f.az_ids}
    checks: list[Check] = []
    for key, listed in (("neuron_types", f.neuron_types), ("fallback_types", f.fallback_types)):
        neuron = key == "neuron_types"
        kind = "Neuron type" if neuron else "GPU fallback type"
        for j, t in enumerate(listed):
            where = offered.get(t, set())
            present = [a for a in f.az_ids if a in where]
            missing = [a for a in f.az_ids if a not in where]
            name = f"offering {f.name}: {t}"
            elsewhere = sorted(where - set(f.az_ids))
            region_has = f"{env.region} offers it in {', '.join(sorted(where))}" if where else f"no AZ of {env.region} offers it"
            if not missing:
                checks.append(Check("PASS", name, f"{t} ({kind}) is offered in every AZ ID of the fleet ({fleet_azs})"))
            elif not present:
                detail = f"{t} ({kind}) is offered in none of the fleet's AZ IDs ({fleet_azs}); {region_has}"
                move = f"set {loc}.az_ids (and network.az_ids) to AZ IDs among {', '.join(elsewhere)}" if elsewhere else ""
                if neuron:
                    replace = f"replace {loc}.{key}[{j}] with a type offered in {fleet_azs} (see `neuronkit catalog show`)"
                    checks.append(Check("FAIL", name, detail, f"{replace}, or {move}" if move else replace))
                else:
                    replace = f"replace {loc}.{key}[{j}] with a GPU type offered in {fleet_azs}, or remove it"
                    checks.append(
                        Check("WARN", name, f"{detail}: the group never launches it, only the fleet's other types", replace)
                    )
            else:
                bare = [a for a in missing if not launchable[a]]
                then = (
                    f"{', '.join(bare)} {'offers' if len(bare) == 1 else 'offer'} no other type of the fleet either"
                    if bare
                    else "the group launches the fleet's other types there"
                )
                detail = f"{t} ({kind}) is offered in {', '.join(present)} but not in {', '.join(missing)}; {then}"
                fix = (
                    f"to launch it in every AZ ID, replace {', '.join(missing)} in {loc}.az_ids (and network.az_ids) "
                    f"with AZ IDs that offer it ({', '.join(elsewhere)})"
                    if elsewhere
                    else f"to launch it in every AZ ID, replace {loc}.{key}[{j}] with a type offered in {fleet_azs}"
                )
                checks.append(Check("WARN", name, detail, fix))
    if any(launchable.values()):  # otherwise the type lines above already say that nothing launches
        for az in f.az_ids:
            if not launchable[az]:
                offer_any = sorted({a for t in every for a in offered.get(t, set())} - set(f.az_ids))
                hint = f" ({env.region} offers one of them in {', '.join(offer_any)})" if offer_any else ""
                checks.append(
                    Check(
                        "FAIL",
                        f"offering {f.name}: {az}",
                        f"{az} offers none of the fleet's types ({', '.join(every)}): the group cannot launch there",
                        f"replace {az} in {loc}.az_ids (and network.az_ids) with an AZ ID that offers one of them{hint}",
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


@dataclass(frozen=True)
class VcpuNeed:
    """What one pool needs of one vCPU quota at its max_size."""

    pool: str
    vcpus: int
    text: str  # e.g. "serve: 4 x g6e.12xlarge = 192 if all GPU", "serve: 4 x inf2.48xlarge (largest of its 2 Neuron types) = 768"
    all_gpu: bool = False  # an inference fleet counted on its fallback types


def _by_quota(instance_types: Iterable[str]) -> tuple[dict[str, list[str]], list[str]]:
    """The types grouped by the On-Demand vCPU quota that counts them, and the types no quota maps."""
    by_code: dict[str, list[str]] = {}
    missing = []
    for t in instance_types:
        quota = quotas.quota_for_family(catalog.get(t).family)
        if quota is None:
            missing.append(t)
        else:
            by_code.setdefault(quota.code, []).append(t)
    return by_code, missing


def vcpu_needs(env: Environment) -> tuple[dict[str, list[VcpuNeed]], list[tuple[str, list[str]]]]:
    """vCPUs each pool needs at max_size, grouped by quota code; and the types no quota maps, per pool.

    A pool of one type (a training cluster, a GPU pool) needs max_size x its vCPUs. An inference fleet
    can end up on any of its types, so for each quota it needs max_size x the largest vCPU count among
    its types that quota counts: its Neuron types against Inf (or Trn), its fallback types against G or
    P (all GPU, when Neuron capacity is short). A fleet with compile groups (``model`` and ``precompile``)
    also needs one node of each Neuron type at once, while a rollout compiles new keys.
    """
    needs: dict[str, list[VcpuNeed]] = {}
    unmapped: list[tuple[str, list[str]]] = []
    for p in pools_from_environment(env):
        by_code, missing = _by_quota(p.instance_types)
        if missing:
            unmapped.append((p.pool, missing))
        for code, types in by_code.items():
            largest = max(types, key=lambda t: catalog.get(t).vcpus)  # the first of equals, in priority order
            vcpus = p.max_size * catalog.get(largest).vcpus
            all_gpu = p.role == "inference" and largest in p.fallback_types
            which = "fallback" if all_gpu else "Neuron"
            of = f" (largest of its {len(types)} {which} types)" if len(types) > 1 else ""
            text = f"{p.pool}: {p.max_size} x {largest}{of} = {vcpus}" + (" if all GPU" if all_gpu else "")
            needs.setdefault(code, []).append(VcpuNeed(p.pool, vcpus, text, all_gpu))
        # A rollout that changes a key runs one compile node per Neuron type while the fleet still runs.
        for code, types in _by_quota(p.compile_types)[0].items():
            vcpus = sum(catalog.get(t).vcpus for t in types)
            text = f"{p.pool} compile groups: {' + '.join(f'1 x {t}' for t in types)} = {vcpus} (during a rollout with new keys)"
            needs.setdefault(code, []).append(VcpuNeed(f"{p.pool} compile", vcpus, text))
    return needs, unmapped


def check_quotas(env: Environment, sq: Client) -> list[Check]:
    needs, unmapped = vcpu_needs(env)
    checks = [
        Check(
            "WARN",
            f"quota {pool}",
            f"no On-Demand vCPU quota is mapped for {', '.join(types)}",
            "add its family to neuronkit/catalog/quotas.yaml",
        )
        for pool, types in unmapped
    ]
    for code, parts in needs.items():
        quota = quotas.vcpu_quotas()[code]
        need = sum(p.vcpus for p in parts)
        have = quota_value(sq, code)
        sums = ", ".join(p.text for p in parts)
        source = "" if have.applied else " (AWS default; no applied value)"
        detail = f"{quota.name} ({code}) is {have.value:g} vCPUs{source}; max sizes need {need} ({sums})"
        fleets = [p.pool for p in parts if p.all_gpu]
        if fleets:
            detail += (
                f"; {', '.join(fleets)} counted all GPU at max_size on the largest fallback type, "
                "as a fleet can end up all GPU when Neuron capacity is short"
            )
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
@dataclass(frozen=True)
class AmiUse:
    """One pool booting an AMI: the pool, the file's key of its AMI (relative to the pool), its types."""

    pool: str
    key: str  # ami, gpu_pool.ami, neuron_ami or gpu_ami
    instance_types: tuple[str, ...]
    root_device_name: str | None


def _fleet_family(ami: Ami, kind: str) -> str | None:
    """A fleet's AMI family (given, or the catalog default of ``kind``); None when pinned."""
    if ami.ami_id:
        return None
    return ami.family or catalog.default_ami_family(kind)


def ami_uses(env: Environment) -> list[tuple[str | None, str | None, AmiUse]]:
    """Every AMI the environment boots, as (family, pinned ami_id, use); one of the first two is None.

    Training clusters and GPU pools on ``scheduler: batch`` boot the ECS-optimized AMIs; fleets boot
    ``neuron_ami`` on their Neuron types and ``gpu_ami`` on their fallback types (only if they have some).
    """
    out: list[tuple[str | None, str | None, AmiUse]] = []
    for c in env.training:
        out.append((ami_family(c), c.ami.ami_id, AmiUse(c.name, "ami", (c.instance_type,), c.ami.root_device_name)))
        gpu = c.gpu_pool
        if gpu is not None:
            use = AmiUse(gpu_pool_name(c.name), "gpu_pool.ami", (gpu.instance_type,), gpu.ami.root_device_name)
            out.append((gpu_ami_family(c), gpu.ami.ami_id, use))
    for f in env.inference:
        use = AmiUse(f.name, "neuron_ami", tuple(f.neuron_types), f.neuron_ami.root_device_name)
        out.append((_fleet_family(f.neuron_ami, "neuron"), f.neuron_ami.ami_id, use))
        if f.fallback_types:
            use = AmiUse(f.name, "gpu_ami", tuple(f.fallback_types), f.gpu_ami.root_device_name)
            out.append((_fleet_family(f.gpu_ami, "gpu"), f.gpu_ami.ami_id, use))
    return out


def check_amis(env: Environment, ssm: Client, ec2: Client) -> list[Check]:
    families: dict[str, list[AmiUse]] = {}
    pinned: dict[str, list[AmiUse]] = {}
    for family, ami_id, use in ami_uses(env):
        if family is not None:
            families.setdefault(family, []).append(use)
        elif ami_id is not None:
            pinned.setdefault(ami_id, []).append(use)
    checks = [_check_family(env.region, ssm, fam, users) for fam, users in families.items()]
    checks += [_check_pinned(env.region, ec2, ami_id, users) for ami_id, users in pinned.items()]
    return checks


def _users(uses: list[AmiUse]) -> str:
    return ", ".join(dict.fromkeys(u.pool for u in uses))


def _keys(uses: list[AmiUse]) -> list[str]:
    return list(dict.fromkeys(u.key for u in uses))


def _check_family(region: str, ssm: Client, family: str, users: list[AmiUse]) -> Check:
    parameter = catalog.ami_families()[family].ssm_parameter
    name = f"ami {family}"
    try:
        value = ssm.get_parameter(Name=parameter)["Parameter"]["Value"]
    except ClientError as err:
        if err.response.get("Error", {}).get("Code") != "ParameterNotFound":
            raise
        keys = _keys(users)
        fix = (
            f"choose another {keys[0]}.family from neuronkit/catalog/amis.yaml, or pin {keys[0]}.ami_id"
            if len(keys) == 1
            else f"choose another family from neuronkit/catalog/amis.yaml for {', '.join(k + '.family' for k in keys)}, "
            "or pin an ami_id"
        )
        return Check("FAIL", name, f"{parameter} does not exist in {region} (used by {_users(users)})", fix)
    return Check("PASS", name, f"{parameter} resolves to {value} in {region}")


def _check_pinned(region: str, ec2: Client, ami_id: str, users: list[AmiUse]) -> Check:
    name = f"ami {ami_id}"
    try:
        images = ec2.describe_images(ImageIds=[ami_id])["Images"]
    except ClientError as err:
        if not err.response.get("Error", {}).get("Code", "").startswith("InvalidAMIID"):
            raise
        images = []
    if not images:
        keys = " or ".join(f"{k}.family" for k in _keys(users))
        return Check(
            "FAIL",
            name,
            f"{ami_id} does not exist in {region} or is not shared with this account (used by {_users(users)})",
            f"AMI ids are per region: copy the image to {region} (aws ec2 copy-image) and pin the new id, or use {keys}",
        )
    image = images[0]
    problems: list[tuple[str, str]] = []
    if image.get("State") != "available":
        problems.append((f"its state is {image.get('State')}", "wait until it is available or pin another AMI"))
    for u in users:
        for t in u.instance_types:
            arch = catalog.get(t).architecture
            if image.get("Architecture") and image["Architecture"] != arch:
                problems.append((f"it is {image.get('Architecture')}, {t} needs {arch}", f"pin an {arch} AMI"))
        if u.root_device_name and image.get("RootDeviceName") and image["RootDeviceName"] != u.root_device_name:
            problems.append(
                (
                    f"its root device is {image.get('RootDeviceName')}, not {u.root_device_name} ({u.pool})",
                    f"set {u.key}.root_device_name: {image.get('RootDeviceName')}",
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
        elif isinstance(cap, CapacityBlock) and len(cap.reservations) > 1:
            checks.extend(_check_ultraserver_blocks(env, f"training[{i}]", c, cap, ec2, now))
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


def _check_ultraserver_blocks(
    env: Environment, loc: str, c: TrainingCluster, cap: CapacityBlock, ec2: Client, now: dt.datetime
) -> list[Check]:
    """UltraServer blocks: each UltraServer is its own reservation. Each must exist, match and be in its window;
    together they must hold max_size instances."""
    checks: list[Check] = []
    total = 0
    for rid in cap.reservations:
        res = _describe_reservation(ec2, rid)
        if res is None:
            checks.append(
                Check(
                    "FAIL",
                    f"capacity {c.name} {rid}",
                    f"Capacity Block {rid} does not exist in account {env.account}, {env.region}",
                    f"check {loc}.capacity.reservation_ids (reservations are per account and region)",
                )
            )
            continue
        total += int(res.get("TotalInstanceCount", 0))
        checks += [
            dataclasses.replace(check, name=check.name.replace(f"capacity {c.name}:", f"capacity {c.name} {rid}:"))
            for check in (_reservation_match(loc, c, cap, res), _reservation_window(loc, c, cap, res, now))
        ]
    if all(ch.status != "FAIL" for ch in checks):
        ok = total >= c.max_size
        checks.append(
            Check(
                "PASS" if ok else "FAIL",
                f"capacity {c.name}: size",
                f"{len(cap.reservations)} UltraServer blocks hold {total} instances for max_size {c.max_size}",
                "" if ok else f"lower {loc}.max_size to {total} or add the other UltraServers' reservations",
            )
        )
    return checks


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
    if vpcs:
        from neuronkit.account.reachability import check_alb_cidr

        checks += check_alb_cidr(env, vpcs[0])
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
