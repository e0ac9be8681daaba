"""The AMI lookups an environment's pools make, and the CDK context keys that pin them (no CDK, no AWS).

Pools that neither pin an ``ami_id`` nor float with ``track: latest`` boot an image found by a CDK context
lookup (:class:`neuronkit.constructs.launch_template.AmiSpec`): DescribeImages by name (and description on
Neuron DLAMIs), owner ``amazon``, at the first synth with credentials, then pinned in ``cdk.context.json``.
This module says, from the file alone, which lookups each pool makes and under which key CDK stores them, so
that ``neuronkit validate`` can name the unpinned ones, ``neuronkit pin`` can fill them with read-only
credentials, and ``neuronkit rehearse`` can stand in for them offline.

The key is CDK's ``ContextProvider.getKey`` for the ``ami`` provider: ``ami:`` then every property flattened to
``path=value`` (lists indexed ``.0``), sorted and joined by ``:``, with ``$`` and ``:`` in values quoted as
``$$`` and ``$:`` (aws-cdk-lib ``core/lib/context-provider.ts``). ``tests/unit/test_lookups.py`` checks that these
keys equal the ones a synthesized app reports missing.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuronkit import catalog
from neuronkit.catalog import releases
from neuronkit.config.environment import Environment, pool_releases
from neuronkit.config.training import Ami, ami_family, gpu_ami_family

CONTEXT_FILE = "cdk.context.json"


@dataclass(frozen=True)
class ImageLookup:
    """One pool's AMI lookup: where it is in the file, what DescribeImages is asked, and its context key."""

    environment: str
    key_path: str  # the pool's AMI key in the file, e.g. training[1].gpu_pool.ami or inference[0].neuron_ami
    family: str
    account: str
    region: str
    name: str
    owner: str
    description: str | None
    root_device_name: str

    @property
    def filters(self) -> dict[str, list[str]]:
        """DescribeImages filters, as CDK's LookupMachineImage builds them."""
        out = {"name": [self.name], "state": ["available"], "image-type": ["machine"]}
        if self.description:
            out["description"] = [self.description]
        return out

    @property
    def context_key(self) -> str:
        props = {"account": self.account, "region": self.region, "owners": [self.owner], "filters": self.filters}
        return "ami:" + ":".join(sorted(_flatten(props)))

    @property
    def label(self) -> str:
        """The image asked for, short: its name pattern and, for a Neuron DLAMI, its release."""
        return self.name + (f" [{self.description.strip('*')}]" if self.description else "")


def _flatten(props: dict[str, Any], prefix: str = "") -> list[str]:
    out: list[str] = []
    for key, value in props.items():
        if value is None:
            continue
        if isinstance(value, dict):
            out += _flatten(value, f"{prefix}{key}.")
        elif isinstance(value, list):
            out += _flatten({str(i): v for i, v in enumerate(value)}, f"{prefix}{key}.")
        elif isinstance(value, str):
            out.append(f"{prefix}{key}=" + value.replace("$", "$$").replace(":", "$:"))
        else:
            out.append(f"{prefix}{key}={json.dumps(value)}")
    return out


def _lookup(env: Environment, key_path: str, family: str, version: str | None) -> ImageLookup | None:
    fam = catalog.ami_families().get(family)
    if fam is None:
        return None
    if fam.lookup_name is not None:
        name, owner, description = fam.lookup_name, fam.lookup_owner, None
    else:  # a Neuron DLAMI family: the image of the pool's release (the newest release when none is known)
        rel = releases.release(version) if version else releases.releases()[-1]
        found = rel.dlami_lookup(family) if rel is not None else None
        if found is None:
            return None
        name, owner, description = found.name, found.owner, found.description
    return ImageLookup(
        environment=env.name,
        key_path=key_path,
        family=family,
        account=env.account,
        region=env.region,
        name=name,
        owner=owner,
        description=description,
        root_device_name=fam.root_device_name,
    )


def _looked_up(ami: Ami) -> bool:
    return not ami.ami_id and ami.track != "latest"


