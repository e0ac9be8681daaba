"""The neuron-monitor publisher: recorded reports in, the PutMetricData requests CloudWatch would receive out.

The fixtures under tests/fixtures/neuron-monitor/ follow neuron-monitor's documented JSON format (their
README lists what each holds). PutMetricData is checked with botocore's Stubber on a real CloudWatch
client (exact request parameters) and read back from moto.
"""

from __future__ import annotations

import ast
import datetime as dt
import importlib.util
import io
import json
import sys
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from neuronkit import userdata

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "neuron-monitor"
SOURCE = userdata.script_path("neuron_monitor_publisher.py")
NOW = dt.datetime(2026, 11, 21, 12, 0, tzinfo=dt.UTC)
GIB = 1024**3


def _load() -> Any:
    # The publisher is a standalone script on the node, not a module of the package: load it by path.
    spec = importlib.util.spec_from_file_location("neuron_monitor_publisher", SOURCE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


pub = _load()
SETTINGS = pub.Settings(
    namespace="Neuronkit", region="us-east-1", environment="prod", pool="pretrain", instance_id="i-0123456789abcdef0"
)


def lines(name: str) -> list[str]:
    return (FIXTURES / name).read_text().splitlines(keepends=True)


def window(name: str) -> Any:
    w = pub.Window()
    for line in lines(name):
        if line.strip():
            try:
                w.add(json.loads(line))
            except json.JSONDecodeError:
                pass
    return w


def stats(w: Any, name: str) -> tuple[int, float, float, float]:
    values = w.samples[name]
    return len(values), round(sum(values), 6), min(values), max(values)


def by_name(data: list[dict[str, Any]], dims: int = 2) -> dict[str, dict[str, Any]]:
    return {d["MetricName"]: d for d in data if len(d["Dimensions"]) == dims}


# --------------------------------------------------------------------------------------------
# aggregation of recorded reports
# --------------------------------------------------------------------------------------------
def test_training_node_aggregates_utilization_memory_errors_latency_and_ecc() -> None:
    w = window("trn1-32xlarge-training.jsonl")
    assert w.reports == 3
    # 32 cores at 50%, 32 at 70%, 16 of 32 at 100% -> 50, 70, 50 (the node's share, not the busy cores').
    assert stats(w, "NeuronCoreUtilization") == (3, 170.0, 50.0, 70.0)
    assert stats(w, "NeuronCoresInUse") == (3, 80.0, 16.0, 32.0)
    assert stats(w, "DeviceMemoryUsed") == (3, 896.0 * GIB, 256.0 * GIB, 384.0 * GIB)
    assert stats(w, "DeviceMemoryUtilization") == (3, 175.0, 50.0, 75.0)  # of 16 x 32 GiB
    assert stats(w, "ExecutionLatencyP50") == (3, 750.0, 200.0, 300.0)  # ms, from seconds
    assert stats(w, "ExecutionLatencyP99") == (3, 1200.0, 300.0, 500.0)
    assert w.totals == {"ExecutionErrors": 3.0, "ExecutionsCompleted": 30.0, "EccUncorrected": 0.0, "EccCorrected": 1.0}


def test_idle_node_reads_zero_utilization_not_nothing() -> None:
    # The idle alarm counts missing utilization as busy; a node with no job must publish a real 0.
    w = window("trn1-32xlarge-idle.jsonl")
    assert stats(w, "NeuronCoreUtilization") == (2, 0.0, 0.0, 0.0)
    assert stats(w, "NeuronCoresInUse") == (2, 0.0, 0.0, 0.0)
    assert stats(w, "DeviceMemoryUtilization") == (2, 0.0, 0.0, 0.0)
    assert w.samples["ExecutionLatencyP99"] == []
    assert w.totals["ExecutionErrors"] == 0


def test_serving_node_sums_runtimes_and_counts_the_uncorrected_ecc_event() -> None:
    w = window("inf2-xlarge-serving.jsonl")
    assert w.reports == 3  # the cut-off line and the blank one are not reports
    assert stats(w, "NeuronCoreUtilization") == (3, 90.0, 0.0, 50.0)  # (30+50)/2, (40+60)/2, 0
    assert stats(w, "DeviceMemoryUtilization") == (3, 150.0, 50.0, 50.0)  # 2 x 8 GiB of 32 GiB
    # Latency only while requests ran: 2 runtimes x 2 reports; the idle report has none.
    assert stats(w, "ExecutionLatencyP50") == (4, 60.0, 12.0, 18.0)
    assert stats(w, "ExecutionLatencyP99") == (4, 140.0, 20.0, 50.0)
    assert w.totals == {"ExecutionErrors": 1.0, "ExecutionsCompleted": 420.0, "EccUncorrected": 1.0, "EccCorrected": 2.0}


def test_report_without_hardware_info_divides_by_the_cores_it_sees() -> None:
    gauges, _ = pub.read_report(
        {
            "neuron_runtime_data": [
                {
                    "report": {
                        "neuroncore_counters": {
                            "neuroncores_in_use": {"0": {"neuroncore_utilization": 80}, "1": {"neuroncore_utilization": 40}}
                        }
                    }
                }
            ]
        }
    )
    assert gauges["NeuronCoreUtilization"] == [60.0]
    assert gauges["DeviceMemoryUtilization"] == []  # no device size to divide by
    empty, counters = pub.read_report({})
    assert all(v == [] for v in empty.values()) and all(v == 0 for v in counters.values())


def test_metric_data_per_pool_and_per_instance_with_units() -> None:
    data = window("trn1-32xlarge-training.jsonl").metric_data(SETTINGS.dimension_sets, NOW)
    pool, instance = by_name(data, 2), by_name(data, 3)
    assert set(pool) == set(instance) == set(pub.GAUGES) | set(pub.COUNTERS)
    util = pool["NeuronCoreUtilization"]
    assert util["Dimensions"] == [{"Name": "Environment", "Value": "prod"}, {"Name": "Pool", "Value": "pretrain"}]
    assert util["StatisticValues"] == {"SampleCount": 3.0, "Sum": 170.0, "Minimum": 50.0, "Maximum": 70.0}
    assert util["Unit"] == "Percent" and util["Timestamp"] == NOW
    assert pool["ExecutionErrors"] == {
        "MetricName": "ExecutionErrors",
        "Dimensions": util["Dimensions"],
        "Timestamp": NOW,
        "Value": 3.0,
        "Unit": "Count",
    }
    assert pool["ExecutionLatencyP99"]["Unit"] == "Milliseconds" and pool["DeviceMemoryUsed"]["Unit"] == "Bytes"
    assert instance["EccCorrected"]["Dimensions"][-1] == {"Name": "InstanceId", "Value": "i-0123456789abcdef0"}
    # Without an instance id there is no per-instance copy; an empty window sends nothing at all.
    no_instance = pub.Settings(namespace="N", region="us-east-1", environment="prod", pool="pretrain")
    assert all(len(d["Dimensions"]) == 2 for d in window("trn1-32xlarge-idle.jsonl").metric_data(no_instance.dimension_sets, NOW))
    assert pub.Window().metric_data(SETTINGS.dimension_sets, NOW) == []


# --------------------------------------------------------------------------------------------
# PutMetricData: Stubber (exact requests) and moto (read back)
# --------------------------------------------------------------------------------------------
def test_stream_is_published_per_interval_with_exact_requests(aws_credentials: None) -> None:
    client = boto3.client("cloudwatch", region_name="us-east-1")
    stubber = Stubber(client)
    training = [line for line in lines("trn1-32xlarge-training.jsonl")]
    idle = [line for line in lines("trn1-32xlarge-idle.jsonl")]
    # Reports arrive at 12:00:00, :10, :20 (training) and 12:01:10, :20 (idle): the 12:00 minute closes at 12:01:10.
    times = iter([NOW + dt.timedelta(seconds=s) for s in (0, 10, 20, 70, 80)])
    first = pub.Window()
    for line in training:
        first.add(json.loads(line))
    second = pub.Window()
    for line in idle[:2]:
        second.add(json.loads(line))
    for w, stamp in ((first, NOW), (second, NOW + dt.timedelta(minutes=1))):
        stubber.add_response(
            "put_metric_data", {}, {"Namespace": "Neuronkit", "MetricData": w.metric_data(SETTINGS.dimension_sets, stamp)}
        )
    with stubber:
        published = pub.run(training + idle, SETTINGS, pub.boto3_sink("us-east-1", client), now=lambda: next(times))
    stubber.assert_no_pending_responses()
    assert published == 2
    # Each minute holds only its own reports: the first the three busy ones, the second the idle ones.
    busy_stats, idle_stats = stats(first, "NeuronCoreUtilization"), stats(second, "NeuronCoreUtilization")
    assert busy_stats[0] == 3 and busy_stats[2] > 0 and idle_stats == (2, 0.0, 0.0, 0.0)


def test_failed_request_is_logged_and_the_publisher_carries_on(aws_credentials: None) -> None:
    client = boto3.client("cloudwatch", region_name="us-east-1")
    stubber = Stubber(client)
    stubber.add_client_error("put_metric_data", service_error_code="Throttling", service_message="Rate exceeded")
    stubber.add_response("put_metric_data", {})
    log = io.StringIO()
    # Reports at 12:00:00 and 12:01:01 (the 12:00 minute closes: the request fails), then 12:01:10; the stream ends.
    times = iter([NOW + dt.timedelta(seconds=s) for s in (0, 61, 70)])
    report = lines("trn1-32xlarge-idle.jsonl")[0]
    with stubber:
        published = pub.run(
            [report, report, report], SETTINGS, pub.boto3_sink("us-east-1", client), now=lambda: next(times), log=log
        )
    stubber.assert_no_pending_responses()
    assert published == 2
    # An idle report has 4 gauges (no latency) and 4 counters, per pool and per instance: 16 metric data.
    assert "PutMetricData of 16 metric data failed" in log.getvalue() and "Rate exceeded" in log.getvalue()


def test_bad_lines_are_skipped_with_a_message() -> None:
    sent: list[list[dict[str, Any]]] = []
    log = io.StringIO()
    pub.run(["not json\n", "[1, 2]\n", "\n"], SETTINGS, lambda ns, data: sent.append(data), log=log)
    assert sent == []  # nothing valid: nothing published
    assert "line 1 is not JSON" in log.getvalue() and "line 2 is not a JSON object" in log.getvalue()


def test_metrics_read_back_from_cloudwatch(aws_credentials: None) -> None:
    with mock_aws():
        client = boto3.client("cloudwatch", region_name="us-east-1")
        pub.run(lines("inf2-xlarge-serving.jsonl"), SETTINGS, pub.boto3_sink("us-east-1", client), log=io.StringIO())
        listed = client.list_metrics(Namespace="Neuronkit", MetricName="EccUncorrected")["Metrics"]
        dims = {tuple(sorted((d["Name"], d["Value"]) for d in m["Dimensions"])) for m in listed}
        assert dims == {
            (("Environment", "prod"), ("Pool", "pretrain")),
            (("Environment", "prod"), ("InstanceId", "i-0123456789abcdef0"), ("Pool", "pretrain")),
        }
        end = dt.datetime.now(dt.UTC) + dt.timedelta(minutes=5)
        points = client.get_metric_statistics(
            Namespace="Neuronkit",
            MetricName="EccUncorrected",
            # moto matches any metric holding these dimensions (CloudWatch wants the exact set), so ask for
            # the per-instance series, the only one with all three.
            Dimensions=[
                {"Name": "Environment", "Value": "prod"},
                {"Name": "Pool", "Value": "pretrain"},
                {"Name": "InstanceId", "Value": "i-0123456789abcdef0"},
            ],
            StartTime=end - dt.timedelta(hours=1),
            EndTime=end,
            Period=3600,
            Statistics=["Sum"],
        )["Datapoints"]
        assert [p["Sum"] for p in points] == [1.0]


# --------------------------------------------------------------------------------------------
# limits, the CLI fallback, the command line
# --------------------------------------------------------------------------------------------
def test_batches_stay_within_the_put_metric_data_limits() -> None:
    datum = {"MetricName": "M", "Dimensions": [{"Name": "Pool", "Value": "p"}], "Value": 1.0}
    sizes = [len(b) for b in pub.batches([datum] * 2500)]
    assert sizes == [1000, 1000, 500]
    assert pub.MAX_DATA_PER_REQUEST == 1000 and pub.MAX_REQUEST_BYTES == 1_000_000
    big = {**datum, "Dimensions": [{"Name": f"D{i}", "Value": "x" * 1000} for i in range(30)]}
    each = len(json.dumps(big))
    for batch in pub.batches([big] * 100):
        assert len(batch) * each <= pub.MAX_REQUEST_BYTES // 2
    assert sum(len(b) for b in pub.batches([big] * 100)) == 100
    assert list(pub.batches([])) == []


def test_cli_sink_calls_the_aws_cli_with_iso_timestamps() -> None:
    calls: list[tuple[list[str], dict[str, Any]]] = []

    def run(argv: list[str], **kwargs: Any) -> None:
        path = argv[-1].removeprefix("file://")
        calls.append((argv, json.loads(Path(path).read_text())))

    data = window("trn1-32xlarge-idle.jsonl").metric_data(SETTINGS.dimension_sets, NOW)
    pub.cli_sink("eu-west-1", run=run)("Neuronkit", data)
    ((argv, payload),) = calls
    assert argv[:6] == ["aws", "cloudwatch", "put-metric-data", "--region", "eu-west-1", "--cli-input-json"]
    assert payload["Namespace"] == "Neuronkit" and len(payload["MetricData"]) == len(data)
    assert {d["Timestamp"] for d in payload["MetricData"]} == {"2026-11-21T12:00:00Z"}


def test_command_line() -> None:
    s = pub.parse_args(
        [
            "--namespace",
            "NS",
            "--region",
            "us-east-1",
            "--environment",
            "dev",
            "--pool",
            "serve",
            "--instance-id",
            "i-1",
            "--interval",
            "30",
        ]
    )
    assert (s.namespace, s.region, s.environment, s.pool, s.instance_id, s.interval) == (
        "NS",
        "us-east-1",
        "dev",
        "serve",
        "i-1",
        30.0,
    )
    assert len(s.dimension_sets) == 2
    with pytest.raises(SystemExit):
        pub.parse_args(["--namespace", "NS"])


def test_runs_on_the_nodes_python_3_9() -> None:
    # Amazon Linux 2023's system python3 is 3.9: no 3.10+ syntax, no datetime.UTC, no X | Y in isinstance,
    # and boto3 only imported where the CLI fallback can take over.
    for path in (SOURCE, userdata.script_path("kit/cloudwatch_agent_config.py")):
        tree = ast.parse(path.read_text(), feature_version=(3, 9))
        for node in ast.walk(tree):
            assert not (isinstance(node, ast.Attribute) and node.attr == "UTC"), f"{path.name}: datetime.UTC is 3.11+"
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
                assert not isinstance(node.args[1], ast.BinOp), f"{path.name}: isinstance(x, A | B) is 3.10+"
        top_level = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
        assert all("boto3" not in ast.unparse(n) for n in top_level), f"{path.name}: boto3 must stay optional"


def test_a_node_a_job_holds_is_busy_even_with_idle_cores(tmp_path: Path) -> None:
    from neuronkit.userdata.neuron_monitor_publisher import node_busy

    proc = tmp_path / "proc"
    (proc / "123" / "fd").mkdir(parents=True)
    marker = tmp_path / "job-active"
    assert node_busy(str(marker), str(proc)) is False
    (proc / "123" / "fd" / "3").symlink_to("/dev/neuron0")  # a compile or training process holding a device
    assert node_busy(str(marker), str(proc)) is True
    (proc / "123" / "fd" / "3").unlink()
    marker.touch()  # a job's marker during a CPU-side phase
    assert node_busy(str(marker), str(proc)) is True


def test_every_interval_publishes_whether_the_node_is_busy() -> None:
    from neuronkit.userdata.neuron_monitor_publisher import BUSY, Settings, run

    sent: list[dict[str, Any]] = []
    settings = Settings(namespace="Neuronkit", region="us-east-1", environment="dev", pool="p")
    run(['{"neuron_runtime_data": []}'], settings, lambda ns, data: sent.extend(data), busy=lambda: True)
    (busy,) = [d for d in sent if d["MetricName"] == BUSY]
    assert busy["Value"] == 1.0 and {"Name": "Pool", "Value": "p"} in busy["Dimensions"]


def test_every_minute_gets_one_datapoint_stamped_on_its_boundary() -> None:
    # neuron-monitor every 7 s for five minutes from 12:00:03: counting 60 s from each flush would close an
    # interval every ~63 s and skip a minute now and then; clock-aligned intervals give each minute one.
    report = lines("trn1-32xlarge-idle.jsonl")[0]
    times = iter([NOW + dt.timedelta(seconds=3 + 7 * i) for i in range(43)])
    stamps: list[dt.datetime] = []

    def sink(namespace: str, data: list[dict[str, Any]]) -> None:
        stamps.extend({d["Timestamp"] for d in data})

    published = pub.run([report] * 43, SETTINGS, sink, now=lambda: next(times), log=io.StringIO())
    assert stamps == [NOW + dt.timedelta(minutes=m) for m in range(5)] and published == 5  # 12:00:03 .. 12:04:57
