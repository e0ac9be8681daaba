"""Reading a billing export offline: AWS Data Exports CUR 2.0 (gzip CSV, CSV or Parquet; a file, a folder or a
billing period's manifest) and the JSON of ``aws ce get-cost-and-usage``.

Rows are streamed (CSV row by row, Parquet in record batches) into per-workload groups: GPU instance type,
region, the tags the user names and the workload kind, told by the user's workload tag, else by SageMaker's
usage type, else ``unknown`` (never guessed). What the columns mean is in ``catalog/billing.yaml``.
No AWS client is created here.
"""

from __future__ import annotations

import csv
import gzip
import io
import json
import re
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from neuronkit import catalog

_FACTS = Path(catalog.__file__).resolve().parent / "billing.yaml"
SAMPLE = Path(__file__).resolve().parent / "sample" / "cur2-sample.csv.gz"
DATA_SUFFIXES = (".csv.gz", ".csv", ".parquet", ".snappy.parquet", ".gz.parquet")
_PERIOD = re.compile(r"BILLING_PERIOD=(\d{4}-\d{2})")
BATCH_ROWS = 65_536  # Parquet record batch size: the memory bound of one read


class BillingError(Exception):
    """An export the reader cannot use: one line naming the file and the fix."""


@cache
def facts() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(_FACTS.read_text())
    return data


@dataclass
class SpendGroup:
    """The instance hours and spend of one workload: GPU type, region, kind and the named tags' values."""

    source: str  # "ec2" | "sagemaker" | "cost-explorer"
    instance_type: str
    region: str
    kind: str  # "training" | "inference" | "unknown"
    kind_basis: str  # how the kind was told, e.g. "tag workload=serving"
    tags: tuple[tuple[str, str], ...] = ()
    hours: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # purchase option -> instance hours
    billed: dict[str, float] = field(default_factory=lambda: defaultdict(float))  # purchase option -> effective USD
    public_on_demand: float = 0.0  # the export's public On-Demand cost of the on-demand and covered hours
    rows: int = 0
    covered_rows: dict[str, int] = field(default_factory=lambda: defaultdict(int))  # line item type -> rows
    covered_resources: list[str] = field(default_factory=list)  # a few resource ids of covered rows
    workload_words: tuple[tuple[str, str], ...] = ()  # (tag column, value) of tags whose value says a kind
    model_tags: tuple[tuple[str, str], ...] = ()  # (tag column, value) of tags named like a model (user:model ...)

    def merge(self, other: SpendGroup) -> None:
        """Add another group's hours, spend and rows to this one (same workload, told apart before detection)."""
        for option, hours in other.hours.items():
            self.hours[option] += hours
        for option, usd in other.billed.items():
            self.billed[option] += usd
        self.public_on_demand += other.public_on_demand
        self.rows += other.rows
        for line_type, n in other.covered_rows.items():
            self.covered_rows[line_type] += n
        for resource in other.covered_resources:
            if resource not in self.covered_resources and len(self.covered_resources) < 3:
                self.covered_resources.append(resource)

    @property
    def total_hours(self) -> float:
        return sum(self.hours.values())

    @property
    def total_billed(self) -> float:
        return sum(self.billed.values())

    @property
    def name(self) -> str:
        shown = [*self.tags, *((k.removeprefix(facts()["tag_prefix"]), v) for k, v in self.model_tags)]
        tags = ", ".join(f"{k}={v or '(untagged)'}" for k, v in shown)
        return f"{self.instance_type} {self.region}" + (f" ({tags})" if tags else "")


@dataclass
class Export:
    """What an export holds for the GPU workloads, and what the reader saw besides."""

    inputs: list[str]
    kind: str  # "cur2" | "cost-explorer"
    periods: set[str] = field(default_factory=set)  # billing periods, YYYY-MM
    groups: dict[tuple[Any, ...], SpendGroup] = field(default_factory=dict)
    rows_read: int = 0
    tag_keys_seen: set[str] = field(default_factory=set)
    named_tags: tuple[str, ...] = ()
    workload_tag: str | None = None
    # Tag columns whose values on GPU rows are training or inference words: column -> kind -> rows.
    workload_candidates: dict[str, dict[str, int]] = field(default_factory=dict)
    detected_workload_tag: str | None = None  # the candidate used when no --workload-tag was named
    accounts: set[str] = field(default_factory=set)  # usage accounts of the GPU rows (line_item_usage_account_id)

    @property
    def months(self) -> int:
        return max(len(self.periods), 1)

    def missing_tags(self) -> list[str]:
        """Named tags (and the workload tag) the export never shows."""
        wanted = [*self.named_tags, *([self.workload_tag] if self.workload_tag else [])]
        return [t for t in dict.fromkeys(wanted) if _tag_column(t) not in self.tag_keys_seen]


