"""GPU training pools beside Trainium clusters: EFA layout, AMI and placement from the catalog.

Every GPU type with EFA that the catalog offers somewhere gets a pool in a generated environment (grouped
by region, a few pools per environment so each stack stays well under CloudFormation's resource limit);
all of them are synthesized once for this module. The prod example's p5.48xlarge pool is checked against
the session synth.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from neuronkit import catalog
from neuronkit.config import parse_environment
from neuronkit.reports.pools import gpu_pool_name
from neuronkit.stacks import build_environment
from tests.conftest import Synth, cdk_context, new_app
from tests.templates import pinned_image

ASG = "AWS::AutoScaling::AutoScalingGroup"
_POOLS_PER_ENVIRONMENT = 6


def _placements() -> dict[str, tuple[str, str, str, str]]:
    """GPU type -> (region, GPU AZ ID, Trainium type, Trainium AZ ID) for every GPU type with EFA offered anywhere
    that the kit's default GPU AMI boots (the catalog holds every GPU type EC2 reports; older and newer ones
    need an AMI family of their own first)."""
    types = catalog.instance_types()
    booted = set(catalog.ami_families()[catalog.default_ami_family("gpu")].supports)
    trainium = sorted((t for t in types.values() if t.accelerator == "trainium"), key=lambda t: (t.efa_max_interfaces, t.name))
    out = {}
    gpus = (t for t in types.values() if t.accelerator == "gpu" and t.efa_supported and t.family in booted)
    for gpu in sorted(gpus, key=lambda t: t.name):
        for region in sorted(gpu.offerings):
            trn = next((t for t in trainium if t.az_ids(region)), None)
            if trn is not None and gpu.az_ids(region):
                out[gpu.name] = (region, gpu.az_ids(region)[0], trn.name, trn.az_ids(region)[0])
                break
    return out


PLACEMENTS = _placements()
GPU_TYPES = sorted(PLACEMENTS)


def _environments() -> list[dict[str, Any]]:
    by_region: dict[str, list[str]] = {}
    for gpu, (region, *_) in PLACEMENTS.items():
        by_region.setdefault(region, []).append(gpu)
    envs = []
    for region, gpus in sorted(by_region.items()):
        for start in range(0, len(gpus), _POOLS_PER_ENVIRONMENT):
            chunk = gpus[start : start + _POOLS_PER_ENVIRONMENT]
            clusters, az_ids = [], []
            for gpu in chunk:
                _, gpu_az, trn, trn_az = PLACEMENTS[gpu]
                az_ids += [a for a in (trn_az, gpu_az) if a not in az_ids]
                clusters.append(
                    {
                        "name": _cluster(gpu),
                        "instance_type": trn,
                        "az_id": trn_az,
                        "max_size": 1,
                        "gpu_pool": {"instance_type": gpu, "az_id": gpu_az, "max_size": 2},
                    }
                )
            name = f"gpu-{region}-{start // _POOLS_PER_ENVIRONMENT}"
            envs.append(
                {"name": name, "account": "444444444444", "region": region, "network": {"az_ids": az_ids}, "training": clusters}
            )
    return envs


def _cluster(gpu: str) -> str:
    return "c-" + re.sub(r"[^a-z0-9]", "", gpu)[:12]


@pytest.fixture(scope="module")
def templates() -> dict[str, dict[str, Any]]:
    """Training templates of every generated environment, from one synth; keyed by GPU type."""
    app = new_app()
    stacks = {}
    for raw in _environments():
        env = parse_environment(raw, f"{raw['name']}.yaml")
        built = build_environment(app, env)
        assert built.training is not None
        stacks[env.name] = built.training.stack_name
    assembly = app.synth()
    by_stack = {s.stack_name: s.template for s in assembly.stacks}
    out = {}
    for raw in _environments():
        for cluster in raw["training"]:
            out[cluster["gpu_pool"]["instance_type"]] = by_stack[stacks[raw["name"]]]
    return out


def _pool_resources(template: dict[str, Any], cluster: str) -> dict[str, dict[str, Any]]:
    prefix = "Cluster" + gpu_pool_name(cluster).replace("-", "")
    return {k: v for k, v in template["Resources"].items() if re.match(rf"{prefix}[A-Z]", k)}


def _one(resources: dict[str, dict[str, Any]], type_: str) -> dict[str, Any]:
    (found,) = [v for v in resources.values() if v["Type"] == type_]
    return found


def test_every_gpu_type_with_efa_is_covered() -> None:
    assert {"p5.48xlarge", "p4d.24xlarge", "p5en.48xlarge", "g6e.48xlarge"} <= set(GPU_TYPES)
    assert not [t for t in GPU_TYPES if not catalog.get(t).efa_supported]


@pytest.mark.parametrize("gpu", GPU_TYPES)
def test_gpu_pool_has_every_efa_interface_the_catalog_lists(templates: dict[str, dict[str, Any]], gpu: str) -> None:
    facts = catalog.get(gpu)
    resources = _pool_resources(templates[gpu], _cluster(gpu))
    data = _one(resources, "AWS::EC2::LaunchTemplate")["Properties"]["LaunchTemplateData"]
    assert data["InstanceType"] == gpu
    interfaces = data["NetworkInterfaces"]
    efa = [n for n in interfaces if n["InterfaceType"] == "efa-only"]
    assert len(efa) == facts.efa_max_interfaces
    # One interface per network card at most on cards > 0; the primary ENA stays on card 0 device 0.
    assert interfaces[0]["InterfaceType"] == "interface" and interfaces[0]["NetworkCardIndex"] == 0
    assert len({n["NetworkCardIndex"] for n in efa if n["NetworkCardIndex"] > 0}) == len(
        [n for n in efa if n["NetworkCardIndex"] > 0]
    )
    assert max(n["NetworkCardIndex"] for n in interfaces) < facts.network_cards
    text = json.dumps(data["UserData"])
    assert "ACCELERATOR='gpu'" in text and f"EXPECTED_ACCELERATORS='{facts.gpus}'" in text
    assert f"EXPECTED_EFA='{facts.efa_max_interfaces}'" in text
    _one(resources, "AWS::EC2::PlacementGroup")  # its own placement group
    group = _one(resources, ASG)
    assert group["Metadata"]["neuronkit"]["role"] == "training-gpu"
    assert group["Metadata"]["neuronkit"]["fallback_types"] == [gpu]


def test_prod_gpu_pool_is_p5_with_32_efa_the_gpu_ami_and_its_own_placement_group(synth: Synth) -> None:
    t = synth.template("prod-training")
    resources = _pool_resources(t, "pretrain")
    data = _one(resources, "AWS::EC2::LaunchTemplate")["Properties"]["LaunchTemplateData"]
    assert data["InstanceType"] == "p5.48xlarge"
    assert len([n for n in data["NetworkInterfaces"] if n["InterfaceType"] == "efa-only"]) == 32
    gpu_name = catalog.ami_families()[catalog.default_ami_family("gpu")].lookup_name
    assert gpu_name is not None  # pinned by a lookup (cdk.context.json), never a `latest` parameter
    assert data["ImageId"] == pinned_image(cdk_context(), account="222222222222", region="us-east-2", name=gpu_name)
    group = _one(resources, ASG)
    props = group["Properties"]
    placement = next(k for k, v in resources.items() if v["Type"] == "AWS::EC2::PlacementGroup")
    assert props["PlacementGroup"] == {"Ref": placement}
    # Default min 0: no GPU node runs until someone raises it in the file (one change).
    assert (props["MinSize"], props["MaxSize"]) == ("0", "2") and "DesiredCapacity" not in props
    assert props["AutoScalingGroupName"] == "prod-pretrain-gpu"
    assert group["Metadata"]["neuronkit"]["pool"] == "pretrain-gpu"


def test_prod_gpu_pool_shares_the_clusters_storage_and_hostfile_conventions(synth: Synth) -> None:
    t = synth.template("prod-training")
    pool = _pool_resources(t, "pretrain")
    trn = {k: v for k, v in t["Resources"].items() if re.match(r"Clusterpretrain[A-Z]", k)}
    pool_policy = _one(pool, "AWS::IAM::Policy")["Properties"]["PolicyDocument"]["Statement"]
    trn_policy = _one(trn, "AWS::IAM::Policy")["Properties"]["PolicyDocument"]["Statement"]
    by_sid = {s["Sid"]: s for s in pool_policy}
    for sid in ("ListBuckets", "ReadData", "Checkpoints"):
        assert by_sid[sid]["Resource"] == next(s["Resource"] for s in trn_policy if s["Sid"] == sid)
    assert by_sid["OwnGroup"]["Resource"].endswith("autoScalingGroupName/prod-pretrain-gpu")
    pool_data = _one(pool, "AWS::EC2::LaunchTemplate")["Properties"]["LaunchTemplateData"]
    trn_data = _one(trn, "AWS::EC2::LaunchTemplate")["Properties"]["LaunchTemplateData"]
    text = json.dumps(pool_data["UserData"])
    assert "neuronkit-hostfile" in text and "mount_lustre" in text and "ASG_NAME='prod-pretrain-gpu'" in text
    # Same Lustre client security group as the cluster; its own EFA security group.
    pool_groups = pool_data["NetworkInterfaces"][0]["Groups"]
    trn_groups = trn_data["NetworkInterfaces"][0]["Groups"]
    assert pool_groups[1:] == trn_groups[1:] and pool_groups[0] != trn_groups[0]
