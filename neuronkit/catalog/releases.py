"""The Neuron SDK release matrix (``neuron_releases.yaml``): what runs where, with which software.

API (stable; config, constructs, stacks, summary, cost and assess use it):

- :func:`releases` -> every :class:`Release`, oldest first; :func:`release` (``"2.28.1"``) -> one (KeyError
  when the matrix does not hold it); :func:`versions` -> their version strings.
- :func:`support` (release, family, workload) -> ``"supported" | "maintenance" | "unsupported"``.
- :func:`default_release` (family, workload) -> the newest release that fully supports it, or None.
- :func:`last_supporting` (family, workload) -> the newest release where it is supported or in
  maintenance, or None.
- :func:`families_supporting` (release, workload) -> the families a release fully supports it on.
- :func:`driver_version` (version) -> the Neuron driver a release shipped (``driver_shipped``).
- ``Release.driver_min``: the oldest driver the release's runtime works with (a node below it fails its boot check;
  ``driver_min_source`` says where it comes from, or that no source states one and it is the shipped driver);
  ``Release.driver`` (aliases ``driver_shipped``, ``driver_version``): the driver the release shipped (a node between
  the two joins with a warning and a metric); ``.runtime``, ``.compiler``, ``.date``;
  ``.container(kind)`` -> the pinned Deep Learning Container of a workload (``"pytorch-training"``, also
  ``"training"``; ``"vllm-serving"``, ``"pytorch-inference"``, ``"jax"``) or None;
  ``.dlami(kind, os)`` (``"multi-framework"``, ``"ubuntu-24.04"``) and ``.dlami_lookup(ami_family)`` ->
  the DescribeImages filters of the release's DLAMI (:class:`DlamiLookup`), or None when that DLAMI does
  not exist for the release; ``.unverified`` -> facts of the row no source confirmed (fact -> finding).
- :func:`container_release` (image) -> the SDK release a Neuron DLC tag was built for (``sdk2.28.0``).
- :func:`driver_fit` (driver, version) -> :class:`DriverFit`: THE decision whether a Neuron driver suits a release
  (its window: ``driver_min``, the ``driver_rules`` Neuron states in either direction, the ``driver_read`` mark), with
  the reason naming driver, release and rule. Validate, review, the EKS image choice, the job renderer and the node
  checks (through :func:`driver_window`, the same window rendered for node-lib.sh and prejob.py) all use it.
- :func:`driver_window` (version) -> :class:`DriverWindow`: the window as bounds (low inclusive, high exclusive, read
  inclusive) with the rule behind each; :func:`driver_rules` -> every :class:`DriverRule`; :func:`driver_read` -> the
  newest driver the catalog has read (:class:`DriverRead`).
- :func:`source_url` (id) and :func:`citations` (text) -> the documents a row or cell cites.

Families are instance-type prefixes (``trn1``, ``trn1n``, ``inf2``, ``trn2``, ``trn2u``, ``trn3``);
:func:`family_of` turns an instance type into one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Literal

import yaml

Status = Literal["supported", "maintenance", "unsupported"]
_HERE = Path(__file__).parent
_SDK_TAG = re.compile(r"-sdk(\d+\.\d+\.\d+)")
_CITATION = re.compile(r"\[([a-z0-9][a-z0-9.-]*)\]")
_CONTAINER_KINDS = {"training": "pytorch-training", "inference": "pytorch-inference", "serving": "vllm-serving"}
_OS_SUFFIX = {"amazon-linux-2023": "al2023"}


def version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


@dataclass(frozen=True)
class DlamiLookup:
    """What to ask DescribeImages for: the newest image of ``owner`` matching both patterns."""

    name: str
    description: str
    owner: str
    ami_family: str = ""  # the catalog family (amis.yaml) whose image this is
    release: str = ""
    os: str = ""  # from amis.yaml, e.g. ubuntu-24.04
    root_device_name: str = ""  # from amis.yaml, e.g. /dev/sda1


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
    unverified: dict[str, str] = field(default_factory=dict)  # "fact" or "workload.fact" -> what we found
    driver_min: str = ""  # the oldest driver the runtime works with (defaults to the shipped driver)
    driver_min_source: str = ""

    def __post_init__(self) -> None:
        if not self.driver_min:
            object.__setattr__(self, "driver_min", self.driver)

    @property
    def driver_version(self) -> str:
        return self.driver

    @property
    def driver_shipped(self) -> str:
        return self.driver

    def container(self, kind: str) -> str | None:
        """The release's pinned Deep Learning Container for a workload (``"training"`` means PyTorch training)."""
        return self.containers.get(_CONTAINER_KINDS.get(kind, kind))

    def dlami_lookup(self, ami_family: str) -> DlamiLookup | None:
        """How to find this release's image of a catalog Neuron AMI family; None when the family has no image
        for this release (e.g. PyTorch 2.9 DLAMIs after 2.31) or is not a Neuron DLAMI family."""
        spec = _data()["dlami_lookup"]
        entry = spec["names"].get(ami_family)
        if entry is None:
            return None
        entry = {"name": entry} if isinstance(entry, str) else entry
        mine = version_key(self.version)
        if "from" in entry and mine < version_key(str(entry["from"])):
            return None
        if "until" in entry and mine > version_key(str(entry["until"])):
            return None
        from neuronkit import catalog  # the package imports nothing of this module; a late import keeps it so

        fam = catalog.ami_families().get(ami_family)
        return DlamiLookup(
            name=entry["name"],
            description=spec["description"].format(release=self.version),
            owner=spec["owner"],
            ami_family=ami_family,
            release=self.version,
            os=fam.os if fam else "",
            root_device_name=fam.root_device_name if fam else "",
        )

    def dlami(self, kind: str = "multi-framework", os: str = "ubuntu-24.04") -> DlamiLookup | None:
        """The release's DLAMI of a kind (``multi-framework``, ``base``, ``pytorch-2.9`` ...) and OS
        (``ubuntu-24.04``, ``amazon-linux-2023``); see :meth:`dlami_lookup`."""
        return self.dlami_lookup(f"neuron-{kind}-{_OS_SUFFIX.get(os, os)}")

    def source_of(self, workload: str) -> str:
        """The document behind a workload's cell: the URL of its first citation (the row's source otherwise)."""
        cited = citations(self.sources.get(workload, ""))
        return source_url(cited[0] if cited else self.source)

    def dlami_families(self) -> list[str]:
        """The catalog Neuron AMI families that have an image for this release."""
        return [f for f in _data()["dlami_lookup"]["names"] if self.dlami_lookup(f) is not None]


