"""`neuronkit assess --from`: a CUR 2.0 export of a month of g6e.12xlarge serving and p4d.24xlarge training in
us-west-2, read offline (gzip CSV, CSV, Parquet; a folder; a manifest), the Cost Explorer JSON, the mapping,
like-for-like prices, commitments, unknown workloads, missing tags, bad inputs and the shipped sample."""

from __future__ import annotations

import json
import types
from pathlib import Path
from typing import Any

import pytest

from neuronkit import catalog
from neuronkit.adoption import assess, billing, offline
from neuronkit.adoption.sample import make_sample
from neuronkit.catalog import pricing
from neuronkit.cli import main

REGION = "us-west-2"
DAYS = 30
HEADER = make_sample.HEADER
SERVING = {"user:team": "chat", "user:workload": "serving"}
TRAINING = {"user:team": "research", "user:workload": "training"}


def _row(day: int, line_type: str, usage_type: str, hours: float, cost: float, resource: str, itype: str, tags: dict[str, str],
         sp: float = 0.0, product: str = "AmazonEC2") -> list[Any]:  # fmt: skip
    date = f"2026-09-{day + 1:02d}T00:00:00Z"
    return [
        "2026-09-01T00:00:00Z", date, line_type, product, usage_type, hours, cost, resource, "us-west-2a", itype, REGION,
        "OnDemand", cost if line_type != "SavingsPlanNegation" else 0.0, sp, 0.0, json.dumps(tags) if tags else "",
    ]  # fmt: skip


def month_rows() -> list[list[Any]]:
    """Daily rows: 4 x g6e.12xlarge serving (node 0 under a Savings Plan), 2 x p4d.24xlarge training all month,
    an untagged g5.xlarge, an m5.large (not a GPU)."""
    table = pricing.load_prices()
    g6e, p4d, g5 = (table.require(t, REGION) for t in ("g6e.12xlarge", "p4d.24xlarge", "g5.xlarge"))
    out: list[list[Any]] = []
    for day in range(DAYS):
        for n in range(4):
            usage = "USW2-BoxUsage:g6e.12xlarge"
            if n == 0:
                out.append(
                    _row(day, "SavingsPlanCoveredUsage", usage, 24, 24 * g6e, "i-sp0", "g6e.12xlarge", SERVING, sp=24 * g6e * 0.7)
                )
                out.append(_row(day, "SavingsPlanNegation", usage, 0, -24 * g6e, "i-sp0", "g6e.12xlarge", SERVING))
            else:
                out.append(_row(day, "Usage", usage, 24, 24 * g6e, f"i-serve{n}", "g6e.12xlarge", SERVING))
        for n in range(2):
            out.append(_row(day, "Usage", "USW2-BoxUsage:p4d.24xlarge", 24, 24 * p4d, f"i-train{n}", "p4d.24xlarge", TRAINING))
        out.append(_row(day, "Usage", "USW2-BoxUsage:g5.xlarge", 8, 8 * g5, "i-dev", "g5.xlarge", {}))
        out.append(_row(day, "Usage", "USW2-BoxUsage:m5.large", 24, 2.3, "i-web", "m5.large", {}))
    return out


@pytest.fixture
def export_file(tmp_path: Path) -> Path:
    path = tmp_path / "cur.csv.gz"
    billing.write_csv_gz(path, HEADER, month_rows())
    return path


def _read(path: Path, **kw: Any) -> billing.Export:
    return billing.read(path, workload_tag=kw.pop("workload_tag", "workload"), is_gpu=assess._is_gpu, **kw)


def _by_type(result: offline.BillingAssessment) -> dict[str, offline.Priced]:
    return {p.group.instance_type: p for p in result.priced}


