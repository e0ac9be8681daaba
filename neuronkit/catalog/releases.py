"""The Neuron SDK release matrix (``neuron_releases.yaml``): what runs where, with which software.

API (stable; config, constructs, summary, cost and assess use it):

- :func:`releases` -> every :class:`Release`, oldest first; :func:`release` (``"2.28.1"``) -> one.
- :func:`support` (release, family, workload) -> ``"supported" | "maintenance" | "unsupported"``.
- :func:`default_release` (family, workload) -> the newest release that fully supports it, or None.
- :func:`last_supporting` (family, workload) -> the newest release where it is supported or in
  maintenance, or None.
- :func:`families_supporting` (release, workload) -> the families a release fully supports it on.
- ``Release.driver``, ``.runtime``, ``.compiler``, ``.container(workload)`` (a pinned DLC or None),
  ``.dlami_lookup(ami_family)`` (the DescribeImages filters of the release's DLAMI, or None).
- :func:`container_release` (image) -> the SDK release a Neuron DLC tag was built for (``sdk2.28.0``).

Families are instance-type prefixes (``trn1``, ``trn1n``, ``inf2``, ``trn2``, ``trn2u``, ``trn3``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml

Status = Literal["supported", "maintenance", "unsupported"]
_HERE = Path(__file__).parent
_SDK_TAG = re.compile(r"-sdk(\d+\.\d+\.\d+)")


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


@dataclass(frozen=True)
class DlamiLookup:
    """What to ask DescribeImages for: the newest image of ``owner`` matching both patterns."""

    name: str
    description: str
    owner: str


@dataclass(frozen=True)
class Release:
    version: str
    date: str
    source: str
    driver: str
    runtime: str
    compiler: str
    status: dict[str, dict[str, Status]]  # workload -> family -> status (unsupported when absent)
    sources: dict[str, str]  # workload -> source of its support row
    containers: dict[str, str]

    def container(self, workload: str) -> str | None:
        return self.containers.get(workload)

    def dlami_lookup(self, ami_family: str) -> DlamiLookup | None:
        spec = _data()["dlami_lookup"]
        name = spec["names"].get(ami_family)
        if name is None:
            return None
        return DlamiLookup(name=name, description=spec["description"].format(release=self.version), owner=spec["owner"])


@cache
def _data() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((_HERE / "neuron_releases.yaml").read_text())
    return data


def families() -> tuple[str, ...]:
    return tuple(_data()["families"])


def workloads() -> dict[str, str]:
    """Workload key -> how people say it ("pytorch-training" -> "PyTorch training")."""
    return dict(_data()["workloads"])


@cache
def releases() -> tuple[Release, ...]:
    out = []
    for version, row in _data()["releases"].items():
        status: dict[str, dict[str, Status]] = {}
        sources: dict[str, str] = {}
        for workload, entry in row["workloads"].items():
            per: dict[str, Status] = {}
            for fam in entry.get("maintenance", []):
                per[fam] = "maintenance"
            for fam in entry.get("supported", []):
                per[fam] = "supported"
            status[workload] = per
            sources[workload] = entry["source"]
        out.append(
            Release(
                version=str(version),
                date=str(row["date"]),
                source=row["source"],
                driver=str(row["driver"]),
                runtime=str(row["runtime"]),
                compiler=str(row["compiler"]),
                status=status,
                sources=sources,
                containers=dict(row.get("containers") or {}),
            )
        )
    return tuple(sorted(out, key=lambda r: version_key(r.version)))


def versions() -> list[str]:
    return [r.version for r in releases()]


def release(version: str) -> Release:
    """One release; KeyError when the matrix does not hold it."""
    for r in releases():
        if r.version == version:
            return r
    raise KeyError(version)


def family_of(instance_type: str) -> str:
    return instance_type.split(".", 1)[0]


def support(rel: Release, family: str, workload: str) -> Status:
    return rel.status.get(workload, {}).get(family, "unsupported")


def default_release(family: str, workload: str) -> Release | None:
    """The newest release that fully supports ``workload`` on ``family``."""
    good = [r for r in releases() if support(r, family, workload) == "supported"]
    return good[-1] if good else None


def last_supporting(family: str, workload: str) -> Release | None:
    """The newest release where ``workload`` on ``family`` still runs (supported or in maintenance)."""
    good = [r for r in releases() if support(r, family, workload) != "unsupported"]
    return good[-1] if good else None


def families_supporting(rel: Release, workload: str) -> list[str]:
    return [f for f in families() if support(rel, f, workload) == "supported"]


def container_release(image: str) -> str | None:
    """The SDK release a Neuron Deep Learning Container tag names (``...-sdk2.28.0-ubuntu24.04``), or None."""
    m = _SDK_TAG.search(image.rsplit(":", 1)[-1]) if ":" in image else None
    return m.group(1) if m else None
