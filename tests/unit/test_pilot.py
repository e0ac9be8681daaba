"""The pilot (adoption phase 2): the step reporter, the `pilot:` section, its synthesized queues and dashboard,
`neuronkit pilot start` (Batch through the Stubber) and `neuronkit pilot report` (CloudWatch Logs in moto)."""

from __future__ import annotations

import copy
import datetime as dt
import io
import json
import math
import statistics
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from botocore.stub import ANY, Stubber
from moto import mock_aws

from neuronkit.adoption import pilot
from neuronkit.adoption.pilot_metrics import NAMESPACE, StepReporter
from neuronkit.catalog import pricing
from neuronkit.cli import main
from neuronkit.config import ConfigError, load_environment, parse_environment
from neuronkit.stacks import build_environment
from tests.conftest import ROOT, new_app
from tests.templates import resources

FILE = ROOT / "examples" / "environments" / "pilot.yaml"
SHOWN = "examples/environments/pilot.yaml"
DATA = yaml.safe_load(FILE.read_text())
RUN = "run-20261124T120000Z"


# --------------------------------------------------------------------------------------------
# the step reporter
# --------------------------------------------------------------------------------------------
def test_a_step_is_one_emf_line_with_the_pilots_dimensions() -> None:
    out = io.StringIO()
    env = {"NEURONKIT_ENVIRONMENT": "pilot", "NEURONKIT_PILOT": "llama-finetune", "NEURONKIT_PILOT_SIDE": "neuron",
           "NEURONKIT_PILOT_RUN": RUN, "AWS_BATCH_JOB_NODE_INDEX": "0"}  # fmt: skip
    StepReporter(out=out, env=env).step(7, loss=2.5, tokens=4096, seconds=0.5)
    (line,) = out.getvalue().splitlines()
    doc = json.loads(line)
    (directive,) = doc["_aws"]["CloudWatchMetrics"]
    assert directive["Namespace"] == NAMESPACE and directive["Dimensions"] == [["Environment", "Pilot", "Side"]]
    assert {m["Name"] for m in directive["Metrics"]} == {"Loss", "TokensPerSecond", "StepTime"}
    assert (doc["Step"], doc["Loss"], doc["TokensPerSecond"], doc["StepTime"], doc["RunId"]) == (7, 2.5, 8192.0, 0.5, RUN)
    # Every metric and dimension named in the directive is a top-level member, as EMF requires.
    assert all(m["Name"] in doc for m in directive["Metrics"]) and all(d in doc for d in directive["Dimensions"][0])


def test_only_the_first_node_reports_and_bad_values_are_refused() -> None:
    out = io.StringIO()
    env = {"NEURONKIT_ENVIRONMENT": "e", "NEURONKIT_PILOT": "p", "NEURONKIT_PILOT_SIDE": "gpu", "NEURONKIT_PILOT_RUN": RUN,
           "AWS_BATCH_JOB_NODE_INDEX": "1"}  # fmt: skip
    StepReporter(out=out, env=env).step(1, loss=1.0, tokens=1, seconds=1)
    assert out.getvalue() == ""
    with pytest.raises(ValueError, match="side must be one of neuron, gpu"):
        StepReporter(env={**env, "NEURONKIT_PILOT_SIDE": "tpu"})
    with pytest.raises(ValueError, match="run_id not given"):
        StepReporter(env={k: v for k, v in env.items() if k != "NEURONKIT_PILOT_RUN"})
    with pytest.raises(ValueError, match="a finite loss"):
        StepReporter(env=env).record(1, loss=math.nan, tokens=1, seconds=1)


# --------------------------------------------------------------------------------------------
# the pilot: section
# --------------------------------------------------------------------------------------------
def problems(edit: dict[str, Any]) -> list[str]:
    data = copy.deepcopy(DATA)
    data["pilot"].update(edit)
    with pytest.raises(ConfigError) as err:
        parse_environment(data, SHOWN)
    return err.value.problems


