"""EC2 On-Demand vCPU quotas as data: which Service Quotas code counts which instance families.

The mapping lives in ``quotas.yaml`` (with its source); ``neuronkit preflight`` compares each quota
with what an environment's clusters need at their max sizes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

_FILE = Path(__file__).with_name("quotas.yaml")


@dataclass(frozen=True)
class VcpuQuota:
    """One On-Demand vCPU quota of EC2 (e.g. L-2C3B7624, "Running On-Demand Trn instances")."""

    code: str
    name: str
    families: tuple[str, ...]  # family name prefixes (trn, inf, p, g, vt)
    usage_class: str | None = None  # Class dimension of its AWS/Usage ResourceCount metric (e.g. Inf/OnDemand)


@cache
def _raw() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(_FILE.read_text())
    return data


def service_code() -> str:
    """The Service Quotas service code the vCPU quotas belong to (``ec2``)."""
    code: str = _raw()["service_code"]
    return code


@cache
def vcpu_quotas() -> dict[str, VcpuQuota]:
    """Every On-Demand vCPU quota neuronkit knows, by quota code."""
    return {
        code: VcpuQuota(code=code, name=e["name"], families=tuple(e["family_prefixes"]), usage_class=e.get("usage_class"))
        for code, e in _raw()["vcpu_quotas"].items()
    }


def quota_for_family(family: str) -> VcpuQuota | None:
    """The vCPU quota that counts instances of ``family`` (e.g. trn1), or None if none is mapped: the quota
    whose longest family prefix the family starts with (``family_prefixes`` in quotas.yaml)."""
    best: tuple[int, VcpuQuota] | None = None
    for quota in vcpu_quotas().values():
        for prefix in quota.families:
            if family.startswith(prefix) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), quota)
    return best[1] if best else None
