"""`neuronkit cost`: figures against hand-computed values, the GPU comparison, the PR diff, and the errors users see.

Every expected figure is computed here from the price table's own values (nodes x hourly price x hours a
month), so a refreshed prices.json keeps the tests meaningful while a wrong multiplication, a wrong
node count or a mislabelled row fails them.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from neuronkit import catalog, config
from neuronkit.catalog import pricing, serving
from neuronkit.cli import main
from neuronkit.reports.cost import cost_report, price_pools, rate
from neuronkit.reports.pools import Pool, pools_from_cdk_out, pools_from_environment
from tests.conftest import Synth

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "fixtures"
TABLE = pricing.load_prices()
HOURS = TABLE.hours_per_month


def price(instance_type: str, region: str = "us-east-1") -> float:
    return TABLE.prices[region][instance_type]


def money(x: float) -> str:
    return f"-${-x:,.2f}" if x < 0 else f"${x:,.2f}"


def run(argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    monkeypatch.chdir(REPO)
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


def metadata(**over: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {
        "environment": "prod",
        "region": "us-east-1",
        "pool": "pretrain",
        "role": "training",
        "instance_types": ["trn1.32xlarge"],
        "neuron_types": ["trn1.32xlarge"],
        "fallback_types": [],
        "min_size": 0,
        "max_size": 16,
        "desired_size": 16,
        "capacity": "on-demand",
    }
    meta.update(over)
    return meta


def write_cdk_out(folder: Path, asgs: dict[str, dict[str, Any] | None], stack: str = "NeuronkitTest") -> Path:
    """A minimal cdk.out: one template whose Auto Scaling groups carry the given Metadata (None: none)."""
    folder.mkdir(parents=True, exist_ok=True)
    resources: dict[str, Any] = {}
    for logical_id, meta in asgs.items():
        resource: dict[str, Any] = {"Type": "AWS::AutoScaling::AutoScalingGroup", "Properties": {"MinSize": "0", "MaxSize": "1"}}
        if meta is not None:
            resource["Metadata"] = {"neuronkit": meta}
        resources[logical_id] = resource
    (folder / f"{stack}.template.json").write_text(json.dumps({"Resources": resources}))
    return folder


# --------------------------------------------------------------------------------------------
# neuronkit cost: environments
# --------------------------------------------------------------------------------------------
def _prod_block() -> tuple[float, float]:
    """prod.yaml's Capacity Block: what it cost and how many hours it runs."""
    cap = config.load_environment(REPO / "environments" / "prod.yaml").training[0].capacity
    assert isinstance(cap, config.CapacityBlock) and cap.upfront_fee_usd is not None
    return cap.upfront_fee_usd, (cap.end - cap.start).total_seconds() / 3600


def test_prod_block_cluster_is_priced_by_its_fee_against_p5en_for_the_same_hours(capsys, monkeypatch):
    code, out, err = run(["cost", "--env", "prod", "--format", "markdown"], capsys, monkeypatch)
    assert code == 0, err
    fee, hours = _prod_block()
    assert hours <= HOURS  # a two-week block: the whole fee falls in one month
    gpu = price("p5en.48xlarge", "us-east-2")
    # prod.yaml: 16 x trn2.48xlarge on a 336-hour Capacity Block. The fee is paid whether the nodes run or not,
    # so every level counts the block's 16 nodes; the GPU equivalent runs 16 p5en for the same hours.
    assert "### pretrain: training, trn2.48xlarge, capacity capacity-block" in out
    gpu_block = 16 * gpu * hours
    row = f"| {money(fee / hours)} | {money(fee)} | {money(gpu_block)} | {money(gpu_block - fee)} | {(gpu_block - fee) / gpu_block * 100:.1f}% |"
    for level in ("min", "desired", "max"):
        assert f"| {level} | 16 {row}" in out
    # The block's rate comes from the fee the user typed in: labelled as an input, never as a measured saving.
    assert (
        f"trn2.48xlarge at {money(fee / hours / 16)}/hour (your input: capacity.upfront_fee_usd over the block's node-hours"
        in out
    )
    assert "| difference from your input $/month | difference |" in out
    assert "The total prices pretrain from your capacity.upfront_fee_usd: an input you entered" in out
    assert (
        f"Capacity capacity-block: {money(fee)} paid up front for {hours:,.0f} hours of 16 nodes, whether they run or not" in out
    )
    # The environment total adds the GPU training pool (p5.48xlarge, 0/0/2, priced at its own rate on both
    # sides) and the chat fleet (inf2.48xlarge first, 2/4/12, against its own fallback g6e.12xlarge).
    p5, inf2, g5 = price("p5.48xlarge", "us-east-2"), price("inf2.48xlarge", "us-east-2"), price("g6e.12xlarge", "us-east-2")
    total_hour = fee / hours + 0 * p5 + 4 * inf2
    total_month = fee + 4 * inf2 * HOURS
    total_gpu = gpu_block + 4 * g5 * HOURS
    assert f"| desired | {money(total_hour)} | {money(total_month)} | {money(total_gpu)} |" in out
    top_hour = fee / hours + 2 * p5 + 12 * inf2
    top_month = fee + (2 * p5 + 12 * inf2) * HOURS
    top_gpu = gpu_block + (2 * p5 + 12 * g5) * HOURS
    assert f"| max | {money(top_hour)} | {money(top_month)} | {money(top_gpu)} | {money(top_gpu - top_month)} |" in out


def test_a_block_longer_than_a_month_is_spread_over_its_months():
    table = pricing.load_prices()
    pool = Pool(
        environment="team",
        region="us-east-2",
        pool="pretrain",
        role="training",
        instance_types=("trn2.48xlarge",),
        neuron_types=("trn2.48xlarge",),
        fallback_types=(),
        min_size=0,
        max_size=8,
        desired_size=0,
        capacity="capacity-block",
        block_fee=300_000.0,
        block_hours=182 * 24,
    )
    (c,) = price_pools([pool], table)
    assert c.monthly("min") == pytest.approx(300_000.0 * table.hours_per_month / (182 * 24))
    assert c.hourly("desired") == pytest.approx(300_000.0 / (182 * 24))
    assert "the month columns spread it over the block's 6.0 months" in cost_report([pool], "markdown", table)


