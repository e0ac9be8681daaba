"""`neuronkit preflight`: every check in its PASS, WARN and FAIL forms, the table and the exit code.

Where the AWS answers come from is said in each test:
- moto (`mock_aws`): STS, instance type offerings (moto carries AWS's recorded offerings), SSM
  parameters, images, VPCs and subnets (moto honours AvailabilityZoneId on CreateSubnet).
- botocore Stubber with AWS-shaped responses: Service Quotas (moto models only `vpc` quotas) and
  DescribeCapacityReservations (moto does not implement it).
"""

from __future__ import annotations

import datetime as dt
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import botocore.session
import pytest
import yaml
from botocore.stub import Stubber
from moto import mock_aws
from moto.core import DEFAULT_ACCOUNT_ID
from moto.ssm.models import ssm_backends

from neuronkit import catalog
from neuronkit.account.preflight import Check, PreflightAbort, check_capacity, check_offerings, run_checks
from neuronkit.catalog import quotas
from neuronkit.cli import main
from neuronkit.cli.preflight import render
from neuronkit.config import Environment, Odcr, parse_environment
from neuronkit.rehearsal import moto_workarounds
from neuronkit.reports.pools import pools_from_environment

REGION = "us-east-1"
ACCOUNT = DEFAULT_ACCOUNT_ID  # the account moto answers for
TRN_QUOTA = "L-2C3B7624"
NOW = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC)
DLAMI = catalog.ami_families()[catalog.default_ami_family("neuron")].ssm_parameter
GPU_DLAMI = catalog.ami_families()[catalog.default_ami_family("gpu")].ssm_parameter
INF_QUOTA, P_QUOTA, G_QUOTA = "L-1945791B", "L-417A185B", "L-DB2E81BA"


# --------------------------------------------------------------------------------------------
# fixtures and helpers
# --------------------------------------------------------------------------------------------
def _clear_aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")


@pytest.fixture
def dummy_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    _clear_aws_env(monkeypatch, tmp_path)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_SESSION_TOKEN", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)


@pytest.fixture(scope="module")
def _moto() -> Iterator[None]:
    """One moto for the module (starting moto's EC2 costs about half a second); tests leave no shared state."""
    with mock_aws():
        yield


@pytest.fixture(scope="module")
def _botocore() -> botocore.session.Session:
    """One botocore session for the module: each new one parses the EC2 service model again (~0.1 s)."""
    return botocore.session.get_session()


@pytest.fixture
def aws(_moto: None, _botocore: botocore.session.Session, dummy_credentials: None) -> Iterator[boto3.session.Session]:
    yield boto3.session.Session(region_name=REGION, botocore_session=_botocore)
    for name in _SEEDED:  # public parameters exist per test
        ssm_backends[ACCOUNT][REGION]._parameters.pop(name, None)
    _SEEDED.clear()


_SEEDED: set[str] = set()


class StubbedSession(boto3.session.Session):
    """moto for every service except the ones given, which are botocore-Stubber clients."""

    def __init__(self, base: boto3.session.Session, stubbed: dict[str, Any]):
        super().__init__(region_name=REGION, botocore_session=base._session)
        self._stubbed = stubbed

    def client(self, service_name: str, *args: Any, **kwargs: Any) -> Any:  # type: ignore[override]
        if service_name in self._stubbed:
            return self._stubbed[service_name]
        return super().client(service_name, *args, **kwargs)


def cluster(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"name": "pretrain", "instance_type": "trn1.32xlarge", "az_id": "use1-az6", "max_size": 4}
    return base | over


def fleet(**over: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "name": "serve",
        "neuron_types": ["inf2.48xlarge"],
        "fallback_types": ["g6e.12xlarge"],
        "az_ids": ["use1-az6", "use1-az4"],
        "max_size": 4,
        "model_s3_prefix": "models/llama/neuron/",
        "serve": {"neuron": "python -m server --neuron", "gpu": "python -m server --cuda"},
    }
    return base | over


def make_env(
    *clusters: dict[str, Any],
    account: str = ACCOUNT,
    network: dict[str, Any] | None = None,
    inference: list[dict[str, Any]] | None = None,
) -> Environment:
    data = {
        "account": account,
        "region": REGION,
        "network": network or {"az_ids": ["use1-az6", "use1-az4"]},
        "training": list(clusters) or [cluster()],
        "inference": inference or [],
    }
    return parse_environment(data, "environments/test.yaml")


def stale_fleet(env: Environment, **update: Any) -> Environment:
    """The environment with its first fleet changed without validation, as a catalog older than AWS would let pass."""
    return env.model_copy(update={"inference": [env.inference[0].model_copy(update=update), *env.inference[1:]]})


def vcpus(instance_type: str, count: int) -> int:
    return catalog.get(instance_type).vcpus * count


def seed_public_parameter(name: str, value: str) -> None:
    """Seed an AWS-owned SSM parameter (moto refuses PutParameter under /aws/); removed after the test."""
    moto_workarounds.seed_public_parameter(ACCOUNT, REGION, name, value)
    _SEEDED.add(name)


def quota_client(*values: float, code: str = TRN_QUOTA) -> tuple[Any, Stubber]:
    """A Service Quotas client (Stubber) answering GetServiceQuota once per value, as AWS does."""
    sq = boto3.client("service-quotas", region_name=REGION)
    stub = Stubber(sq)
    for value in values:
        stub.add_response("get_service_quota", quota_response(code, value), {"ServiceCode": "ec2", "QuotaCode": code})
    stub.activate()
    return sq, stub


def quotas_client(answers: list[tuple[str, float]]) -> tuple[Any, Stubber]:
    """A Service Quotas client (Stubber) answering GetServiceQuota for each (code, value), in that order."""
    sq = boto3.client("service-quotas", region_name=REGION)
    stub = Stubber(sq)
    for code, value in answers:
        stub.add_response("get_service_quota", quota_response(code, value), {"ServiceCode": "ec2", "QuotaCode": code})
    stub.activate()
    return sq, stub


def quota_codes(env: Environment) -> list[str]:
    """The quota codes preflight asks for, in its order: pool by pool (pools.py order), each pool's types in order."""
    codes: dict[str, None] = {}
    for pool in pools_from_environment(env):
        for t in pool.instance_types:
            quota = quotas.quota_for_family(catalog.get(t).family)
            assert quota is not None
            codes.setdefault(quota.code)
    return list(codes)


def quota_response(code: str, value: float) -> dict[str, Any]:
    return {
        "Quota": {
            "ServiceCode": "ec2",
            "ServiceName": "Amazon Elastic Compute Cloud (Amazon EC2)",
            "QuotaArn": f"arn:aws:servicequotas:{REGION}:{ACCOUNT}:ec2/{code}",
            "QuotaCode": code,
            "QuotaName": quotas.vcpu_quotas()[code].name,
            "Value": value,
            "Unit": "None",
            "Adjustable": True,
            "GlobalQuota": False,
            "UsageMetric": {
                "MetricNamespace": "AWS/Usage",
                "MetricName": "ResourceCount",
                "MetricDimensions": {"Class": "Standard/OnDemand", "Resource": "vCPU", "Service": "EC2", "Type": "Resource"},
                "MetricStatisticRecommendation": "Maximum",
            },
        }
    }


