"""AcceleratorLaunchTemplate: EFA layout per instance type from the catalog, IMDSv2, root volume."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import Environment as CdkEnv
from aws_cdk import Stack
from aws_cdk.assertions import Template

from neuronkit import catalog
from neuronkit.constructs import AcceleratorLaunchTemplate, AmiSpec
from tests.conftest import missing_lookups, new_app

# Every accelerator type that can run in a cluster: Trainium for training, GPU types for fallback pools.
CLUSTER_TYPES = sorted(n for n, t in catalog.instance_types().items() if t.accelerator in ("trainium", "gpu"))
EFA_TYPES = [n for n in CLUSTER_TYPES if catalog.get(n).efa_max_interfaces > 0]


def _lid(name: str) -> str:
    return "Lt" + name.replace(".", "").replace("-", "")


@pytest.fixture(scope="module")
def templates() -> dict[str, dict[str, Any]]:
    """One stack holding a launch template per type: a single synth for the whole module."""
    app = new_app()
    stack = Stack(app, "LaunchTemplates", env=CdkEnv(account="123456789012", region="us-east-1"))
    for name in CLUSTER_TYPES:
        kind = "gpu" if catalog.get(name).accelerator == "gpu" else "neuron"
        AcceleratorLaunchTemplate(
            stack,
            _lid(name),
            instance_type=name,
            ami=AmiSpec.family(catalog.default_ami_family(kind)),
            security_group_ids=["sg-0123456789abcdef0"],
            user_data="#!/bin/bash\necho hi\n",
        )
    template = Template.from_stack(stack).to_json()
    out = {}
    for res in template["Resources"].values():
        if res["Type"] == "AWS::EC2::LaunchTemplate":
            data = res["Properties"]["LaunchTemplateData"]
            out[data["InstanceType"]] = data
    assert set(out) == set(CLUSTER_TYPES)
    return out


def _efa(data: dict[str, Any]) -> list[dict[str, Any]]:
    return [n for n in data["NetworkInterfaces"] if n.get("InterfaceType") in ("efa", "efa-only")]


@pytest.mark.parametrize("name", CLUSTER_TYPES)
def test_efa_interfaces_match_the_catalog(templates: dict[str, dict[str, Any]], name: str) -> None:
    facts = catalog.get(name)
    efa = _efa(templates[name])
    assert len(efa) == facts.efa_max_interfaces
    cards = [n["NetworkCardIndex"] for n in efa]
    assert len(set(cards)) == len(cards), "one EFA interface per network card"
    assert all(0 <= c < facts.network_cards for c in cards)


@pytest.mark.parametrize("name", CLUSTER_TYPES)
def test_primary_interface_is_ena_on_card0_device0(templates: dict[str, dict[str, Any]], name: str) -> None:
    primary = [n for n in templates[name]["NetworkInterfaces"] if n["DeviceIndex"] == 0 and n["NetworkCardIndex"] == 0]
    assert len(primary) == 1
    assert primary[0]["InterfaceType"] == "interface"
    assert primary[0]["AssociatePublicIpAddress"] is False


@pytest.mark.parametrize("name", EFA_TYPES)
def test_efa_layout_follows_ec2_multi_card_guide(templates: dict[str, dict[str, Any]], name: str) -> None:
    facts = catalog.get(name)
    layout = {(n["NetworkCardIndex"], n["DeviceIndex"]): n["InterfaceType"] for n in templates[name]["NetworkInterfaces"]}
    if facts.efa_on_card0:
        assert layout[(0, 1)] == "efa-only"
    for card in range(1, facts.efa_max_interfaces):
        assert layout[(card, 0)] == "efa-only"
    # efa-only interfaces take no IP address: only the primary uses one of the subnet's addresses.
    assert sum(1 for t in layout.values() if t == "interface") == 1


def test_trn2_gets_sixteen_efa_devices_from_the_catalog(templates: dict[str, dict[str, Any]]) -> None:
    # The catalog, not a literal, decides; trn1.32xlarge has 8, trn1n/trn2 16, p5 32.
    assert len(_efa(templates["trn1.32xlarge"])) == catalog.get("trn1.32xlarge").efa_max_interfaces == 8
    assert len(_efa(templates["trn2.48xlarge"])) == 16
    assert len(_efa(templates["p5.48xlarge"])) == 32


@pytest.mark.parametrize("name", CLUSTER_TYPES)
def test_security_groups_on_every_interface_and_none_at_top_level(templates: dict[str, dict[str, Any]], name: str) -> None:
    data = templates[name]
    assert "SecurityGroupIds" not in data and "SecurityGroups" not in data
    assert all(n["Groups"] == ["sg-0123456789abcdef0"] for n in data["NetworkInterfaces"])


@pytest.mark.parametrize("name", CLUSTER_TYPES)
def test_imdsv2_hop_limit_two_no_key_pair(templates: dict[str, dict[str, Any]], name: str) -> None:
    data = templates[name]
    assert data["MetadataOptions"]["HttpTokens"] == "required"
    assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == 2
    assert "KeyName" not in data


@pytest.mark.parametrize("name", CLUSTER_TYPES)
def test_root_volume_encrypted_gp3_sized_for_the_accelerator(templates: dict[str, dict[str, Any]], name: str) -> None:
    facts = catalog.get(name)
    (root,) = templates[name]["BlockDeviceMappings"]
    kind = "gpu" if facts.accelerator == "gpu" else "neuron"
    assert root["DeviceName"] == catalog.ami_families()[catalog.default_ami_family(kind)].root_device_name
    ebs = root["Ebs"]
    assert ebs["Encrypted"] is True and ebs["VolumeType"] == "gp3"
    if facts.accelerator == "trainium":
        assert ebs["VolumeSize"] >= 512


def test_ami_is_pinned_by_a_release_lookup_never_a_latest_parameter() -> None:
    app = new_app()
    stack = Stack(app, "Pinned", env=CdkEnv(account="123456789012", region="us-east-1"))
    AcceleratorLaunchTemplate(
        stack,
        "Lt",
        instance_type="trn1.32xlarge",
        ami=AmiSpec.family("neuron-multi-framework-ubuntu-24.04", "2.28.1"),
        security_group_ids=["sg-0123456789abcdef0"],
        user_data="#!/bin/bash\n",
    )
    (missing,) = missing_lookups(app.synth().directory)
    # DescribeImages by the release's DLAMI name and description, owner amazon; the CLI pins the answer.
    assert "filters.description.0=*Neuron SDK 2.28.1*" in missing and "owners.0=amazon" in missing
    assert "filters.name.0=Deep Learning AMI Neuron (Ubuntu 24.04) *" in missing
    floating = AmiSpec.latest("neuron-multi-framework-ubuntu-24.04")
    assert floating.floating and floating.ssm_parameter and floating.ssm_parameter.endswith("/latest/image_id")


def test_a_lookup_needs_the_stacks_account_and_region() -> None:
    stack = Stack(new_app(), "Agnostic")
    with pytest.raises(ValueError, match="needs the stack's account and region"):
        AmiSpec.family("neuron-multi-framework-ubuntu-24.04", "2.28.1").image_id(stack)


def test_too_small_root_volume_is_refused() -> None:
    app = new_app()
    stack = Stack(app, "Small", env=CdkEnv(account="123456789012", region="us-east-1"))
    with pytest.raises(ValueError, match="root_volume_gib: 100 GiB is below the 512 GiB a trainium node needs"):
        AcceleratorLaunchTemplate(
            stack,
            "Lt",
            instance_type="trn1.32xlarge",
            ami=AmiSpec(root_device_name="/dev/sda1", ami_id="ami-0123456789abcdef0"),
            security_group_ids=["sg-0123456789abcdef0"],
            user_data="#!/bin/bash\n",
            root_volume_gib=100,
        )


def test_user_data_over_ec2_limit_is_refused() -> None:
    app = new_app()
    stack = Stack(app, "Big", env=CdkEnv(account="123456789012", region="us-east-1"))
    with pytest.raises(ValueError, match="too close to EC2's 16384-byte limit"):
        AcceleratorLaunchTemplate(
            stack,
            "Lt",
            instance_type="trn1.32xlarge",
            ami=AmiSpec(root_device_name="/dev/sda1", ami_id="ami-0123456789abcdef0"),
            security_group_ids=["sg-0123456789abcdef0"],
            user_data="#!/bin/bash\n" + "echo padding\n" * 1300,
        )
