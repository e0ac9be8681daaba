#!/usr/bin/env python3
"""Print the CloudWatch agent configuration of a neuronkit node (JSON), from /etc/neuronkit/node.env values.

observability.sh runs it with node.env exported and installs the output as the agent's configuration:

- metrics into METRICS_NAMESPACE: ``mem_used_percent``, ``disk_used_percent`` (/, /local, /fsx) and, on
  GPU nodes (ACCELERATOR=gpu), the ``nvidia_gpu`` measurements (published as ``nvidia_smi_*``), each with
  the Environment and Pool dimensions plus InstanceId, and rolled up per Environment and Pool;
- logs: /var/log/neuronkit-boot.log into BOOT_LOG_GROUP and /var/log/neuronkit/server.log (the journal
  export) into SERVER_LOG_GROUP, one stream per instance. The log groups exist already (the stack
  creates them with the file's retention); the node may not create log groups.

Standard library only, Python 3.9-compatible (Amazon Linux 2023's python3).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Mapping
from typing import Any

BOOT_LOG = "/var/log/neuronkit-boot.log"
SERVER_LOG = "/var/log/neuronkit/server.log"
REQUIRED = ("ENVIRONMENT", "POOL", "REGION", "ACCELERATOR", "METRICS_NAMESPACE", "BOOT_LOG_GROUP", "SERVER_LOG_GROUP")
GPU_MEASUREMENTS = ["utilization_gpu", "utilization_memory", "memory_used", "memory_total", "temperature_gpu", "power_draw"]


def agent_config(env: Mapping[str, str]) -> dict[str, Any]:
    missing = [k for k in REQUIRED if not env.get(k)]
    if missing:
        raise KeyError(f"missing values: {', '.join(missing)}")
    pool = {"Environment": env["ENVIRONMENT"], "Pool": env["POOL"]}
    collected: dict[str, Any] = {
        "mem": {"measurement": ["mem_used_percent"], "append_dimensions": pool},
        "disk": {
            "measurement": ["used_percent"],
            "resources": ["/", "/local", "/fsx"],
            "drop_device": True,
            "append_dimensions": pool,
        },
    }
    if env["ACCELERATOR"] == "gpu":
        collected["nvidia_gpu"] = {"measurement": GPU_MEASUREMENTS, "append_dimensions": pool}
    return {
        "agent": {"metrics_collection_interval": 60, "region": env["REGION"], "run_as_user": "root"},
        "metrics": {
            "namespace": env["METRICS_NAMESPACE"],
            "append_dimensions": {"InstanceId": "${aws:InstanceId}"},
            "aggregation_dimensions": [["Environment", "Pool"]],
            "metrics_collected": collected,
        },
        "logs": {
            "logs_collected": {
                "files": {
                    "collect_list": [
                        {"file_path": BOOT_LOG, "log_group_name": env["BOOT_LOG_GROUP"], "log_stream_name": "{instance_id}"},
                        {"file_path": SERVER_LOG, "log_group_name": env["SERVER_LOG_GROUP"], "log_stream_name": "{instance_id}"},
                    ]
                }
            }
        },
    }


def main() -> int:
    try:
        config = agent_config(os.environ)
    except KeyError as err:
        print(f"cloudwatch_agent_config: {err.args[0]}", file=sys.stderr)
        return 2
    json.dump(config, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