def test_a_block_without_its_fee_on_a_type_without_a_price_says_what_to_set(tmp_path, capsys, monkeypatch):
    import yaml

    data = yaml.safe_load((REPO / "environments" / "prod.yaml").read_text())
    del data["training"][0]["capacity"]["upfront_fee_usd"]
    path = tmp_path / "prod.yaml"
    path.write_text(yaml.safe_dump(data))
    code, _, err = run(["cost", "--file", str(path)], capsys, monkeypatch)
    assert code == 2
    assert (
        "prod/pretrain (training): a Capacity Block is priced by what it cost and trn2.48xlarge has no On-Demand price "
        "to stand in; set capacity.upfront_fee_usd to the block's UpfrontFee" in err
    )


def test_a_block_without_its_fee_on_a_priced_type_is_priced_on_demand_and_says_so():
    table = pricing.load_prices()
    pool = Pool(
        environment="team",
        region="us-east-1",
        pool="pretrain",
        role="training",
        instance_types=("trn1.32xlarge",),
        neuron_types=("trn1.32xlarge",),
        fallback_types=(),
        min_size=0,
        max_size=4,
        desired_size=4,
        capacity="capacity-block",
        block_hours=48.0,
    )
    (c,) = price_pools([pool], table)
    assert c.monthly("desired") == pytest.approx(4 * price("trn1.32xlarge") * HOURS)
    assert "these figures are the On-Demand equivalent (set capacity.upfront_fee_usd" in cost_report([pool], "markdown", table)


def test_prod_gpu_training_pool_is_priced_on_its_own_type(capsys, monkeypatch):
    code, out, _ = run(["cost", "--env", "prod", "--format", "markdown"], capsys, monkeypatch)
    assert code == 0
    p5 = price("p5.48xlarge", "us-east-2")
    section = out[out.index("### pretrain-gpu: training-gpu, p5.48xlarge, capacity on-demand") :]
    section = section[: section.index("\n### ")]
    # prod.yaml: gpu_pool p5.48xlarge, min 0, max 2, desired unset (= min); no GPU-equivalent columns.
    assert "| desired | 0 | $0.00 | $0.00 |" in section
    assert f"| max | 2 | {money(2 * p5)} | {money(2 * p5 * HOURS)} |" in section
    assert "saving" not in section.split("\n\n")[2]
    assert "p5.48xlarge is a GPU type: no GPU equivalent" in section


def test_prod_inference_fleet_is_priced_on_its_first_neuron_type_with_fallback_prices(capsys, monkeypatch):
    code, out, _ = run(["cost", "--env", "prod", "--format", "markdown"], capsys, monkeypatch)
    assert code == 0
    inf2, g5 = price("inf2.48xlarge", "us-east-2"), price("g6e.12xlarge", "us-east-2")
    section = out[
        out.index("### chat: inference, inf2.48xlarge, inf2.24xlarge, g6e.12xlarge, p4d.24xlarge, capacity on-demand") :
    ]
    section = section[: section.index("\n### ")]
    # The GPU comparison is the fleet's own first GPU fallback, not the catalog's equivalent of inf2.48xlarge.
    assert pricing.equivalents()["inf2.48xlarge"].gpu_type == "g5.48xlarge"
    assert (
        "GPU comparison: g6e.12xlarge, the pool's own GPU fallback (its first GPU fallback_types entry), not the catalog's equivalent g5.48xlarge."
        in section
    )
    assert "| g6e.12xlarge $/month | saving $/month | saving |" in section
    # prod.yaml: chat fleet min 2, desired 4, max 12; the group launches inf2.48xlarge first.
    for level, n in (("min", 2), ("desired", 4), ("max", 12)):
        own, other = n * inf2 * HOURS, n * g5 * HOURS
        assert f"| {level} | {n} | {money(n * inf2)} | {money(own)} | {money(other)} | {money(other - own)} |" in section
    assert (
        f"inf2.24xlarge (${price('inf2.24xlarge', 'us-east-2')}/hour), g6e.12xlarge (${price('g6e.12xlarge', 'us-east-2')}/hour)"
        in section
    )
    worst = 4 * max(price("g6e.12xlarge", "us-east-2"), price("p4d.24xlarge", "us-east-2")) * HOURS
    assert (
        f"GPU fallback: if no Neuron capacity can be had, at desired capacity the fleet would cost up to {money(worst)} a month"
        in section
    )


def test_dev_scales_to_zero_and_costs_more_than_its_gpu_equivalent_at_max(capsys, monkeypatch):
    code, out, _ = run(["cost", "--env", "dev", "--format", "markdown"], capsys, monkeypatch)
    assert code == 0
    trn, gpu = price("trn1.2xlarge"), price("g5.2xlarge")
    # dev.yaml: 1 x trn1.2xlarge at most, min 0, desired unset (= min).
    assert "| desired | 0 | $0.00 | $0.00 | $0.00 | $0.00 | – |" in out
    saving = gpu * HOURS - trn * HOURS
    share = saving / (gpu * HOURS) * 100
    assert saving < 0  # at list prices trn1.2xlarge costs more an hour than g5.2xlarge
    assert f"| max | 1 | {money(trn)} | {money(trn * HOURS)} | {money(gpu * HOURS)} | {money(saving)} | {share:.1f}% |" in out
    assert "a negative saving means the Neuron capacity costs more" in out
    # dev.yaml's serve fleet: inf2.xlarge, min 0, max 2, against g5.xlarge; its fallback is g5.xlarge too.
    inf2, g5 = price("inf2.xlarge"), price("g5.xlarge")
    fleet = out[out.index("### serve: inference, inf2.xlarge, g5.xlarge, capacity on-demand") :]
    assert f"| max | 2 | {money(2 * inf2)} | {money(2 * inf2 * HOURS)} | {money(2 * g5 * HOURS)} |" in fleet
    assert f"at max capacity the fleet would cost up to {money(2 * g5 * HOURS)} a month on g5.xlarge" in fleet
    # dev.yaml's batch cluster (scheduler: batch): up to 2 x trn1.32xlarge, none while the queue is empty.
    big, p4d = price("trn1.32xlarge"), price("p4d.24xlarge")
    batch = out[out.index("### batch: training, trn1.32xlarge, capacity on-demand") :]
    assert "| desired | 0 | $0.00 | $0.00 | $0.00 | $0.00 | – |" in batch
    assert f"| max | 2 | {money(2 * big)} | {money(2 * big * HOURS)} | {money(2 * p4d * HOURS)} |" in batch
    top_hour = trn + 2 * big + 2 * inf2
    top, top_gpu = top_hour * HOURS, (gpu + 2 * p4d + 2 * g5) * HOURS
    assert f"| max | {money(top_hour)} | {money(top)} | {money(top_gpu)} | {money(top_gpu - top)} |" in out