# --------------------------------------------------------------------------------------------
# finding the files
# --------------------------------------------------------------------------------------------
def data_files(path: Path) -> list[Path]:
    """The data files a path names: itself, every data file under a folder, or a manifest's ``dataFiles``."""
    if not path.exists():
        raise BillingError(
            f"{path}: no such file or folder; pass a CUR 2.0 export (file, folder or manifest) or a Cost Explorer JSON"
        )
    if path.is_dir():
        found = sorted(p for p in path.rglob("*") if p.is_file() and p.name.lower().endswith(DATA_SUFFIXES))
        if not found:
            raise BillingError(f"{path}: no .csv.gz, .csv or .parquet files in this folder; sync the export's data/ folder here")
        return found
    if path.name.lower().endswith(DATA_SUFFIXES):
        return [path]
    raise BillingError(f"{path}: not a CUR 2.0 data file (.csv.gz, .csv, .parquet), a folder, a manifest or a Cost Explorer JSON")


def manifest_files(path: Path, doc: dict[str, Any]) -> list[Path]:
    """The local copies of a Data Exports manifest's data files (S3 URIs, found under the manifest's folders)."""
    names = doc.get("dataFiles")
    if not isinstance(names, list) or not names:
        raise BillingError(f"{path}: the manifest lists no dataFiles; is this a Data Exports CUR 2.0 manifest?")
    out: list[Path] = []
    roots = [path.parent, *list(path.parents)[:5]]
    for name in names:
        key = re.sub(r"^s3://[^/]+/", "", str(name)).split("/")
        local = next(
            (r.joinpath(*key[i:]) for r in roots for i in range(len(key)) if r.joinpath(*key[i:]).is_file()),
            None,
        )
        if local is None:
            raise BillingError(
                f"{path}: data file {name} is not under {path.parent.parent}; copy the export with "
                "`aws s3 sync s3://BUCKET/PREFIX/EXPORT/ DIR/` and pass the manifest inside DIR"
            )
        out.append(local)
    return out


# --------------------------------------------------------------------------------------------
# streaming rows
# --------------------------------------------------------------------------------------------
def _check_columns(path: Path, columns: Sequence[str]) -> None:
    spec = facts()["columns"]
    if any(c.startswith(spec["legacy_marker"]) for c in columns):
        raise BillingError(
            f"{path}: a legacy Cost and Usage Report (lineItem/... columns); create a CUR 2.0 export in AWS Data Exports"
        )
    missing = [c for c in spec["required"] if c not in columns]
    if missing:
        raise BillingError(f"{path}: not a CUR 2.0 export: columns {', '.join(missing)} are missing")


def csv_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of a (gzip) CSV export, one at a time."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", newline="", encoding="utf-8") as handle:  # type: ignore[operator]
            reader = csv.DictReader(handle)
            _check_columns(path, reader.fieldnames or [])
            yield from reader
    except (OSError, EOFError, UnicodeDecodeError, csv.Error) as err:
        raise BillingError(f"{path}: cannot read it as {'gzip ' if opener is gzip.open else ''}CSV ({err})") from None


def parquet_rows(path: Path) -> Iterator[dict[str, Any]]:
    """The rows of a Parquet export, read in record batches of the columns assess uses."""
    try:
        import pyarrow.parquet as pq
    except ImportError:  # pragma: no cover - pyarrow is a pinned dependency
        raise BillingError(f"{path}: reading Parquet needs pyarrow (`make setup` installs it)") from None
    try:
        handle = pq.ParquetFile(path)
    except Exception as err:  # noqa: BLE001 - pyarrow raises several types for a broken file
        raise BillingError(f"{path}: cannot read it as Parquet ({err})") from None
    names = handle.schema_arrow.names
    _check_columns(path, names)
    spec = facts()["columns"]
    wanted = [c for c in [*spec["required"], *spec["optional"]] if c in names]
    for batch in handle.iter_batches(batch_size=BATCH_ROWS, columns=wanted):
        yield from batch.to_pylist()


def rows(path: Path) -> Iterator[dict[str, Any]]:
    return parquet_rows(path) if path.name.lower().endswith(".parquet") else csv_rows(path)


