"""Write the sample CUR 2.0 export that ``neuronkit assess --sample`` reads (cur2-sample.csv.gz beside this file).

    python -m neuronkit.adoption.sample.make_sample

A month (October 2026, hourly rows) of a team's GPU spend in us-west-2, as AWS Data Exports writes it (gzip CSV):

- 4 x g6e.12xlarge serving Llama-70B on EC2 (tags team=chat, workload=serving); two of the four are covered by
  a Compute Savings Plan (SavingsPlanCoveredUsage rows at an illustrative 28% discount, with their
  SavingsPlanNegation rows), two run On-Demand;
- 2 x p4d.24xlarge training on EC2 for 400 hours each (team=research, workload=training);
- SageMaker training jobs on ml.g5.12xlarge (no tags: told by the usage type Train);
- one untagged g5.xlarge development box (unknown kind: never guessed);
- non-GPU rows (m5.large, S3) that assess skips.

EC2 rates are the catalog's On-Demand prices; the SageMaker rate and the Savings Plan discount are illustrative
sample values, not catalog facts.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path

from neuronkit.adoption.billing import SAMPLE, write_csv_gz
from neuronkit.catalog import pricing

REGION, PREFIX = "us-west-2", "USW2"
START = dt.datetime(2026, 10, 1, tzinfo=dt.UTC)
HOURS = 31 * 24
SP_DISCOUNT = 0.28  # illustrative Compute Savings Plan discount
SAGEMAKER_G5_12XL = 7.09  # illustrative SageMaker training rate for ml.g5.12xlarge, USD/hour
HEADER = [
    "bill_billing_period_start_date", "line_item_usage_start_date", "line_item_line_item_type", "line_item_product_code",
    "line_item_usage_type", "line_item_usage_amount", "line_item_unblended_cost", "line_item_resource_id",
    "line_item_availability_zone", "product_instance_type", "product_region_code", "pricing_term",
    "pricing_public_on_demand_cost", "savings_plan_savings_plan_effective_cost", "reservation_effective_cost",
    "resource_tags",
]  # fmt: skip


def _row(
    hour: int, line_type: str, product: str, usage_type: str, cost: float, resource: str, itype: str, **kw: object
) -> list[object]:
    start = START + dt.timedelta(hours=hour)
    tags = kw.get("tags") or {}
    return [
        START.strftime("%Y-%m-%dT%H:%M:%SZ"), start.strftime("%Y-%m-%dT%H:%M:%SZ"), line_type, product, usage_type,
        kw.get("amount", 1), f"{cost:.6f}", resource, kw.get("az", "us-west-2a"), itype, REGION,
        kw.get("term", "OnDemand"), f"{kw.get('public', cost):.6f}", f"{kw.get('sp', 0.0):.6f}", "0.000000",
        json.dumps(tags, sort_keys=True) if tags else "",
    ]  # fmt: skip


def records() -> Iterator[list[object]]:
    table = pricing.load_prices()
    g6e, p4d = table.require("g6e.12xlarge", REGION), table.require("p4d.24xlarge", REGION)
    g5 = table.require("g5.xlarge", REGION)
    serving = {"user:team": "chat", "user:workload": "serving"}
    training = {"user:team": "research", "user:workload": "training"}
    for hour in range(HOURS):
        for n in range(4):  # the serving fleet: nodes 0 and 1 under a Savings Plan
            rid, usage = f"i-0c4a7e12serve{n}", f"{PREFIX}-BoxUsage:g6e.12xlarge"
            if n < 2:
                yield _row(hour, "SavingsPlanCoveredUsage", "AmazonEC2", usage, g6e, rid, "g6e.12xlarge", tags=serving,
                           sp=g6e * (1 - SP_DISCOUNT), term="")  # fmt: skip
                yield _row(
                    hour, "SavingsPlanNegation", "AmazonEC2", usage, -g6e, rid, "g6e.12xlarge", tags=serving, public=0.0, term=""
                )
            else:
                yield _row(hour, "Usage", "AmazonEC2", usage, g6e, rid, "g6e.12xlarge", tags=serving)
        if hour < 400:
            for n in range(2):
                yield _row(hour, "Usage", "AmazonEC2", f"{PREFIX}-BoxUsage:p4d.24xlarge", p4d, f"i-0b7d5f90train{n}",
                           "p4d.24xlarge", tags=training, az="us-west-2b")  # fmt: skip
        if 200 <= hour < 320:
            yield _row(hour, "Usage", "AmazonSageMaker", f"{PREFIX}-Train:ml.g5.12xlarge", SAGEMAKER_G5_12XL,
                       "arn:aws:sagemaker:us-west-2:111122223333:training-job/finetune-7", "ml.g5.12xlarge")  # fmt: skip
        if hour % 24 < 10:  # a development box, office hours
            yield _row(hour, "Usage", "AmazonEC2", f"{PREFIX}-BoxUsage:g5.xlarge", g5, "i-0dev5box", "g5.xlarge")
        yield _row(hour, "Usage", "AmazonEC2", f"{PREFIX}-BoxUsage:m5.large", 0.096, "i-0web", "m5.large")
    yield _row(0, "Usage", "AmazonS3", "USW2-TimedStorage-ByteHrs", 41.2, "models-bucket", "", amount=1800, term="")


def main(path: Path = SAMPLE) -> None:
    write_csv_gz(path, HEADER, records())
    print(f"wrote {path}")


if __name__ == "__main__":  # pragma: no cover
    main()