def by_name(checks: list[Check]) -> dict[str, Check]:
    names = [c.name for c in checks]
    assert len(names) == len(set(names)), f"duplicate check names: {names}"
    return {c.name: c for c in checks}


def run(
    aws: boto3.session.Session,
    env: Environment,
    quota_values: tuple[float, ...] | None = None,
    *,
    quota: dict[str, float] | None = None,
    clients: dict[str, Any] | None = None,
) -> dict[str, Check]:
    """run_checks with moto plus a Stubber Service Quotas client.

    ``quota_values`` answers the Trn quota; ``quota`` answers each code given (in the order preflight
    asks); without either, every quota the environment needs is answered with plenty of vCPUs.
    ``clients`` replaces the session's client of those services (e.g. an SSM client that counts calls).
    """
    if quota is not None:
        sq, stub = quotas_client(list(quota.items()))
    elif quota_values is not None:
        sq, stub = quota_client(*quota_values)
    else:
        sq, stub = quotas_client([(code, 1_000_000.0) for code in quota_codes(env)])
    checks = by_name(run_checks(env, StubbedSession(aws, {"service-quotas": sq, **(clients or {})}), now=NOW))
    stub.assert_no_pending_responses()
    return checks


# --------------------------------------------------------------------------------------------
# account (moto STS)
# --------------------------------------------------------------------------------------------
def test_account_pass(aws: boto3.session.Session) -> None:
    seed_public_parameter(DLAMI, "ami-0abcdef1234567890")
    checks = run(aws, make_env())
    assert checks["account"].status == "PASS"
    assert ACCOUNT in checks["account"].detail


def test_account_mismatch_fails_and_skips_the_rest(aws: boto3.session.Session) -> None:
    checks = run_checks(make_env(account="222222222222"), aws, now=NOW)
    assert [c.name for c in checks] == ["account"]
    assert checks[0].status == "FAIL"
    assert f"your credentials are for account {ACCOUNT}" in checks[0].detail
    assert "222222222222" in checks[0].fix


# --------------------------------------------------------------------------------------------
# instance type offerings (moto's recorded offerings)
# --------------------------------------------------------------------------------------------
def test_offering_pass_lists_the_offering_az_ids(aws: boto3.session.Session) -> None:
    checks = run(aws, make_env())
    check = checks["offering pretrain"]
    assert check.status == "PASS"
    assert "trn1.32xlarge is offered in use1-az6" in check.detail
    assert "use1-az4, use1-az5, use1-az6" in check.detail


def test_offering_fail_names_the_az_ids_that_offer_it(aws: boto3.session.Session) -> None:
    # The catalog would reject this file; model_copy skips validation, as a stale catalog would.
    env = make_env(cluster(instance_type="trn1n.32xlarge"))
    stale = env.model_copy(update={"training": [env.training[0].model_copy(update={"az_id": "use1-az4"})]})
    check = run(aws, stale)["offering pretrain"]
    assert check.status == "FAIL"
    assert check.detail == "trn1n.32xlarge is not offered in use1-az4; AZ IDs of us-east-1 that offer it: use1-az6"
    assert "use1-az6" in check.fix


def test_offering_fail_when_the_region_offers_the_type_nowhere(aws: boto3.session.Session) -> None:
    env = make_env()
    stale = env.model_copy(update={"training": [env.training[0].model_copy(update={"instance_type": "trn2.48xlarge"})]})
    check = run(aws, stale)["offering pretrain"]
    assert check.status == "FAIL"
    assert "not offered in any AZ of us-east-1" in check.detail


def test_gpu_pool_offering_pass(aws: boto3.session.Session) -> None:
    check = run(aws, make_env(cluster(gpu_pool={"instance_type": "p5.48xlarge", "max_size": 2})))["offering pretrain-gpu"]
    assert check.status == "PASS"
    assert check.detail.startswith("p5.48xlarge is offered in use1-az6 (us-east-1 offers it in use1-az1, ")


def test_gpu_pool_offering_fail_names_the_az_ids_that_offer_it(aws: boto3.session.Session) -> None:
    env = make_env(cluster(gpu_pool={"instance_type": "p5en.48xlarge", "max_size": 1}))
    c = env.training[0]
    assert c.gpu_pool is not None
    stale = env.model_copy(
        update={"training": [c.model_copy(update={"gpu_pool": c.gpu_pool.model_copy(update={"az_id": "use1-az4"})})]}
    )
    checks = run(aws, stale)
    check = checks["offering pretrain-gpu"]
    assert check.status == "FAIL"
    assert check.detail == "p5en.48xlarge is not offered in use1-az4; AZ IDs of us-east-1 that offer it: use1-az2, use1-az6"
    assert check.fix == "set training[0].gpu_pool.az_id (and network.az_ids) to one of use1-az2, use1-az6"
    assert checks["offering pretrain"].status == "PASS"


def test_fleet_offering_passes_for_each_type_in_every_az_id(aws: boto3.session.Session) -> None:
    env = make_env(inference=[fleet(neuron_types=["inf2.48xlarge", "inf2.xlarge"], fallback_types=["g6e.12xlarge"])])
    checks = run(aws, env)
    fleet_lines = {n: c for n, c in checks.items() if n.startswith("offering serve")}
    assert sorted(fleet_lines) == ["offering serve: g6e.12xlarge", "offering serve: inf2.48xlarge", "offering serve: inf2.xlarge"]
    assert {c.status for c in fleet_lines.values()} == {"PASS"}
    assert fleet_lines["offering serve: inf2.48xlarge"].detail == (
        "inf2.48xlarge (Neuron type) is offered in every AZ ID of the fleet (use1-az6, use1-az4)"
    )
    assert "(GPU fallback type)" in fleet_lines["offering serve: g6e.12xlarge"].detail


def test_fleet_types_missing_in_one_az_id_warn(aws: boto3.session.Session) -> None:
    # inf2 is not offered in use1-az1 and g6e not in use1-az5: each AZ ID still launches one of the types.
    checks = run(aws, stale_fleet(make_env(inference=[fleet()]), az_ids=["use1-az5", "use1-az1"]))
    neuron, gpu = checks["offering serve: inf2.48xlarge"], checks["offering serve: g6e.12xlarge"]
    assert (neuron.status, gpu.status) == ("WARN", "WARN")
    assert neuron.detail == (
        "inf2.48xlarge (Neuron type) is offered in use1-az5 but not in use1-az1; the group launches the fleet's other types there"
    )
    assert "replace use1-az1 in inference[0].az_ids (and network.az_ids) with AZ IDs that offer it" in neuron.fix
    assert "use1-az2, use1-az4, use1-az6" in neuron.fix
    assert gpu.detail == (
        "g6e.12xlarge (GPU fallback type) is offered in use1-az1 but not in use1-az5; "
        "the group launches the fleet's other types there"
    )
    assert not any(c.status == "FAIL" for n, c in checks.items() if n.startswith("offering"))