def test_all_environments_add_up(capsys, monkeypatch):
    code, out, _ = run(["cost"], capsys, monkeypatch)
    assert code == 0
    # prod (us-east-2): the trn2 block's fee, 2 x p5.48xlarge (GPU pool), 12 x inf2.48xlarge (chat);
    # dev (us-east-1): 1 x trn1.2xlarge, 2 x trn1.32xlarge (the Batch cluster), 2 x inf2.xlarge (serve).
    fee, _ = _prod_block()
    prod_max = fee + (2 * price("p5.48xlarge", "us-east-2") + 12 * price("inf2.48xlarge", "us-east-2")) * HOURS
    dev_max = (price("trn1.2xlarge") + 2 * price("trn1.32xlarge") + 2 * price("inf2.xlarge")) * HOURS
    # Any other file in environments/ (a user's own) adds its pools' maximum, priced by the same module.
    others = [e for e in config.load_all(REPO / "environments") if e.name not in ("dev", "prod")]
    other_max = sum(c.monthly("max") for e in others for c in price_pools(pools_from_environment(e)))
    grand = out[out.index(f"Total: {2 + len(others)} environments") :]
    max_row = next(line for line in grand.splitlines() if line.startswith("max"))
    assert money(prod_max + dev_max + other_max) in max_row.split()
    # Plain text: aligned columns, underlined headings, no Markdown table syntax.
    assert "prod (us-east-2)\n================" in out
    assert "|" not in out


def test_file_option_prices_any_environment_file(capsys, monkeypatch):
    code, out, _ = run(["cost", "--file", str(REPO / "environments" / "prod.yaml")], capsys, monkeypatch)
    assert code == 0
    assert money(_prod_block()[0]) in out


def test_prod_pools_are_the_cluster_its_gpu_pool_and_the_fleet():
    env = config.load_environment(REPO / "environments" / "prod.yaml")
    assert pools_from_environment(env) == [
        Pool(
            environment="prod",
            region="us-east-2",
            pool="pretrain",
            role="training",
            instance_types=("trn2.48xlarge",),
            neuron_types=("trn2.48xlarge",),
            fallback_types=(),
            min_size=0,
            max_size=16,
            desired_size=0,
            capacity="capacity-block",
            block_fee=_prod_block()[0],
            block_hours=336.0,
        ),
        Pool(
            environment="prod",
            region="us-east-2",
            pool="pretrain-gpu",
            role="training-gpu",
            instance_types=("p5.48xlarge",),
            neuron_types=(),
            fallback_types=("p5.48xlarge",),
            min_size=0,
            max_size=2,
            desired_size=0,
            capacity="on-demand",
        ),
        Pool(
            environment="prod",
            region="us-east-2",
            pool="chat",
            role="inference",
            instance_types=("inf2.48xlarge", "inf2.24xlarge", "g6e.12xlarge", "p4d.24xlarge"),
            neuron_types=("inf2.48xlarge", "inf2.24xlarge"),
            fallback_types=("g6e.12xlarge", "p4d.24xlarge"),
            min_size=2,
            max_size=12,
            desired_size=4,
            capacity="on-demand",
            compile_types=("inf2.48xlarge", "inf2.24xlarge"),  # a model fleet: compile groups per Neuron type
        ),
    ]


def test_environment_without_inference_section_gives_only_training_pools():
    env = config.load_environment(REPO / "environments" / "prod.yaml").model_copy(update={"inference": []})
    assert [(p.pool, p.role) for p in pools_from_environment(env)] == [("pretrain", "training"), ("pretrain-gpu", "training-gpu")]


def test_inference_fleet_is_priced_on_its_first_neuron_type():
    fleet = config.InferenceFleet.model_validate(
        {
            "name": "serve",
            "neuron_types": ["inf2.xlarge", "inf2.8xlarge"],
            "fallback_types": ["g5.xlarge"],
            "az_ids": ["use1-az6", "use1-az4"],
            "min_size": 2,
            "max_size": 8,
            "model_s3_prefix": "models/m/",
            "serve": {"neuron": "serve --neuron", "gpu": "serve --gpu"},
        }
    )
    env = SimpleNamespace(name="prod", region="us-east-1", training=[], inference=[fleet])
    (pool,) = pools_from_environment(env)
    assert pool.instance_types == ("inf2.xlarge", "inf2.8xlarge", "g5.xlarge")
    assert (pool.role, pool.desired_size, pool.primary_type) == ("inference", 2, "inf2.xlarge")
    out = cost_report([pool], fmt="markdown")
    inf2, g5 = price("inf2.xlarge"), price("g5.xlarge")
    assert "### serve: inference, inf2.xlarge, inf2.8xlarge, g5.xlarge, capacity on-demand" in out
    saving = 8 * g5 * HOURS - 8 * inf2 * HOURS
    assert f"| max | 8 | {money(8 * inf2)} | {money(8 * inf2 * HOURS)} | {money(8 * g5 * HOURS)} | {money(saving)} |" in out
    assert "Priced on the primary type inf2.xlarge" in out
    assert f"inf2.8xlarge (${price('inf2.8xlarge')}/hour), g5.xlarge (${g5}/hour)" in out


def test_gpu_pool_is_not_compared_with_itself():
    pool = Pool("prod", "us-east-1", "pretrain-gpu", "training-gpu", ("p5.48xlarge",), (), (), 0, 2, 1, "on-demand")
    out = cost_report([pool], fmt="markdown")
    assert "p5.48xlarge is a GPU type: no GPU equivalent" in out
    assert f"| desired | 1 | {money(price('p5.48xlarge'))} | {money(price('p5.48xlarge') * HOURS)} |" in out


