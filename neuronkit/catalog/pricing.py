"""On-Demand prices and GPU equivalents as data, and their refresh from the AWS Price List API.

``prices.json`` holds dated On-Demand Linux hourly prices (USD) per region; ``equivalents.yaml`` names the
GPU type each Neuron type is compared with. ``neuronkit catalog refresh --prices`` rewrites prices.json
with :func:`refresh_prices`, which asks the Price List API (``pricing:GetProducts``, served from
us-east-1) for each instance type and region. Code never carries a price: it reads this table.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from neuronkit import catalog, clock

_HERE = Path(__file__).parent
PRICES_FILE = _HERE / "prices.json"
EQUIVALENTS_FILE = _HERE / "equivalents.yaml"

# The Price List query API answers in us-east-1 (also eu-central-1 and ap-south-1) for every region.
PRICING_API_REGION = "us-east-1"
# What "the On-Demand price" means here: Linux, shared tenancy, no pre-installed software, instances that
# run (capacitystatus Used; the other values price unused and allocated capacity reservations).
PRODUCT_FILTERS: dict[str, str] = {
    "operatingSystem": "Linux",
    "tenancy": "Shared",
    "preInstalledSw": "NA",
    "capacitystatus": "Used",
}
REFRESH_COMMAND = "neuronkit catalog refresh --prices"


class MissingPriceError(Exception):
    """Prices the table lacks; ``problems`` holds one line per instance type and region."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


class PricingError(Exception):
    """The Price List API answered something the refresh cannot turn into one price."""


@dataclass(frozen=True)
class PriceTable:
    """Hourly On-Demand prices per region and instance type, with where and when they came from."""

    source: str
    as_of: str
    currency: str
    hours_per_month: float
    prices: Mapping[str, Mapping[str, float]]
    unpriced: Mapping[str, str]
    path: Path

    @property
    def regions(self) -> tuple[str, ...]:
        return tuple(self.prices)

    @property
    def shown_path(self) -> str:
        return shown_path(self.path)

    def hourly(self, instance_type: str, region: str) -> float | None:
        """The hourly price, or None when the table has none."""
        return self.prices.get(region, {}).get(instance_type)

    def require(self, instance_type: str, region: str) -> float:
        """The hourly price; :class:`MissingPriceError` explaining why and how to fix it when absent."""
        price = self.hourly(instance_type, region)
        if price is None:
            raise MissingPriceError([self.missing_message(instance_type, region)])
        return price

    def missing_message(self, instance_type: str, region: str) -> str:
        head = f"no On-Demand price for {instance_type} in {region} in {self.shown_path} (as of {self.as_of})"
        # A refresh rewrites the whole table, so it names every region the table should keep.
        regions = "" if region in self.prices else "".join(f" --region {r}" for r in [*self.prices, region])
        refresh = f"run `{REFRESH_COMMAND}{regions}` (needs pricing:GetProducts) or add the price by hand"
        known = catalog.instance_types()
        if instance_type not in known:
            return f"{head}: {instance_type} is not in the instance catalog; check the spelling"
        offered = known[instance_type].az_ids(region)
        if region in catalog.metadata()["regions"] and not offered:
            where = ", ".join(sorted(known[instance_type].offerings)) or "no scanned region"
            return f"{head}: {instance_type} is not offered in {region} (offered in {where}); use a type offered there"
        if instance_type in self.unpriced:
            return f"{head}: {self.unpriced[instance_type]}"
        if region not in self.prices:
            return f"{head}: the table covers {', '.join(self.prices)} only; {refresh}"
        return f"{head}; {refresh}"


@dataclass(frozen=True)
class Equivalent:
    """The GPU type a Neuron type is compared with, and why."""

    neuron_type: str
    gpu_type: str
    reason: str


def shown_path(path: Path) -> str:
    """Path as a user finds it in the repository: neuronkit/catalog/prices.json."""
    try:
        return str(path.resolve().relative_to(_HERE.parent.parent))
    except ValueError:
        return str(path)


def _table(doc: dict[str, Any], path: Path) -> PriceTable:
    return PriceTable(
        source=doc["source"],
        as_of=doc["as_of"],
        currency=doc["currency"],
        hours_per_month=doc["hours_per_month"],
        prices={r: dict(p) for r, p in doc["prices"].items()},
        unpriced=dict(doc.get("unpriced", {})),
        path=path,
    )


@cache
def _load(path: str) -> PriceTable:
    p = Path(path)
    return _table(json.loads(p.read_text()), p)


def load_prices(path: Path | None = None) -> PriceTable:
    """The price table (prices.json unless ``path`` names another file)."""
    return _load(str(path or PRICES_FILE))