def test_a_month_of_serving_and_training_maps_with_like_for_like_prices(export_file: Path) -> None:
    result = offline.assess_export(_read(export_file))
    rows = _by_type(result)
    assert set(rows) == {"g6e.12xlarge", "p4d.24xlarge", "g5.xlarge"}  # m5.large is not a GPU
    table = pricing.load_prices()

    serving = rows["g6e.12xlarge"]
    assert serving.group.kind == "inference" and serving.match is not None
    assert serving.match.neuron_type == "inf2.24xlarge"
    hours = 4 * 24 * DAYS
    # Like for like: the same node-hours at both On-Demand list prices.
    assert serving.gpu_list_monthly == pytest.approx(hours * table.require("g6e.12xlarge", REGION))
    assert serving.neuron_list_monthly == pytest.approx(hours * table.require("inf2.24xlarge", REGION))
    inf2, g6e = catalog.get("inf2.24xlarge"), catalog.get("g6e.12xlarge")
    why = serving.match.why
    assert f"{inf2.neuron_memory_mib:,} MiB" in why and f"{g6e.gpu_memory_mib:,} MiB" in why
    assert "TP 12" in why and all(z in why for z in inf2.az_ids(REGION)) and "release: Neuron" in why

    # Training: a type offered in us-west-2 (trn2.3xlarge is not: the old mapping proposed it).
    training = rows["p4d.24xlarge"]
    assert training.group.kind == "training" and training.match is not None
    assert training.match.neuron_type == "trn1.32xlarge"
    assert catalog.get("trn1.32xlarge").az_ids(REGION) and not catalog.get("trn2.3xlarge").az_ids(REGION)
    assert training.neuron_list_monthly == pytest.approx(2 * 24 * DAYS * table.require("trn1.32xlarge", REGION))

    text = offline.render(result)
    assert "| g6e.12xlarge us-west-2 (ec2) | tag workload=serving | 4.0 |" in text
    assert "- g6e.12xlarge us-west-2 → inf2.24xlarge: memory: 196,608 MiB" in text


def test_a_commitment_covered_row_is_reported_as_such(export_file: Path) -> None:
    result = offline.assess_export(_read(export_file))
    serving = _by_type(result)["g6e.12xlarge"]
    g6e = pricing.load_prices().require("g6e.12xlarge", REGION)
    assert serving.covered_hours == 24 * DAYS and dict(serving.group.covered_rows) == {"SavingsPlanCoveredUsage": DAYS}
    # Billed: three nodes at list plus the covered node at its Savings Plan effective cost (negations ignored).
    assert serving.effective_monthly == pytest.approx(3 * 24 * DAYS * g6e + 24 * DAYS * g6e * 0.7)
    text = offline.render(result)
    assert (
        f"commitments: {24 * DAYS:,} of {4 * 24 * DAYS:,} hours were covered: {DAYS} SavingsPlanCoveredUsage rows (e.g. i-sp0)"
        in text
    )
    assert "Neuron commitments (Savings Plans, Reserved Instances) are not priced" in text
    assert "commitments:" not in text.split("p4d.24xlarge us-west-2 →")[1]  # training had none


def test_untagged_usage_is_unknown_and_not_mapped(export_file: Path) -> None:
    result = offline.assess_export(_read(export_file))
    dev = _by_type(result)["g5.xlarge"]
    assert (dev.group.kind, dev.match) == ("unknown", None)
    assert "never guessed" in offline.render(result)
    # Without --workload-tag the export's own workload tag is detected and used; the untagged group stays unknown.
    bare = _read(export_file, workload_tag=None)
    assert bare.detected_workload_tag == "user:workload"
    assert {p.group.kind for p in offline.assess_export(bare).priced} == {"unknown", "training", "inference"}


def test_a_tag_value_that_is_neither_kind_is_named(tmp_path: Path) -> None:
    path = tmp_path / "cur.csv"
    billing.write_csv_gz(
        path.with_suffix(".csv.gz"),
        HEADER,
        [_row(0, "Usage", "USW2-BoxUsage:g6e.12xlarge", 24, 250.0, "i-1", "g6e.12xlarge", {"user:workload": "batch-etl"})],
    )
    (group,) = _read(path.with_suffix(".csv.gz")).groups.values()
    assert group.kind == "unknown" and "tag workload=batch-etl is neither a training nor an inference value" in group.kind_basis


