"""neuron_sdk and workload: which Neuron release each pool runs, checked against the release matrix.

The file names a release at the top (``neuron_sdk``) and may override it per pool; each Neuron pool
names the workload it runs (``workload``: training clusters default to PyTorch training, inference
fleets to vLLM serving). A pool without a release gets the newest one that fully supports its workload
on its instance family (``neuronkit/catalog/neuron_releases.yaml``). An unsupported combination is
refused with the last release that runs it and the families the chosen release supports; a combination
in maintenance passes with a warning.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from neuronkit import catalog
from neuronkit.catalog import releases

Workload = Literal["pytorch-training", "pytorch-inference", "vllm-serving", "jax"]


def lnc_problem(instance_types: list[str], lnc: int | None) -> str | None:
    """The one LNC rule of training clusters and inference fleets: an ``lnc`` needs a Trn2/Trn3 type and one of its
    family's settings (catalog/trainium.yaml)."""
    if lnc is None:
        return None
    families = [t.split(".", 1)[0] for t in instance_types]
    capable = [f for f in families if catalog.lnc_allowed(f)]
    if not capable:
        return f"{', '.join(instance_types)} has no logical NeuronCore setting (Trn2 and Trn3 have); remove lnc"
    for family in capable:
        allowed = catalog.lnc_allowed(family)
        if lnc not in allowed:
            return f"{lnc} is not an LNC setting of {family}; use {' or '.join(map(str, allowed))}"
    return None


@dataclass(frozen=True)
class PoolRelease:
    """What one Neuron pool runs: where it is in the file, its families and workload, and the outcome."""

    key: str  # e.g. training[0]
    families: tuple[str, ...]
    workload: str
    release: releases.Release | None  # None when nothing the file says can work
    inherited: bool  # the release came from the top-level neuron_sdk (or the matrix default)


def _label(workload: str) -> str:
    return releases.workloads().get(workload, workload)


def _known(version: str) -> str | None:
    if version in releases.versions():
        return None
    return f"'{version}' is not a Neuron release the kit knows; use one of {', '.join(releases.versions())}"


def neuron_families(instance_types: list[str]) -> tuple[str, ...]:
    """The Neuron instance families among ``instance_types`` (unknown and GPU types are left out)."""
    types = catalog.instance_types()
    out: list[str] = []
    for t in instance_types:
        it = types.get(t)
        fam = releases.family_of(t)
        if it is not None and it.is_neuron and fam in releases.families() and fam not in out:
            out.append(fam)
    return tuple(out)


def resolve(
    key: str, top: str | None, own: str | None, families: tuple[str, ...], workload: str
) -> tuple[PoolRelease, list[tuple[str, str]], list[str]]:
    """The release a pool runs, the problems (key, message) and the warnings (one line each)."""
    problems: list[tuple[str, str]] = []
    warnings: list[str] = []
    chosen = own or top
    where = f"{key}.neuron_sdk"
    if chosen is None:
        # The newest release that fully supports the workload on every family of the pool.
        candidates = [r for r in releases.releases() if all(releases.support(r, f, workload) == "supported" for f in families)]
        if not candidates:
            problems.append((f"{key}.workload", _nowhere(families, workload)))
            return PoolRelease(key, families, workload, None, True), problems, warnings
        return PoolRelease(key, families, workload, candidates[-1], True), problems, warnings
    unknown = _known(chosen)
    if unknown:
        problems.append((where if own else "neuron_sdk", unknown))
        return PoolRelease(key, families, workload, None, own is None), problems, warnings
    rel = releases.release(chosen)
    for fam in families:
        status = releases.support(rel, fam, workload)
        if status == "unsupported":
            problems.append((where, _refusal(rel, fam, workload, inherited=own is None)))
        elif status == "maintenance":
            warnings.append(
                f"{where}: {_label(workload)} on {fam} is in maintenance in Neuron {rel.version} (critical fixes only: "
                f"{rel.source_of(workload)}); docs/neuron-releases.md"
            )
    return PoolRelease(key, families, workload, None if problems else rel, own is None), problems, warnings