# --------------------------------------------------------------------------------------------
# reading one row
# --------------------------------------------------------------------------------------------
def _tag_column(key: str) -> str:
    return key if ":" in key else f"{facts()['tag_prefix']}{key}"


def parse_tags(value: Any) -> dict[str, str]:
    """``resource_tags``: a map in Parquet (a dict or key/value pairs), a JSON object in CSV, or empty."""
    if not value:
        return {}
    if isinstance(value, dict):
        return {str(k): str(v) for k, v in value.items() if v not in (None, "")}
    if isinstance(value, list):
        return {str(k): str(v) for k, v in value if v not in (None, "")}
    try:
        parsed = json.loads(value)
    except (TypeError, ValueError):
        return {}
    return {str(k): str(v) for k, v in parsed.items() if v not in (None, "")} if isinstance(parsed, dict) else {}


def _number(value: Any) -> float:
    try:
        return float(value) if value not in (None, "") else 0.0
    except (TypeError, ValueError):
        return 0.0


def _period(row: dict[str, Any]) -> str | None:
    for column in ("bill_billing_period_start_date", "line_item_usage_start_date"):
        value = row.get(column)
        if value:
            return str(value)[:7]
    return None


def instance_type_of(row: dict[str, Any]) -> str:
    itype = str(row.get("product_instance_type") or "")
    if not itype and ":" in str(row.get("line_item_usage_type") or ""):
        itype = str(row["line_item_usage_type"]).split(":", 1)[1]
    return itype.removeprefix("ml.")


def purchase_option(row: dict[str, Any]) -> str | None:
    """on-demand | spot | capacity-block | savings-plan | reserved, or None for a row that is not instance usage."""
    types = facts()["line_item_types"]
    line_type = str(row.get("line_item_line_item_type") or "")
    if line_type in types["covered"]:
        return str(types["covered"][line_type]["option"])
    if line_type != types["usage"]:
        return None
    usage = str(row.get("line_item_usage_type") or "")
    marks = facts()["usage_types"]
    if any(m in usage for m in marks["capacity_block"]):
        return "capacity-block"
    if str(row.get("pricing_term") or "") == "Spot" or any(m in usage for m in marks["ec2_spot"]):
        return "spot"
    return "on-demand"


def sagemaker_kind(usage_type: str) -> tuple[str, str] | None:
    """The kind a SageMaker usage type tells (``USW2-Train:ml.p4d.24xlarge`` -> training), with its prefix."""
    if ":" not in usage_type:
        return None
    head = usage_type.split(":", 1)[0]
    prefix = head.split("-", 1)[1] if re.match(r"^[A-Z]{2,4}\d?-", head) else head
    for kind, prefixes in facts()["sagemaker_usage_prefixes"].items():
        if kind != "unverified" and prefix in prefixes:
            return kind, prefix
    return None


def classify(product: str, usage_type: str, tags: dict[str, str], workload_tag: str | None) -> tuple[str, str]:
    """(kind, how it was told): the user's workload tag, else SageMaker's usage type, else unknown."""
    if workload_tag:
        value = tags.get(_tag_column(workload_tag))
        if value is not None:
            for kind, values in facts()["workload_values"].items():
                if value.strip().lower() in values:
                    return kind, f"tag {workload_tag}={value}"
            return "unknown", f"tag {workload_tag}={value} is neither a training nor an inference value (catalog/billing.yaml)"
    if product == "AmazonSageMaker":
        told = sagemaker_kind(usage_type)
        if told is not None:
            kind, prefix = told
            return kind, f"SageMaker usage type {prefix}" + (" (not training or serving)" if kind == "unknown" else "")
    where = f"no {workload_tag} tag" if workload_tag else "no workload tag named (--workload-tag)"
    return "unknown", f"{where}; not a SageMaker training or hosting usage type"