def test_fleet_fallback_type_offered_in_no_az_id_warns(aws: boto3.session.Session) -> None:
    checks = run(aws, stale_fleet(make_env(inference=[fleet()]), fallback_types=["p5e.48xlarge"]))
    check = checks["offering serve: p5e.48xlarge"]
    assert check.status == "WARN"
    assert check.detail == (
        "p5e.48xlarge (GPU fallback type) is offered in none of the fleet's AZ IDs (use1-az6, use1-az4); "
        "no AZ of us-east-1 offers it: the group never launches it, only the fleet's other types"
    )
    assert check.fix == "replace inference[0].fallback_types[0] with a GPU type offered in use1-az6, use1-az4, or remove it"
    assert checks["offering serve: inf2.48xlarge"].status == "PASS"


def test_fleet_neuron_type_offered_in_no_az_id_fails(aws: boto3.session.Session) -> None:
    # Neither use1-az1 nor use1-az3 offers inf2; g5 is offered in use1-az1 only, so use1-az3 launches nothing.
    env = make_env(inference=[fleet(fallback_types=["g5.12xlarge"])])
    checks = run(aws, stale_fleet(env, az_ids=["use1-az1", "use1-az3"]))
    neuron = checks["offering serve: inf2.48xlarge"]
    assert neuron.status == "FAIL"
    assert neuron.detail == (
        "inf2.48xlarge (Neuron type) is offered in none of the fleet's AZ IDs (use1-az1, use1-az3); "
        "us-east-1 offers it in use1-az2, use1-az4, use1-az5, use1-az6"
    )
    assert neuron.fix.startswith("replace inference[0].neuron_types[0] with a type offered in use1-az1, use1-az3")
    assert neuron.fix.endswith(
        "or set inference[0].az_ids (and network.az_ids) to AZ IDs among use1-az2, use1-az4, use1-az5, use1-az6"
    )
    gpu = checks["offering serve: g5.12xlarge"]
    assert gpu.status == "WARN"
    assert gpu.detail.endswith("but not in use1-az3; use1-az3 offers no other type of the fleet either")
    az = checks["offering serve: use1-az3"]
    assert az.status == "FAIL"
    assert az.detail == "use1-az3 offers none of the fleet's types (inf2.48xlarge, g5.12xlarge): the group cannot launch there"
    assert az.fix.startswith("replace use1-az3 in inference[0].az_ids (and network.az_ids) with an AZ ID that offers one of them")


# --------------------------------------------------------------------------------------------
# On-Demand vCPU quotas (Stubber: Service Quotas)
# --------------------------------------------------------------------------------------------
def test_quota_pass_shows_the_sum_from_the_catalog(aws: boto3.session.Session) -> None:
    need = vcpus("trn1.32xlarge", 4)
    check = run(aws, make_env(), quota_values=(float(need * 4),))[f"quota {TRN_QUOTA}"]
    assert check.status == "PASS"
    assert f"max sizes need {need} (pretrain: 4 x trn1.32xlarge = {need})" in check.detail
    assert "Running On-Demand Trn instances" in check.detail


def test_quota_sums_every_cluster_of_the_family(aws: boto3.session.Session) -> None:
    env = make_env(cluster(), cluster(name="tune", instance_type="trn1n.32xlarge", max_size=2))
    need = vcpus("trn1.32xlarge", 4) + vcpus("trn1n.32xlarge", 2)
    check = run(aws, env, quota_values=(float(need - 1),))[f"quota {TRN_QUOTA}"]
    assert check.status == "FAIL"
    assert f"max sizes need {need}" in check.detail
    assert f"--quota-code {TRN_QUOTA} --desired-value {need}" in check.fix


def test_quota_warns_above_80_percent(aws: boto3.session.Session) -> None:
    need = vcpus("trn1.32xlarge", 4)
    check = run(aws, make_env(), quota_values=(need / 0.9,))[f"quota {TRN_QUOTA}"]
    assert check.status == "WARN"
    assert "90% of the quota" in check.detail


def test_quota_fails_above_100_percent(aws: boto3.session.Session) -> None:
    need = vcpus("trn1.32xlarge", 4)
    check = run(aws, make_env(), quota_values=(need / 2,))[f"quota {TRN_QUOTA}"]
    assert check.status == "FAIL"
    assert f"is {need / 2:g} vCPUs" in check.detail
    assert f"request at least {need} vCPUs" in check.fix


def test_quota_falls_back_to_the_aws_default(aws: boto3.session.Session) -> None:
    sq = boto3.client("service-quotas", region_name=REGION)
    stub = Stubber(sq)
    stub.add_client_error("get_service_quota", "NoSuchResourceException", "The request failed because the quota does not exist.")
    stub.add_response(
        "get_aws_default_service_quota", quota_response(TRN_QUOTA, 0.0), {"ServiceCode": "ec2", "QuotaCode": TRN_QUOTA}
    )
    stub.activate()
    checks = by_name(run_checks(make_env(), StubbedSession(aws, {"service-quotas": sq}), now=NOW))
    stub.assert_no_pending_responses()
    check = checks[f"quota {TRN_QUOTA}"]
    assert check.status == "FAIL"
    assert "is 0 vCPUs (AWS default; no applied value)" in check.detail


def test_quota_access_denied_fails_that_check_only(aws: boto3.session.Session) -> None:
    sq = boto3.client("service-quotas", region_name=REGION)
    stub = Stubber(sq)
    stub.add_client_error(
        "get_service_quota", "AccessDeniedException", "User is not authorized to perform servicequotas:GetServiceQuota"
    )
    stub.activate()
    seed_public_parameter(DLAMI, "ami-0abcdef1234567890")
    checks = by_name(run_checks(make_env(), StubbedSession(aws, {"service-quotas": sq}), now=NOW))
    assert checks["quota"].status == "FAIL"
    assert checks["quota"].detail == "access denied to servicequotas:GetServiceQuota"
    assert checks["offering pretrain"].status == "PASS"
    assert checks[f"ami {catalog.default_ami_family('neuron')}"].status == "PASS"


def test_quota_counts_gpu_pools_and_fleets_at_their_worst_case(aws: boto3.session.Session) -> None:
    env = make_env(
        cluster(gpu_pool={"instance_type": "p5.48xlarge", "max_size": 2}),
        inference=[fleet(neuron_types=["inf2.xlarge", "inf2.48xlarge"], fallback_types=["g6e.12xlarge", "g6.xlarge"])],
    )
    assert quota_codes(env) == [TRN_QUOTA, P_QUOTA, INF_QUOTA, G_QUOTA]
    checks = run(aws, env, quota={TRN_QUOTA: 10_000.0, P_QUOTA: 10_000.0, INF_QUOTA: 10_000.0, G_QUOTA: 10_000.0})
    p, inf, g = checks[f"quota {P_QUOTA}"], checks[f"quota {INF_QUOTA}"], checks[f"quota {G_QUOTA}"]
    assert {p.status, inf.status, g.status} == {"PASS"}
    assert f"max sizes need {vcpus('p5.48xlarge', 2)} (pretrain-gpu: 2 x p5.48xlarge = {vcpus('p5.48xlarge', 2)})" in p.detail
    need_inf = vcpus("inf2.48xlarge", 4)  # the fleet on its largest Neuron type, not its first
    assert f"max sizes need {need_inf} (serve: 4 x inf2.48xlarge (largest of its 2 Neuron types) = {need_inf})" in inf.detail
    need_g = vcpus("g6e.12xlarge", 4)
    assert f"serve: 4 x g6e.12xlarge (largest of its 2 fallback types) = {need_g} if all GPU" in g.detail
    assert g.detail.endswith(
        "serve counted all GPU at max_size on the largest fallback type, as a fleet can end up all GPU when Neuron capacity is short"
    )
    assert "all GPU" not in inf.detail
    assert f"pretrain: 4 x trn1.32xlarge = {vcpus('trn1.32xlarge', 4)})" in checks[f"quota {TRN_QUOTA}"].detail