def _pick(candidates: list[releases.Release], family: str, workload: str) -> releases.Release | None:
    """The newest fully supporting release among ``candidates``, else the newest in maintenance."""
    full = [r for r in candidates if releases.support(r, family, workload) == "supported"]
    best = full or candidates
    return best[-1] if best else None


def _refusal(rel: releases.Release, family: str, workload: str, *, inherited: bool) -> str:
    """One line: where the combination ends (or starts), the release to set, and the families that run it."""
    what = f"{_label(workload)} on {family}"
    others = releases.families_supporting(rel, workload)
    use = f" or use {', '.join(others)}" if others else ""
    origin = " (the top-level neuron_sdk)" if inherited else ""
    mine = releases.version_key(rel.version)
    running = [r for r in releases.releases() if releases.support(r, family, workload) != "unsupported"]
    older = _pick([r for r in running if releases.version_key(r.version) < mine], family, workload)
    newer = _pick([r for r in running if releases.version_key(r.version) > mine], family, workload)
    if older is None and newer is None:
        return f"{_nowhere((family,), workload)}{origin}"
    if newer is None:
        assert older is not None
        return f"{what} ends with Neuron {older.version}{origin}; set neuron_sdk: {older.version}{use}"
    if older is None:
        first = next(r for r in running if releases.version_key(r.version) > mine)
        return f"{what} starts with Neuron {first.version}{origin}; set neuron_sdk: {newer.version}{use}"
    return f"{what} is not supported by Neuron {rel.version}{origin}; set neuron_sdk: {newer.version} (or {older.version}){use}"


def _nowhere(families: tuple[str, ...], workload: str) -> str:
    where = " and ".join(families)
    somewhere = sorted({f for r in releases.releases() for f in releases.families_supporting(r, workload)})
    fix = f"use {', '.join(somewhere)}" if somewhere else "pick another workload"
    return f"no Neuron release the kit knows runs {_label(workload)} on {where}; {fix} (or another workload)"


def dlami_problems(key: str, ami_family: str | None, pool: PoolRelease) -> list[tuple[str, str]]:
    """A Neuron DLAMI family must have an image for the pool's release (PyTorch 2.9 DLAMIs end with 2.31,
    TorchNeuron ones start with 2.33); ``key`` is the file's key of the AMI (e.g. training[0].ami)."""
    rel = pool.release
    family = catalog.ami_families().get(ami_family or "")
    if rel is None or family is None or family.kind != "neuron" or rel.dlami_lookup(family.name) is not None:
        return []
    if not all(f in family.supports for f in pool.families):
        return []  # the family does not boot the pool's type at all: reported on its own line
    having = [r.version for r in releases.releases() if r.dlami_lookup(family.name) is not None]
    others = ", ".join(f for f in rel.dlami_families() if catalog.ami_families().get(f) is not None)
    span = f"its images carry Neuron {having[0]} to {having[-1]}" if having else "the release matrix has no image of it"
    return [
        (
            f"{key}.family",
            f"'{family.name}' has no image for Neuron {rel.version} ({span}); use {others or 'a pinned ami_id'}"
            f" or set neuron_sdk to a release it carries",
        )
    ]


def container_problems(key: str, image: str | None, pool: PoolRelease) -> list[tuple[str, str]]:
    """A pool's container must be built for its host's release (or an older one the driver still serves)."""
    rel = pool.release
    if rel is None:
        return []
    if image is None:
        if rel.container(pool.workload) is None:
            return [
                (
                    f"{key}.container_image",
                    f"the release matrix has no {_label(pool.workload)} container for Neuron {rel.version}; name one "
                    f"built for {rel.version} or older (public.ecr.aws/neuron/...-sdk{rel.version}-...)",
                )
            ]
        return []
    built = releases.container_release(image)
    if built is not None and releases.version_key(built) > releases.version_key(rel.version):
        ours = rel.container(pool.workload)
        fix = f"use {ours}" if ours else f"use an image built for Neuron {rel.version} or older"
        return [
            (
                f"{key}.container_image",
                f"built for Neuron {built}, newer than the pool's Neuron {rel.version} (driver {rel.driver}); {fix}"
                + (f", or set neuron_sdk: {built}" if built in releases.versions() else ""),
            )
        ]
    return []
