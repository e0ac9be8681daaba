"""The scale environment: 8 training clusters (different types and AZ IDs) and 4 inference fleets.

Used by tests/unit/test_scale.py (CloudFormation's limits per stack) and ``make bench`` (tests/bench.py),
so both measure the same environment. Every kind of pool the kit builds is in it: plain clusters on
On-Demand, a stack-created ODCR and a Capacity Block, clusters with GPU pools, AWS Batch clusters (one with
a Batch GPU pool), and inference fleets with GPU fallback.
"""

from __future__ import annotations

from typing import Any

from neuronkit.config import Environment, parse_environment

NEURON_IMAGE = "public.ecr.aws/neuron/pytorch-training-neuronx:2.9.0-neuronx-py312-sdk2.28.0-ubuntu24.04"
CUDA_IMAGE = "nvcr.io/nvidia/pytorch:25.01-py3"


def _fleet(name: str, neuron: list[str], fallback: list[str], max_size: int) -> dict[str, Any]:
    return {
        "name": name,
        "neuron_types": neuron,
        "fallback_types": fallback,
        "az_ids": ["use1-az6", "use1-az4"],
        "min_size": 1,
        "max_size": max_size,
        "model_s3_prefix": f"models/{name}/neuron/",
        "serve": {
            "neuron": "/opt/aws_neuronx_venv_pytorch/bin/vllm serve $MODEL_DIR --device neuron --port 8080",
            "gpu": "/opt/pytorch/bin/vllm serve $MODEL_DIR --port 8080",
        },
    }


SCALE: dict[str, Any] = {
    "name": "scale",
    "account": "333333333333",
    "region": "us-east-1",
    "network": {"az_ids": ["use1-az6", "use1-az4", "use1-az5"], "cidr": "10.30.0.0/16", "nat_gateways": 3},
    "storage": {"lustre": {"deployment_type": "PERSISTENT_2", "size_gib": 9600, "throughput_mbps_per_tib": 250}},
    "training": [
        {
            "name": "pretrain",
            "instance_type": "trn1.32xlarge",
            "az_id": "use1-az6",
            "max_size": 32,
            "capacity": {"type": "odcr", "instance_count": 32},
            "compile_cache": "s3",
            "gpu_pool": {"instance_type": "p5.48xlarge", "max_size": 4},
        },
        {"name": "finetune", "instance_type": "trn1n.32xlarge", "az_id": "use1-az6", "max_size": 16},
        {
            "name": "block",
            "instance_type": "trn1.32xlarge",
            "az_id": "use1-az6",
            "max_size": 16,
            "capacity": {
                "type": "capacity-block",
                "reservation_id": "cr-0123456789abcdef0",
                "instance_type": "trn1.32xlarge",
                "az_id": "use1-az6",
                "instance_count": 16,
                "start": "2026-12-01T11:30:00Z",
                "end": "2026-12-15T11:30:00Z",
            },
        },
        {
            "name": "eval",
            "instance_type": "trn1.32xlarge",
            "az_id": "use1-az4",
            "max_size": 8,
            "gpu_pool": {"instance_type": "p4d.24xlarge", "max_size": 2},
        },
        {
            "name": "sweep",
            "instance_type": "trn1.32xlarge",
            "az_id": "use1-az5",
            "max_size": 8,
            "scheduler": "batch",
            "container_image": NEURON_IMAGE,
            "gpu_pool": {"instance_type": "p5.48xlarge", "max_size": 2, "container_image": CUDA_IMAGE},
        },
        {
            "name": "jobs",
            "instance_type": "trn1n.32xlarge",
            "az_id": "use1-az6",
            "max_size": 16,
            "scheduler": "batch",
            "container_image": NEURON_IMAGE,
        },
        {"name": "dev", "instance_type": "trn1.2xlarge", "az_id": "use1-az5", "max_size": 4},
        {"name": "notebook", "instance_type": "trn1.2xlarge", "az_id": "use1-az6", "max_size": 2},
    ],
    "inference": [
        _fleet("chat", ["inf2.48xlarge", "inf2.24xlarge"], ["g6e.12xlarge", "g5.12xlarge"], 12),
        _fleet("embed", ["inf2.xlarge"], ["g5.xlarge"], 8),
        _fleet("rerank", ["inf2.8xlarge"], ["g6.xlarge"], 6),
        _fleet("code", ["inf2.24xlarge"], ["g5.12xlarge"], 4),
    ],
    "monitoring": {"emails": ["ml-platform@example.com"]},
    "budget": {"monthly_usd": 900000},
}


def scale_environment() -> Environment:
    """The validated scale environment (8 training clusters, 4 inference fleets)."""
    return parse_environment(SCALE, "environments/scale.yaml")