def test_quota_counts_a_compile_node_per_neuron_type_of_a_model_fleet(aws: boto3.session.Session) -> None:
    model = {"id": "meta-llama/Llama-3.1-8B-Instruct", "s3_prefix": "models/llama-8b/", "parameters_billion": 8.0}
    # TP 8 and 4: they divide the types' cores and the model's 32 attention heads (the fit rule, catalog/fit.py).
    profiles = {"inf2.48xlarge": {"tensor_parallel": 8}, "inf2.24xlarge": {"tensor_parallel": 4}}
    served = fleet(
        neuron_types=["inf2.48xlarge", "inf2.24xlarge"], model=model, model_s3_prefix=None, serve=None, profiles=profiles
    )
    need = vcpus("inf2.48xlarge", 4) + vcpus("inf2.48xlarge", 1) + vcpus("inf2.24xlarge", 1)
    check = run(aws, make_env(inference=[served]), quota={TRN_QUOTA: 10_000.0, INF_QUOTA: need - 1, G_QUOTA: 10_000.0})[
        f"quota {INF_QUOTA}"
    ]
    assert check.status == "FAIL"
    compile_vcpus = vcpus("inf2.48xlarge", 1) + vcpus("inf2.24xlarge", 1)
    assert (
        f"serve compile groups: 1 x inf2.48xlarge + 1 x inf2.24xlarge = {compile_vcpus} (during a rollout with new keys)"
        in check.detail
    )
    assert f"max sizes need {need} " in check.detail
    off = run(
        aws,
        make_env(inference=[served | {"precompile": False}]),
        quota={TRN_QUOTA: 10_000.0, INF_QUOTA: need - 1, G_QUOTA: 10_000.0},
    )
    assert "compile" not in off[f"quota {INF_QUOTA}"].detail


@pytest.mark.parametrize(("ratio", "status"), [(1 / 0.9, "WARN"), (0.5, "FAIL")])
def test_quota_sums_gpu_pool_and_fleet_in_one_family(aws: boto3.session.Session, ratio: float, status: str) -> None:
    # A GPU pool and a fleet's fallback types both count against G; the fleet's Neuron type against Inf.
    env = make_env(cluster(gpu_pool={"instance_type": "g6e.48xlarge", "max_size": 1}), inference=[fleet()])
    need_g = vcpus("g6e.48xlarge", 1) + vcpus("g6e.12xlarge", 4)
    need_inf = vcpus("inf2.48xlarge", 4)
    values = {TRN_QUOTA: 10_000.0, G_QUOTA: need_g * ratio, INF_QUOTA: need_inf * ratio}
    checks = run(aws, env, quota=values)
    g, inf = checks[f"quota {G_QUOTA}"], checks[f"quota {INF_QUOTA}"]
    assert (g.status, inf.status) == (status, status)
    assert f"max sizes need {need_g} (pretrain-gpu: 1 x g6e.48xlarge = 192, serve: 4 x g6e.12xlarge = 192 if all GPU)" in g.detail
    assert f"max sizes need {need_inf} (serve: 4 x inf2.48xlarge = {need_inf})" in inf.detail
    if status == "WARN":
        assert "90% of the quota" in g.detail
    else:
        assert f"request at least {need_g} vCPUs" in g.fix
        assert f"--quota-code {INF_QUOTA} --desired-value {need_inf}" in inf.fix


def test_every_catalog_family_has_a_vcpu_quota() -> None:
    families = {t.family for t in catalog.instance_types().values()}
    assert {f for f in families if quotas.quota_for_family(f) is None} == set()
    assert quotas.quota_for_family("trn2").code == TRN_QUOTA  # type: ignore[union-attr]
    assert quotas.quota_for_family("inf2").code == "L-1945791B"  # type: ignore[union-attr]
    assert quotas.quota_for_family("p5").code == "L-417A185B"  # type: ignore[union-attr]
    assert quotas.quota_for_family("g6e").code == "L-DB2E81BA"  # type: ignore[union-attr]


# --------------------------------------------------------------------------------------------
# AMIs (moto: SSM parameters seeded in the backend, images)
# --------------------------------------------------------------------------------------------
def test_ami_family_parameter_resolves(aws: boto3.session.Session) -> None:
    seed_public_parameter(DLAMI, "ami-0abcdef1234567890")
    check = run(aws, make_env())[f"ami {catalog.default_ami_family('neuron')}"]
    assert check.status == "PASS"
    assert check.detail == f"{DLAMI} resolves to ami-0abcdef1234567890 in {REGION}"


def test_batch_cluster_checks_the_ecs_optimized_neuron_ami(aws: boto3.session.Session) -> None:
    # scheduler: batch nodes boot the ECS-optimized Neuron AMI, not the DLAMI of the plain cluster beside it.
    ecs = catalog.ami_families()["ecs-neuron-al2023"].ssm_parameter
    seed_public_parameter(DLAMI, "ami-0abcdef1234567890")
    seed_public_parameter(ecs, "ami-0fedcba9876543210")
    image = "public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.28.0-ubuntu24.04"
    env = make_env(cluster(), cluster(name="jobs", scheduler="batch", container_image=image))
    checks = run(aws, env)
    assert checks["ami ecs-neuron-al2023"].status == "PASS"
    assert checks["ami ecs-neuron-al2023"].detail == f"{ecs} resolves to ami-0fedcba9876543210 in {REGION}"
    assert checks[f"ami {catalog.default_ami_family('neuron')}"].status == "PASS"


def test_ami_family_parameter_missing_fails(aws: boto3.session.Session) -> None:
    family = "neuron-base-al2023"
    check = run(aws, make_env(cluster(ami={"family": family})))[f"ami {family}"]
    assert check.status == "FAIL"
    assert f"{catalog.ami_families()[family].ssm_parameter} does not exist in {REGION}" in check.detail
    assert "ami.family" in check.fix


def _image(ec2: Any, architecture: str, root: str) -> str:
    images = ec2.describe_images(
        Owners=["amazon"],
        Filters=[{"Name": "architecture", "Values": [architecture]}, {"Name": "root-device-name", "Values": [root]}],
    )["Images"]
    assert images, f"moto carries no {architecture} image with root {root}"
    return str(images[0]["ImageId"])


def _own_image(ec2: Any) -> str:
    """A private AMI made from an instance, as a user would pin (x86_64, root /dev/sda1 in moto)."""
    source = _image(ec2, "x86_64", "/dev/sda1")
    instance = ec2.run_instances(ImageId=source, MinCount=1, MaxCount=1, InstanceType="trn1.32xlarge")["Instances"][0]
    return str(ec2.create_image(InstanceId=instance["InstanceId"], Name="team-neuron-image")["ImageId"])


