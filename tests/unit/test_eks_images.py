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


# --- the driver rule against the node images (docs/neuron-releases.md) --------------------------------------------
import copy  # noqa: E402
from collections.abc import Iterator  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import yaml  # noqa: E402

from neuronkit.catalog import releases  # noqa: E402
from neuronkit.cli import main  # noqa: E402
from tests.conftest import ROOT  # noqa: E402

EXAMPLE = yaml.safe_load((ROOT / "examples" / "environments" / "eks.yaml").read_text())
K8S = str(catalog.eks_facts()["kubernetes"]["version"])


def _validate(tmp_path: Path, capsys: pytest.CaptureFixture[str], **eks: Any) -> tuple[int, str, str]:
    data = copy.deepcopy(EXAMPLE)
    data["eks"].update(eks)
    path = tmp_path / "eks.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    code = main(["validate", str(path)])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def january_table(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """A fixture image table whose newest Neuron image is the January one (driver 2.25.4.0)."""
    table = copy.deepcopy(catalog.eks_facts()["node_image_releases"])
    rows = table["by_accelerator"]["neuron"]
    table["by_accelerator"]["neuron"] = [r for r in rows if str(r["date"]) <= "2026-01-29"]
    facts = {**catalog.eks_facts(), "node_image_releases": table}
    facts["node_images"] = {
        **facts["node_images"],
        "neuron": {**facts["node_images"]["neuron"], "release_version": "1.35.0-20260129"},
    }
    monkeypatch.setattr(eks_images.catalog, "eks_facts", lambda: facts)
    eks_images._rows.cache_clear()
    yield "1.35.0-20260129"
    eks_images._rows.cache_clear()


def test_driver_min_never_exceeds_the_shipped_driver_and_names_its_source() -> None:
    for r in releases.releases():
        assert releases.version_key(r.driver_min) <= releases.version_key(r.driver_shipped), r.version
        assert r.driver_min_source, r.version
    stated = [r for r in releases.releases() if r.driver_min != r.driver_shipped]
    assert stated, "at least one release runs on an older driver than it shipped (2.28.1 on 2.28.0's)"


def test_every_release_the_eks_path_accepts_has_an_image_that_meets_its_minimum(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The pinned image meets driver_min of every release an EKS pool may use; validate refuses the others by name."""
    pin = eks_images.pinned("neuron", K8S)
    accepted = 0
    for r in releases.releases():
        meets = eks_images.meets(pin, r.driver_min)
        data = copy.deepcopy(EXAMPLE)
        data["neuron_sdk"] = r.version
        data["training"] = []  # the serving pool alone: JAX on inf2 runs on every release
        data["inference"][0]["workload"] = "jax"
        (tmp_path / r.version).mkdir()
        path = tmp_path / r.version / "eks.yaml"
        path.write_text(yaml.safe_dump(data, sort_keys=False))
        code = main(["validate", str(path)])
        _, err = capsys.readouterr()
        line = f"Neuron {r.version} needs driver {r.driver_min} or newer"
        if meets:
            assert code == 0 and line not in err, (r.version, err)
            accepted += 1
        else:
            assert code == 1 and line in err and pin.neuron_driver in err, (r.version, err)
    assert accepted >= 2, "the pinned image serves the releases the examples run"
    assert eks_images.meets(pin, releases.release(EXAMPLE["neuron_sdk"]).driver_min)


def test_validate_refuses_when_no_image_meets_a_release_minimum(
    january_table: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rel = releases.release(EXAMPLE["neuron_sdk"])
    code, out, err = _validate(tmp_path, capsys)
    assert code == 1 and ": ok:" not in out
    assert f"neuron_sdk: Neuron {rel.version} needs driver {rel.driver_min} or newer" in err
    assert f"{january_table}, carries 2.25.4.0" in err


def test_a_pinned_release_is_checked_and_a_newer_one_is_accepted_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rel = releases.release(EXAMPLE["neuron_sdk"])
    code, _, err = _validate(tmp_path, capsys, node_release_version="1.35.0-20260129")
    assert code == 1
    assert (
        f"eks.node_release_version: Neuron {rel.version} needs driver {rel.driver_min} or newer; EKS node image 1.35.0-20260129 carries 2.25.4.0"
        in err
    )
    code, _, err = _validate(tmp_path, capsys, node_release_version="1.35.9-20261201")
    assert code == 1 and "eks.node_release_source" in err
    code, out, err = _validate(
        tmp_path, capsys, node_release_version="1.35.9-20261201", node_release_source="amazon-eks-ami CHANGELOG v20261201"
    )
    assert code == 0 and ": ok:" in out
    assert "eks.node_release_version: 1.35.9-20261201 is not in the catalog" in err and "unchecked" in err
