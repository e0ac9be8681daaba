"""`neuronkit assess --from` speaks of the user's bill only: a generated CUR 2.0 export (us-east-2, where trn2.48xlarge
is offered) with a `user:workload` tag it was not told about, p4d.24xlarge training and a Llama-3.1-70B serving group.
The tag is detected, nothing from environments/ is printed, Trainium2 is proposed at the user's Capacity Block prices
and said to be block-only, trn1's last release is flagged, TP is checked against the model's heads, and
--pilot-output writes a starter file from the export."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from neuronkit import catalog
from neuronkit.adoption import assess, billing, offline
from neuronkit.adoption.sample import make_sample
from neuronkit.catalog import pricing, releases
from neuronkit.cli import main
from neuronkit.config import load_environment
from tests.conftest import ROOT

REGION = "us-east-2"
ACCOUNT = "444455556666"
HEADER = [*make_sample.HEADER, "line_item_usage_account_id"]
TRAINING = {"user:workload": "training", "user:team": "research"}
SERVING = {"user:workload": "inference", "user:model": "Llama-3.1-70B-Instruct"}
BLOCK_FEE = 24 * 2 * 40.0  # a 2-instance, 24-hour trn2.48xlarge block at $40 an instance-hour


def _row(day: int, usage: str, hours: float, cost: float, resource: str, itype: str, tags: dict[str, str]) -> list[Any]:
    date = f"2026-10-{day + 1:02d}T00:00:00Z"
    return [
        "2026-10-01T00:00:00Z", date, "Usage", "AmazonEC2", usage, hours, cost, resource, "us-east-2a", itype, REGION,
        "OnDemand", cost, 0.0, 0.0, json.dumps(tags) if tags else "", ACCOUNT,
    ]  # fmt: skip


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    table = pricing.load_prices()
    p4d, g6e = table.require("p4d.24xlarge", REGION), table.require("g6e.12xlarge", REGION)
    rows = []
    for day in range(31):
        for n in range(2):
            rows.append(_row(day, "USE2-BoxUsage:p4d.24xlarge", 24, 24 * p4d, f"i-train{n}", "p4d.24xlarge", TRAINING))
        rows.append(_row(day, "USE2-BoxUsage:g6e.12xlarge", 24, 24 * g6e, "i-chat", "g6e.12xlarge", SERVING))
    path = tmp_path_factory.mktemp("cur") / "cur2.csv.gz"
    billing.write_csv_gz(path, HEADER, rows)
    return path


@pytest.fixture(scope="module")
def blocks(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What `aws ec2 describe-capacity-block-offerings --output json` answers (its keys)."""
    path = tmp_path_factory.mktemp("blocks") / "offerings.json"
    offers = [
        {"CapacityBlockOfferingId": "cb-0trn2", "InstanceType": "trn2.48xlarge", "AvailabilityZone": "us-east-2b",
         "InstanceCount": 2, "StartDate": "2026-12-01T11:30:00Z", "EndDate": "2026-12-02T11:30:00Z",
         "CapacityBlockDurationHours": 24, "UpfrontFee": f"{BLOCK_FEE:.2f}", "CurrencyCode": "USD", "Tenancy": "default"},
    ]  # fmt: skip
    path.write_text(json.dumps({"CapacityBlockOfferings": offers}))
    return path