def test_the_pilot_must_name_a_batch_cluster_with_a_gpu_pool_that_fits() -> None:
    assert problems({"cluster": "llama2"}) == [
        f"{SHOWN}: pilot.cluster: 'llama2' is not a training cluster of this file (clusters: llama)"
    ]
    assert problems({"nodes": 2}) == [
        f"{SHOWN}: pilot.nodes: 2 is more than llama's training max_size 1; lower nodes or raise it",
        f"{SHOWN}: pilot.nodes: 2 is more than llama's gpu_pool max_size 1; lower nodes or raise it",
    ]
    assert problems({"data_s3_prefix": "s3://bucket/x"}) == [
        f"{SHOWN}: pilot.data_s3_prefix: 's3://bucket/x' must be a key prefix ending in '/', e.g. pilot/"
    ]


# --------------------------------------------------------------------------------------------
# synthesized
# --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def templates(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    app = new_app(tmp_path_factory.mktemp("pilot") / "cdk.out")
    build_environment(app, load_environment(FILE))
    return {s.stack_name: s.template for s in app.synth().stacks}


def test_the_example_runs_both_sides_as_batch_queues_on_the_same_data(templates: dict[str, dict[str, Any]]) -> None:
    queues = {q["Properties"]["JobQueueName"] for q in resources(templates["pilot-training"], "AWS::Batch::JobQueue").values()}
    assert queues == {"pilot-llama", "pilot-llama-gpu"}
    envs = {
        d["Properties"]["JobDefinitionName"]: {
            e["Name"]: e["Value"] for e in d["Properties"]["NodeProperties"]["NodeRangeProperties"][0]["Container"]["Environment"]
        }
        for d in resources(templates["pilot-training"], "AWS::Batch::JobDefinition").values()
    }
    assert set(envs) == {"pilot-llama", "pilot-llama-gpu"}
    assert envs["pilot-llama"]["NEURONKIT_DATASETS"] == envs["pilot-llama-gpu"]["NEURONKIT_DATASETS"]


def test_the_comparison_dashboard_shows_both_sides_and_their_cost_per_token(templates: dict[str, dict[str, Any]]) -> None:
    (dashboard,) = [
        d
        for d in resources(templates["pilot-monitoring"], "AWS::CloudWatch::Dashboard").values()
        if d["Properties"]["DashboardName"] == "neuronkit-pilot-pilot-llama-finetune"
    ]
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for metric in ("Loss", "TokensPerSecond", "StepTime"):
        assert metric in body
    table = pricing.load_prices()
    for itype in ("trn1.32xlarge", "p4d.24xlarge"):
        price = table.require(itype, "us-east-1")
        assert f"{price:.6g} / (tps_" in body, itype


# --------------------------------------------------------------------------------------------
# start and report
# --------------------------------------------------------------------------------------------
def test_start_submits_the_same_budget_to_both_queues() -> None:
    env = load_environment(FILE)
    batch = boto3.client("batch", region_name="us-east-1", aws_access_key_id="x", aws_secret_access_key="y")
    stub = Stubber(batch)
    for side, queue in (("neuron", "pilot-llama"), ("gpu", "pilot-llama-gpu")):
        stub.add_response(
            "submit_job", {"jobArn": f"arn:aws:batch:us-east-1:333333333333:job/{side}", "jobName": "x", "jobId": f"job-{side}"},
            {"jobName": f"llama-finetune-{side}-{RUN}", "jobQueue": queue, "jobDefinition": queue, "nodeOverrides": ANY,
             "tags": ANY, "propagateTags": True},
        )  # fmt: skip
    seen: list[dict[str, Any]] = []
    batch.meta.events.register("provide-client-params.batch.SubmitJob", lambda params, **_: seen.append(params))
    with stub:
        assert pilot.start(env, batch, RUN) == {"neuron": "job-neuron", "gpu": "job-gpu"}
    variables = [
        {e["name"]: e["value"] for e in p["nodeOverrides"]["nodePropertyOverrides"][0]["containerOverrides"]["environment"]}
        for p in seen
    ]
    assert [v["NEURONKIT_PILOT_SIDE"] for v in variables] == ["neuron", "gpu"]
    assert {v["NEURONKIT_PILOT_STEPS"] for v in variables} == {"500"} and {v["NEURONKIT_PILOT_RUN"] for v in variables} == {RUN}
    assert {v["NEURONKIT_PILOT_DATA"] for v in variables} == {"s3://pilot-datasets-333333333333-us-east-1/pilot/llama-finetune/"}
    assert (
        "--device xla" in variables[0]["NEURONKIT_TRAIN_COMMAND"] and "--device cuda" in variables[1]["NEURONKIT_TRAIN_COMMAND"]
    )
    assert all(p["nodeOverrides"]["numNodes"] == 1 for p in seen)