def test_missing_gpu_equivalent_price_skips_the_comparison_with_a_reason():
    table = dataclasses.replace(
        TABLE, prices={r: {t: p for t, p in ps.items() if t != "p4d.24xlarge"} for r, ps in TABLE.prices.items()}
    )
    pool = Pool("prod", "us-east-1", "pretrain", "training", ("trn1.32xlarge",), ("trn1.32xlarge",), (), 0, 4, 4, "on-demand")
    out = cost_report([pool], fmt="markdown", table=table)
    assert "GPU comparison skipped: no On-Demand price for p4d.24xlarge in us-east-1" in out
    assert "p4d.24xlarge $/month" not in out
    assert f"| desired | 4 | {money(4 * price('trn1.32xlarge'))} | {money(4 * price('trn1.32xlarge') * HOURS)} |" in out


# --------------------------------------------------------------------------------------------
# cdk.out and the PR diff
# --------------------------------------------------------------------------------------------
def test_pools_are_read_from_the_asg_metadata_of_every_template():
    pools = pools_from_cdk_out(FIXTURES / "cdk_out_new")
    seen = {(p.stack, p.label, p.role, p.primary_type, p.min_size, p.desired_size, p.max_size, p.capacity) for p in pools}
    assert seen == {
        ("NeuronkitDevCompute", "dev/dev", "training", "trn1.2xlarge", 0, 0, 1, "on-demand"),
        ("NeuronkitProdCompute", "prod/pretrain", "training", "trn1n.32xlarge", 0, 16, 32, "odcr"),
        ("NeuronkitProdInference", "prod/serve", "inference", "inf2.xlarge", 1, 2, 4, "on-demand"),
    }


def test_diff_is_markdown_with_a_table_per_changed_added_and_removed_pool(capsys, monkeypatch):
    old, new = str(FIXTURES / "cdk_out_old"), str(FIXTURES / "cdk_out_new")
    code, out, err = run(["cost", "--diff", old, new], capsys, monkeypatch)
    assert code == 0, err
    trn1, trn1n, trn1s, inf2 = price("trn1.32xlarge"), price("trn1n.32xlarge"), price("trn1.2xlarge"), price("inf2.xlarge")

    changed = out[out.index("### prod/pretrain (training): changed") :]
    assert "| instance types | trn1.32xlarge | trn1n.32xlarge |  |" in changed
    assert "| nodes min/desired/max | 0/16/16 | 0/16/32 |  |" in changed
    b, a = 16 * trn1 * HOURS, 16 * trn1n * HOURS
    assert f"| $/month at desired | {money(b)} | {money(a)} | +{money(a - b)} ({(a - b) / b * 100:+.1f}%) |" in changed
    b, a = 16 * trn1 * HOURS, 32 * trn1n * HOURS
    assert f"| $/month at max | {money(b)} | {money(a)} | +{money(a - b)} ({(a - b) / b * 100:+.1f}%) |" in changed

    added = out[out.index("### prod/serve (inference): added") :]
    assert "| instance types | – | inf2.xlarge, inf2.8xlarge, g5.xlarge |  |" in added
    assert f"| $/month at desired | $0.00 | {money(2 * inf2 * HOURS)} | +{money(2 * inf2 * HOURS)} |" in added

    removed = out[out.index("### prod/eval (training): removed") :]
    assert f"| $/month at desired | {money(trn1s * HOURS)} | $0.00 | -{money(trn1s * HOURS)} (-100.0%) |" in removed

    assert "### dev/dev" not in out
    assert "- dev/dev (training): $0.00 a month at desired capacity" in out

    before = 16 * trn1 * HOURS + 1 * trn1s * HOURS
    after = 16 * trn1n * HOURS + 2 * inf2 * HOURS
    total = out[out.index("### Total") :]
    assert "| pools | 3 | 3 |  |" in total
    change = f"+{money(after - before)} ({(after - before) / before * 100:+.1f}%)"
    assert f"| $/month at desired | {money(before)} | {money(after)} | {change} |" in total
    # The first line under the heading is the PR comment's headline.
    headline = out.splitlines()[2]
    assert headline.startswith(
        f"Monthly On-Demand cost at desired capacity: {money(before)} → {money(after)}, +{money(after - before)}"
    )


def test_diff_of_identical_synths_says_nothing_changed(capsys, monkeypatch):
    old = str(FIXTURES / "cdk_out_old")
    code, out, _ = run(["cost", "--diff", old, old], capsys, monkeypatch)
    assert code == 0
    desired = 16 * price("trn1.32xlarge") * HOURS + 1 * price("trn1.2xlarge") * HOURS
    assert f"No change in On-Demand cost: 3 pool(s), {money(desired)} a month at desired capacity." in out
    assert not re.search(r"\): (changed|added|removed)$", out, re.MULTILINE)
    assert "- prod/pretrain (training): " in out


def test_diff_as_text(capsys, monkeypatch):
    code, out, _ = run(
        ["cost", "--diff", str(FIXTURES / "cdk_out_old"), str(FIXTURES / "cdk_out_new"), "--format", "text"], capsys, monkeypatch
    )
    assert code == 0
    assert "prod/serve (inference): added\n-----------------------------" in out
    assert "|" not in out
    assert re.search(r"^\$/month at desired +\$", out, re.MULTILINE)


def test_renamed_stack_is_not_a_change(tmp_path, capsys, monkeypatch):
    old = write_cdk_out(tmp_path / "old", {"Asg": metadata()}, stack="NeuronkitProdTraining")
    new = write_cdk_out(tmp_path / "new", {"Asg": metadata()}, stack="NeuronkitProdCompute")
    code, out, _ = run(["cost", "--diff", str(old), str(new)], capsys, monkeypatch)
    assert code == 0
    assert "No change in On-Demand cost: 1 pool(s)" in out