def test_sagemaker_usage_types_tell_the_kind() -> None:
    assert billing.classify("AmazonSageMaker", "USW2-Train:ml.p4d.24xlarge", {}, None)[0] == "training"
    assert billing.classify("AmazonSageMaker", "USE1-Host:ml.g5.12xlarge", {}, None)[0] == "inference"
    assert billing.classify("AmazonSageMaker", "USE1-Notebk:ml.g5.xlarge", {}, None)[0] == "unknown"
    assert billing.classify("AmazonEC2", "USE1-BoxUsage:g5.xlarge", {}, None)[0] == "unknown"


def test_named_tags_group_spend_and_missing_ones_say_activate(export_file: Path) -> None:
    export = _read(export_file, tags=["team", "cost-center"])
    names = {g.name for g in export.groups.values()}
    assert "g6e.12xlarge us-west-2 (team=chat, cost-center=(untagged))" in names
    result = offline.assess_export(export)
    (problem,) = result.problems
    assert problem.startswith(
        "tag 'cost-center' was not found in the export's resource_tags (tags seen: user:team, user:workload)"
    )
    assert "only activated cost-allocation tags appear there" in problem


# --------------------------------------------------------------------------------------------
# streaming: folders, manifests, Parquet
# --------------------------------------------------------------------------------------------
def _totals(export: billing.Export) -> dict[tuple[str, str], float]:
    return {(g.instance_type, g.kind): round(g.total_hours, 6) for g in export.groups.values()}


def _write_parquet(path: Path, rows: list[list[Any]]) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns: dict[str, list[Any]] = {h: [r[i] for r in rows] for i, h in enumerate(HEADER)}
    numeric = ("line_item_usage_amount", "line_item_unblended_cost", "pricing_public_on_demand_cost",
               "savings_plan_savings_plan_effective_cost", "reservation_effective_cost")  # fmt: skip
    arrays = {h: pa.array([float(x) for x in v]) if h in numeric else pa.array([str(x) for x in v]) for h, v in columns.items()}
    # resource_tags is a map column in Parquet
    arrays["resource_tags"] = pa.array(
        [list(json.loads(t).items()) if t else [] for t in columns["resource_tags"]], type=pa.map_(pa.string(), pa.string())
    )
    pq.write_table(pa.table(arrays), path, row_group_size=16)


def test_a_folder_of_several_files_in_every_format_reads_as_one_export(tmp_path: Path, export_file: Path) -> None:
    rows = month_rows()
    folder = tmp_path / "export" / "data" / "BILLING_PERIOD=2026-09"
    folder.mkdir(parents=True)
    third = len(rows) // 3
    billing.write_csv_gz(folder / "x-00001.csv.gz", HEADER, rows[:third])
    billing.write_csv_gz(folder / "x-00002.csv.gz", HEADER, rows[third : 2 * third])
    _write_parquet(folder / "x-00003.parquet", rows[2 * third :])
    whole = _read(export_file)
    parts = _read(tmp_path / "export")
    assert _totals(parts) == _totals(whole) and len(_totals(whole)) == 3
    assert parts.rows_read == whole.rows_read == len(rows) and parts.periods == {"2026-09"}
    assert parts.tag_keys_seen == {"user:team", "user:workload"}  # the Parquet map column read too


def test_rows_are_streamed_not_loaded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    rows = month_rows()
    _write_parquet(tmp_path / "x.parquet", rows)
    monkeypatch.setattr(billing, "BATCH_ROWS", 10)
    stream = billing.rows(tmp_path / "x.parquet")
    assert isinstance(stream, types.GeneratorType)
    assert next(stream)["line_item_resource_id"] == "i-sp0" and sum(1 for _ in stream) == len(rows) - 1
    billing.write_csv_gz(tmp_path / "x.csv.gz", HEADER, rows)
    assert isinstance(billing.rows(tmp_path / "x.csv.gz"), types.GeneratorType)