def _seed(logs: Any, side: str, group: str, steps: int, loss0: float, tokens: float, seconds: float, run: str = RUN) -> None:
    logs.create_log_group(logGroupName=group)
    logs.create_log_stream(logGroupName=group, logStreamName="job/0")
    reporter = StepReporter(environment="pilot", pilot="llama-finetune", side=side, run_id=run, env={})
    # CloudWatch Logs refuses events older than 14 days: the run happened in the last hour.
    start = int(time.time()) - 3600
    events = [{"timestamp": start * 1000, "message": "torchrun: starting"}]
    for step in range(1, steps + 1):
        doc = reporter.record(step, loss=loss0 / math.sqrt(step), tokens=tokens, seconds=seconds, now=start + step)
        events.append({"timestamp": (start + step) * 1000, "message": json.dumps(doc)})
    other = StepReporter(environment="pilot", pilot="llama-finetune", side=side, run_id="run-older", env={})
    events.append(
        {"timestamp": (start + steps + 1) * 1000, "message": json.dumps(other.record(1, loss=99.0, tokens=1, seconds=1))}
    )
    logs.put_log_events(logGroupName=group, logStreamName="job/0", logEvents=events)


def test_report_compares_the_runs_and_writes_its_plots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    with mock_aws():
        logs = boto3.client("logs", region_name="us-east-1")
        # Trainium: 500 steps of 8192 tokens in 0.5 s; GPU: 400 steps (stopped early) of 8192 tokens in 0.4 s.
        # The run id is what `pilot start` names a run that started two hours ago (the read starts there).
        run = pilot.new_run_id(dt.datetime.now(dt.UTC) - dt.timedelta(hours=2))
        _seed(logs, "neuron", "/neuronkit/pilot/batch/llama", 500, 3.00, 8192, 0.5, run)
        _seed(logs, "gpu", "/neuronkit/pilot/batch/llama-gpu", 400, 2.99, 8192, 0.4, run)
        out = tmp_path / "report"
        runs = pilot.read_runs(load_environment(FILE), logs, run)
        # moto ignores CloudWatch Logs' quoted filter terms: the report filters the lines itself.
        assert len(runs["neuron"].steps) == 500 and len(runs["gpu"].steps) == 400
        env = load_environment(FILE).model_copy(
            update={"pilot": load_environment(FILE).pilot.model_copy(update={"serving": None})}
        )  # type: ignore[union-attr]
        c = pilot.compare(env, runs, run)
        text = pilot.render(c, pilot.plots(runs, c, out), out)
        (out / "report.md").write_text(text)
    table = pricing.load_prices()
    trn, p4d = table.require("trn1.32xlarge", "us-east-1"), table.require("p4d.24xlarge", "us-east-1")
    n_total, g_total = trn * 500 * 0.5 / 3600, p4d * 400 * 0.4 / 3600
    n_cpm, g_cpm = n_total / (500 * 8192) * 1e6, g_total / (400 * 8192) * 1e6
    assert (
        f"| neuron | trn1.32xlarge | 500 | {500 * 0.5 / 3600:.2f} | 16,384 | 0.500 | 4,096,000 | ${trn:,.2f} | ${n_total:,.2f} | ${n_cpm:,.2f} |"
        in text
    )
    assert (
        f"| gpu | p4d.24xlarge | 400 | {400 * 0.4 / 3600:.2f} | 20,480 | 0.400 | 3,276,800 | ${p4d:,.2f} | ${g_total:,.2f} | ${g_cpm:,.2f} |"
        in text
    )
    window = range(351, 401)  # the last 50 steps both reached (the older run's line is ignored)
    n_mean = statistics.fmean(3.00 / math.sqrt(s) for s in window)
    g_mean = statistics.fmean(2.99 / math.sqrt(s) for s in window)
    gap = (n_mean - g_mean) / g_mean * 100
    assert f"the mean loss of steps 351-400 (50 steps both sides reached, the last at step 400) is {n_mean:.4f}" in text
    assert f"Trainium's is {gap:+.2f}% against the GPU's" in text
    expected = "go" if n_cpm < g_cpm else "hold"
    assert f"**Verdict: {expected}:" in text and "the gpu side stopped before the 500-step budget" in text
    assert text.startswith(f"# Fine-tuning pilot {c.pilot}:")  # the title names the pilot's kind
    for name in ("loss.png", "throughput.png", "cost_per_token.png", "total_cost.png"):
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert f"]({name})" in text


