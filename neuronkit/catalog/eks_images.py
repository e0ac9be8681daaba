"""The EKS accelerated node images as catalog data (``eks.yaml``, ``node_image_releases``).

API (stable; config, constructs, review and tests use it):

- :class:`NodeImage`: one EKS AMI release of one Kubernetes version (``release_version``, ``kubernetes``,
  ``neuron_driver``, ``nvidia_driver``, ``date``, ``source``).
- :func:`node_image` (``"neuron" | "gpu"``, ``"1.35.6-20260714"``) -> the row, or None when the catalog has none.
- :func:`images` (accelerator, kubernetes_version=None) -> the rows, oldest first.
- :func:`pinned` (accelerator, kubernetes_version) -> the image node groups of that version boot: the catalog's
  ``node_images`` pin for the catalog's Kubernetes version, else the newest row of that version (KeyError when the
  table holds none).
- :func:`meets` (image, driver_min) -> whether a Neuron image's driver is at or above a minimum (a floor only).
- :func:`fit` (image, release) -> ``releases.driver_fit`` of the image's Neuron driver: whether it lies in the
  release's driver window, with the reason naming driver, release and rule.
- :func:`for_release` (kubernetes_version, release) -> the image a Neuron node group of a pool on that release pins:
  the newest row of that Kubernetes version whose driver lies in the release's window, else None (validate refuses
  the file). Pools on different releases may so get different images in one cluster (issue 46).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any, Literal

from neuronkit import catalog
from neuronkit.catalog import releases

Accelerator = Literal["neuron", "gpu"]


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.replace("-", ".").split("."))


@dataclass(frozen=True)
class NodeImage:
    release_version: str  # e.g. 1.35.6-20260714 (AWS::EKS::Nodegroup ReleaseVersion)
    kubernetes: str  # e.g. 1.35
    neuron_driver: str | None  # aws-neuronx-dkms of the Neuron image (None on the NVIDIA image)
    nvidia_driver: str | None  # kmod-nvidia-latest-dkms of the NVIDIA image (None on the Neuron image)
    date: str  # the AMI release's date, YYYY-MM-DD
    source: str  # the changelog section the row comes from, with the changelog's address

    @property
    def driver(self) -> str | None:
        return self.neuron_driver if self.neuron_driver is not None else self.nvidia_driver


def _table() -> dict[str, Any]:
    table: dict[str, Any] = catalog.eks_facts()["node_image_releases"]
    return table


@cache
def _rows(accelerator: str) -> tuple[NodeImage, ...]:
    table = _table()
    doc = str(table["source"]).split(" ", 1)[0]
    out = []
    for row in table["by_accelerator"][accelerator]:
        out.append(
            NodeImage(
                release_version=str(row["release_version"]),
                kubernetes=str(row["kubernetes"]),
                neuron_driver=str(row["neuron_driver"]) if row.get("neuron_driver") else None,
                nvidia_driver=str(row["nvidia_driver"]) if row.get("nvidia_driver") else None,
                date=str(row["date"]),
                source=f"{doc}, {row['source']}",
            )
        )
    return tuple(sorted(out, key=lambda i: (_key(i.kubernetes), i.date, _key(i.release_version))))


def images(accelerator: Accelerator, kubernetes_version: str | None = None) -> tuple[NodeImage, ...]:
    """The catalog's rows for an accelerator (of one Kubernetes version when given), oldest first."""
    rows = _rows(accelerator)
    return tuple(r for r in rows if kubernetes_version is None or r.kubernetes == kubernetes_version)


def node_image(accelerator: Accelerator, release_version: str) -> NodeImage | None:
    """The row of one release version, or None when the catalog does not list it."""
    for row in _rows(accelerator):
        if row.release_version == release_version:
            return row
    return None


def pinned(accelerator: Accelerator, kubernetes_version: str) -> NodeImage:
    """The image the kit pins for node groups of ``kubernetes_version``: the ``node_images`` pin when it is of that
    version, else the newest row of that version. KeyError when the table has no image of that version."""
    pin = str(catalog.eks_facts()["node_images"][accelerator]["release_version"])
    row = node_image(accelerator, pin)
    if row is not None and row.kubernetes == kubernetes_version:
        return row
    rows = images(accelerator, kubernetes_version)
    if not rows:
        raise KeyError(f"no EKS {accelerator} node image of Kubernetes {kubernetes_version} in the catalog")
    return rows[-1]


def meets(image: NodeImage, driver_min: str) -> bool:
    """A Neuron image's driver is ``driver_min`` or newer (False for an image without a Neuron driver)."""
    return image.neuron_driver is not None and _key(image.neuron_driver) >= _key(driver_min)


def fit(image: NodeImage, release: str) -> releases.DriverFit:
    """Whether a Neuron image's driver lies in a release's driver window (``releases.driver_fit``, the one decision)."""
    if image.neuron_driver is None:
        return releases.DriverFit(
            False, "", release, "driver_min", f"EKS node image {image.release_version} has no Neuron driver"
        )
    return releases.driver_fit(image.neuron_driver, release)


def for_release(kubernetes_version: str, release: str) -> NodeImage | None:
    """The newest Neuron image of the Kubernetes version whose driver lies in the release's window, or None."""
    return next((i for i in reversed(images("neuron", kubernetes_version)) if fit(i, release)), None)


def gpu_image_of(neuron_image: NodeImage) -> NodeImage | None:
    """The NVIDIA image of the same AMI release as a Neuron one (one release version for every node group)."""
    return node_image("gpu", neuron_image.release_version)
