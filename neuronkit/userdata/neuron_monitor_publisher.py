#!/usr/bin/env python3
"""neuron-monitor's JSON reports on stdin -> CloudWatch metrics with Environment and Pool dimensions.

On a Neuron node ``observability.sh`` runs it as the ``neuronkit-neuron-monitor`` systemd service::

    neuron-monitor -c /etc/neuronkit/neuron-monitor.json | python3 neuron_monitor_publisher.py \\
        --namespace Neuronkit --region us-east-1 --environment prod --pool pretrain --instance-id i-0abc...

neuron-monitor writes one complete JSON report per line (AWS Neuron "Neuron Monitor User Guide", "The
JSON output format"). The publisher aggregates the reports of each ``--interval`` (60 s) and publishes,
per pool (dimensions Environment, Pool) and per instance (Environment, Pool, InstanceId):

===========================  ============  =================================================================
metric                       unit          from
===========================  ============  =================================================================
NeuronCoreUtilization        Percent       neuroncore_counters: the sum over every runtime's cores in use
                                           divided by the instance's NeuronCores (neuron_hardware_info);
                                           0 when no Neuron application runs, so an idle node reads 0
NeuronCoresInUse             Count         distinct NeuronCores in use
DeviceMemoryUsed             Bytes         memory_used.neuron_runtime_used_bytes.neuron_device, all runtimes
DeviceMemoryUtilization      Percent       DeviceMemoryUsed / (neuron_device_count x neuron_device_memory_size)
ExecutionErrors              Count         execution_stats.error_summary, all types, summed over the interval
ExecutionsCompleted          Count         execution_stats.execution_summary.completed
ExecutionLatencyP50/P99      Milliseconds  execution_stats.latency_stats.total_latency p50/p99 (seconds)
EccUncorrected               Count         neuron_hw_counters mem_ecc_uncorrected + sram_ecc_uncorrected
EccCorrected                 Count         neuron_hw_counters mem_ecc_corrected + sram_ecc_corrected
===========================  ============  =================================================================

Besides those, every interval publishes ``NodeBusy`` (Count): 1 when a job holds the node even though its
NeuronCores may look idle (a CPU-side compile phase, a data-loading stall): the marker file
``/run/neuronkit/job-active`` exists (jobs and AWS Batch launchers touch it) or a process has a
``/dev/neuron*`` device open. The idle alarm ignores a pool while any node is busy.

Gauges are sent as statistic sets (one sample per report), counters as the interval's total: the
counters of a report count the events of its captured period (neuron-monitor's Prometheus companion adds
them up the same way). A window without any report (neuron-monitor not running) publishes nothing.

Standard library only and Python 3.9-compatible, so it runs on the node's system ``python3`` (Amazon
Linux 2023 ships 3.9): it calls PutMetricData through boto3
when boto3 is importable, else through the AWS CLI the DLAMIs carry. Requests hold at most 1000 metric
data and stay under 1 MB (the PutMetricData limits); a failed request is reported on stderr and the
publisher carries on with the next interval.
"""

# ruff: noqa: UP017, UP038 - runs on Python 3.9 (Amazon Linux 2023): no datetime.UTC, no X | Y in isinstance
from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, Protocol

# PutMetricData limits (CloudWatch API reference): 1000 metric data per request, 1 MB per request.
MAX_DATA_PER_REQUEST = 1000
MAX_REQUEST_BYTES = 1_000_000
# Headroom for the request's envelope and the query-protocol encoding of the JSON-sized data.
_SIZE_BUDGET = MAX_REQUEST_BYTES // 2
DEFAULT_INTERVAL_SECONDS = 60.0

GAUGES = {
    "NeuronCoreUtilization": "Percent",
    "NeuronCoresInUse": "Count",
    "DeviceMemoryUsed": "Bytes",
    "DeviceMemoryUtilization": "Percent",
    "ExecutionLatencyP50": "Milliseconds",
    "ExecutionLatencyP99": "Milliseconds",
}
COUNTERS = {
    "ExecutionErrors": "Count",
    "ExecutionsCompleted": "Count",
    "EccUncorrected": "Count",
    "EccCorrected": "Count",
}


