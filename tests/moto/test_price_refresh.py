"""The On-Demand price refresh (`neuronkit catalog refresh --prices`) against the AWS Price List API.

moto does not implement the Price List API: under ``mock_aws`` (moto 5.2.5) ``pricing.get_products``
answers HTTP 404 "Not yet implemented" (``test_moto_does_not_implement_the_price_list_api`` checks this,
so the day moto gains it this file should move to it). The refresh is therefore tested with botocore's
Stubber, which also checks the exact request (service code and TERM_MATCH filters), fed responses shaped
like AWS's: ``PriceList`` is a list of JSON *strings*, each a product with its attributes and its
OnDemand and Reserved terms.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import boto3
import botocore.session
import pytest
from botocore.exceptions import ClientError
from botocore.stub import Stubber
from moto import mock_aws

from neuronkit import catalog, clock
from neuronkit.catalog import pricing
from neuronkit.cli import main

LOCATIONS = {"us-east-1": ("US East (N. Virginia)", ""), "us-east-2": ("US East (Ohio)", "USE2-")}


def product(instance_type: str, region: str, usd: str, *, sku: str = "JRTCKXETXF7QSHJK", **attrs: str) -> str:
    """One PriceList entry as AWS sends it: a JSON string holding the product and its terms."""
    location, prefix = LOCATIONS[region]
    attributes = {
        "instanceType": instance_type,
        "regionCode": region,
        "location": location,
        "locationType": "AWS Region",
        "operatingSystem": "Linux",
        "tenancy": "Shared",
        "preInstalledSw": "NA",
        "capacitystatus": "Used",
        "licenseModel": "No License required",
        "usagetype": f"{prefix}BoxUsage:{instance_type}",
        "operation": "RunInstances",
        "servicecode": "AmazonEC2",
        **attrs,
    }
    on_demand_code, reserved_code = f"{sku}.JRTCKXETXF", f"{sku}.4NA7Y494T4"
    return json.dumps(
        {
            "product": {"productFamily": "Compute Instance", "attributes": attributes, "sku": sku},
            "serviceCode": "AmazonEC2",
            "terms": {
                "OnDemand": {
                    on_demand_code: {
                        "priceDimensions": {
                            f"{on_demand_code}.6YS6EN2CT7": {
                                "unit": "Hrs",
                                "endRange": "Inf",
                                "description": f"${usd} per On Demand Linux {instance_type} Instance Hour",
                                "appliesTo": [],
                                "rateCode": f"{on_demand_code}.6YS6EN2CT7",
                                "beginRange": "0",
                                "pricePerUnit": {"USD": usd},
                            }
                        },
                        "sku": sku,
                        "effectiveDate": "2026-11-01T00:00:00Z",
                        "offerTermCode": "JRTCKXETXF",
                        "termAttributes": {},
                    }
                },
                # Reserved terms come in the same document and must not be taken for the On-Demand price.
                "Reserved": {
                    reserved_code: {
                        "priceDimensions": {
                            f"{reserved_code}.6YS6EN2CT7": {
                                "unit": "Hrs",
                                "pricePerUnit": {"USD": "1.0000000000"},
                                "description": "Linux/UNIX (Amazon VPC), 1 year, No Upfront",
                            }
                        },
                        "sku": sku,
                        "offerTermCode": "4NA7Y494T4",
                        "termAttributes": {"LeaseContractLength": "1yr", "PurchaseOption": "No Upfront"},
                    }
                },
            },
            "version": "20261101000000",
            "publicationDate": "2026-11-01T00:00:00Z",
        }
    )


def expected(instance_type: str, region: str, **extra: Any) -> dict[str, Any]:
    return {
        "ServiceCode": "AmazonEC2",
        "FormatVersion": "aws_v1",
        "Filters": [
            {"Type": "TERM_MATCH", "Field": "instanceType", "Value": instance_type},
            {"Type": "TERM_MATCH", "Field": "regionCode", "Value": region},
            {"Type": "TERM_MATCH", "Field": "operatingSystem", "Value": "Linux"},
            {"Type": "TERM_MATCH", "Field": "tenancy", "Value": "Shared"},
            {"Type": "TERM_MATCH", "Field": "preInstalledSw", "Value": "NA"},
            {"Type": "TERM_MATCH", "Field": "capacitystatus", "Value": "Used"},
        ],
        **extra,
    }


def page(*items: str, next_token: str | None = None) -> dict[str, Any]:
    response: dict[str, Any] = {"FormatVersion": "aws_v1", "PriceList": list(items)}
    if next_token:
        response["NextToken"] = next_token
    return response


class StubSession:
    """A boto3-like session whose only client is a stubbed Price List client in us-east-1."""

    def __init__(self) -> None:
        self.pricing = botocore.session.get_session().create_client(
            "pricing", region_name="us-east-1", aws_access_key_id="testing", aws_secret_access_key="testing"
        )
        self.stub = Stubber(self.pricing)
        self.asked: list[tuple[str, str | None]] = []

    def client(self, service: str, region_name: str | None = None, **_: Any) -> Any:
        self.asked.append((service, region_name))
        return self.pricing


@pytest.fixture
def session() -> StubSession:
    s = StubSession()
    s.stub.activate()
    yield s
    s.stub.deactivate()


def test_refresh_reads_on_demand_prices_and_records_what_has_none(session):
    session.stub.add_response(
        "get_products", page(product("trn1.32xlarge", "us-east-2", "21.5000000000")), expected("trn1.32xlarge", "us-east-2")
    )
    session.stub.add_response("get_products", page(), expected("trn2u.48xlarge", "us-east-2"))
    doc = pricing.refresh_prices(session, ["us-east-2"], ["trn1.32xlarge", "trn2u.48xlarge"], hours_per_month=730)
    session.stub.assert_no_pending_responses()
    assert session.asked == [("pricing", "us-east-1")]  # the Price List API answers in us-east-1 for every region
    assert doc["prices"] == {"us-east-2": {"trn1.32xlarge": 21.5}}
    today = clock.utc_now().date().isoformat()
    assert doc["unpriced"] == {
        "trn2u.48xlarge": f"no On-Demand Linux price in the AWS Price List API for us-east-2 (fetched {today})"
    }
    assert (doc["as_of"], doc["currency"], doc["hours_per_month"]) == (today, "USD", 730)
    assert "AWS Price List API" in doc["source"]


def test_refresh_follows_next_token(session):
    session.stub.add_response("get_products", page(next_token="page-2"), expected("inf2.xlarge", "us-east-1"))
    session.stub.add_response(
        "get_products",
        page(product("inf2.xlarge", "us-east-1", "0.7582000000")),
        expected("inf2.xlarge", "us-east-1", NextToken="page-2"),
    )
    doc = pricing.refresh_prices(session, ["us-east-1"], ["inf2.xlarge"], hours_per_month=730)
    session.stub.assert_no_pending_responses()
    assert doc["prices"]["us-east-1"] == {"inf2.xlarge": 0.7582}


def test_zero_prices_and_other_products_are_not_on_demand_prices():
    items = [
        product("trn2.48xlarge", "us-east-2", "0.0000000000"),  # how the list shows a Capacity-Block-only type
        product("trn2.48xlarge", "us-east-2", "44.0000000000", sku="DEDICATED", usagetype="USE2-DedicatedUsage:trn2.48xlarge"),
        product("trn2.48xlarge", "us-east-2", "35.7600000000", sku="BLOCK", marketoption="CapacityBlock"),
        product("trn2.48xlarge", "us-east-1", "45.0000000000", sku="OTHERREGION"),
    ]
    assert pricing.parse_price_list(items, "trn2.48xlarge", "us-east-2") is None


def test_products_that_disagree_are_an_error_naming_them():
    items = [
        product("p5.48xlarge", "us-east-1", "55.0400000000", sku="AAA"),
        product("p5.48xlarge", "us-east-1", "98.3200000000", sku="BBB"),
    ]
    with pytest.raises(pricing.PricingError) as err:
        pricing.parse_price_list(items, "p5.48xlarge", "us-east-1")
    assert "p5.48xlarge in us-east-1: the Price List API returned 2 different On-Demand prices (AAA: 55.04, BBB: 98.32)" in str(
        err.value
    )


@pytest.fixture
def prices_file(tmp_path, monkeypatch) -> Path:
    """prices.json copied to a temporary folder, so the command under test rewrites the copy."""
    target = tmp_path / "prices.json"
    shutil.copy(pricing.PRICES_FILE, target)
    monkeypatch.setattr(pricing, "PRICES_FILE", target)
    yield target
    pricing._load.cache_clear()


def test_cli_refresh_prices_rewrites_prices_json(session, prices_file, monkeypatch, capsys):
    monkeypatch.setattr(boto3, "Session", lambda *a, **k: session)
    hours = pricing.load_prices(prices_file).hours_per_month
    types = list(catalog.instance_types())
    for name in types:  # the command asks for every catalog type; only trn1.32xlarge has a price here
        items = [product(name, "us-east-2", "21.5000000000")] if name == "trn1.32xlarge" else []
        session.stub.add_response("get_products", page(*items), expected(name, "us-east-2"))
    assert main(["catalog", "refresh", "--prices", "--region", "us-east-2"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("wrote ")
    assert (
        f"(1 prices in 1 regions, as of {clock.utc_now().date().isoformat()}; {len(types) - 1} types without an On-Demand price)"
        in out
    )
    table = pricing.load_prices(prices_file)
    assert table.prices == {"us-east-2": {"trn1.32xlarge": 21.5}}
    assert table.hours_per_month == hours  # carried over from the table it replaces
    assert table.as_of == clock.utc_now().date().isoformat()


def test_cli_refresh_prices_without_permission_is_one_line(session, prices_file, monkeypatch, capsys):
    monkeypatch.setattr(boto3, "Session", lambda *a, **k: session)
    before = prices_file.read_text()
    session.stub.add_client_error(
        "get_products", service_error_code="AccessDeniedException", service_message="not authorized", http_status_code=400
    )
    assert main(["catalog", "refresh", "--prices", "--region", "us-east-1"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("neuronkit: cannot read the AWS Price List API (")
    assert err.rstrip().endswith("it needs credentials allowed pricing:GetProducts")
    assert prices_file.read_text() == before  # nothing written on failure


def test_moto_does_not_implement_the_price_list_api(monkeypatch):
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        client = boto3.client("pricing", region_name="us-east-1")
        with pytest.raises(ClientError) as err:
            client.get_products(ServiceCode="AmazonEC2", Filters=expected("trn1.32xlarge", "us-east-1")["Filters"])
    assert "Not yet implemented" in str(err.value)