@dataclass(frozen=True)
class DriverRule:
    """A compatibility rule Neuron states between its driver and its runtime (``neuron_releases.yaml`` driver_rules).

    ``driver_needs_runtime``: drivers of line ``driver`` and newer need a runtime of line ``runtime`` or newer.
    ``runtime_refuses_driver``: runtimes of line ``runtime`` and newer refuse drivers of line ``driver`` and older."""

    id: str
    kind: Literal["driver_needs_runtime", "runtime_refuses_driver"]
    driver: str  # a major.minor line, e.g. "2.29"
    runtime: str  # a major.minor line, e.g. "2.33"
    quote: str
    source: str  # a source id of the matrix

    def text(self) -> str:
        """The rule as a reason says it: the quoted sentence and where it is written."""
        return f'"{self.quote}" ({self.id}, {self.source})'

    def binds(self, rel: Release) -> bool:
        """The rule narrows this release's window (its runtime is on the rule's side)."""
        line = _line(rel.runtime)
        if self.kind == "driver_needs_runtime":
            return line < _line(self.runtime)
        return line >= _line(self.runtime)

    def refuses(self, driver: str, rel: Release) -> bool:
        if not self.binds(rel):
            return False
        if self.kind == "driver_needs_runtime":
            return _line(driver) >= _line(self.driver)
        return _line(driver) <= _line(self.driver)


@dataclass(frozen=True)
class DriverRead:
    """The newest Neuron driver whose release notes the catalog has read; newer drivers are outside every window."""

    driver: str
    release: str
    source: str

    def text(self) -> str:
        return (
            f"it is newer than {self.driver} (Neuron {self.release}, {self.source}), the newest driver whose release "
            "notes the catalog has read (driver_read: fail closed)"
        )


@dataclass(frozen=True)
class DriverWindow:
    """The drivers that suit a release: ``low`` <= driver (< ``high`` when set) <= ``read``, each bound with its rule."""

    release: str
    runtime: str
    low: str
    low_rule: str
    high: str | None
    high_rule: str
    read: str
    read_rule: str
    rules: tuple[DriverRule, ...]  # the stated rules that bind this release (none: no source states one)
    high_short: str = ""  # the high bound's rule, its first quoted sentence (what a boot script has room for)

    def describe(self) -> str:
        top = f"below {self.high}" if self.high else f"up to {self.read}"
        return f"Neuron {self.release} (runtime {self.runtime}): driver {self.low} or newer, {top}"


@dataclass(frozen=True)
class DriverFit:
    """Whether a Neuron driver suits a release, and why not: the rule that refuses it (quoted, with its source)."""

    ok: bool
    driver: str
    release: str
    rule: str  # the rule's id, "driver_min" or "driver_read"; "" when the driver suits the release
    reason: str  # one line naming driver, release and rule ("" when ok)

    def __bool__(self) -> bool:
        return self.ok


def _line(version: str) -> tuple[int, int]:
    parts = version_key(version)
    return parts[0], parts[1] if len(parts) > 1 else 0