# --------------------------------------------------------------------------------------------
# one report
# --------------------------------------------------------------------------------------------
def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _runtime_reports(report: dict[str, Any]) -> Iterator[dict[str, Any]]:
    runtimes = report.get("neuron_runtime_data")
    for runtime in runtimes if isinstance(runtimes, list) else []:
        if isinstance(runtime, dict):
            yield _dict(runtime.get("report"))


def read_report(report: dict[str, Any]) -> tuple[dict[str, list[float]], dict[str, float]]:
    """The gauge samples and counter increments of one neuron-monitor report.

    Missing metric groups contribute nothing, except NeuronCore utilization: with the hardware info
    present and no Neuron application running it is 0 (the idle alarm must see an idle node as idle).
    """
    gauges: dict[str, list[float]] = {name: [] for name in GAUGES}
    counters: dict[str, float] = dict.fromkeys(COUNTERS, 0.0)
    hardware = _dict(report.get("neuron_hardware_info"))
    devices = _number(hardware.get("neuron_device_count")) or 0.0
    cores_per_device = _number(hardware.get("neuroncore_per_device_count")) or 0.0
    device_memory = _number(hardware.get("neuron_device_memory_size")) or 0.0
    total_cores = devices * cores_per_device

    utilization_sum = 0.0
    cores: set[str] = set()
    memory_used = 0.0
    memory_seen = False
    for runtime in _runtime_reports(report):
        in_use = _dict(_dict(runtime.get("neuroncore_counters")).get("neuroncores_in_use"))
        for index, core in in_use.items():
            value = _number(_dict(core).get("neuroncore_utilization"))
            if value is not None:
                cores.add(str(index))
                utilization_sum += value
        used = _dict(_dict(runtime.get("memory_used")).get("neuron_runtime_used_bytes"))
        device_bytes = _number(used.get("neuron_device"))
        if device_bytes is not None:
            memory_used += device_bytes
            memory_seen = True
        stats = _dict(runtime.get("execution_stats"))
        counters["ExecutionErrors"] += sum(v for v in map(_number, _dict(stats.get("error_summary")).values()) if v)
        counters["ExecutionsCompleted"] += _number(_dict(stats.get("execution_summary")).get("completed")) or 0.0
        latency = _dict(_dict(stats.get("latency_stats")).get("total_latency"))
        for percentile, name in (("p50", "ExecutionLatencyP50"), ("p99", "ExecutionLatencyP99")):
            seconds = _number(latency.get(percentile))
            if seconds is not None:
                gauges[name].append(seconds * 1000.0)

    denominator = total_cores or float(len(cores))
    if denominator:
        gauges["NeuronCoreUtilization"].append(min(100.0, utilization_sum / denominator))
    if total_cores or cores:
        gauges["NeuronCoresInUse"].append(float(len(cores)))
    if memory_seen or total_cores:
        gauges["DeviceMemoryUsed"].append(memory_used)
        if devices and device_memory:
            gauges["DeviceMemoryUtilization"].append(min(100.0, memory_used / (devices * device_memory) * 100.0))

    hw = _dict(_dict(report.get("system_data")).get("neuron_hw_counters"))
    hw_devices = hw.get("neuron_devices")
    for device in hw_devices if isinstance(hw_devices, list) else []:
        d = _dict(device)
        counters["EccUncorrected"] += (_number(d.get("mem_ecc_uncorrected")) or 0.0) + (
            _number(d.get("sram_ecc_uncorrected")) or 0.0
        )
        counters["EccCorrected"] += (_number(d.get("mem_ecc_corrected")) or 0.0) + (_number(d.get("sram_ecc_corrected")) or 0.0)
    return gauges, counters


# --------------------------------------------------------------------------------------------
# an interval's aggregate and its metric data
# --------------------------------------------------------------------------------------------
BUSY = "NodeBusy"
# The busy marker: the one definition of the path jobs touch while they run (docs/node-lifecycle.md). The kit
# renders it into node.env as BUSY_MARKER (constructs import it from here) for the hostfile and drain scripts,
# and into /etc/neuronkit/job.env as NEURONKIT_BUSY_MARKER for jobs.
BUSY_MARKER = "/run/neuronkit/job-active"