def test_pinned_ami_pass(aws: boto3.session.Session) -> None:
    ami_id = _own_image(aws.client("ec2"))
    check = run(aws, make_env(cluster(ami={"ami_id": ami_id, "root_device_name": "/dev/sda1"})))[f"ami {ami_id}"]
    assert check.status == "PASS"
    assert check.detail == f"{ami_id} (team-neuron-image) is available, x86_64, root device /dev/sda1"


def test_pinned_ami_missing_fails(aws: boto3.session.Session) -> None:
    ami_id = "ami-0123456789abcdef0"
    check = run(aws, make_env(cluster(ami={"ami_id": ami_id, "root_device_name": "/dev/sda1"})))[f"ami {ami_id}"]
    assert check.status == "FAIL"
    assert f"{ami_id} does not exist in {REGION}" in check.detail
    assert "copy-image" in check.fix


def test_pinned_ami_with_another_root_device_fails(aws: boto3.session.Session) -> None:
    ami_id = _own_image(aws.client("ec2"))
    check = run(aws, make_env(cluster(ami={"ami_id": ami_id, "root_device_name": "/dev/xvda"})))[f"ami {ami_id}"]
    assert check.status == "FAIL"
    assert "its root device is /dev/sda1, not /dev/xvda" in check.detail
    assert check.fix == "set ami.root_device_name: /dev/sda1"


def test_pinned_ami_of_another_architecture_fails(aws: boto3.session.Session) -> None:
    ami_id = _image(aws.client("ec2"), "arm64", "/dev/xvda")
    check = run(aws, make_env(cluster(ami={"ami_id": ami_id, "root_device_name": "/dev/xvda"})))[f"ami {ami_id}"]
    assert check.status == "FAIL"
    assert "it is arm64, trn1.32xlarge needs x86_64" in check.detail


def test_gpu_pool_and_fleet_amis_resolve_once_per_family(aws: boto3.session.Session) -> None:
    seed_public_parameter(DLAMI, "ami-0abcdef1234567890")
    seed_public_parameter(GPU_DLAMI, "ami-0123456789abcdef1")
    ssm = aws.client("ssm")
    asked: list[str] = []
    ssm.meta.events.register("provide-client-params.ssm.GetParameter", lambda params, **_: asked.append(params["Name"]))
    env = make_env(cluster(gpu_pool={"instance_type": "p5.48xlarge"}), inference=[fleet()])
    checks = run(aws, env, clients={"ssm": ssm})
    assert asked == [DLAMI, GPU_DLAMI]  # the cluster and the fleet share the DLAMI, the GPU pool and fallback the GPU AMI
    amis = {n: c for n, c in checks.items() if n.startswith("ami ")}
    gpu_family = catalog.default_ami_family("gpu")
    assert sorted(amis) == sorted([f"ami {catalog.default_ami_family('neuron')}", f"ami {gpu_family}"])
    assert amis[f"ami {gpu_family}"].status == "PASS"
    assert amis[f"ami {gpu_family}"].detail == f"{GPU_DLAMI} resolves to ami-0123456789abcdef1 in {REGION}"


def test_gpu_ami_family_missing_fails_and_names_its_pools(aws: boto3.session.Session) -> None:
    seed_public_parameter(DLAMI, "ami-0abcdef1234567890")
    env = make_env(cluster(gpu_pool={"instance_type": "p5.48xlarge"}), inference=[fleet()])
    check = run(aws, env)[f"ami {catalog.default_ami_family('gpu')}"]
    assert check.status == "FAIL"
    assert check.detail == f"{GPU_DLAMI} does not exist in {REGION} (used by pretrain-gpu, serve)"
    assert check.fix == (
        "choose another family from neuronkit/catalog/amis.yaml for gpu_pool.ami.family, gpu_ami.family, or pin an ami_id"
    )


def test_fleet_without_fallback_types_checks_no_gpu_ami(aws: boto3.session.Session) -> None:
    seed_public_parameter(DLAMI, "ami-0abcdef1234567890")
    checks = run(aws, make_env(inference=[fleet(fallback_types=[], serve={"neuron": "python -m server"})]))
    assert [n for n in checks if n.startswith("ami ")] == [f"ami {catalog.default_ami_family('neuron')}"]
    assert checks[f"ami {catalog.default_ami_family('neuron')}"].status == "PASS"


def test_batch_gpu_pool_checks_the_ecs_optimized_gpu_ami(aws: boto3.session.Session) -> None:
    ecs_neuron = catalog.ami_families()["ecs-neuron-al2023"].ssm_parameter
    ecs_gpu = catalog.ami_families()["ecs-gpu-al2023"].ssm_parameter
    seed_public_parameter(ecs_neuron, "ami-0fedcba9876543210")
    seed_public_parameter(ecs_gpu, "ami-0fedcba9876543211")
    gpu = {"instance_type": "p5.48xlarge", "container_image": "nvcr.io/nvidia/pytorch:25.01-py3"}
    env = make_env(cluster(scheduler="batch", container_image="public.ecr.aws/neuron/train:latest", gpu_pool=gpu))
    checks = run(aws, env)
    assert checks["ami ecs-gpu-al2023"].status == "PASS"
    assert checks["ami ecs-gpu-al2023"].detail == f"{ecs_gpu} resolves to ami-0fedcba9876543211 in {REGION}"
    assert f"ami {catalog.default_ami_family('gpu')}" not in checks


def test_fleet_pinned_gpu_ami_pass_and_root_device_fail(aws: boto3.session.Session) -> None:
    seed_public_parameter(DLAMI, "ami-0abcdef1234567890")
    ami_id = _own_image(aws.client("ec2"))
    good = run(aws, make_env(inference=[fleet(gpu_ami={"ami_id": ami_id, "root_device_name": "/dev/sda1"})]))
    assert good[f"ami {ami_id}"].status == "PASS"
    assert f"ami {catalog.default_ami_family('gpu')}" not in good
    bad = run(aws, make_env(inference=[fleet(gpu_ami={"ami_id": ami_id, "root_device_name": "/dev/xvda"})]))[f"ami {ami_id}"]
    assert bad.status == "FAIL"
    assert "its root device is /dev/sda1, not /dev/xvda (serve)" in bad.detail
    assert bad.fix == "set gpu_ami.root_device_name: /dev/sda1"


# --------------------------------------------------------------------------------------------
# capacity reservations (Stubber: moto does not implement DescribeCapacityReservations)
# --------------------------------------------------------------------------------------------
def reservation(**over: Any) -> dict[str, Any]:
    """One DescribeCapacityReservations entry as EC2 returns it."""
    base = {
        "CapacityReservationId": "cr-0123456789abcdef0",
        "OwnerId": ACCOUNT,
        "CapacityReservationArn": f"arn:aws:ec2:{REGION}:{ACCOUNT}:capacity-reservation/cr-0123456789abcdef0",
        "AvailabilityZoneId": "use1-az6",
        "InstanceType": "trn1.32xlarge",
        "InstancePlatform": "Linux/UNIX",
        "AvailabilityZone": "us-east-1a",
        "Tenancy": "default",
        "TotalInstanceCount": 4,
        "AvailableInstanceCount": 4,
        "EbsOptimized": True,
        "EphemeralStorage": False,
        "State": "active",
        "StartDate": NOW - dt.timedelta(days=1),
        "EndDateType": "unlimited",
        "InstanceMatchCriteria": "targeted",
        "CreateDate": NOW - dt.timedelta(days=2),
        "ReservationType": "default",
    }
    return base | over


