"""The committed catalog equals what EC2 answers (moto carries a recorded copy of AWS's data)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from moto import mock_aws

from neuronkit import catalog
from neuronkit.catalog import refresh


@pytest.fixture(scope="module")
def regenerated(aws_credentials: None) -> dict[str, Any]:
    with mock_aws():
        return refresh.build(boto3.Session(region_name="us-east-1"))


def test_committed_catalog_matches_ec2(regenerated: dict[str, Any]) -> None:
    committed = catalog._raw()
    assert committed["instance_types"] == regenerated["instance_types"]
    assert committed["source"] and committed["generated"]


def test_catalog_covers_the_families() -> None:
    families = {t.family for t in catalog.instance_types().values()}
    assert {"trn1", "trn1n", "trn2", "trn2u", "inf1", "inf2", "p4d", "p5", "p5e", "g5", "g6", "g6e"} <= families


def test_known_hardware_facts() -> None:
    trn1 = catalog.get("trn1.32xlarge")
    assert (trn1.neuron_devices, trn1.neuron_cores, trn1.efa_max_interfaces, trn1.efa_bandwidth_gbps) == (16, 32, 8, 800)
    assert catalog.get("trn1n.32xlarge").efa_bandwidth_gbps == 1600
    assert catalog.get("trn2.48xlarge").efa_bandwidth_gbps == 3200
    assert catalog.get("p5.48xlarge").efa_max_interfaces == 32
    assert catalog.get("inf2.xlarge").efa_max_interfaces == 0
    assert catalog.get("trn1n.32xlarge").az_ids("us-east-1") == ("use1-az6",)


def test_every_ami_family_supports_only_catalogued_families() -> None:
    families = {t.family for t in catalog.instance_types().values()}
    for ami in catalog.ami_families().values():
        assert set(ami.supports) <= families, ami.name
    assert not any(a.supports_type("inf1.xlarge") for a in catalog.ami_families().values())


def test_trainium2_device_memory_is_1_5_tib() -> None:
    # 16 Trainium2 chips x 96 GiB HBM (Neuron docs, trn2-arch); a correction in overrides.json wins over
    # the 8 TiB that moto's recorded EC2 answer reports.
    assert catalog.get("trn2.48xlarge").neuron_memory_mib == catalog.get("trn2u.48xlarge").neuron_memory_mib == 1_572_864