def node_busy(marker: str = BUSY_MARKER, proc: str = "/proc") -> bool:
    """A job holds this node: the marker file exists, or a process has a Neuron device open."""
    if os.path.exists(marker):
        return True
    try:
        pids = [p for p in os.listdir(proc) if p.isdigit()]
    except OSError:
        return False
    for pid in pids:
        fd_dir = os.path.join(proc, pid, "fd")
        try:
            for fd in os.listdir(fd_dir):
                if os.readlink(os.path.join(fd_dir, fd)).startswith("/dev/neuron"):
                    return True
        except OSError:
            continue  # the process ended, or its descriptors are not ours to read
    return False


@dataclass
class Window:
    """The reports of one publishing interval."""

    reports: int = 0
    samples: dict[str, list[float]] = field(default_factory=lambda: {name: [] for name in GAUGES})
    totals: dict[str, float] = field(default_factory=lambda: dict.fromkeys(COUNTERS, 0.0))

    def add(self, report: dict[str, Any]) -> None:
        gauges, counters = read_report(report)
        self.reports += 1
        for name, values in gauges.items():
            self.samples[name].extend(values)
        for name, value in counters.items():
            self.totals[name] += value

    def metric_data(
        self, dimension_sets: Sequence[Sequence[tuple[str, str]]], timestamp: dt.datetime, busy: bool | None = None
    ) -> list[dict[str, Any]]:
        """PutMetricData entries: each metric once per dimension set; nothing for an empty window. ``busy``
        (None: not measured) adds NodeBusy."""
        if not self.reports:
            return []
        data: list[dict[str, Any]] = []
        for dims in dimension_sets:
            dimensions = [{"Name": k, "Value": v} for k, v in dims]
            if busy is not None:
                data.append(
                    {"MetricName": BUSY, "Dimensions": dimensions, "Timestamp": timestamp, "Value": float(busy), "Unit": "Count"}
                )
            for name, unit in GAUGES.items():
                values = self.samples[name]
                if not values:
                    continue
                data.append(
                    {
                        "MetricName": name,
                        "Dimensions": dimensions,
                        "Timestamp": timestamp,
                        "StatisticValues": {
                            "SampleCount": float(len(values)),
                            "Sum": sum(values),
                            "Minimum": min(values),
                            "Maximum": max(values),
                        },
                        "Unit": unit,
                    }
                )
            for name, unit in COUNTERS.items():
                data.append(
                    {
                        "MetricName": name,
                        "Dimensions": dimensions,
                        "Timestamp": timestamp,
                        "Value": self.totals[name],
                        "Unit": unit,
                    }
                )
        return data


def batches(
    data: Sequence[dict[str, Any]], *, max_items: int = MAX_DATA_PER_REQUEST, max_bytes: int = _SIZE_BUDGET
) -> Iterator[list[dict[str, Any]]]:
    """Split metric data into requests within PutMetricData's item and size limits."""
    batch: list[dict[str, Any]] = []
    size = 0
    for datum in data:
        item = len(json.dumps(datum, default=str))
        if batch and (len(batch) >= max_items or size + item > max_bytes):
            yield batch
            batch, size = [], 0
        batch.append(datum)
        size += item
    if batch:
        yield batch


# --------------------------------------------------------------------------------------------
# sending
# --------------------------------------------------------------------------------------------
class Sink(Protocol):
    def __call__(self, namespace: str, data: list[dict[str, Any]]) -> None: ...


def boto3_sink(region: str, client: Any = None) -> Sink:
    """PutMetricData through boto3 (a given client, e.g. one with a botocore Stubber, or a new one)."""
    if client is None:
        import boto3  # noqa: PLC0415 - optional: the CLI sink serves nodes without boto3

        client = boto3.client("cloudwatch", region_name=region)

    def put(namespace: str, data: list[dict[str, Any]]) -> None:
        client.put_metric_data(Namespace=namespace, MetricData=data)

    return put


def cli_sink(region: str, run: Callable[..., Any] = subprocess.run) -> Sink:
    """PutMetricData through ``aws cloudwatch put-metric-data --cli-input-json`` (no boto3 needed)."""

    def put(namespace: str, data: list[dict[str, Any]]) -> None:
        payload = {"Namespace": namespace, "MetricData": [_cli_datum(d) for d in data]}
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=True) as f:
            json.dump(payload, f)
            f.flush()
            run(
                ["aws", "cloudwatch", "put-metric-data", "--region", region, "--cli-input-json", f"file://{f.name}"],
                check=True,
                capture_output=True,
                timeout=60,
            )

    return put


