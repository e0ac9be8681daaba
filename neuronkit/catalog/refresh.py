"""Regenerate ``instances.json`` from an EC2 endpoint.

The catalog is built from two EC2 calls: ``DescribeInstanceTypes`` (vCPUs, memory, network cards,
EFA, Neuron devices, GPUs) and ``DescribeInstanceTypeOfferings`` with ``LocationType=
availability-zone-id`` (which AZ IDs offer each type). Any endpoint that answers these calls works:
real EC2 with credentials, or moto, which bundles a recorded copy of AWS's answers (the committed
file was made that way; the ``source`` field says which).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from neuronkit import clock

# Which types the catalog keeps is EC2's answer, not a list here: every type DescribeInstanceTypes reports
# with NeuronInfo (Trainium, Inferentia) or GpuInfo (the GPU fallback and comparison types), plus the types
# overrides.json marks accelerated where a recorded answer lacks NeuronInfo (each with its source).

# Regions scanned by default: every commercial region that offers a Trainium or Inferentia type.
DEFAULT_REGIONS: tuple[str, ...] = (
    "us-east-1", "us-east-2", "us-west-1", "us-west-2", "ca-central-1", "sa-east-1",
    "eu-central-1", "eu-north-1", "eu-south-1", "eu-west-1", "eu-west-2", "eu-west-3",
    "ap-northeast-1", "ap-northeast-2", "ap-south-1", "ap-south-2", "ap-southeast-1",
    "ap-southeast-2", "ap-southeast-4", "ap-east-1", "af-south-1", "me-south-1",
)  # fmt: skip

CATALOG_FILE = Path(__file__).with_name("instances.json")


def _family(instance_type: str) -> str:
    return instance_type.split(".", 1)[0]


def _accelerator(info: dict[str, Any]) -> str:
    if "NeuronInfo" in info:
        name = info["NeuronInfo"]["NeuronDevices"][0]["Name"].lower()
        return "inferentia" if name.startswith("inferentia") else "trainium"
    if "GpuInfo" in info:
        return "gpu"
    return "none"


def describe(info: dict[str, Any]) -> dict[str, Any]:
    """Reduce one DescribeInstanceTypes entry to the facts neuronkit uses."""
    net = info["NetworkInfo"]
    neuron = info.get("NeuronInfo", {})
    neuron_devices = sum(d["Count"] for d in neuron.get("NeuronDevices", []))
    neuron_cores = sum(d["Count"] * d["CoreInfo"]["Count"] for d in neuron.get("NeuronDevices", []))
    gpu = info.get("GpuInfo", {})
    gpus = gpu.get("Gpus", [])
    storage = info.get("InstanceStorageInfo", {})
    cards = sorted(net.get("NetworkCards", []), key=lambda c: c["NetworkCardIndex"])
    return {
        "family": _family(info["InstanceType"]),
        "accelerator": _accelerator(info),
        "vcpus": info["VCpuInfo"]["DefaultVCpus"],
        "memory_mib": info["MemoryInfo"]["SizeInMiB"],
        "architecture": info["ProcessorInfo"]["SupportedArchitectures"][0],
        "network_performance": net["NetworkPerformance"],
        "network_cards": net["MaximumNetworkCards"],
        "max_network_interfaces": net["MaximumNetworkInterfaces"],
        "ipv4_per_interface": net["Ipv4AddressesPerInterface"],
        "efa_supported": bool(net.get("EfaSupported")),
        "efa_max_interfaces": net.get("EfaInfo", {}).get("MaximumEfaInterfaces", 0),
        "network_card_details": [
            {
                "index": c["NetworkCardIndex"],
                "max_interfaces": c["MaximumNetworkInterfaces"],
                "baseline_gbps": c.get("BaselineBandwidthInGbps"),
                "interface_types": c.get("InterfaceTypes", ["interface"]),
            }
            for c in cards
        ],
        "neuron_device_name": neuron["NeuronDevices"][0]["Name"] if neuron else None,
        "neuron_devices": neuron_devices,
        "neuron_cores": neuron_cores,
        "neuron_memory_mib": neuron.get("TotalNeuronDeviceMemoryInMiB", 0),
        "gpu_model": gpus[0]["Name"] if gpus else None,
        "gpus": sum(g["Count"] for g in gpus),
        "gpu_memory_mib": gpu.get("TotalGpuMemoryInMiB", 0),
        "local_nvme_gb": storage.get("TotalSizeInGB", 0),
        "placement_strategies": info.get("PlacementGroupInfo", {}).get("SupportedStrategies", []),
        "offerings": {},
    }


OVERRIDES_FILE = Path(__file__).with_name("overrides.json")


def _apply_overrides(name: str, entry: dict[str, Any]) -> None:
    """Fill facts an endpoint leaves out (each override names its source in overrides.json)."""
    overrides = json.loads(OVERRIDES_FILE.read_text())["instance_types"]
    override = overrides.get(name, {})
    for key, value in override.get("facts", {}).items():
        if override.get("replace") or entry.get(key) in (None, 0, "", "none", []):
            entry[key] = value


def _accelerated_by_override(name: str) -> bool:
    overrides = json.loads(OVERRIDES_FILE.read_text())["instance_types"]
    return overrides.get(name, {}).get("facts", {}).get("accelerator") in ("trainium", "inferentia", "gpu")


def build(session: Any, regions: tuple[str, ...] = DEFAULT_REGIONS, source: str = "") -> dict[str, Any]:
    """Build the catalog document with a boto3 session (real or mocked): every accelerated type EC2 reports."""
    first = session.client("ec2", region_name=regions[0])
    types: dict[str, dict[str, Any]] = {}
    for page in first.get_paginator("describe_instance_types").paginate():
        for info in page["InstanceTypes"]:
            if "NeuronInfo" in info or "GpuInfo" in info or _accelerated_by_override(info["InstanceType"]):
                types[info["InstanceType"]] = describe(info)
    for region in regions:
        ec2 = session.client("ec2", region_name=region)
        # Filtered locally: not every endpoint applies wildcard filters to offerings.
        for page in ec2.get_paginator("describe_instance_type_offerings").paginate(LocationType="availability-zone-id"):
            for offer in page["InstanceTypeOfferings"]:
                entry = types.get(offer["InstanceType"])
                if entry is not None:
                    entry["offerings"].setdefault(region, []).append(offer["Location"])
    for name, entry in types.items():
        _apply_overrides(name, entry)
        entry["offerings"] = {r: sorted(set(z)) for r, z in sorted(entry["offerings"].items())}
    return {
        "source": source or "EC2 DescribeInstanceTypes + DescribeInstanceTypeOfferings",
        "generated": clock.utc_now().date().isoformat(),
        "families": sorted({entry["family"] for entry in types.values()}),
        "regions": list(regions),
        "instance_types": dict(sorted(types.items())),
    }


def write(document: dict[str, Any], path: Path = CATALOG_FILE) -> None:
    path.write_text(json.dumps(document, indent=1, sort_keys=False) + "\n")
