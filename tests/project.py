"""The project the environment-wide tests run on: every file under environments/ (the examples and any file a
user added) plus the user-like files of tests/fixtures/user_environments/, each pinned (every pool's ``ami_id``)
and as an unpinned variant (``NAME-lookup``: the same file with the catalog's AMI lookups instead of pins).

Expectations come from these files, never from a count or a list of names: a valid file a user adds under
environments/ joins the project and the suite holds for it too. Tests about one example name it (``dev``,
``prod``). ``tests/conftest.py``'s session fixture ``project`` writes the folder; the names are known at
collection time (``environments()``) so that tests can be parametrized over them.
"""

from __future__ import annotations

import copy
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from neuronkit.config import Environment, parse_environment

ROOT = Path(__file__).resolve().parent.parent
USER_FIXTURES = ROOT / "tests" / "fixtures" / "user_environments"
LOOKUP_SUFFIX = "-lookup"
EXAMPLES = ("dev", "prod")


def unpinned(data: dict[str, Any]) -> dict[str, Any]:
    """The same environment with every pinned ``ami_id`` (and its root device) removed: its pools look up the
    catalog's images, as a file written before anyone pinned them would."""
    out = copy.deepcopy(data)
    out["name"] = f"{data['name']}{LOOKUP_SUFFIX}"
    amis = []
    for cluster in out.get("training") or []:
        amis.append(cluster.get("ami"))
        amis.append((cluster.get("gpu_pool") or {}).get("ami"))
    for fleet in out.get("inference") or []:
        amis += [fleet.get("neuron_ami"), fleet.get("gpu_ami")]
    for ami in amis:
        if isinstance(ami, dict) and ami.pop("ami_id", None):
            ami.pop("root_device_name", None)
    return out


@cache
def sources() -> dict[str, str]:
    """File name -> YAML text of every environment of the project (a user's own file of the same name wins)."""
    out = {p.name: p.read_text(encoding="utf-8") for p in sorted((ROOT / "environments").glob("*.yaml"))}
    for path in sorted(USER_FIXTURES.glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        out.setdefault(path.name, text)
        if yaml.safe_load(text).get("platform") == "eks":
            continue  # EKS node groups make no image lookups: an unpinned variant would be the same file
        variant = unpinned(yaml.safe_load(text))
        out.setdefault(f"{variant['name']}.yaml", yaml.safe_dump(variant, sort_keys=False))
    return dict(sorted(out.items()))


@cache
def environments() -> dict[str, Environment]:
    """Every environment of the project by name, validated as `neuronkit validate` would."""
    envs = (parse_environment(yaml.safe_load(text), f"environments/{name}") for name, text in sources().items())
    return {e.name: e for e in envs}


def on_platform(platform: str) -> dict[str, Environment]:
    """The project's environments on ``platform`` (``asg``, the default, or ``eks``) by name: tests of the Auto
    Scaling stacks (ENV-training, ENV-inference, ENV-monitoring) run over ``asg``, those of ENV-eks over ``eks``."""
    return {name: e for name, e in environments().items() if e.platform == platform}


def monitoring_stack(env: Environment) -> str:
    """The stack holding an environment's alarm topic, alarms, dashboard and budget."""
    return f"{env.name}-eks" if env.platform == "eks" else f"{env.name}-monitoring"


def write(root: Path) -> Path:
    """Write the project (environments/, cdk.json, cdk.context.json) under ``root``."""
    (root / "environments").mkdir(parents=True, exist_ok=True)
    for name, text in sources().items():
        (root / "environments" / name).write_text(text, encoding="utf-8")
    for name in ("cdk.json", "cdk.context.json"):
        (root / name).write_bytes((ROOT / name).read_bytes())
    return root


def environment_of(stack: str, *, strict: bool = True) -> str:
    """The environment a stack name belongs to (stack names are ENV-PART; environment names may hold dashes)."""
    env, _, _ = stack.rpartition("-")
    assert env in environments() or not strict, stack
    return env