# --------------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------------
def test_missing_prices_name_each_type_region_and_the_fix(tmp_path, capsys, monkeypatch):
    folder = write_cdk_out(
        tmp_path / "cdk.out",
        {
            "ServeAsg": metadata(
                region="eu-west-1", pool="serve", role="inference", instance_types=["inf2.xlarge"], neuron_types=["inf2.xlarge"]
            ),
            "BigAsg": metadata(region="us-east-2", pool="big", instance_types=["trn2.48xlarge"], neuron_types=["trn2.48xlarge"]),
            "WrongAsg": metadata(region="eu-west-1", pool="wrong"),
        },
    )
    code, out, err = run(["cost", "--cdk-out", str(folder)], capsys, monkeypatch)
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert lines[0].startswith("neuronkit: ")
    assert len(lines) == 3
    # A region the table does not cover: how to refresh it.
    assert any(
        "prod/serve (inference): no On-Demand price for inf2.xlarge in eu-west-1 in neuronkit/catalog/prices.json" in line
        and f"run `neuronkit catalog refresh --prices{''.join(f' --region {r}' for r in [*TABLE.regions, 'eu-west-1'])}`" in line
        for line in lines
    )
    # A type AWS sells without an On-Demand price: why.
    assert any("trn2.48xlarge in us-east-2" in line and "Capacity Blocks" in line for line in lines)
    # A type the region does not offer: where it is offered.
    assert any("trn1.32xlarge is not offered in eu-west-1 (offered in ap-south-1," in line for line in lines)


def test_missing_cdk_out_folder(tmp_path, capsys, monkeypatch):
    code, _, err = run(["cost", "--cdk-out", str(tmp_path / "nope")], capsys, monkeypatch)
    assert code == 2
    assert err == f"neuronkit: {tmp_path / 'nope'}: no such cdk.out folder; run `make synth` (or `cdk synth`) first\n"


def test_empty_cdk_out_folder(tmp_path, capsys, monkeypatch):
    code, _, err = run(["cost", "--diff", str(tmp_path), str(tmp_path)], capsys, monkeypatch)
    assert code == 2
    assert "holds no *.template.json; run `make synth`" in err


def test_asg_without_or_with_bad_metadata_is_named(tmp_path, capsys, monkeypatch):
    folder = write_cdk_out(
        tmp_path / "cdk.out",
        {"BareAsg": None, "BadAsg": metadata(desired_size=20), "OddAsg": metadata(role="batch", pool="odd")},
    )
    code, _, err = run(["cost", "--cdk-out", str(folder)], capsys, monkeypatch)
    assert code == 2
    template = folder / "NeuronkitTest.template.json"
    assert f"{template}: BareAsg: Auto Scaling group has no Metadata.neuronkit; re-synthesize" in err
    assert f"{template}: BadAsg: Metadata.neuronkit.desired_size: 20 is not between min_size 0 and max_size 16" in err
    assert f"{template}: OddAsg: Metadata.neuronkit.role: 'batch' is not one of training, training-gpu, inference" in err


def test_a_pool_in_two_templates_is_an_error(tmp_path, capsys, monkeypatch):
    folder = write_cdk_out(tmp_path / "cdk.out", {"Asg": metadata()}, stack="NeuronkitA")
    write_cdk_out(folder, {"Asg": metadata()}, stack="NeuronkitB")
    code, _, err = run(["cost", "--cdk-out", str(folder)], capsys, monkeypatch)
    assert code == 2
    assert "pool prod/pretrain (training) appears in both NeuronkitA and NeuronkitB; pool names must be unique" in err


def test_unknown_environment_lists_the_known_ones(capsys, monkeypatch):
    code, _, err = run(["cost", "--env", "staging"], capsys, monkeypatch)
    assert code == 2  # a usage error (README: exit codes)
    known = ", ".join(f.stem for f in sorted((REPO / "environments").glob("*.yaml")))
    assert f"environments/staging.yaml: no such environment; known environments: {known}" in err


def test_price_pools_reports_every_missing_price_at_once():
    pools = [
        Pool("a", "ap-south-2", "x", "training", ("trn2u.48xlarge",), ("trn2u.48xlarge",), (), 0, 1, 0, "on-demand"),
        Pool("b", "us-east-1", "y", "training", ("trn9.big",), ("trn9.big",), (), 0, 1, 0, "on-demand"),
    ]
    with pytest.raises(pricing.MissingPriceError) as err:
        price_pools(pools)
    assert len(err.value.problems) == 2
    assert "trn9.big is not in the instance catalog" in err.value.problems[1]


# --------------------------------------------------------------------------------------------
# the catalog files
# --------------------------------------------------------------------------------------------
def test_price_table_is_dated_sourced_and_refreshable():
    assert dt.date.fromisoformat(TABLE.as_of)
    assert TABLE.currency == "USD"
    assert "neuronkit catalog refresh --prices" in TABLE.source
    assert {"us-east-1", "us-east-2", "us-west-2"} <= set(TABLE.regions)
    known = catalog.instance_types()
    for region, prices in TABLE.prices.items():
        for name, hourly in prices.items():
            assert name in known, f"{name} is priced but not in instances.json"
            assert known[name].az_ids(region), f"{name} is priced in {region}, which does not offer it"
            assert hourly > 0
    for name in TABLE.unpriced:
        assert all(name not in prices for prices in TABLE.prices.values()), f"{name} is both priced and unpriced"


def test_every_neuron_type_has_a_gpu_equivalent_priced_wherever_it_is():
    known = catalog.instance_types()
    equivalents = pricing.equivalents()
    for name, facts in known.items():
        if not facts.is_neuron:
            continue
        eq = equivalents.get(name)
        assert eq is not None, f"{name} has no entry in equivalents.yaml"
        assert known[eq.gpu_type].accelerator == "gpu", f"{name}'s equivalent {eq.gpu_type} is not a GPU type"
        assert eq.reason.strip()
        for region, prices in TABLE.prices.items():
            if name in prices:
                assert eq.gpu_type in prices, f"{name} is priced in {region} but its equivalent {eq.gpu_type} is not"


def test_no_prices_or_hours_are_written_into_the_code():
    sources = [REPO / "neuronkit" / f for f in ("reports/cost.py", "reports/pools.py", "catalog/pricing.py", "cli/cost.py")]
    text = "\n".join(p.read_text() for p in sources)
    numbers = {str(v) for prices in TABLE.prices.values() for v in prices.values()} | {f"{HOURS:g}"}
    found = sorted(n for n in numbers if re.search(rf"(?<![\w.]){re.escape(n)}(?![\w.])", text))
    assert found == []