def test_a_manifest_names_the_data_files_of_a_billing_period(tmp_path: Path, export_file: Path) -> None:
    root = tmp_path / "sync" / "cur" / "gpu-export"
    data = root / "data" / "BILLING_PERIOD=2026-09"
    meta = root / "metadata" / "BILLING_PERIOD=2026-09"
    data.mkdir(parents=True)
    meta.mkdir(parents=True)
    rows = month_rows()
    billing.write_csv_gz(data / "gpu-export-00001.csv.gz", HEADER, rows[:100])
    billing.write_csv_gz(data / "gpu-export-00002.csv.gz", HEADER, rows[100:])
    (data / "stale-00009.csv.gz").write_bytes(b"not read: the manifest does not name it")
    keys = [f"s3://billing-bucket/cur/gpu-export/data/BILLING_PERIOD=2026-09/gpu-export-0000{i}.csv.gz" for i in (1, 2)]
    manifest = meta / "gpu-export-Manifest.json"
    manifest.write_text(json.dumps({"exportName": "gpu-export", "dataFiles": keys}))
    assert _totals(_read(manifest)) == _totals(_read(export_file))
    keys.append("s3://billing-bucket/cur/gpu-export/data/BILLING_PERIOD=2026-09/gpu-export-00003.csv.gz")
    manifest.write_text(json.dumps({"dataFiles": keys}))
    with pytest.raises(billing.BillingError, match="gpu-export-00003.csv.gz is not under .*aws s3 sync"):
        _read(manifest)


# --------------------------------------------------------------------------------------------
# Cost Explorer
# --------------------------------------------------------------------------------------------
def _ce(definitions: list[dict[str, str]], groups: list[tuple[list[str], float, float]]) -> dict[str, Any]:
    return {
        "GroupDefinitions": definitions,
        "ResultsByTime": [
            {
                "TimePeriod": {"Start": "2026-09-01", "End": "2026-10-01"},
                "Groups": [
                    {
                        "Keys": k,
                        "Metrics": {
                            "UnblendedCost": {"Amount": str(c), "Unit": "USD"},
                            "UsageQuantity": {"Amount": str(h), "Unit": "Hrs"},
                        },
                    }
                    for k, c, h in groups
                ],
            }
        ],
    }


def test_cost_explorer_by_instance_type_and_region(tmp_path: Path) -> None:
    path = tmp_path / "ce.json"
    dims = [{"Type": "DIMENSION", "Key": "INSTANCE_TYPE"}, {"Type": "DIMENSION", "Key": "REGION"}]
    path.write_text(json.dumps(_ce(dims, [(["g6e.12xlarge", REGION], 31_000.0, 2_880.0), (["m5.large", REGION], 70.0, 720.0)])))
    export = _read(path)
    (group,) = export.groups.values()
    assert (export.kind, group.instance_type, group.region, group.kind) == ("cost-explorer", "g6e.12xlarge", REGION, "unknown")
    assert group.total_hours == 2_880.0 and group.total_billed == 31_000.0


def test_cost_explorer_by_usage_type_and_workload_tag_tells_the_kind(tmp_path: Path) -> None:
    path = tmp_path / "ce.json"
    dims = [{"Type": "DIMENSION", "Key": "USAGE_TYPE"}, {"Type": "TAG", "Key": "workload"}]
    groups = [
        (["USW2-BoxUsage:g6e.12xlarge", "workload$serving"], 31_000.0, 2_880.0),
        (["USW2-Train:ml.p4d.24xlarge", "workload$"], 9_000.0, 300.0),
    ]
    path.write_text(json.dumps(_ce(dims, groups)))
    with pytest.raises(billing.BillingError, match="not grouped by REGION; pass the one region"):
        _read(path)
    result = offline.assess_export(_read(path, regions=[REGION]))
    rows = _by_type(result)
    assert (rows["g6e.12xlarge"].group.kind, rows["p4d.24xlarge"].group.kind) == ("inference", "training")
    assert rows["g6e.12xlarge"].match is not None and rows["g6e.12xlarge"].match.neuron_type == "inf2.24xlarge"