# --------------------------------------------------------------------------------------------
# aggregating
# --------------------------------------------------------------------------------------------
def _add_row(export: Export, row: dict[str, Any], is_gpu: Any) -> None:
    export.rows_read += 1
    product = str(row.get("line_item_product_code") or "")
    if product not in facts()["products"]:
        return
    option = purchase_option(row)
    itype = instance_type_of(row)
    tags = parse_tags(row.get("resource_tags"))
    for column, value in row.items():  # flattened tag columns (resourceTags/user:KEY), as some exports carry them
        if column.startswith(_LEGACY_TAG) and value not in (None, ""):
            tags[column[len(_LEGACY_TAG) :]] = str(value)
    export.tag_keys_seen.update(tags)
    if option is None or not itype or not is_gpu(itype):
        return
    words = tuple(sorted((k, v) for k, v in tags.items() if _word_kind(v) is not None))
    for k, v in words:
        counts = export.workload_candidates.setdefault(k, {})
        kind_of = _word_kind(v) or ""
        counts[kind_of] = counts.get(kind_of, 0) + 1
    period = _period(row)
    if period:
        export.periods.add(period)
    account = str(row.get("line_item_usage_account_id") or "")
    if account:
        export.accounts.add(account)
    usage_type = str(row.get("line_item_usage_type") or "")
    kind, basis = classify(product, usage_type, tags, export.workload_tag)
    named = tuple((t, tags.get(_tag_column(t), "")) for t in export.named_tags)
    source = "sagemaker" if product == "AmazonSageMaker" else "ec2"
    region = str(row.get("product_region_code") or "") or "unknown-region"
    auto = words if export.workload_tag is None else ()
    # Model tags (user:model ...) and the Name tag: each names a workload, and may name its model (assess maps it).
    models = tuple(sorted((k, v) for k, v in tags.items() if _MODEL_KEY.search(k.lower()) or k == _NAME_TAG))
    key = (source, itype, region, kind, basis, named, auto, models)
    group = export.groups.get(key)
    if group is None:
        group = SpendGroup(source, itype, region, kind, basis, named, workload_words=auto, model_tags=models)
        export.groups[key] = group
    group.rows += 1
    group.hours[option] += _number(row.get("line_item_usage_amount"))
    covered = facts()["line_item_types"]["covered"].get(str(row.get("line_item_line_item_type")))
    if covered is not None:
        group.billed[option] += _number(row.get(covered["effective_cost"]))
        group.covered_rows[str(row["line_item_line_item_type"])] += 1
        resource = str(row.get("line_item_resource_id") or "")
        if resource and resource not in group.covered_resources and len(group.covered_resources) < 3:
            group.covered_resources.append(resource)
    else:
        group.billed[option] += _number(row.get("line_item_unblended_cost"))
    if option in ("on-demand", "savings-plan", "reserved"):
        group.public_on_demand += _number(row.get("pricing_public_on_demand_cost"))


_LEGACY_TAG = "resourceTags/"
_NAME_TAG = "user:Name"
_MODEL_KEY = re.compile(r"(^|[:_/-])model($|[-_])")  # user:model, user:model-id, user:model_name


def _word_kind(value: str) -> str | None:
    """training | inference when ``value`` is one of catalog/billing.yaml's workload words, else None."""
    v = value.strip().lower()
    return next((kind for kind, values in facts()["workload_values"].items() if v in values), None)


def detect_workload_tag(export: Export) -> None:
    """Without --workload-tag: use the tag column whose values on the most GPU rows are training/inference words,
    re-tell the groups of unknown kind by it and merge what it made alike (docs/adoption.md)."""
    if export.workload_tag is not None or not export.workload_candidates:
        return
    column = max(sorted(export.workload_candidates), key=lambda c: sum(export.workload_candidates[c].values()))
    export.detected_workload_tag = column
    merged: dict[tuple[Any, ...], SpendGroup] = {}
    for g in export.groups.values():
        value = dict(g.workload_words).get(column)
        if g.kind == "unknown" and value is not None and g.source != "cost-explorer":
            g.kind = _word_kind(value) or "unknown"
            g.kind_basis = f"tag {column}={value} (detected in the export)"
        g.workload_words = ()
        key = (g.source, g.instance_type, g.region, g.kind, g.kind_basis, g.tags, g.model_tags)
        if key in merged:
            merged[key].merge(g)
        else:
            merged[key] = g
    export.groups = merged


def read_cur(
    files: Iterable[Path], inputs: list[str], *, tags: Sequence[str] = (), workload_tag: str | None = None, is_gpu: Any
) -> Export:
    """Stream every file's rows into GPU workload groups."""
    export = Export(inputs=inputs, kind="cur2", named_tags=tuple(tags), workload_tag=workload_tag)
    for path in files:
        before = len(export.periods)
        for row in rows(path):
            _add_row(export, row, is_gpu)
        if len(export.periods) == before:  # no period column: the folder name says it (BILLING_PERIOD=YYYY-MM)
            match = _PERIOD.search(str(path))
            if match:
                export.periods.add(match.group(1))
    detect_workload_tag(export)
    return export