@cache
def equivalents() -> dict[str, Equivalent]:
    """Neuron instance type -> its GPU equivalent, from equivalents.yaml."""
    data: dict[str, Any] = yaml.safe_load(EQUIVALENTS_FILE.read_text())
    return {name: Equivalent(name, e["gpu"], e["reason"]) for name, e in data["equivalents"].items()}


# --------------------------------------------------------------------------------------------
# refresh from the Price List API
# --------------------------------------------------------------------------------------------
def product_filters(instance_type: str, region: str) -> list[dict[str, str]]:
    """The GetProducts TERM_MATCH filters for one instance type's On-Demand Linux price in one region."""
    fields = {"instanceType": instance_type, "regionCode": region, **PRODUCT_FILTERS}
    return [{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in fields.items()]


def parse_price_list(price_list: Iterable[str | dict[str, Any]], instance_type: str, region: str) -> float | None:
    """The hourly USD On-Demand price in a GetProducts ``PriceList`` (a list of JSON strings).

    Only shared-tenancy ``BoxUsage`` products of the type and region count, and only their OnDemand
    terms (Reserved terms sit next to them in the same document). A price of 0 means "no On-Demand
    price" (the API lists some Capacity-Block-only types that way). Returns None when nothing matches;
    raises :class:`PricingError` when products disagree.
    """
    found: dict[str, float] = {}
    for raw in price_list:
        item: dict[str, Any] = json.loads(raw) if isinstance(raw, str) else raw
        product = item.get("product", {})
        attrs = product.get("attributes", {})
        if attrs.get("instanceType") != instance_type or attrs.get("regionCode", region) != region:
            continue
        if "BoxUsage" not in attrs.get("usagetype", "BoxUsage") or attrs.get("marketoption", "OnDemand") != "OnDemand":
            continue
        for term in item.get("terms", {}).get("OnDemand", {}).values():
            for dim in term.get("priceDimensions", {}).values():
                usd = dim.get("pricePerUnit", {}).get("USD")
                if dim.get("unit", "Hrs") != "Hrs" or usd is None:
                    continue
                value = float(usd)
                if value > 0:
                    found[product.get("sku", "?")] = value
    prices = sorted(set(found.values()))
    if not prices:
        return None
    if len(prices) > 1:
        detail = ", ".join(f"{sku}: {price}" for sku, price in sorted(found.items()))
        raise PricingError(
            f"{instance_type} in {region}: the Price List API returned {len(prices)} different On-Demand prices ({detail}); "
            "check the product filters in neuronkit/catalog/pricing.py"
        )
    return prices[0]


def fetch_price(client: Any, instance_type: str, region: str) -> float | None:
    """One type's hourly On-Demand price in one region, read with a ``pricing`` client."""
    items: list[str] = []
    pages = client.get_paginator("get_products").paginate(
        ServiceCode="AmazonEC2", Filters=product_filters(instance_type, region), FormatVersion="aws_v1"
    )
    for page in pages:
        items.extend(page.get("PriceList", []))
    return parse_price_list(items, instance_type, region)


def refresh_prices(
    session: Any,
    regions: Iterable[str],
    instance_types: Iterable[str],
    *,
    source: str = "",
    hours_per_month: float | None = None,
) -> dict[str, Any]:
    """Build a prices.json document from the Price List API with a boto3 session (real or stubbed).

    Every (region, instance type) pair is asked for; a type without an On-Demand price in some region is
    recorded under ``unpriced`` with the regions that lacked it. ``hours_per_month`` is carried over from
    the current table unless given.
    """
    regions = list(regions)
    types = list(instance_types)
    client = session.client("pricing", region_name=PRICING_API_REGION)
    today = clock.utc_now().date().isoformat()
    prices: dict[str, dict[str, float]] = {}
    lacking: dict[str, list[str]] = {}
    for region in regions:
        prices[region] = {}
        for instance_type in types:
            price = fetch_price(client, instance_type, region)
            if price is None:
                lacking.setdefault(instance_type, []).append(region)
            else:
                prices[region][instance_type] = price
    return {
        "source": source or "AWS Price List API (pricing:GetProducts, ServiceCode AmazonEC2, On-Demand terms)",
        "as_of": today,
        "currency": "USD",
        "unit": "On-Demand Linux, shared tenancy, per instance-hour",
        "hours_per_month": hours_per_month if hours_per_month is not None else load_prices().hours_per_month,
        "regions": regions,
        "prices": {r: dict(sorted(p.items())) for r, p in prices.items()},
        "unpriced": {
            t: f"no On-Demand Linux price in the AWS Price List API for {', '.join(rs)} (fetched {today})"
            for t, rs in sorted(lacking.items())
        },
    }


def write_prices(document: dict[str, Any], path: Path = PRICES_FILE) -> None:
    path.write_text(json.dumps(document, indent=1) + "\n")
    _load.cache_clear()