# --------------------------------------------------------------------------------------------
# the command
# --------------------------------------------------------------------------------------------
BAD_INPUTS = {
    "missing.csv.gz": (None, "no such file or folder"),
    "notes.txt": (b"hello", "not a CUR 2.0 data file"),
    "broken.csv.gz": (b"\x1f\x8b\x08\x00garbage", "cannot read it as gzip CSV"),
    "columns.csv": (b"a,b\n1,2\n", "not a CUR 2.0 export: columns line_item_line_item_type"),
    "legacy.csv": (b"lineItem/UsageType,lineItem/UnblendedCost\nx,1\n", "a legacy Cost and Usage Report"),
    "bad.json": (b"{not json", "not valid JSON"),
    "other.json": (b'{"hello": 1}', "neither a Data Exports manifest (dataFiles) nor a Cost Explorer answer"),
    "ce.json": (
        b'{"ResultsByTime": [], "GroupDefinitions": [{"Type": "DIMENSION", "Key": "SERVICE"}]}',
        "not grouped by INSTANCE_TYPE",
    ),
    "broken.parquet": (b"PAR1 nope", "cannot read it as Parquet"),
}


@pytest.mark.parametrize("name", sorted(BAD_INPUTS))
def test_a_bad_input_is_one_line_and_exit_2(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    content, expected = BAD_INPUTS[name]
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    assert main(["assess", "--from", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"neuronkit: {path}: ") and expected in err and "Traceback" not in err


def test_an_empty_folder_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["assess", "--from", str(tmp_path)]) == 2
    assert "no .csv.gz, .csv or .parquet files in this folder" in capsys.readouterr().err


@pytest.fixture
def no_aws(monkeypatch: pytest.MonkeyPatch) -> None:
    """Creating any AWS client or session fails the test: the offline path must not."""
    import boto3
    import botocore.session

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("an AWS client was created")

    for target, name in ((boto3, "client"), (boto3, "Session"), (boto3.session, "Session"), (botocore.session, "get_session")):
        monkeypatch.setattr(target, name, refuse)
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION"):
        monkeypatch.delenv(key, raising=False)


def test_sample_writes_its_report_offline(no_aws: None, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "assess.md"
    assert main(["assess", "--sample", "--tag", "team", "-o", str(report)]) == 0
    out = capsys.readouterr().out
    assert report.read_text() == out and out.startswith("# neuronkit assess (billing export)")
    assert "g6e.12xlarge us-west-2 (team=chat) → inf2.24xlarge" in out
    assert "SavingsPlanCoveredUsage rows" in out and "## Unknown workload kind" in out
    assert main(["assess", "--sample", "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["neuron_commitments_priced"] is False and doc["periods"] == ["2026-10"]
    assert {w["neuron_type"] for w in doc["workloads"] if w["instance_type"] == "g6e.12xlarge"} == {"inf2.24xlarge"}


def test_the_shipped_sample_is_what_the_script_writes(tmp_path: Path) -> None:
    fresh = tmp_path / "sample.csv.gz"
    make_sample.main(fresh)
    assert fresh.read_bytes() == billing.SAMPLE.read_bytes(), "run `python -m neuronkit.adoption.sample.make_sample`"


def test_from_and_sample_exclude_each_other() -> None:
    with pytest.raises(SystemExit) as done:
        main(["assess", "--sample", "--from", "x.csv"])
    assert done.value.code == 2
    # --pilot-output works from an export too: tests/unit/test_assess_proposals.py


def test_a_fleet_whose_gpu_fallback_is_cheaper_per_node_is_reported() -> None:
    table = pricing.load_prices()
    region = "us-east-2"
    fallbacks = ["g6e.12xlarge", "p4d.24xlarge"]
    fleet = types.SimpleNamespace(name="chat", neuron_types=["inf2.48xlarge"], fallback_types=fallbacks, model=None)
    env = types.SimpleNamespace(name="prod", region=region, inference=[fleet])
    lines = offline.fleet_findings([env])  # type: ignore[list-item]
    cheaper = [t for t in fallbacks if table.require(t, region) < table.require("inf2.48xlarge", region)]
    assert cheaper == ["g6e.12xlarge"]  # the catalog's prices: $10.49 against $12.98
    assert len(lines) == 1 and lines[0].startswith(
        f"prod/chat: its GPU fallback g6e.12xlarge (${table.require('g6e.12xlarge', region):,.2f}/h) costs less per node "
        f"than its Neuron primary inf2.48xlarge (${table.require('inf2.48xlarge', region):,.2f}/h) in {region}"
    )
    assert "inf2.24xlarge" in lines[0]  # the cheaper Neuron type that holds what the fallback holds