def test_report_against_moto_reads_the_steps_through_the_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    data = copy.deepcopy(DATA)
    del data["pilot"]["serving"]
    training_only = tmp_path / "pilot.yaml"
    training_only.write_text(yaml.safe_dump(data))
    run = pilot.new_run_id(dt.datetime.now(dt.UTC) - dt.timedelta(hours=2))
    with mock_aws():
        logs = boto3.client("logs", region_name="us-east-1")
        _seed(logs, "neuron", "/neuronkit/pilot/batch/llama", 60, 3.00, 8192, 0.5, run)
        _seed(logs, "gpu", "/neuronkit/pilot/batch/llama-gpu", 60, 3.00, 8192, 0.5, run)
        out = tmp_path / "report"
        assert main(["pilot", "report", "--file", str(training_only), "--run-id", run, "-o", str(out)]) == 0
    text = (out / "report.md").read_text()
    assert "**Verdict: incomplete" not in text and "**Verdict: " in text and "mean loss of steps 11-60" in text
    assert text in capsys.readouterr().out


def test_report_without_a_deployed_pilot_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        assert main(["pilot", "report", "--file", str(FILE), "--run-id", RUN, "-o", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "no bucket pilot-artifacts-333333333333-us-east-1: deploy the environment" in err and "Traceback" not in err


def test_a_loss_gap_beyond_the_tolerance_is_not_yet() -> None:
    env = load_environment(FILE)
    runs = {"neuron": pilot.Series("neuron", "trn1.32xlarge"), "gpu": pilot.Series("gpu", "p4d.24xlarge")}
    for step in (1, 2):
        runs["neuron"].add({"Step": step, "Loss": 2.2, "TokensPerSecond": 100.0, "StepTime": 1.0})
        runs["gpu"].add({"Step": step, "Loss": 2.0, "TokensPerSecond": 100.0, "StepTime": 1.0})
    c = pilot.compare(env, runs, RUN)
    assert c.loss_gap_percent == pytest.approx(10.0)
    assert c.verdict.startswith(
        "not yet: Trainium's mean loss over the last common steps is 10.0% above the GPU's (tolerance 2%)"
    )


def test_one_noisy_step_flips_the_last_step_but_not_the_window() -> None:
    env = load_environment(FILE)
    runs = {"neuron": pilot.Series("neuron", "trn1.32xlarge"), "gpu": pilot.Series("gpu", "p4d.24xlarge")}
    for step in range(1, 101):
        # Both sides learn the same curve, with the same small step-to-step wobble ...
        wobble = 0.01 * (-1) ** step
        runs["neuron"].add({"Step": step, "Loss": 2.0 + wobble, "TokensPerSecond": 100.0, "StepTime": 1.0})
        runs["gpu"].add({"Step": step, "Loss": 2.0 - wobble, "TokensPerSecond": 100.0, "StepTime": 1.0})
    # ... except that Trainium's very last step is a noisy one, 5% up.
    runs["neuron"].loss[-1] = 2.1
    last_step_gap = (runs["neuron"].loss_at(100) - runs["gpu"].loss_at(100)) / runs["gpu"].loss_at(100) * 100  # type: ignore[operator]
    assert last_step_gap > env.pilot.max_loss_gap_percent  # type: ignore[union-attr] # the one-step rule says "not yet"
    c = pilot.compare(env, runs, RUN)
    assert c.window is not None and (c.window.first_step, c.window.last_step, c.window.steps) == (51, 100, 50)
    assert abs(c.loss_gap_percent or 0) < env.pilot.max_loss_gap_percent  # type: ignore[union-attr]
    assert not c.verdict.startswith("not yet") and c.window.std["neuron"] > c.window.std["gpu"]