def test_a_created_reservation_is_priced_apart_as_billed_used_or_not() -> None:
    from neuronkit.reports.cost import cost_report
    from neuronkit.reports.pools import Pool

    pool = Pool(
        environment="team", region="us-east-1", pool="pretrain", role="training", instance_types=("trn1.32xlarge",),
        neuron_types=("trn1.32xlarge",), fallback_types=(), min_size=0, max_size=16, desired_size=0, capacity="odcr",
        reserved=16,
    )  # fmt: skip
    table = pricing.load_prices()
    hourly = table.require("trn1.32xlarge", "us-east-1")
    text = cost_report([pool], "markdown", table)
    expected = f"Reservation: 16 x trn1.32xlarge reserved by the stack, billed whether used or not: ${16 * hourly:,.2f}/hour"
    assert expected in text
    # The pool itself runs 0 nodes at desired: the reservation line shows what the rows do not.
    assert "$0.00" in text
    assert "Reservation:" not in cost_report([dataclasses.replace(pool, reserved=0)], "markdown", table)


# --------------------------------------------------------------------------------------------
# besides the pools: NAT gateways, endpoints, load balancers, Lustre; against the budget
# --------------------------------------------------------------------------------------------
def test_prod_fixed_costs_are_computed_from_the_service_price_list() -> None:
    import yaml

    from neuronkit.reports.cost import fixed_costs

    env = config.load_environment(REPO / "environments" / "prod.yaml")
    sp = yaml.safe_load((REPO / "neuronkit" / "catalog" / "service_prices.yaml").read_text())
    got = {f.item: f.monthly for f in fixed_costs(env)}
    net = env.network
    lustre = env.storage.lustre
    assert lustre is not None and lustre.deployment_type == "PERSISTENT_2"
    assert got == pytest.approx(
        {
            f"NAT gateways x{net.nat_gateways}": net.nat_gateways * sp["nat_gateway_hour"]["usd"] * HOURS,
            f"interface endpoints x{len(net.interface_endpoints)}": len(net.interface_endpoints) * len(net.az_ids) * sp["interface_endpoint_az_hour"]["usd"] * HOURS,
            "ALB of chat": sp["load_balancer_hour"]["alb"]["usd"] * HOURS,
            f"FSx for Lustre PERSISTENT_2 {lustre.size_gib} GiB": lustre.size_gib * sp["lustre_gb_month"]["PERSISTENT_2"][lustre.throughput_mbps_per_tib]["usd"],
        }
    )  # fmt: skip


def test_the_report_compares_the_whole_maximum_with_the_budget(capsys, monkeypatch, tmp_path):
    import yaml

    from neuronkit.reports.cost import fixed_costs

    code, out, _ = run(["cost", "--env", "prod", "--format", "markdown"], capsys, monkeypatch)
    assert code == 0
    env = config.load_environment(REPO / "environments" / "prod.yaml")
    fee, _ = _prod_block()
    top = fee + (2 * price("p5.48xlarge", "us-east-2") + 12 * price("inf2.48xlarge", "us-east-2")) * HOURS
    top += sum(f.monthly for f in fixed_costs(env))
    assert f"max {money(top)} ({top / 450_000 * 100:.1f}%): within the budget at desired (budget.enforce: desired)." in out
    assert out.count("Budget $450,000.00 a month; estimate min $") == 1
    # A budget below the maximum, enforced at max, says so and how to fix it.
    data = yaml.safe_load((REPO / "environments" / "prod.yaml").read_text())
    data["budget"]["monthly_usd"] = 100_000
    path = tmp_path / "prod.yaml"
    path.write_text(yaml.safe_dump(data))
    data["budget"]["enforce"] = "max"
    path.write_text(yaml.safe_dump(data))
    code, out, err = run(["cost", "--file", str(path)], capsys, monkeypatch)
    assert code == 1 and "**over the budget at max** (budget.enforce: max); lower the sizes or raise budget.monthly_usd" in out
    assert err.startswith(f"{path}: budget.monthly_usd: the estimate at max capacity, {money(top)} a month, exceeds")


# --------------------------------------------------------------------------------------------
# the budget gate: budget.enforce (desired by default, max, off) against budget.monthly_usd
# --------------------------------------------------------------------------------------------
def _levels(env: config.Environment) -> dict[str, float]:
    """min/desired/max computed here: nodes x hourly price x hours, plus the fixed charges."""
    from neuronkit.reports.cost import fixed_costs

    fixed = sum(f.monthly for f in fixed_costs(env))
    pools = pools_from_environment(env)
    assert pools and all(p.block_fee is None for p in pools)  # priced on demand, so the formula below holds
    sizes = {"min": "min_size", "desired": "desired_size", "max": "max_size"}
    return {
        level: fixed + sum(getattr(p, attr) * price(p.primary_type, p.region) * HOURS for p in pools)
        for level, attr in sizes.items()
    }


def _dev_with(tmp_path: Path, fleet: dict[str, Any], budget: dict[str, Any] | None = None) -> Path:
    import yaml

    data = yaml.safe_load((REPO / "environments" / "dev.yaml").read_text())
    data["inference"][0].update(fleet)
    data["budget"].update(budget or {})
    path = tmp_path / "dev.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_dev_passes_the_default_gate_and_shows_the_three_levels(capsys, monkeypatch) -> None:
    env = config.load_environment(REPO / "environments" / "dev.yaml")
    assert env.budget is not None and env.budget.enforce == "desired"  # the default
    code, out, err = run(["cost", "--env", "dev"], capsys, monkeypatch)
    assert code == 0, err
    levels = _levels(env)
    assert levels["desired"] <= env.budget.monthly_usd
    shown = ", ".join(f"{lv} {money(levels[lv])} ({levels[lv] / env.budget.monthly_usd * 100:.1f}%)" for lv in levels)
    assert f"Budget $3,000.00 a month; estimate {shown}: within the budget at desired (budget.enforce: desired)" in out


