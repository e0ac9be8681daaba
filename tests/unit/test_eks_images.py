"""The EKS node images as catalog data (neuronkit/catalog/eks_images.py, eks.yaml node_image_releases)."""

from __future__ import annotations

import re

import pytest

from neuronkit import catalog
from neuronkit.catalog import eks_images

ACCELERATORS = ("neuron", "gpu")


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_every_image_row_names_its_changelog_section_and_date(accelerator: str) -> None:
    rows = eks_images.images(accelerator)  # type: ignore[arg-type]
    assert len(rows) >= 10, "the table lists the releases of a year"
    for row in rows:
        assert re.fullmatch(r"1\.\d+\.\d+-20\d{6}", row.release_version), row
        assert row.release_version.startswith(row.kubernetes + "."), row
        assert re.fullmatch(r"20\d\d-\d\d-\d\d", row.date) and row.date.replace("-", "") == row.release_version[-8:], row
        assert "amazon-eks-ami" in row.source and f"AMI Release v{row.date.replace('-', '')}" in row.source, row
        driver = row.neuron_driver if accelerator == "neuron" else row.nvidia_driver
        assert driver and re.fullmatch(r"\d+(\.\d+)+", driver), row


def test_the_january_image_carries_the_driver_its_changelog_names() -> None:
    """amazon-eks-ami CHANGELOG.md, "AMI Release v20260129": aws-neuronx-dkms 2.25.4.0 on Kubernetes 1.35."""
    row = eks_images.node_image("neuron", "1.35.0-20260129")
    assert row is not None and row.neuron_driver == "2.25.4.0" and row.kubernetes == "1.35"
    assert eks_images.node_image("neuron", "1.35.9-20990101") is None


@pytest.mark.parametrize("accelerator", ACCELERATORS)
def test_the_pin_is_a_row_of_the_catalog_kubernetes_version(accelerator: str) -> None:
    facts = catalog.eks_facts()
    version = str(facts["kubernetes"]["version"])
    pin = eks_images.pinned(accelerator, version)  # type: ignore[arg-type]
    assert pin.release_version == facts["node_images"][accelerator]["release_version"]
    assert pin.kubernetes == version
    older = str(facts["kubernetes"]["previous"][-1])
    assert eks_images.pinned(accelerator, older).kubernetes == older  # type: ignore[arg-type]
    with pytest.raises(KeyError):
        eks_images.pinned(accelerator, "1.20")  # type: ignore[arg-type]