def _cli_datum(datum: dict[str, Any]) -> dict[str, Any]:
    stamp = datum.get("Timestamp")
    if isinstance(stamp, dt.datetime):
        return {**datum, "Timestamp": stamp.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")}
    return datum


def default_sink(region: str) -> Sink:
    try:
        return boto3_sink(region)
    except ImportError:
        return cli_sink(region)


def publish(namespace: str, data: Sequence[dict[str, Any]], sink: Sink, *, log: IO[str] = sys.stderr) -> int:
    """Send the data in batches; returns the number of requests that failed (each is logged)."""
    failed = 0
    for batch in batches(data):
        try:
            sink(namespace, batch)
        except Exception as err:  # noqa: BLE001 - one failed request must not stop the service
            failed += 1
            print(f"neuron_monitor_publisher: PutMetricData of {len(batch)} metric data failed: {err}", file=log)
    return failed


# --------------------------------------------------------------------------------------------
# the stream
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Settings:
    namespace: str
    region: str
    environment: str
    pool: str
    instance_id: str | None = None
    interval: float = DEFAULT_INTERVAL_SECONDS

    @property
    def dimension_sets(self) -> list[list[tuple[str, str]]]:
        pool = [("Environment", self.environment), ("Pool", self.pool)]
        return [pool, [*pool, ("InstanceId", self.instance_id)]] if self.instance_id else [pool]


def interval_start(when: dt.datetime, interval: float) -> dt.datetime:
    """The start of the wall-clock interval holding ``when`` (a minute boundary for 60 s)."""
    epoch = when.timestamp()
    return dt.datetime.fromtimestamp(epoch - epoch % interval, dt.timezone.utc)


def run(
    lines: Iterable[str],
    settings: Settings,
    sink: Sink,
    *,
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.timezone.utc),
    log: IO[str] = sys.stderr,
    busy: Callable[[], bool] | None = None,
) -> int:
    """Publish one set of datapoints per wall-clock interval, stamped with the interval's start.

    Intervals are aligned to the clock (minute boundaries by default), not counted from the last flush: an
    interval closes at the first report of the next one (neuron-monitor reports every few seconds) and at
    the end of the stream. So every minute has exactly one datapoint per metric, which the idle alarm's
    every-minute evaluation needs (counting from the last flush drifted to ~70 s and left minutes empty).
    Returns the number of intervals published.
    """
    window = Window()
    start: dt.datetime | None = None
    published = 0

    def flush() -> None:
        nonlocal window, published
        if start is not None:
            data = window.metric_data(settings.dimension_sets, start, busy() if busy is not None else None)
            if data:
                publish(settings.namespace, data, sink, log=log)
                published += 1
        window = Window()

    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text:
            continue
        try:
            report = json.loads(text)
        except json.JSONDecodeError as err:
            print(f"neuron_monitor_publisher: line {number} is not JSON ({err}); skipped", file=log)
            continue
        if not isinstance(report, dict):
            print(f"neuron_monitor_publisher: line {number} is not a JSON object; skipped", file=log)
            continue
        current = interval_start(now(), settings.interval)
        if start is not None and current != start:
            flush()
        start = current
        window.add(report)
    flush()
    return published


def parse_args(argv: Sequence[str] | None = None) -> Settings:
    p = argparse.ArgumentParser(description="Publish neuron-monitor's JSON reports (stdin) to CloudWatch.")
    p.add_argument("--namespace", required=True)
    p.add_argument("--region", required=True)
    p.add_argument("--environment", required=True, help="value of the Environment dimension")
    p.add_argument("--pool", required=True, help="value of the Pool dimension")
    p.add_argument("--instance-id", help="also publish per instance (adds the InstanceId dimension)")
    p.add_argument("--interval", type=float, default=DEFAULT_INTERVAL_SECONDS, help="seconds per published interval")
    args = p.parse_args(argv)
    if args.interval <= 0:
        p.error("--interval must be positive")
    return Settings(
        namespace=args.namespace,
        region=args.region,
        environment=args.environment,
        pool=args.pool,
        instance_id=args.instance_id or None,
        interval=args.interval,
    )


def main(argv: Sequence[str] | None = None) -> int:
    settings = parse_args(argv)
    run(sys.stdin, settings, default_sink(settings.region), busy=node_busy)
    return 0


if __name__ == "__main__":
    sys.exit(main())