@pytest.fixture(scope="module")
def report(export: Path, blocks: Path, tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("out") / "assess.md"
    assert main(["assess", "--from", str(export), "--capacity-blocks", str(blocks), "-o", str(out)]) == 0
    return out.read_text()


def test_nothing_from_environments_without_env(report: str, export: Path, tmp_path: Path) -> None:
    names = [load_environment(f).name for f in sorted((ROOT / "environments").glob("*.yaml"))]
    assert names, "environments/ holds files: the check below can fail"
    assert "Fleets whose GPU fallback" not in report and "environments/" not in report
    assert not any(f"{n}/" in report for n in names)
    # Named with --env, an environment's fleets are checked (prod's fallback is cheaper per node).
    out = tmp_path / "with-env.md"
    assert main(["assess", "--from", str(export), "--env", "prod", "-o", str(out)]) == 0
    assert "## Fleets whose GPU fallback is cheaper per node" in out.read_text()


def test_the_workload_tag_is_detected(report: str, export: Path) -> None:
    read = billing.read(export, is_gpu=assess._is_gpu)
    assert read.detected_workload_tag == "user:workload" and read.workload_candidates["user:workload"] == {
        "training": 62,
        "inference": 31,
    }
    assert "Workload tag detected: `user:workload`" in report
    assert "tag user:workload=training (detected in the export)" in report and "## Unknown workload kind" not in report


def test_trainium2_is_proposed_for_training_at_the_users_block_price(report: str, export: Path, blocks: Path) -> None:
    assert "trn2.48xlarge" in catalog.instance_types() and REGION in catalog.get("trn2.48xlarge").offerings
    result = offline.assess_export(billing.read(export, is_gpu=assess._is_gpu), blocks=assess.read_block_offerings(blocks))
    (train,) = [p for p in result.priced if p.group.kind == "training"]
    assert train.trn2 is not None and train.trn2.instance_type == "trn2.48xlarge" and train.trn2.price is not None
    assert train.trn2.price.per_instance_hour == pytest.approx(BLOCK_FEE / (2 * 24))
    assert train.trn2_block_monthly == pytest.approx(train.like_hours * 40.0)
    line = next(x for x in report.splitlines() if "Trainium2: trn2.48xlarge holds what p4d.24xlarge holds" in x)
    assert "block-only (EC2 Capacity Blocks for ML" in line and "no On-Demand price" in line
    assert "$40.00 per instance-hour at Capacity Block prices (your offerings offerings.json (cb-0trn2" in line
    assert f"offered in {REGION}" in line
    # Without offerings (and no published price in the catalog) it is said to be unpriced, never priced On-Demand.
    bare = offline.render(offline.assess_export(billing.read(export, is_gpu=assess._is_gpu)))
    assert "unpriced: pass --capacity-blocks FILE" in bare


def test_a_bad_offerings_file_is_one_line(export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "offers.json"
    bad.write_text(json.dumps({"CapacityBlockOfferings": [{"InstanceType": "trn2.48xlarge"}]}))
    assert main(["assess", "--from", str(export), "--capacity-blocks", str(bad)]) == 2
    err = capsys.readouterr().err
    assert f"--capacity-blocks: {bad}: offering 0 lacks" in err and "Traceback" not in err


def test_trn1s_last_release_is_flagged(report: str) -> None:
    rel = releases.default_release("trn1", "pytorch-training")
    assert rel is not None and rel.version == "2.28.1"
    later = [r for r in releases.releases() if releases.version_key(r.version) > releases.version_key(rel.version)]
    assert later and all(releases.support(r, "trn1", "pytorch-training") != "supported" for r in later)
    assert "release: Neuron 2.28.1 is the last release with PyTorch training on trn1" in report
    # A release that is not the last of its line gets no such note.
    assert assess.release_note("trn2", "training", releases.default_release("trn2", "pytorch-training").version) is None  # type: ignore[union-attr]


def test_tp_is_checked_against_the_known_models_heads(report: str) -> None:
    heads = assess.model_heads()["meta-llama/Llama-3.1-70B-Instruct"]
    assert (heads["attention_heads"], heads["kv_heads"]) == (64, 8) and "huggingface.co" in heads["source"]
    # Issue 50: the 70B group is placed by the one fit rule (catalog/fit.py), not by GPU memory with a TP note: no inf2
    # type holds it at a TP dividing cores and heads, so the forward family (trn2.48xlarge at TP 64) is proposed.
    line = next(x for x in report.splitlines() if "fits meta-llama/Llama-3.1-70B-Instruct" in x)
    assert "→ trn2.48xlarge" in line and "TP 64 LNC 2" in line and "inf2.24xlarge: TP 4: memory" in line
    assert assess.tp_check(8, "meta-llama/Llama-3.1-70B-Instruct").startswith("TP 8 fits")
    assert assess.tp_check(16, "meta-llama/Llama-3.1-70B-Instruct").startswith("TP 16 fits")  # KV heads replicated
    # An unknown model gets the rule, not a verdict.
    assert "check that TP divides its attention heads" in assess.tp_check(12, None)
    assert assess.known_model("g6e.12xlarge us-east-2 (team=chat-llama-3.3-70b)") == "meta-llama/Llama-3.1-70B-Instruct"
    assert assess.known_model("team=vision") is None


def test_pilot_output_works_from_an_export(export: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    starter = tmp_path / "pilot.yaml"
    assert main(["assess", "--from", str(export), "--pilot-output", str(starter)]) == 0
    doc = yaml.safe_load(starter.read_text())
    assert doc["account"] == ACCOUNT and doc["region"] == REGION
    assert doc["training"][0]["gpu_pool"]["instance_type"] == "p4d.24xlarge" and doc["pilot"]["cluster"] == "candidate"
    env = load_environment(starter)  # a valid environment file
    assert env.pilot is not None and env.training[0].instance_type == doc["training"][0]["instance_type"]


def test_the_json_carries_the_detected_tag_and_trainium2(export: Path, blocks: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["assess", "--from", str(export), "--capacity-blocks", str(blocks), "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["workload_tag_detected"] == "user:workload"
    (train,) = [w for w in doc["workloads"] if w["kind"] == "training"]
    t2 = train["trainium2"]
    assert t2["instance_type"] == "trn2.48xlarge" and t2["capacity_blocks_only"] is True
    assert t2["block_price_per_instance_hour"] == pytest.approx(40.0) and "cb-0trn2" in t2["block_price_basis"]
    (serve,) = [w for w in doc["workloads"] if w["kind"] == "inference"]
    assert serve["model"] == "meta-llama/Llama-3.1-70B-Instruct"