def test_a_400_node_fleet_fails_the_gate_with_min_desired_and_max(capsys, monkeypatch, tmp_path) -> None:
    path = _dev_with(tmp_path, {"min_size": 0, "desired_size": 400, "max_size": 400})
    levels = _levels(config.load_environment(path))
    assert levels["desired"] > 3000
    code, out, err = run(["cost", "--file", str(path)], capsys, monkeypatch)
    assert code == 1
    expected = (
        f"{path}: budget.monthly_usd: the estimate at desired capacity, {money(levels['desired'])} a month, exceeds the "
        f"budget of $3,000.00 (min {money(levels['min'])}, desired {money(levels['desired'])}, max {money(levels['max'])}; "
        "pools and fixed charges); lower the sizes or raise budget.monthly_usd (budget.enforce: desired)"
    )
    assert err.splitlines() == [expected]
    assert "**over the budget at desired**" in out
    # validate holds the same gate, with the same line, and prints no "ok" for the file.
    code, out, err = run(["validate", str(path)], capsys, monkeypatch)
    assert code == 1 and expected in err.splitlines() and ": ok:" not in out
    # The override is a reviewed line in the file: a budget that covers it.
    raised = _dev_with(tmp_path, {"min_size": 0, "desired_size": 400, "max_size": 400}, {"monthly_usd": levels["max"] + 1})
    assert run(["cost", "--file", str(raised)], capsys, monkeypatch)[0] == 0


def test_max_size_400_passes_at_desired_fails_at_max_and_off_turns_the_gate_off(capsys, monkeypatch, tmp_path) -> None:
    fleet = {"min_size": 0, "max_size": 400}
    code, out, _ = run(["cost", "--file", str(_dev_with(tmp_path, fleet))], capsys, monkeypatch)
    assert code == 0 and "within the budget at desired (budget.enforce: desired); at max it would exceed it (not enforced)" in out
    code, _, err = run(["validate", str(_dev_with(tmp_path, fleet, {"enforce": "max"}))], capsys, monkeypatch)
    assert code == 1 and "budget.monthly_usd: the estimate at max capacity" in err
    off = _dev_with(tmp_path, {"min_size": 0, "desired_size": 400, "max_size": 400}, {"enforce": "off"})
    code, out, _ = run(["cost", "--file", str(off)], capsys, monkeypatch)
    assert code == 0 and "not enforced (budget.enforce: off)" in out
    assert run(["validate", str(off)], capsys, monkeypatch)[0] == 0


def test_an_unknown_enforce_level_is_one_line_naming_the_choices(capsys, monkeypatch, tmp_path) -> None:
    code, _, err = run(["validate", str(_dev_with(tmp_path, {}, {"enforce": "always"}))], capsys, monkeypatch)
    assert code == 1 and "budget.enforce" in err and "'desired'" in err and "Traceback" not in err


def test_a_model_fleet_notes_what_its_compile_nodes_cost_per_rollout() -> None:
    env = config.load_environment(REPO / "environments" / "prod.yaml")
    (fleet,) = [p for p in pools_from_environment(env) if p.role == "inference"]
    assert fleet.compile_types == tuple(env.inference[0].neuron_types)
    report = cost_report([fleet])
    table = pricing.load_prices()
    note = next(line for line in report.splitlines() if "Rollouts:" in line)
    for t in env.inference[0].neuron_types:
        price = table.hourly(t, env.region)
        assert price is not None and f"{t} ({rate(price)}/hour)" in note
    hours = serving.facts()["compiled_cache"]["lock_timeout_seconds"] / 3600
    assert f"up to {hours:g} hours" in note and "not in the monthly figures" in note
    off = env.model_copy(update={"inference": [env.inference[0].model_copy(update={"precompile": False})]})
    (plain,) = [p for p in pools_from_environment(off) if p.role == "inference"]
    assert plain.compile_types == () and "Rollouts:" not in cost_report([plain])


def test_the_synthesized_fleet_carries_the_same_compile_types(synth: Synth) -> None:
    pools = {(p.environment, p.pool): p for p in pools_from_cdk_out(synth.outdir) if p.role == "inference"}
    for name in ("dev", "prod"):
        env = config.load_environment(REPO / "environments" / f"{name}.yaml")
        for f in env.inference:
            assert pools[(name, f.name)].compile_types == tuple(f.neuron_types)


# --------------------------------------------------------------------------------------------
# the fleet's own GPU fallback; block-only types (issue 42)
# --------------------------------------------------------------------------------------------
def _dev_fleet(tmp_path: Path, **fleet: Any) -> Path:
    data = yaml.safe_load((REPO / "environments" / "dev.yaml").read_text())
    data["inference"][0].update(fleet)
    path = tmp_path / "dev.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_a_fleet_with_a_g6e_fallback_is_compared_with_g6e(tmp_path, capsys, monkeypatch):
    f = _dev_fleet(tmp_path, neuron_types=["inf2.8xlarge"], fallback_types=["g6e.2xlarge"])
    code, out, err = run(["cost", "--file", str(f), "--format", "markdown"], capsys, monkeypatch)
    assert code == 0, err
    assert pricing.equivalents()["inf2.8xlarge"].gpu_type == "g5.8xlarge"  # what it used to be compared with
    section = out[out.index("### serve: inference, inf2.8xlarge, g6e.2xlarge") :]
    section = section[: section.index("\n### ")]
    assert "; GPU fallback g6e.2xlarge at" in section and "g5.8xlarge $/month" not in section
    assert "the pool's own GPU fallback (its first GPU fallback_types entry), not the catalog's equivalent g5.8xlarge" in section
    inf2, g6e = price("inf2.8xlarge"), price("g6e.2xlarge")
    mx = 2 * HOURS  # dev's serve fleet runs up to 2 nodes
    assert f"| max | 2 | {money(2 * inf2)} | {money(inf2 * mx)} | {money(g6e * mx)} | {money((g6e - inf2) * mx)} |" in section


def _prod_on_demand(tmp_path: Path, **capacity: Any) -> Path:
    data = yaml.safe_load((REPO / "environments" / "prod.yaml").read_text())
    data["training"][0]["capacity"] = capacity or {"type": "on-demand"}
    data["budget"]["enforce"] = "off"
    path = tmp_path / "prod.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False, default_flow_style=False))
    return path