# --------------------------------------------------------------------------------------------
# Cost Explorer
# --------------------------------------------------------------------------------------------
def read_cost_explorer(
    path: Path, doc: dict[str, Any], *, regions: Sequence[str], workload_tag: str | None, is_gpu: Any
) -> Export:
    """The JSON of ``aws ce get-cost-and-usage`` grouped by two of INSTANCE_TYPE, REGION, USAGE_TYPE (or a TAG)."""
    spec = facts()["cost_explorer"]
    definitions = doc.get("GroupDefinitions") or []
    keys = [d.get("Key") if d.get("Type") == "DIMENSION" else f"TAG:{d.get('Key')}" for d in definitions]
    if not any(k in ("INSTANCE_TYPE", "USAGE_TYPE") for k in keys):
        raise BillingError(
            f"{path}: the Cost Explorer answer is not grouped by INSTANCE_TYPE (or USAGE_TYPE); run the command in "
            "docs/adoption.md (--group-by Type=DIMENSION,Key=INSTANCE_TYPE Type=DIMENSION,Key=REGION)"
        )
    if "REGION" not in keys and len(regions) != 1:
        raise BillingError(f"{path}: not grouped by REGION; pass the one region the answer covers with --region R")
    export = Export(inputs=[str(path)], kind="cost-explorer", workload_tag=workload_tag)
    for period in doc.get("ResultsByTime") or []:
        start = str((period.get("TimePeriod") or {}).get("Start", ""))[:7]
        for g in period.get("Groups") or []:
            values = dict(zip(keys, g.get("Keys") or [], strict=False))
            usage_type = str(values.get("USAGE_TYPE", ""))
            itype = str(values.get("INSTANCE_TYPE") or (usage_type.split(":", 1)[1] if ":" in usage_type else ""))
            itype = itype.removeprefix("ml.")
            if not is_gpu(itype):
                continue
            if start:
                export.periods.add(start)
            metrics = g.get("Metrics") or {}
            cost = _number((metrics.get(spec["cost_metric"]) or {}).get("Amount"))
            usage = metrics.get(spec["usage_metric"]) or {}
            hours = _number(usage.get("Amount")) if usage.get("Unit") in ("Hrs", "Hours") else 0.0
            tag_key = next((k for k in keys if k.startswith("TAG:")), None)
            tags = {}
            tag_value = str(values.get(tag_key, "")).split("$", 1)[-1] if tag_key else ""
            if tag_key and tag_value:  # CE writes a tag group as KEY$VALUE, untagged as KEY$
                tags = {_tag_column(tag_key[4:]): tag_value}
            product = "AmazonSageMaker" if ":ml." in usage_type else "AmazonEC2"
            if tags:
                export.tag_keys_seen.update(tags)
            kind, basis = classify(product, usage_type, tags, workload_tag)
            region = str(values.get("REGION") or regions[0])
            key = ("cost-explorer", itype, region, kind, basis)
            group = export.groups.setdefault(key, SpendGroup("cost-explorer", itype, region, kind, basis))
            group.rows += 1
            group.hours["unknown"] += hours
            group.billed["unknown"] += cost
    return export


def read(
    path: Path, *, tags: Sequence[str] = (), workload_tag: str | None = None, regions: Sequence[str] = (), is_gpu: Any
) -> Export:
    """Read a CUR 2.0 file, folder or manifest, or a Cost Explorer JSON; :class:`BillingError` when unusable."""
    if path.is_file() and path.name.lower().endswith(".json"):
        try:
            doc = json.loads(path.read_text())
        except (OSError, UnicodeDecodeError, ValueError) as err:
            raise BillingError(
                f"{path}: not valid JSON ({err}); pass a Data Exports manifest or a Cost Explorer answer"
            ) from None
        if isinstance(doc, dict) and "ResultsByTime" in doc:
            return read_cost_explorer(path, doc, regions=regions, workload_tag=workload_tag, is_gpu=is_gpu)
        if isinstance(doc, dict) and "dataFiles" in doc:
            files = manifest_files(path, doc)
            return read_cur(files, [str(path)], tags=tags, workload_tag=workload_tag, is_gpu=is_gpu)
        raise BillingError(f"{path}: neither a Data Exports manifest (dataFiles) nor a Cost Explorer answer (ResultsByTime)")
    files = data_files(path)
    return read_cur(files, [str(path)], tags=tags, workload_tag=workload_tag, is_gpu=is_gpu)


def write_csv_gz(path: Path, header: Sequence[str], records: Iterable[Sequence[Any]]) -> None:
    """Write a gzip CSV export (the sample script and tests use it); mtime 0 keeps the bytes reproducible."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(records)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as handle:
        handle.write(buffer.getvalue().encode())