def _full(version: str) -> tuple[int, ...]:
    parts = version_key(version)
    return parts + (0,) * (4 - len(parts))


@cache
def driver_rules() -> tuple[DriverRule, ...]:
    out = []
    for rule_id, row in (_data().get("driver_rules") or {}).items():
        out.append(
            DriverRule(
                id=str(rule_id),
                kind=row["kind"],
                driver=str(row["driver"]),
                runtime=str(row["runtime"]),
                quote=" ".join(str(row["quote"]).split()),
                source=str(row["source"]),
            )
        )
    return tuple(out)


def driver_read() -> DriverRead:
    row = _data()["driver_read"]
    return DriverRead(driver=str(row["driver"]), release=str(row["release"]), source=str(row["source"]))


def driver_window(version: str) -> DriverWindow:
    """The window of drivers that suit a release (KeyError for a release the matrix does not hold)."""
    rel = release(version)
    rules = tuple(r for r in driver_rules() if r.binds(rel))
    low, low_rule = rel.driver_min, f"{rel.driver_min} is the release's driver_min: {rel.driver_min_source}"
    high: str | None = None
    high_rule = high_short = ""
    for r in rules:
        if r.kind == "runtime_refuses_driver":
            major, minor = _line(r.driver)
            bound = f"{major}.{minor + 1}.0.0"
            if _full(bound) > _full(low):
                low, low_rule = bound, r.text()
        else:
            bound = f"{r.driver}.0.0"
            if high is None or _full(bound) < _full(high):
                high, high_rule = bound, r.text()
                high_short = r.quote.split(". ", 1)[0].rstrip(".")
    read = driver_read()
    return DriverWindow(
        release=rel.version,
        runtime=rel.runtime,
        low=low,
        low_rule=low_rule,
        high=high,
        high_rule=high_rule,
        read=read.driver,
        read_rule=read.text(),
        rules=rules,
        high_short=high_short,
    )


def driver_fit(driver: str, version: str) -> DriverFit:
    """Whether Neuron driver ``driver`` suits release ``version``: the one decision every check uses (validate, review,
    the EKS image choice, job render; the node checks apply :func:`driver_window`, its rendering). Refused: a driver
    newer than ``driver_read`` (fail closed), one a stated rule refuses (either direction), one below ``driver_min``."""
    rel = release(version)
    head = f"Neuron driver {driver} does not suit Neuron {rel.version} (runtime {rel.runtime})"
    read = driver_read()
    if _full(driver) > _full(read.driver):
        return DriverFit(False, driver, rel.version, "driver_read", f"{head}: {read.text()}")
    for r in driver_rules():
        if r.refuses(driver, rel):
            return DriverFit(False, driver, rel.version, r.id, f"{head}: {r.text()}")
    if _full(driver) < _full(rel.driver_min):
        why = f"it is older than {rel.driver_min}, the release's driver_min ({rel.driver_min_source})"
        return DriverFit(False, driver, rel.version, "driver_min", f"{head}: {why}")
    return DriverFit(True, driver, rel.version, "", "")


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
        unverified = {str(k): " ".join(str(v).split()) for k, v in (row.get("unverified") or {}).items()}
        if row.get("containers_unverified"):
            unverified["containers"] = " ".join(str(row["containers_unverified"]).split())
        for workload, entry in row["workloads"].items():
            for fact, found in (entry.get("unverified") or {}).items():
                unverified[f"{workload}.{fact}"] = " ".join(str(found).split())
            per: dict[str, Status] = {}
            for fam in entry.get("maintenance", []):
                per[fam] = "maintenance"
            for fam in entry.get("supported", []):
                per[fam] = "supported"
            status[workload] = per
            sources[workload] = " ".join(str(entry["source"]).split())
        out.append(
            Release(
                version=str(version),
                date=str(row["date"]),
                source=row["source"],
                driver=str(row["driver_shipped"]),
                driver_min=str(row["driver_min"]),
                driver_min_source=" ".join(str(row["driver_min_source"]).split()),
                runtime=str(row["runtime"]),
                compiler=str(row["compiler"]),
                status=status,
                sources=sources,
                containers=dict(row.get("containers") or {}),
                unverified=unverified,
            )
        )
    return tuple(sorted(out, key=lambda r: version_key(r.version)))


def sources() -> dict[str, str]:
    """Source id -> the document (URL) it names."""
    return dict(_data()["sources"])


def source_url(source_id: str) -> str:
    """The document a source id names; KeyError when the matrix does not define it."""
    return sources()[source_id]


def citations(text: str) -> list[str]:
    """The source ids a matrix cell cites (``[components-2.28.1]``), in order."""
    return _CITATION.findall(text)


def driver_version(version: str) -> str:
    """The Neuron driver (aws-neuronx-dkms) a release shipped (``driver_shipped``); its minimum is ``driver_min``."""
    return release(version).driver


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
