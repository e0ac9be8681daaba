"""`neuronkit capacity offerings`: the offerings table, the purchase hint and the checks made before AWS.

moto does not implement DescribeCapacityBlockOfferings, so every AWS answer here comes from botocore's
Stubber, shaped like EC2's (DescribeCapacityBlockOfferings, DescribeAvailabilityZones); the Stubber
also checks the request parameters the command sends.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from botocore.stub import Stubber

from neuronkit import catalog
from neuronkit.cli import main
from neuronkit.config import CapacityBlock

REGION = "us-east-1"
START = dt.datetime(2026, 12, 1, 11, 30, tzinfo=dt.UTC)


@pytest.fixture(autouse=True)
def dummy_credentials(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for key in list(os.environ):
        if key.startswith("AWS_"):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")


class FakeSession:
    """What the command needs of a boto3 session: a region and an EC2 client (a Stubber one here)."""

    def __init__(self, ec2: Any, region: str | None = REGION):
        self.ec2 = ec2
        self.region_name = region

    def client(self, service_name: str, **kwargs: Any) -> Any:
        assert service_name == "ec2"
        return self.ec2


@pytest.fixture
def ec2(monkeypatch: pytest.MonkeyPatch) -> Iterator[Stubber]:
    client = boto3.client("ec2", region_name=REGION)
    stub = Stubber(client)
    monkeypatch.setattr("neuronkit.cli.capacity.aws_session", lambda profile: FakeSession(client))
    with stub:
        yield stub


def offering(
    offering_id: str, start: dt.datetime, fee: str, az: str = "us-east-1a", count: int = 4, hours: int = 48
) -> dict[str, Any]:
    """One DescribeCapacityBlockOfferings entry as EC2 returns it."""
    return {
        "CapacityBlockOfferingId": offering_id,
        "InstanceType": "trn1.32xlarge",
        "AvailabilityZone": az,
        "InstanceCount": count,
        "StartDate": start,
        "EndDate": start + dt.timedelta(hours=hours),
        "CapacityBlockDurationHours": hours,
        "UpfrontFee": fee,
        "CurrencyCode": "USD",
        "Tenancy": "default",
        "CapacityBlockDurationMinutes": hours * 60,
    }


ZONES = {
    "AvailabilityZones": [
        {
            "State": "available",
            "RegionName": REGION,
            "ZoneName": "us-east-1a",
            "ZoneId": "use1-az6",
            "ZoneType": "availability-zone",
        },
        {
            "State": "available",
            "RegionName": REGION,
            "ZoneName": "us-east-1f",
            "ZoneId": "use1-az5",
            "ZoneType": "availability-zone",
        },
    ]
}


def offerings_cmd(*extra: str) -> list[str]:
    return ["capacity", "offerings", "trn1.32xlarge", "--count", "4", "--hours", "48", *extra]


def test_offerings_table_and_how_to_buy(ec2: Stubber, capsys: pytest.CaptureFixture[str]) -> None:
    later = START + dt.timedelta(days=1)
    ec2.add_response(
        "describe_capacity_block_offerings",
        {
            "CapacityBlockOfferings": [
                offering("cb-0fedcba9876543210", later, "3810.5600", az="us-east-1f"),
                offering("cb-0123456789abcdef0", START, "4123.7800"),
            ]
        },
        {"InstanceType": "trn1.32xlarge", "InstanceCount": 4, "CapacityDurationHours": 48},
    )
    ec2.add_response("describe_availability_zones", ZONES, {})
    assert main(offerings_cmd()) == 0
    ec2.assert_no_pending_responses()
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == f"Capacity Block offerings for 4 x trn1.32xlarge for 48 hours in {REGION}:"
    assert lines[1].split() == [
        "OFFERING",
        "ID",
        "AZ",
        "AZ",
        "ID",
        "START",
        "(UTC)",
        "END",
        "(UTC)",
        "HOURS",
        "UPFRONT",
        "FEE",
        "CURRENCY",
    ]
    # earliest start first, with the AZ ID of this account
    assert lines[2].split() == [
        "cb-0123456789abcdef0",
        "us-east-1a",
        "use1-az6",
        "2026-12-01",
        "11:30",
        "2026-12-03",
        "11:30",
        "48",
        "4123.7800",
        "USD",
    ]
    assert lines[3].split() == [
        "cb-0fedcba9876543210",
        "us-east-1f",
        "use1-az5",
        "2026-12-02",
        "11:30",
        "2026-12-04",
        "11:30",
        "48",
        "3810.5600",
        "USD",
    ]
    out = "\n".join(lines)
    assert (
        f"aws ec2 purchase-capacity-block --region {REGION} --capacity-block-offering-id cb-0123456789abcdef0 "
        "--instance-platform Linux/UNIX"
    ) in out


def test_printed_capacity_entry_is_a_valid_capacity_block(ec2: Stubber, capsys: pytest.CaptureFixture[str]) -> None:
    ec2.add_response(
        "describe_capacity_block_offerings", {"CapacityBlockOfferings": [offering("cb-0123456789abcdef0", START, "4123.7800")]}
    )
    ec2.add_response("describe_availability_zones", ZONES)
    assert main(offerings_cmd()) == 0
    out = capsys.readouterr().out
    snippet = out[out.index("  training:") : out.index("and check it with")]
    cluster = yaml.safe_load(snippet.replace("cr-...", "cr-0123456789abcdef0"))["training"][0]
    assert cluster["az_id"] == "use1-az6"
    block = CapacityBlock.model_validate(cluster["capacity"])
    # Every required field of the block, and nothing the model does not know.
    required = {k for k, f in CapacityBlock.model_fields.items() if f.is_required()}
    assert required <= set(cluster["capacity"]) <= set(CapacityBlock.model_fields)
    assert (block.instance_type, block.az_id, block.instance_count) == ("trn1.32xlarge", "use1-az6", 4)
    assert (block.start, block.end) == (START, START + dt.timedelta(hours=48))
    assert block.upfront_fee_usd == 4123.78  # the offering's UpfrontFee: `neuronkit cost` prices the block by it


def test_start_and_end_are_sent_as_date_ranges(ec2: Stubber, capsys: pytest.CaptureFixture[str]) -> None:
    ec2.add_response(
        "describe_capacity_block_offerings",
        {"CapacityBlockOfferings": []},
        {
            "InstanceType": "trn1.32xlarge",
            "InstanceCount": 4,
            "CapacityDurationHours": 48,
            "StartDateRange": dt.datetime(2026, 12, 1, tzinfo=dt.UTC),
            "EndDateRange": dt.datetime(2026, 12, 15, 9, 0, tzinfo=dt.UTC),
        },
    )
    assert main(offerings_cmd("--start", "2026-12-01", "--end", "2026-12-15T09:00:00+00:00")) == 0
    ec2.assert_no_pending_responses()
    assert capsys.readouterr().out.startswith("no Capacity Block offerings for 4 x trn1.32xlarge for 48 hours in us-east-1;")


def test_access_denied_is_one_line(ec2: Stubber, capsys: pytest.CaptureFixture[str]) -> None:
    ec2.add_client_error(
        "describe_capacity_block_offerings", "UnauthorizedOperation", "You are not authorized to perform this operation.", 403
    )
    assert main(offerings_cmd()) == 2
    assert capsys.readouterr().err.splitlines() == [
        "neuronkit: access denied to ec2:DescribeCapacityBlockOfferings; allow it for your role (see docs/preflight.md)"
    ]


def test_ec2_refusal_is_one_line(ec2: Stubber, capsys: pytest.CaptureFixture[str]) -> None:
    ec2.add_client_error("describe_capacity_block_offerings", "InvalidParameterValue", "The duration 7 hours is not supported.")
    assert main(offerings_cmd()) == 2
    err = capsys.readouterr().err
    assert err == "neuronkit: EC2 refused the request (InvalidParameterValue): The duration 7 hours is not supported.\n"


# --------------------------------------------------------------------------------------------
# checks made before AWS is called: the Stubber holds no answers, so any call would fail the test
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["trn1n.32xlarge", "--count", "4", "--hours", "48"],
            "TYPE: Capacity Blocks are not sold for trn1n.32xlarge; use one of "
            + ", ".join(catalog.capacity_facts()["capacity_blocks"]["instance_types"]),
        ),
        (
            ["trn1.32xlarge", "--count", "3", "--hours", "48"],
            f"--count: a Capacity Block holds {', '.join(map(str, catalog.capacity_facts()['capacity_blocks']['sizes']))} instances, not 3",
        ),
        (["trn1.32xlarge", "--count", "4", "--hours", "0"], "--hours: must be a positive number of hours, not 0"),
        (
            ["trn1.32xlarge", "--count", "4", "--hours", "24", "--region", "eu-west-1"],
            "TYPE: trn1.32xlarge is not offered in eu-west-1",
        ),
        (
            ["trn1.32xlarge", "--count", "4", "--hours", "24", "--start", "2026-12-05", "--end", "2026-12-01"],
            "--end: must be after --start",
        ),
    ],
)
def test_request_is_checked_before_calling_aws(
    ec2: Stubber, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["capacity", "offerings", *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith("neuronkit: ")
    assert message in err
    assert "Traceback" not in err


def test_several_problems_are_reported_together(ec2: Stubber, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capacity", "offerings", "inf2.48xlarge", "--count", "5", "--hours", "48"]) == 2
    err = capsys.readouterr().err
    assert "TYPE: Capacity Blocks are not sold for inf2.48xlarge" in err
    assert "not 5" in err


def test_missing_region_is_one_line(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr("neuronkit.cli.capacity.aws_session", lambda profile: FakeSession(None, region=None))
    assert main(offerings_cmd()) == 2
    assert (
        capsys.readouterr().err == "neuronkit: no AWS region: pass --region or set AWS_REGION (or a region in your AWS profile)\n"
    )


def test_bad_time_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(offerings_cmd("--start", "next tuesday"))
    assert exit_info.value.code == 2
    assert "'next tuesday' is not an ISO 8601 time" in capsys.readouterr().err


def test_ultraserver_offerings_ask_for_whole_ultraservers_and_print_an_ultraserver_cluster(
    ec2: Stubber, capsys: pytest.CaptureFixture[str]
) -> None:
    unit = catalog.ultraserver("u-trn2x64")
    assert unit is not None and unit["instance_type"] == "trn2u.48xlarge" and unit["servers"] == 4
    entry = offering("cb-0aaaabbbbccccdddd", START, "98765.4300", count=4 * unit["servers"], hours=96)
    entry.update(InstanceType=unit["instance_type"], UltraserverType="u-trn2x64", UltraserverCount=4)
    ec2.add_response(
        "describe_capacity_block_offerings",
        {"CapacityBlockOfferings": [entry]},
        {"UltraserverType": "u-trn2x64", "UltraserverCount": 4, "CapacityDurationHours": 96},
    )
    ec2.add_response("describe_availability_zones", ZONES, {})
    assert main(["capacity", "offerings", "--ultraserver-type", "u-trn2x64", "--count", "4", "--hours", "96"]) == 0
    ec2.assert_no_pending_responses()
    out = capsys.readouterr().out
    assert out.splitlines()[0] == f"Capacity Block offerings for 4 x u-trn2x64 UltraServers for 96 hours in {REGION}:"
    # The printed cluster runs whole UltraServers and its block says so; both validate.
    snippet = out[out.index("  training:") :].split("and check it")[0]
    cluster = yaml.safe_load(snippet.replace("cr-...", "cr-0123456789abcdef0"))["training"][0]
    assert cluster["instance_type"] == "trn2u.48xlarge" and cluster["ultraserver"] == "u-trn2x64"
    block = CapacityBlock.model_validate(cluster["capacity"])
    assert (block.ultraserver_type, block.instance_count) == ("u-trn2x64", 16)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--ultraserver-type", "u-trn9x99", "--count", "1", "--hours", "24"], "not an UltraServer type the catalog knows"),
        (["trn2.48xlarge", "--ultraserver-type", "u-trn2x64", "--count", "1", "--hours", "24"], "one of them"),
    ],
)
def test_ultraserver_requests_are_checked_before_aws(
    ec2: Stubber, args: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["capacity", "offerings", *args]) == 2
    assert message in capsys.readouterr().err


def test_each_region_given_is_searched_in_turn(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    asked: list[str] = []
    clients: dict[str, Any] = {}
    stubs: list[Stubber] = []
    for region in (REGION, "us-east-2"):
        clients[region] = boto3.client("ec2", region_name=region)
        stub = Stubber(clients[region])
        offers = [offering("cb-0123456789abcdef0", START, "4123.7800")] if region == REGION else []
        stub.add_response(
            "describe_capacity_block_offerings",
            {"CapacityBlockOfferings": offers},
            {"InstanceType": "trn1.32xlarge", "InstanceCount": 4, "CapacityDurationHours": 48},
        )
        if offers:
            stub.add_response("describe_availability_zones", ZONES, {})
        stub.activate()
        stubs.append(stub)

    class Session(FakeSession):
        def client(self, service_name: str, **kwargs: Any) -> Any:
            asked.append(kwargs["region_name"])
            return clients[kwargs["region_name"]]

    monkeypatch.setattr("neuronkit.cli.capacity.aws_session", lambda profile: Session(None))
    assert main(offerings_cmd("--region", REGION, "--region", "us-east-2")) == 0
    assert asked == [REGION, "us-east-2"]
    for stub in stubs:
        stub.assert_no_pending_responses()
    out = capsys.readouterr().out
    assert out.startswith(f"Capacity Block offerings for 4 x trn1.32xlarge for 48 hours in {REGION}:\n")
    assert "\nno Capacity Block offerings for 4 x trn1.32xlarge for 48 hours in us-east-2; try other" in out


def test_the_type_option_removed_in_0_3_says_the_new_spelling(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["capacity", "offerings", "--type", "trn1.32xlarge", "--count", "4", "--hours", "48"]) == 2
    assert capsys.readouterr().err == "neuronkit: --type was removed in 0.3; use capacity offerings TYPE\n"