def block(**over: Any) -> dict[str, Any]:
    start, end = NOW + dt.timedelta(days=2), NOW + dt.timedelta(days=4)
    return (
        reservation(
            ReservationType="capacity-block",
            State="scheduled",
            StartDate=start,
            EndDate=end,
            EndDateType="limited",
            AvailableInstanceCount=0,
        )
        | over
    )


def block_capacity(start: dt.datetime, end: dt.datetime, **over: Any) -> dict[str, Any]:
    base = {
        "type": "capacity-block",
        "reservation_id": "cr-0123456789abcdef0",
        "instance_type": "trn1.32xlarge",
        "az_id": "use1-az6",
        "instance_count": 4,
        "start": start.isoformat(),
        "end": end.isoformat(),
    }
    return base | over


def capacity_checks(env: Environment, *answers: dict[str, Any] | str) -> dict[str, Check]:
    """check_capacity with a Stubber EC2 client; a str answer is an EC2 error code."""
    ec2 = boto3.client("ec2", region_name=REGION)
    stub = Stubber(ec2)
    for answer in answers:
        if isinstance(answer, str):
            stub.add_client_error("describe_capacity_reservations", answer, "The capacity reservation ID does not exist")
        else:
            stub.add_response("describe_capacity_reservations", {"CapacityReservations": [answer]})
    with stub:
        checks = by_name(check_capacity(env, ec2, now=NOW))
        stub.assert_no_pending_responses()
    return checks


def test_created_odcr_passes_with_a_billing_note(aws: boto3.session.Session) -> None:
    env = make_env(cluster(capacity={"type": "odcr", "create": True, "instance_count": 4}))
    check = capacity_checks(env)["capacity pretrain"]  # no AWS call: the Stubber holds no answers
    assert check.status == "PASS"
    assert "bills from creation" in check.detail
    assert run(aws, env)["capacity pretrain"].status == "PASS"  # and run_checks includes it


def test_existing_odcr_passes(dummy_credentials: None) -> None:
    env = make_env(
        cluster(capacity={"type": "odcr", "create": False, "reservation_id": "cr-0123456789abcdef0", "instance_count": 4})
    )
    checks = capacity_checks(env, reservation())
    assert {n: c.status for n, c in checks.items()} == {
        "capacity pretrain: match": "PASS",
        "capacity pretrain: size": "PASS",
        "capacity pretrain: window": "PASS",
    }
    assert "has no end date" in checks["capacity pretrain: window"].detail


def test_reservation_not_found_fails(dummy_credentials: None) -> None:
    env = make_env(
        cluster(capacity={"type": "odcr", "create": False, "reservation_id": "cr-0123456789abcdef0", "instance_count": 4})
    )
    check = capacity_checks(env, "InvalidCapacityReservationId.NotFound")["capacity pretrain"]
    assert check.status == "FAIL"
    assert f"cr-0123456789abcdef0 does not exist in account {ACCOUNT}, {REGION}" in check.detail


def test_reservation_of_another_type_and_az_fails(dummy_credentials: None) -> None:
    env = make_env(
        cluster(capacity={"type": "odcr", "create": False, "reservation_id": "cr-0123456789abcdef0", "instance_count": 4})
    )
    answer = reservation(InstanceType="trn1n.32xlarge", AvailabilityZoneId="use1-az4", AvailabilityZone="us-east-1d")
    check = capacity_checks(env, answer)["capacity pretrain: match"]
    assert check.status == "FAIL"
    assert "holds trn1n.32xlarge, the cluster runs trn1.32xlarge" in check.detail
    assert "is in use1-az4 (us-east-1d), the cluster in use1-az6" in check.detail
    assert "set training[0].az_id to use1-az4" in check.fix


def test_reservation_too_small_fails(dummy_credentials: None) -> None:
    env = make_env(
        cluster(capacity={"type": "odcr", "create": False, "reservation_id": "cr-0123456789abcdef0", "instance_count": 4})
    )
    check = capacity_checks(env, reservation(TotalInstanceCount=2, AvailableInstanceCount=2))["capacity pretrain: size"]
    assert check.status == "FAIL"
    assert "holds 2 instances, max_size is 4" in check.detail
    assert "set training[0].capacity.instance_count: 2" in check.fix


def test_reservation_in_use_warns(dummy_credentials: None) -> None:
    env = make_env(
        cluster(capacity={"type": "odcr", "create": False, "reservation_id": "cr-0123456789abcdef0", "instance_count": 4})
    )
    check = capacity_checks(env, reservation(AvailableInstanceCount=1))["capacity pretrain: size"]
    assert check.status == "WARN"
    assert "1 of 4 instances free" in check.detail


def test_capacity_block_not_started_warns(dummy_credentials: None) -> None:
    start, end = NOW + dt.timedelta(days=2), NOW + dt.timedelta(days=4)
    env = make_env(cluster(capacity=block_capacity(start, end)))
    checks = capacity_checks(env, block(StartDate=start, EndDate=end))
    assert checks["capacity pretrain: match"].status == "PASS"
    assert checks["capacity pretrain: size"].status == "PASS"
    window = checks["capacity pretrain: window"]
    assert window.status == "WARN"
    assert "is scheduled: starts 2026-11-23 12:00 UTC, ends 2026-11-25 12:00 UTC" in window.detail
    reclaim = catalog.capacity_facts()["capacity_blocks"]["reclaim_minutes_before_end"]
    assert f"reclaims instances {reclaim} minutes before" in window.detail


def test_active_capacity_block_passes(dummy_credentials: None) -> None:
    start, end = NOW - dt.timedelta(hours=1), NOW + dt.timedelta(days=1)
    env = make_env(cluster(capacity=block_capacity(start, end)))
    checks = capacity_checks(env, block(State="active", StartDate=start, EndDate=end, AvailableInstanceCount=4))
    assert {c.status for c in checks.values()} == {"PASS"}
    assert "is active since 2026-11-21 11:00 UTC, ends 2026-11-22 12:00 UTC" in checks["capacity pretrain: window"].detail


def test_ended_capacity_block_fails(dummy_credentials: None) -> None:
    start, end = NOW - dt.timedelta(days=3), NOW - dt.timedelta(days=1)
    env = make_env(cluster(capacity=block_capacity(start, end)))
    window = capacity_checks(env, block(State="expired", StartDate=start, EndDate=end))["capacity pretrain: window"]
    assert window.status == "FAIL"
    assert "is expired at 2026-11-20 12:00 UTC" in window.detail
    assert "neuronkit capacity offerings" in window.fix


def test_capacity_block_dates_differing_from_the_file_warn(dummy_credentials: None) -> None:
    start, end = NOW - dt.timedelta(hours=1), NOW + dt.timedelta(days=1)
    env = make_env(cluster(capacity=block_capacity(start, end)))
    later = end + dt.timedelta(hours=12)
    window = capacity_checks(env, block(State="active", StartDate=start, EndDate=later, AvailableInstanceCount=4))[
        "capacity pretrain: window"
    ]
    assert window.status == "WARN"
    assert "the file says end 2026-11-22 12:00 UTC" in window.detail
    assert f"set training[0].capacity.end: {later.isoformat()}" in window.fix


