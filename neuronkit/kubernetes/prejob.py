#!/usr/bin/env python3
"""The pre-job checks of a Neuron training job (issue 41): a program shipped into the job's pods by a ConfigMap.

Standard library only (it runs inside the job's own Neuron container, whatever it carries). Two modes:

- ``node``: on each node, before a rank starts (an init container): the Neuron devices ``neuron-ls --json-output``
  lists against the catalog count, the driver (``/sys/module/neuron/version``) against the pool's Neuron release (below
  ``driver_min`` fails, below ``driver_shipped`` warns, as the boot check), the runtime opening every NeuronCore (a one-node ``nccom-test`` over all logical cores), the EFA interfaces
  ``fi_info -p efa`` answers for against the catalog count, and the Lustre mount;
- ``collective``: once per job across its pods (an init container of every rank pod, after ``node``): a small
  ``nccom-test`` all-reduce with ``--check`` (correctness) over every node; a bus bandwidth floor only when one is
  given (unset by default); ``--calibrate FILE`` records a healthy run's numbers for later runs to compare.

Every outcome names the node and the reason. A failed check exits non-zero, writes ``node NAME: reason`` to the
termination log (the pod's status and the Job's events show it) and prints one CloudWatch embedded-metric-format line
(``PreJobCheckFailed``), which becomes a metric wherever the container logs reach CloudWatch Logs. It needs no rights
on nodes: it never cordons or drains (``neuronkit job check --cordon`` prints the commands an operator runs).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

TERMINATION_LOG = "/dev/termination-log"
METRIC_NAMESPACE = "neuronkit/prejob"
# fi_info where the EFA installer puts it. The Neuron training DLCs run efa_installer.sh but never put its bin
# directory on PATH (aws-neuron/deep-learning-containers pytorch/training/2.9.0/Dockerfile.neuronx, lines 29 and 116
# set PATH; line 170 or 165 runs the installer), so a bare ``fi_info`` is "not found" in the job's pods. AWS's own
# runs call it by this path (aws-neuron/aws-neuron-eks-samples dp_bert_hf_pretrain/docker/assets/dump_env.py line 23,
# "/opt/amazon/efa/bin/fi_info -p efa") or add the directory to PATH themselves (aws/aws-k8s-tester
# test/images/efa/Dockerfile lines 3 and 30). tests/fixtures/images/ records each pinned image's PATH.
FI_INFO = "/opt/amazon/efa/bin/fi_info"
# The EFA devices a pod was given (the EFA device plugin mounts one uverbs device per interface) and the name of the
# RDMA device behind each (the kernel's infiniband_verbs class): how a missing interface is named.
UVERBS_DIR = "/dev/infiniband"
VERBS_CLASS = "/sys/class/infiniband_verbs"
# The mount table; NEURONKIT_PREJOB_MOUNTS points the check at a recorded one (the sandbox cannot mount Lustre).
MOUNTS = os.environ.get("NEURONKIT_PREJOB_MOUNTS", "/proc/mounts")


@dataclass(frozen=True)
class Outcome:
    node: str
    check: str
    ok: bool
    reason: str

    def line(self) -> str:
        return f"node {self.node}: {self.check}: {'ok' if self.ok else 'FAILED'}: {self.reason}"


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v)[:4])


def check_devices(node: str, neuron_ls_json: str, expected: int) -> Outcome:
    """``neuron-ls --json-output``: one entry per Neuron device the driver exposes."""
    try:
        devices = json.loads(neuron_ls_json)
    except json.JSONDecodeError as err:
        return Outcome(node, "devices", False, f"neuron-ls printed no JSON ({err.msg})")
    found = len(devices) if isinstance(devices, list) else 0
    if found != expected:
        ids = sorted(int(d.get("neuron_device", -1)) for d in devices) if isinstance(devices, list) else []
        missing = sorted(set(range(expected)) - set(ids))
        where = f" (missing neuron_device {', '.join(map(str, missing))})" if missing else ""
        return Outcome(node, "devices", False, f"{found} Neuron devices, expected {expected}{where}")
    return Outcome(node, "devices", True, f"{found} Neuron devices")


def check_driver(
    node: str,
    version: str,
    floor: str,
    shipped: str | None = None,
    *,
    release: str = "",
    below: str | None = None,
    below_rule: str = "",
    read: str | None = None,
    read_rule: str = "",
) -> Outcome:
    """The boot check's rule, the release's driver window as the kit renders it (``releases.driver_window``): newer than
    ``read`` (the newest driver the catalog has read) fails, at or above ``below`` (the first driver a stated rule
    refuses) fails, below ``floor`` (the release's ``driver_min``) fails, each naming driver, release and rule; at or
    above the floor but below ``shipped`` (the driver the release shipped) passes with a WARNING in its reason."""
    version = version.strip()
    if not version:
        return Outcome(node, "driver", False, "no Neuron driver loaded (/sys/module/neuron/version absent)")
    outside = f"Neuron driver {version} does not suit Neuron {release}"
    if read and _version_key(version) > _version_key(read):
        return Outcome(node, "driver", False, f"{outside}: {read_rule}")
    if below and _version_key(version) >= _version_key(below):
        return Outcome(node, "driver", False, f"{outside}: {below_rule}")
    if _version_key(version) < _version_key(floor):
        return Outcome(node, "driver", False, f"Neuron driver {version} is older than the release's minimum {floor}")
    if shipped and _version_key(version) < _version_key(shipped):
        return Outcome(
            node, "driver", True, f"WARNING: Neuron driver {version} is older than the release's {shipped} (minimum {floor})"
        )
    return Outcome(node, "driver", True, f"Neuron driver {version} (minimum {floor})")


def efa_domains(fi_info_output: str) -> list[str]:
    """The EFA devices ``fi_info -p efa`` lists: one reliable-datagram domain (``...-rdm``) per interface."""
    return sorted(set(re.findall(r"domain:\s*(\S+-rdm)\b", fi_info_output)))


def efa_devices(uverbs_dir: str = UVERBS_DIR, verbs_class: str = VERBS_CLASS) -> dict[str, str]:
    """The pod's EFA devices: ``/dev/infiniband/uverbsN`` -> its RDMA device name (``rdmap16s0``), or "" when the
    kernel's class entry is not readable. Empty when the pod has no /dev/infiniband (a type without EFA)."""
    root = Path(uverbs_dir)
    if not root.is_dir():
        return {}
    out: dict[str, str] = {}
    for dev in sorted(root.glob("uverbs*"), key=lambda d: int(re.sub(r"\D", "", d.name) or 0)):
        ibdev = Path(verbs_class, dev.name, "ibdev")
        try:
            out[str(dev)] = ibdev.read_text().strip()
        except OSError:
            out[str(dev)] = ""
    return out


def check_efa(
    node: str, fi_info_output: str, expected: int, returncode: int = 0, devices: dict[str, str] | None = None
) -> Outcome:
    """The EFA interfaces ``fi_info -p efa`` answers for against the type's count; with ``devices`` (the pod's
    uverbs devices and their RDMA names) a missing interface is named."""
    domains = efa_domains(fi_info_output)
    if devices is not None and not devices and expected:
        return Outcome(node, "efa", False, f"no EFA device in the pod ({UVERBS_DIR} absent), expected {expected}")
    if returncode != 0 and not domains:
        first = fi_info_output.strip().splitlines()[:1]
        why = f": {first[0]}" if first else ""
        return Outcome(node, "efa", False, f"fi_info -p efa failed (exit {returncode}): no EFA provider answers{why}")
    if len(domains) != expected:
        reason = f"{len(domains)} EFA interfaces answer fi_info -p efa, expected {expected}"
        silent = [f"{name} ({dev})" for dev, name in (devices or {}).items() if name and f"{name}-rdm" not in domains]
        if silent:
            reason += f"; no answer from {', '.join(silent)}"
        elif devices is not None and len(devices) != expected:
            reason += f"; the pod has {len(devices)} EFA devices"
        return Outcome(node, "efa", False, reason)
    return Outcome(node, "efa", True, f"{len(domains)} EFA interfaces answer")


def check_lustre(node: str, mounts: str, path: str) -> Outcome:
    for line in mounts.splitlines():
        parts = line.split()
        if len(parts) >= 3 and parts[1] == path and parts[2] == "lustre":
            return Outcome(node, "lustre", True, f"Lustre mounted at {path}")
    return Outcome(node, "lustre", False, f"no Lustre file system mounted at {path}")


@dataclass(frozen=True)
class Collective:
    completed: bool
    correct: bool
    busbw_gbps: float | None
    error: str


# The collective's sweep: small sizes measure latency, not bandwidth (nccom-test user guide, 2 x trn1: 1.45 GB/s bus
# bandwidth at 1 MB against 47.09 GB/s at 1 GB), so the floor is compared at the largest size of a short sweep.
SWEEP = ("64MB", "1GB")
_ROW = re.compile(r"^\s*(\d+)\s+\d+\s+\S+\s+[0-9.]+\s+[0-9.]+\s+([0-9.]+)\s*$", re.MULTILINE)


def parse_nccom(output: str, returncode: int) -> Collective:
    """nccom-test's table (``size(B) count(elems) type time(us) algbw(GB/s) busbw(GB/s)``) and its
    ``Avg bus bandwidth:`` line; with ``--check`` a wrong result is reported and the exit status is non-zero. The bus
    bandwidth is the largest size's row (the average mixes in the latency-bound sizes of a sweep); the average only
    when no row is readable."""
    rows = [(int(size), float(bw)) for size, bw in _ROW.findall(output)]
    avg = re.search(r"Avg bus bandwidth:\s*([0-9.]+)\s*GB/s", output)
    busbw = max(rows)[1] if rows else (float(avg.group(1)) if avg else None)
    errors = [ln.strip() for ln in output.splitlines() if re.search(r"error|fail|mismatch", ln, re.IGNORECASE)]
    correct = not any(re.search(r"mismatch|check fail|incorrect|golden", e, re.IGNORECASE) for e in errors)
    completed = returncode == 0 and busbw is not None
    error = errors[-1] if errors else ("" if completed else f"nccom-test exited {returncode} without a result")
    return Collective(completed=completed, correct=correct and completed, busbw_gbps=busbw, error=error)


def check_collective(nodes: list[str], result: Collective, min_busbw_gbps: float | None) -> Outcome:
    who = ",".join(nodes)
    if not result.completed:
        return Outcome(who, "collective", False, f"all-reduce did not complete: {result.error}")
    if not result.correct:
        return Outcome(who, "collective", False, f"all-reduce result wrong: {result.error}")
    if min_busbw_gbps is not None and result.busbw_gbps is not None and result.busbw_gbps < min_busbw_gbps:
        return Outcome(
            who,
            "collective",
            False,
            f"all-reduce bus bandwidth {result.busbw_gbps:g} GB/s below the floor {min_busbw_gbps:g} GB/s",
        )
    return Outcome(who, "collective", True, f"all-reduce correct, {result.busbw_gbps:g} GB/s bus bandwidth")


def emf_line(outcome: Outcome, environment: str, pool: str, now_ms: int | None = None) -> str:
    """One CloudWatch embedded metric format record: PreJobCheckFailed=1 by Environment, Pool and Check."""
    return json.dumps(
        {
            "_aws": {
                "Timestamp": now_ms if now_ms is not None else int(time.time() * 1000),
                "CloudWatchMetrics": [
                    {
                        "Namespace": METRIC_NAMESPACE,
                        "Dimensions": [["Environment", "Pool", "Check"]],
                        "Metrics": [{"Name": "PreJobCheckFailed", "Unit": "Count"}],
                    }
                ],
            },
            "Environment": environment,
            "Pool": pool,
            "Check": outcome.check,
            "Node": outcome.node,
            "Reason": outcome.reason,
            "PreJobCheckFailed": 1,
        },
        sort_keys=True,
    )


def report(outcomes: list[Outcome], *, environment: str, pool: str, termination_log: str | None = None) -> int:
    """Print every outcome; on any failure write the termination log and an EMF line, and return 1."""
    failed = [o for o in outcomes if not o.ok]
    for o in outcomes:
        print(o.line(), flush=True)
    if not failed:
        return 0
    for o in failed:
        print(emf_line(o, environment, pool), flush=True)
    try:
        Path(termination_log or TERMINATION_LOG).write_text("; ".join(o.line() for o in failed)[:4000] + "\n")
    except OSError:
        pass
    return 1


def _run(cmd: list[str], timeout: int = 1800) -> tuple[int, str]:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except FileNotFoundError:
        return 127, f"{cmd[0]}: not found"
    except subprocess.TimeoutExpired:
        return 124, f"{cmd[0]}: timed out after {timeout} s"
    return done.returncode, done.stdout + done.stderr


def nccom_command(
    *, ranks: int, nodes: int, hosts: list[str], size: str | tuple[str, str], collector_host: str = ""
) -> list[str]:
    """A small all-reduce with correctness check (nccom-test user guide: ``-r``, ``-N``, ``-b``/``-e``, ``--check``,
    ``--hosts``; multi-node runs need ``NEURON_RT_ROOT_COMM_ID`` set to the first host and a free port).
    ``collector_host``: where the peers report their results (``--data-collector-host``); in a pod its IP, as
    aws/aws-k8s-tester's multi-node nccom-test passes ``--data-collector-host $POD_IP``."""
    begin, end = (size, size) if isinstance(size, str) else size
    cmd = ["nccom-test", "-r", str(ranks), "-N", str(nodes), "-b", begin, "-e", end]
    cmd += ["-f", "2"] if begin != end else []  # a sweep doubling the size (aws-k8s-tester passes -f 2 too)
    cmd += ["-d", "fp32", "--check", "all_ones", "allr"]
    if nodes > 1:
        cmd += ["--hosts", *hosts]
        if collector_host:
            cmd += ["--data-collector-host", collector_host]
    return cmd


def node_checks(args: argparse.Namespace) -> list[Outcome]:
    node = args.node
    rc, out = _run(["neuron-ls", "--json-output"])
    outcomes = [check_devices(node, out if rc == 0 else "", args.devices)]
    version = Path("/sys/module/neuron/version").read_text() if Path("/sys/module/neuron/version").exists() else ""
    outcomes.append(
        check_driver(
            node, version, args.driver_floor, args.driver_shipped, release=args.release, below=args.driver_below,
            below_rule=args.driver_below_rule, read=args.driver_read, read_rule=args.driver_read_rule,
        )
    )  # fmt: skip
    rc, out = _run(nccom_command(ranks=args.cores, nodes=1, hosts=[], size="1kb"), timeout=900)
    result = parse_nccom(out, rc)
    runtime = check_collective([node], result, None)
    outcomes.append(Outcome(node, "runtime", runtime.ok, runtime.reason.replace("all-reduce", f"{args.cores}-core all-reduce")))
    if args.efa:
        rc, out = _run([FI_INFO, "-p", "efa"])
        outcomes.append(check_efa(node, out, args.efa, rc, devices=efa_devices()))
    if args.lustre:
        outcomes.append(check_lustre(node, Path(MOUNTS).read_text(), args.lustre))
    return outcomes


def collective_check(args: argparse.Namespace) -> list[Outcome]:
    hosts = [h for h in Path(args.hosts_file).read_text().split() if h]
    cmd = nccom_command(
        ranks=args.cores * len(hosts),
        nodes=len(hosts),
        hosts=hosts,
        size=(args.begin, args.end),
        collector_host=args.data_collector_host,
    )
    rc, out = _run(cmd)
    print(out, flush=True)
    result = parse_nccom(out, rc)
    outcome = check_collective(hosts, result, args.min_busbw_gbps)
    if outcome.ok and args.calibrate:
        record = {"nodes": len(hosts), "size": args.end, "busbw_gbps": result.busbw_gbps, "at": int(time.time())}
        Path(args.calibrate).parent.mkdir(parents=True, exist_ok=True)
        Path(args.calibrate).write_text(json.dumps(record, sort_keys=True) + "\n")
        print(f"calibration recorded in {args.calibrate}: {record}", flush=True)
    return [outcome]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="neuronkit-prejob")
    p.add_argument("--environment", default=os.environ.get("NEURONKIT_ENVIRONMENT", ""))
    p.add_argument("--pool", default=os.environ.get("NEURONKIT_POOL", ""))
    p.add_argument("--node", default=os.environ.get("NODE_NAME", os.uname().nodename))
    sub = p.add_subparsers(dest="mode", required=True)
    n = sub.add_parser("node")
    n.add_argument("--devices", type=int, required=True)
    n.add_argument("--cores", type=int, required=True)
    n.add_argument("--efa", type=int, default=0)
    n.add_argument("--driver-floor", required=True, help="the release's driver_min: an older driver fails")
    n.add_argument("--driver-shipped", default=None, help="the release's driver_shipped: an older driver warns")
    n.add_argument("--release", default="", help="the Neuron release whose driver window this is")
    n.add_argument("--driver-below", default=None, help="the first driver a stated rule refuses for the release")
    n.add_argument("--driver-below-rule", default="", help="that rule, quoted with its source")
    n.add_argument("--driver-read", default=None, help="the newest driver the catalog has read: a newer one fails")
    n.add_argument("--driver-read-rule", default="", help="the read mark, with its source")
    n.add_argument("--lustre", default="")
    c = sub.add_parser("collective")
    c.add_argument("--hosts-file", required=True)
    c.add_argument("--cores", type=int, required=True)
    c.add_argument("--begin", default=SWEEP[0], help="the sweep's first size")
    c.add_argument("--end", default=SWEEP[1], help="the sweep's last size: the bus bandwidth compared")
    c.add_argument("--min-busbw-gbps", type=float, default=None)
    c.add_argument("--calibrate", default="")
    c.add_argument("--data-collector-host", default="", help="nccom-test's --data-collector-host (a pod: its IP)")
    args = p.parse_args(argv)
    outcomes = node_checks(args) if args.mode == "node" else collective_check(args)
    return report(outcomes, environment=args.environment, pool=args.pool)


if __name__ == "__main__":
    sys.exit(main())