@pytest.fixture
def trn2_block_only(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The catalog holding a sourced, dated fact that trn2.48xlarge is block-only in us-east-2 (the shape of
    capacity.yaml's block_only; the shipped catalog holds none, see docs/cost.md)."""
    facts = json.loads(json.dumps(catalog.capacity_facts()))
    fact = {"source": "https://example.invalid/ec2-pricing-trn2", "as_of": "2026-11-26"}
    facts["block_only"] = {"trn2.48xlarge": {"us-east-2": fact}}
    monkeypatch.setattr(catalog, "capacity_facts", lambda: facts)
    return fact


def test_an_on_demand_pool_of_a_block_only_type_is_a_capacity_problem(tmp_path, capsys, monkeypatch, trn2_block_only):
    f = _prod_on_demand(tmp_path)
    code, _, err = run(["validate", "--file", str(f)], capsys, monkeypatch)
    assert code == 1
    line = next(x for x in err.splitlines() if "training[0].capacity" in x)
    assert str(f) in line and "sold only through EC2 Capacity Blocks for ML in us-east-2" in line
    assert trn2_block_only["source"] in line and "read 2026-11-26" in line
    assert "capacity: {type: capacity-block" in line and "existing reservation (capacity: {type: odcr" in line
    assert "budget" not in line and "Traceback" not in err
    # An on-demand fallback after the block asks for the same capacity: refused too.
    block = dict(yaml.safe_load((REPO / "environments" / "prod.yaml").read_text())["training"][0]["capacity"])
    f = _prod_on_demand(tmp_path, **{**block, "fallback": "on-demand"})
    code, _, err = run(["validate", "--file", str(f)], capsys, monkeypatch)
    assert code == 1 and "training[0].capacity.fallback: trn2.48xlarge is sold only through EC2 Capacity Blocks" in err


def test_the_kits_files_stay_valid_with_trn2_block_only(capsys, monkeypatch, trn2_block_only):
    files = sorted((REPO / "environments").glob("*.yaml")) + sorted((REPO / "examples" / "environments").glob("*.yaml"))
    trn2 = [f for f in files if "trn2.48xlarge" in f.read_text()]
    assert trn2, "some files run trn2.48xlarge: the rule is exercised"
    for f in files:
        code, _, err = run(["validate", "--file", str(f)], capsys, monkeypatch)
        assert code == 0, f"{f}: {err}"


def test_without_a_sourced_fact_an_on_demand_trn2_pool_warns(tmp_path, capsys, monkeypatch):
    assert not catalog.capacity_facts()["block_only"]  # the shipped catalog sources no block-only type (docs/cost.md)
    f = _prod_on_demand(tmp_path)
    code, out, err = run(["validate", "--file", str(f)], capsys, monkeypatch)
    warning = next(x for x in err.splitlines() if x.startswith(f"warning: {f}: training[0].capacity:"))
    assert "on-demand trn2.48xlarge may get no capacity in us-east-2" in warning
    assert "no sourced fact that it is block-only" in warning
    assert "training[0].capacity: trn2.48xlarge is sold only" not in err


# --------------------------------------------------------------------------------------------
# platform: eks: the fleet's GPU fallback is a node group of its own, linked by Metadata fallback_for (issue 50)
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "path", [REPO / "examples" / "environments" / "eks.yaml", FIXTURES / "user_environments" / "mlp.yaml"], ids=lambda p: p.name
)
def test_an_eks_fleet_is_compared_with_its_own_fallback_node_group(path: Path) -> None:
    env = config.load_environment(path)
    pools = pools_from_environment(env)
    fleets = [f for f in env.inference if f.fallback_types]
    assert fleets, f"{path.name} has a fleet with fallback_types"
    for f in fleets:
        (fleet,) = [p for p in pools if p.pool == f.name]
        # One group per GPU type of a served fleet, in the file's order; the fleet is compared with the first.
        groups = [p for p in pools if p.fallback_for == f.name]
        assert [g.instance_types for g in groups] == [(t,) for t in f.fallback_types]
        gpu = groups[0]
        assert fleet.fallback_types == () and gpu.pool == f"{f.name}-gpu"  # the link the pools themselves no longer carry
        (cost,) = [c for c in price_pools([fleet, *groups]) if c.pool is fleet]
        equivalent = pricing.equivalents()[f.neuron_types[0]].gpu_type
        assert cost.gpu_type == f.fallback_types[0] != equivalent and cost.gpu_is_fallback
        assert cost.gpu_hourly_price == pytest.approx(TABLE.hourly(f.fallback_types[0], env.region))
        report = cost_report([fleet, gpu], "markdown")
        assert f"GPU fallback {f.fallback_types[0]} at" in report and f"{equivalent} $/month" not in report
        assert f"the first type of its GPU fallback node group {f.name}-gpu" in report


def test_the_fallback_link_survives_cdk_out(tmp_path: Path) -> None:
    """The node group construct writes fallback_for into the pool Metadata and cdk.out's reader returns it."""
    from neuronkit.constructs.eks import NeuronNodeGroup, NodeGroupSpec
    from tests.templates import bare_stack, template
    from tests.unit.test_eks import _cluster

    stack = bare_stack()
    cluster = _cluster(stack)
    subnets = cluster.cluster.vpc.private_subnets
    for name, types, link in (("chat", ["inf2.8xlarge"], None), ("chat-gpu", ["g6e.2xlarge"], "chat")):
        NeuronNodeGroup(
            stack, f"Group-{name}", environment="team", cluster=cluster, subnets=subnets, role="inference",
            script="#!/bin/bash\necho check\n",
            spec=NodeGroupSpec(name=name, instance_types=types, max_size=2, efa=False, fallback_for=link),
        )  # fmt: skip
    out = tmp_path / "cdk.out"
    out.mkdir()
    (out / "team.template.json").write_text(json.dumps(template(stack)))
    pools = {p.pool: p for p in pools_from_cdk_out(out)}
    assert pools["chat-gpu"].fallback_for == "chat" and pools["chat"].fallback_for is None
    (chat,) = [c for c in price_pools(pools.values()) if c.pool.pool == "chat"]
    assert chat.gpu_type == "g6e.2xlarge" and chat.gpu_is_fallback