def test_odcr_referenced_as_a_capacity_block_fails(dummy_credentials: None) -> None:
    start, end = NOW - dt.timedelta(hours=1), NOW + dt.timedelta(days=1)
    env = make_env(cluster(capacity=block_capacity(start, end)))
    check = capacity_checks(env, reservation())["capacity pretrain: match"]
    assert check.status == "FAIL"
    assert "is an On-Demand Capacity Reservation, not a Capacity Block" in check.detail


# --------------------------------------------------------------------------------------------
# imported network (moto: VPCs and subnets created by AZ ID)
# --------------------------------------------------------------------------------------------
def _vpc(ec2: Any, *az_ids: str) -> tuple[str, dict[str, str]]:
    vpc = ec2.create_vpc(CidrBlock="10.30.0.0/16")["Vpc"]["VpcId"]
    subnets = {}
    for i, az in enumerate(az_ids):
        subnets[az] = ec2.create_subnet(VpcId=vpc, CidrBlock=f"10.30.{i}.0/24", AvailabilityZoneId=az)["Subnet"]["SubnetId"]
    return vpc, subnets


def _network(vpc: str, subnets: dict[str, str]) -> dict[str, Any]:
    return {"az_ids": ["use1-az6", "use1-az4"], "existing": {"vpc_id": vpc, "subnet_ids": subnets}}


def test_existing_network_passes(aws: boto3.session.Session) -> None:
    vpc, subnets = _vpc(aws.client("ec2"), "use1-az6", "use1-az4")
    checks = run(aws, make_env(network=_network(vpc, subnets)))
    assert checks["network vpc"].status == "PASS"
    assert checks["network subnet use1-az6"].status == "PASS"
    assert checks["network subnet use1-az4"].status == "PASS"
    assert f"{subnets['use1-az4']} (10.30.1.0/24," in checks["network subnet use1-az4"].detail


def test_subnet_in_another_az_id_fails_and_names_the_right_one(aws: boto3.session.Session) -> None:
    ec2 = aws.client("ec2")
    vpc, subnets = _vpc(ec2, "use1-az6", "use1-az4", "use1-az1")
    wrong = {"use1-az6": subnets["use1-az6"], "use1-az4": subnets["use1-az1"]}
    check = run(aws, make_env(network=_network(vpc, wrong)))["network subnet use1-az4"]
    assert check.status == "FAIL"
    assert f"{subnets['use1-az1']} is in use1-az1" in check.detail
    assert f"has {subnets['use1-az4']} there" in check.fix


def test_missing_vpc_and_subnet_fail(aws: boto3.session.Session) -> None:
    missing = _network("vpc-0123456789abcdef0", {"use1-az6": "subnet-0123456789abcdef0", "use1-az4": "subnet-0123456789abcdef1"})
    checks = run(aws, make_env(network=missing))
    assert checks["network vpc"].status == "FAIL"
    assert checks["network vpc"].detail == f"vpc-0123456789abcdef0 does not exist in {REGION}"
    assert checks["network subnet use1-az6"].status == "FAIL"
    assert "subnet-0123456789abcdef0 does not exist" in checks["network subnet use1-az6"].detail


def test_subnet_of_another_vpc_fails(aws: boto3.session.Session) -> None:
    ec2 = aws.client("ec2")
    vpc, subnets = _vpc(ec2, "use1-az6", "use1-az4")
    other = ec2.create_vpc(CidrBlock="10.40.0.0/16")["Vpc"]["VpcId"]
    stray = ec2.create_subnet(VpcId=other, CidrBlock="10.40.0.0/24", AvailabilityZoneId="use1-az6")["Subnet"]["SubnetId"]
    check = run(aws, make_env(network=_network(vpc, {"use1-az6": stray, "use1-az4": subnets["use1-az4"]})))[
        "network subnet use1-az6"
    ]
    assert check.status == "FAIL"
    assert f"{stray} belongs to {other}, not {vpc}" in check.detail


# --------------------------------------------------------------------------------------------
# credentials and reachability
# --------------------------------------------------------------------------------------------
def test_rejected_credentials_abort_with_one_line(aws: boto3.session.Session) -> None:
    sts = boto3.client("sts", region_name=REGION)
    stub = Stubber(sts)
    stub.add_client_error("get_caller_identity", "ExpiredToken", "The security token included in the request is expired", 403)
    stub.activate()
    with pytest.raises(PreflightAbort, match=r"AWS rejected your credentials \(ExpiredToken\)"):
        run_checks(make_env(), StubbedSession(aws, {"sts": sts}), now=NOW)


