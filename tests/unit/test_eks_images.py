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


def _only_images(monkeypatch: pytest.MonkeyPatch, *rows: dict[str, Any]) -> None:
    """A fixture image table holding only ``rows`` as Neuron images of the catalog's Kubernetes version."""
    table = copy.deepcopy(catalog.eks_facts()["node_image_releases"])
    table["by_accelerator"]["neuron"] = [dict(r, kubernetes=K8S) for r in rows]
    facts = {**catalog.eks_facts(), "node_image_releases": table}
    monkeypatch.setattr(eks_images.catalog, "eks_facts", lambda: facts)
    eks_images._rows.cache_clear()


@pytest.fixture(autouse=True)
def _fresh_rows() -> Iterator[None]:
    yield
    eks_images._rows.cache_clear()


def _one_pool(tmp_path: Path, capsys: pytest.CaptureFixture[str], release: str) -> tuple[int, str, str]:
    data = copy.deepcopy(EXAMPLE)
    data["neuron_sdk"] = release
    data["training"] = []  # the serving pool alone: JAX on inf2 runs on every release
    data["inference"] = [dict(data["inference"][0], workload="jax")]
    (tmp_path / release).mkdir(exist_ok=True)
    path = tmp_path / release / "eks.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    code = main(["validate", str(path)])
    out, err = capsys.readouterr()
    return code, out, err


def test_every_release_the_eks_path_accepts_has_an_image_in_its_driver_window(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each release gets the newest image whose driver lies in its window (releases.driver_fit); validate refuses a
    release no image suits, in one line naming the newest image, its driver, the release and the rule."""
    accepted = 0
    for r in releases.releases():
        image = eks_images.for_release(K8S, r.version)
        code, _, err = _one_pool(tmp_path, capsys, r.version)
        if image is not None:
            assert releases.driver_fit(str(image.neuron_driver), r.version).ok
            later = [i for i in eks_images.images("neuron", K8S) if i.date > image.date]
            assert all(not eks_images.fit(i, r.version).ok for i in later), (r.version, "not the newest that fits")
            assert code == 0, (r.version, err)
            accepted += 1
        else:
            newest = eks_images.images("neuron", K8S)[-1]
            lines = [ln for ln in err.splitlines() if f"suits Neuron {r.version}" in ln]
            assert code == 1 and len(lines) == 1, (r.version, err)
            assert newest.release_version in lines[0] and str(newest.neuron_driver) in lines[0], lines[0]
    assert accepted >= 2, "the catalog's images serve the releases the examples run"


def test_the_2_28_1_pools_are_off_the_2_29_driver() -> None:
    """Issue 46: 1.35.6-20260714 ships aws-neuronx-dkms 2.29.0.0, which needs runtime 2.33: 2.28.1 pools (runtime 2.30)
    boot the newest image with a 2.28 driver (v20260625); a 2.31.1 pool (runtime 2.33) boots 20260714."""
    assert eks_images.node_image("neuron", "1.35.6-20260714").neuron_driver == "2.29.0.0"  # type: ignore[union-attr]
    old = eks_images.for_release(K8S, "2.28.1")
    assert old is not None and old.release_version == "1.35.6-20260625" and old.neuron_driver == "2.28.0.0"
    new = eks_images.for_release(K8S, "2.31.1")
    assert new is not None and new.release_version == "1.35.6-20260714"


def test_validate_refuses_a_2_28_1_pool_when_the_only_image_carries_driver_2_29(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _only_images(
        monkeypatch,
        {
            "release_version": f"{K8S}.6-20260714",
            "neuron_driver": "2.29.0.0",
            "date": "2026-07-14",
            "source": "AMI Release v20260714",
        },
    )
    code, out, err = _one_pool(tmp_path, capsys, "2.28.1")
    assert code == 1 and ": ok:" not in out
    lines = [ln for ln in err.splitlines() if "2.29.0.0" in ln]
    assert len(lines) == 1, err
    line = lines[0]
    assert "Neuron 2.28.1" in line and f"{K8S}.6-20260714" in line
    assert "Neuron Driver 2.29 requires Neuron Runtime Library 2.33 or later" in line and "nrt_init()" in line


def test_validate_refuses_an_image_with_a_driver_newer_than_any_the_catalog_has_read(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    read = releases.driver_read()
    major, minor, *_ = read.driver.split(".")
    newer = f"{major}.{int(minor) + 5}.0.0"
    _only_images(
        monkeypatch,
        {"release_version": f"{K8S}.9-20990101", "neuron_driver": newer, "date": "2099-01-01", "source": "AMI Release v20990101"},
    )
    assert releases.driver_fit(newer, "2.28.1").rule == "driver_read"
    code, _, err = _one_pool(tmp_path, capsys, "2.28.1")
    lines = [ln for ln in err.splitlines() if newer in ln]
    assert code == 1 and len(lines) == 1, err
    assert "Neuron 2.28.1" in lines[0] and read.driver in lines[0] and "the newest driver whose release notes" in lines[0]


def test_validate_refuses_when_no_image_meets_a_release_minimum(
    january_table: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rel = releases.release(EXAMPLE["neuron_sdk"])
    code, out, err = _validate(tmp_path, capsys)
    assert code == 1 and ": ok:" not in out
    line = next(ln for ln in err.splitlines() if f"suits Neuron {rel.version}" in ln)
    assert f"neuron_sdk: no EKS node image of Kubernetes {K8S}" in line
    assert january_table in line and "2.25.4.0" in line and f"older than {rel.driver_min}" in line


def test_a_pinned_release_is_checked_and_a_newer_one_is_accepted_with_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rel = releases.release(EXAMPLE["neuron_sdk"])
    code, _, err = _validate(tmp_path, capsys, node_release_version="1.35.0-20260129")
    assert code == 1
    assert (
        f"eks.node_release_version: EKS node image 1.35.0-20260129: Neuron driver 2.25.4.0 does not suit Neuron {rel.version}"
        in err
    )
    # the pin the catalog used to make for every group: outside the 2.28.1 window by the 2.29 driver's rule
    code, _, err = _validate(tmp_path, capsys, node_release_version="1.35.6-20260714")
    line = next(ln for ln in err.splitlines() if f"does not suit Neuron {rel.version}" in ln)
    assert code == 1 and "2.29.0.0" in line and "requires Neuron Runtime Library 2.33" in line
    code, _, err = _validate(tmp_path, capsys, node_release_version="1.35.9-20261201")
    assert code == 1 and "eks.node_release_source" in err
    code, out, err = _validate(
        tmp_path, capsys, node_release_version="1.35.9-20261201", node_release_source="amazon-eks-ami CHANGELOG v20261201"
    )
    assert code == 0 and ": ok:" in out
    assert "eks.node_release_version: 1.35.9-20261201 is not in the catalog" in err and "unchecked" in err