def image_lookups(env: Environment) -> list[ImageLookup]:
    """Every AMI lookup of a valid environment, one per pool that makes one (pinned ``ami_id`` and floating
    ``track: latest`` pools make none), in file order. Pools asking for the same image share a context key.

    A ``platform: eks`` environment makes none: its node groups boot EKS's image by ``amiType`` and the catalog's
    ``releaseVersion`` (docs/eks.md), so there is nothing for cdk.context.json or ``neuronkit pin`` to hold."""
    if env.platform == "eks":
        return []
    out: list[ImageLookup | None] = []
    pools = pool_releases(env)

    def version(name: str) -> str | None:
        pool = pools.get(name)
        return pool.release.version if pool is not None and pool.release is not None else None

    for i, c in enumerate(env.training):
        family = ami_family(c)
        if family is not None and _looked_up(c.ami):
            # Batch hosts are ECS-optimized images (found by name alone); plain clusters boot their release's DLAMI.
            out.append(_lookup(env, f"training[{i}].ami", family, None if c.scheduler == "batch" else version(c.name)))
        gpu_family = gpu_ami_family(c)
        if c.gpu_pool is not None and gpu_family is not None and _looked_up(c.gpu_pool.ami):
            out.append(_lookup(env, f"training[{i}].gpu_pool.ami", gpu_family, None))
    for i, f in enumerate(env.inference):
        if _looked_up(f.neuron_ami):
            family = f.neuron_ami.family or catalog.default_ami_family("neuron")
            out.append(_lookup(env, f"inference[{i}].neuron_ami", family, version(f.name)))
        if f.fallback_types and _looked_up(f.gpu_ami):
            out.append(_lookup(env, f"inference[{i}].gpu_ami", f.gpu_ami.family or catalog.default_ami_family("gpu"), None))
    return [lookup for lookup in out if lookup is not None]


def find_project(start: str | Path = ".") -> Path | None:
    """The folder holding cdk.json (the app), searching upwards from ``start``; None outside a project."""
    here = Path(start).resolve()
    return next((folder for folder in (here, *here.parents) if (folder / "cdk.json").is_file()), None)


def write_context(project_dir: str | Path, values: dict[str, Any]) -> Path:
    """Add ``values`` to the project's cdk.context.json as the CDK CLI writes it (two-space JSON, keys kept in
    their order, new ones after them)."""
    path = Path(project_dir) / CONTEXT_FILE
    context = read_context(project_dir)
    context.update(values)
    path.write_text(json.dumps(context, indent=2) + "\n", encoding="utf-8")
    return path


def read_context(project_dir: str | Path) -> dict[str, Any]:
    """The project's ``cdk.context.json`` (empty when there is none)."""
    path = Path(project_dir) / CONTEXT_FILE
    if not path.is_file():
        return {}
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else {}


def pinned(value: Any) -> bool:
    """A context value that pins an image (not a lookup error CDK recorded)."""
    return isinstance(value, str) and value.startswith("ami-")


def unpinned_lookups(env: Environment, context: dict[str, Any]) -> list[ImageLookup]:
    """The environment's lookups that ``context`` (cdk.context.json) does not pin yet."""
    return [lookup for lookup in image_lookups(env) if not pinned(context.get(lookup.context_key))]


def unpinned_warnings(env: Environment, context: dict[str, Any], select: str) -> list[str]:
    """One line per pool whose image lookup is not pinned, naming its key and the two fixes.

    ``select`` is how commands name this environment (``--env NAME`` or ``--file PATH``)."""
    return [unpinned_line(lookup, select) for lookup in unpinned_lookups(env, context)]


def unpinned_line(lookup: ImageLookup, select: str, why: str = "is not pinned") -> str:
    """What to do about one pool's unpinned lookup: the two fixes, naming the pool's own keys."""
    return (
        f"{lookup.key_path}: image lookup '{lookup.label}' {why} in {CONTEXT_FILE} for "
        f"{lookup.account}/{lookup.region}; run `neuronkit pin {select}` with read-only credentials of that account "
        f"(then commit {CONTEXT_FILE}), or set {lookup.key_path}.ami_id and {lookup.key_path}.root_device_name"
    )