def test_unreachable_region_aborts(dummy_credentials: None, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:  # a local port nobody listens on: connection refused, no network used
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{port}")
    with pytest.raises(PreflightAbort, match=r"cannot reach AWS in region 'us-east-1'"):
        run_checks(make_env(), boto3.session.Session(), now=NOW)


# --------------------------------------------------------------------------------------------
# the command: table, exit codes, one-line errors
# --------------------------------------------------------------------------------------------
def _write_env(folder: Path, name: str, **over: Any) -> Path:
    data: dict[str, Any] = {
        "account": ACCOUNT,
        "region": REGION,
        "network": {"az_ids": ["use1-az6", "use1-az4"]},
        "training": [cluster()],
    } | over
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture
def cli_session(aws: boto3.session.Session, monkeypatch: pytest.MonkeyPatch) -> Iterator[Stubber]:
    """The command's session: moto, with a Stubber Service Quotas client answering plenty of quota."""
    sq, stub = quota_client(1_000_000.0)
    monkeypatch.setattr("neuronkit.cli.preflight.aws_session", lambda profile: StubbedSession(aws, {"service-quotas": sq}))
    yield stub


def test_cli_all_pass_exits_zero(cli_session: Stubber, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    seed_public_parameter(DLAMI, "ami-0abcdef1234567890")
    assert main(["preflight", "--file", str(_write_env(tmp_path, "test"))]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0] == f"preflight test: account {ACCOUNT}, {REGION}"
    assert lines[1].split() == ["STATUS", "CHECK", "DETAIL"]
    assert any(line.startswith("PASS") and "offering pretrain" in line for line in lines)
    assert lines[-1] == "4 passed, 0 warnings, 0 failed"


def test_cli_fail_exits_one_and_prints_the_fix(cli_session: Stubber, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # No DLAMI parameter seeded: the AMI check fails.
    assert main(["preflight", "--file", str(_write_env(tmp_path, "test"))]) == 1
    lines = capsys.readouterr().out.splitlines()
    fail = next(i for i, line in enumerate(lines) if line.startswith("FAIL"))
    assert f"ami {catalog.default_ami_family('neuron')}" in lines[fail]
    assert lines[fail + 1].strip().startswith("fix: choose another ami.family")
    assert lines[-1] == "3 passed, 0 warnings, 1 failed"


def test_cli_env_name_reads_environments_folder(
    cli_session: Stubber, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "environments").mkdir()
    _write_env(tmp_path / "environments", "staging")
    monkeypatch.chdir(tmp_path)
    seed_public_parameter(DLAMI, "ami-0abcdef1234567890")
    assert main(["preflight", "--env", "staging"]) == 0
    assert capsys.readouterr().out.startswith("preflight staging:")
    assert main(["preflight", "--env", "nope"]) == 2  # a usage error (README: exit codes)
    assert "environments/nope.yaml: no such environment; known environments: staging" in capsys.readouterr().err


def test_cli_checks_gpu_pools_and_fleets(
    aws: boto3.session.Session, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seed_public_parameter(DLAMI, "ami-0abcdef1234567890")
    seed_public_parameter(GPU_DLAMI, "ami-0123456789abcdef1")
    path = _write_env(
        tmp_path, "test", training=[cluster(gpu_pool={"instance_type": "p5.48xlarge", "max_size": 2})], inference=[fleet()]
    )
    sq, stub = quotas_client([(TRN_QUOTA, 1_000_000.0), (P_QUOTA, 1_000_000.0), (INF_QUOTA, 1_000_000.0), (G_QUOTA, 1_000_000.0)])
    monkeypatch.setattr("neuronkit.cli.preflight.aws_session", lambda profile: StubbedSession(aws, {"service-quotas": sq}))
    assert main(["preflight", "--file", str(path)]) == 0
    stub.assert_no_pending_responses()
    rows = [line.split(None, 1) for line in capsys.readouterr().out.splitlines()[2:-1]]
    names = [rest.split("  ")[0].strip() for _, rest in rows]
    assert names == [
        "account",
        "offering pretrain",
        "offering pretrain-gpu",
        "offering serve: inf2.48xlarge",
        "offering serve: g6e.12xlarge",
        f"quota {TRN_QUOTA}",
        f"quota {P_QUOTA}",
        f"quota {INF_QUOTA}",
        f"quota {G_QUOTA}",
        f"ami {catalog.default_ami_family('neuron')}",
        f"ami {catalog.default_ami_family('gpu')}",
    ]
    assert {status for status, _ in rows} == {"PASS"}


def test_cli_without_credentials_prints_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _clear_aws_env(monkeypatch, tmp_path)
    path = _write_env(tmp_path, "test")
    assert main(["preflight", "--file", str(path)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.splitlines() == [
        "neuronkit: no AWS credentials found: run `aws configure` or `aws sso login`, or set AWS_PROFILE (or pass --profile)"
    ]
    assert "Traceback" not in captured.err


def test_cli_unknown_profile_prints_one_line(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _clear_aws_env(monkeypatch, tmp_path)
    assert main(["preflight", "--file", str(_write_env(tmp_path, "test")), "--profile", "ghost"]) == 2
    assert capsys.readouterr().err.splitlines() == [
        "neuronkit: AWS profile 'ghost' is not in your AWS config; run `aws configure list-profiles`"
    ]


def test_render_prints_fixes_under_warn_and_fail_lines_only() -> None:
    text = render(
        [
            Check("PASS", "account", "credentials for arn:aws:iam::123456789012:user/ci", "never shown"),
            Check("WARN", "quota L-2C3B7624", "90% of the quota", "request more"),
            Check("FAIL", "ami x", "does not exist", "pin ami.ami_id"),
        ]
    ).splitlines()
    assert [line.split()[0] for line in text] == ["STATUS", "PASS", "WARN", "fix:", "FAIL", "fix:", "1"]
    assert text[3].strip() == "fix: request more"
    assert text[-1] == "1 passed, 1 warning, 1 failed"


def ultraserver_env(start: dt.datetime, end: dt.datetime) -> Environment:
    """2 x u-trn2x64 (8 x trn2u.48xlarge): each UltraServer is its own block and reservation."""
    capacity = block_capacity(
        start,
        end,
        instance_type="trn2u.48xlarge",
        instance_count=8,
        ultraserver_type="u-trn2x64",
        reservation_ids=["cr-0123456789abcdef0", "cr-0123456789abcdef1"],
    )
    del capacity["reservation_id"]
    return make_env(cluster(instance_type="trn2u.48xlarge", ultraserver="u-trn2x64", max_size=8, capacity=capacity))


def test_ultraserver_blocks_are_checked_one_by_one_and_sized_together(dummy_credentials: None) -> None:
    start, end = NOW - dt.timedelta(hours=1), NOW + dt.timedelta(days=1)
    env = ultraserver_env(start, end)
    answers = [
        block(
            CapacityReservationId=f"cr-0123456789abcdef{i}",
            InstanceType="trn2u.48xlarge",
            TotalInstanceCount=4,
            AvailableInstanceCount=4,
            State="active",
            StartDate=start,
            EndDate=end,
        )
        for i in range(2)
    ]
    checks = capacity_checks(env, *answers)
    assert {c.status for c in checks.values()} == {"PASS"}
    assert "capacity pretrain cr-0123456789abcdef1: window" in checks
    assert checks["capacity pretrain: size"].detail == "2 UltraServer blocks hold 8 instances for max_size 8"


def test_a_missing_ultraserver_block_fails_and_names_the_key(dummy_credentials: None) -> None:
    start, end = NOW - dt.timedelta(hours=1), NOW + dt.timedelta(days=1)
    env = ultraserver_env(start, end)
    first = block(InstanceType="trn2u.48xlarge", TotalInstanceCount=4, State="active", StartDate=start, EndDate=end)
    checks = capacity_checks(env, first, "InvalidCapacityReservationId.NotFound")
    missing = checks["capacity pretrain cr-0123456789abcdef1"]
    assert missing.status == "FAIL" and "cr-0123456789abcdef1 does not exist" in missing.detail
    assert "training[0].capacity.reservation_ids" in missing.fix
    assert "capacity pretrain: size" not in checks  # no size verdict on a partial set


def test_a_block_outside_the_on_demand_offerings_warns_and_its_reservation_is_checked(aws: boto3.session.Session) -> None:
    """One offering rule: trn2.48xlarge has no on-demand offering in us-east-1 (moto's recorded offerings), but a
    Capacity Block sells it apart: the offering check warns and the capacity checks judge the block itself."""
    start, end = NOW + dt.timedelta(days=2), NOW + dt.timedelta(days=4)
    cap = block_capacity(start, end, instance_type="trn2.48xlarge", instance_count=4)
    env = make_env(cluster(instance_type="trn2.48xlarge", capacity=cap))  # validate accepts it with a warning
    (offering,) = [c for c in check_offerings(env, aws.client("ec2")) if c.name == "offering pretrain"]
    assert offering.status == "WARN"
    assert "trn2.48xlarge is not in us-east-1's on-demand offerings for use1-az6" in offering.detail
    assert "Capacity Block" in offering.detail
    checks = capacity_checks(env, block(InstanceType="trn2.48xlarge", TotalInstanceCount=4, StartDate=start, EndDate=end))
    assert checks["capacity pretrain: match"].status == "PASS"
    wrong = capacity_checks(env, block(InstanceType="trn1.32xlarge", TotalInstanceCount=4, StartDate=start, EndDate=end))
    assert wrong["capacity pretrain: match"].status == "FAIL"  # the block is checked for real, not assumed
    same_on_reservation = env.model_copy(
        update={"training": [env.training[0].model_copy(update={"capacity": Odcr(type="odcr", instance_count=4)})]}
    )
    (refused,) = [c for c in check_offerings(same_on_reservation, aws.client("ec2")) if c.name == "offering pretrain"]
    assert refused.status == "FAIL"
