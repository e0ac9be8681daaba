"""Reading environment files: YAML with duplicate keys refused, validation, all problems at once."""

from __future__ import annotations

import re
import typing
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from neuronkit.config import cluster_pins
from neuronkit.config.base import NAME_RE, ConfigError
from neuronkit.config.environment import Environment, _cross_problems_of_parts
from neuronkit.config.errors import _format


def parse_environment(data: Any, path: str, context: dict[str, Any] | None = None) -> Environment:
    """Validate already-parsed YAML data; raises ConfigError with one line per problem (all of them).

    ``eks.existing`` attributes the file leaves out come from their pin in ``context`` (default: the project's
    cdk.context.json; :mod:`neuronkit.config.cluster_pins`); one line when neither has them."""
    if not isinstance(data, dict):
        raise ConfigError([f"{path}: the file must hold a mapping of keys (name, account, region, ...)"])
    data, unpinned = cluster_pins.complete(data, path, context)
    if unpinned:
        raise ConfigError(unpinned)
    stem = Path(path).stem
    data = dict(data)
    data.setdefault("name", stem)
    problems: list[str] = []
    name = data["name"]
    if isinstance(name, str) and re.match(NAME_RE, name) and name != stem:
        problems.append(f"{path}: name: '{name}' differs from the file name '{stem}'; rename the file or the key")
    try:
        env = Environment.model_validate(data)
    except ValidationError as err:
        problems.extend(_format(path, err))
        if not any(e["loc"] == () for e in err.errors()):  # the cross checks did not run: run them per section
            problems.extend(f"{path}: {key}: {msg}" for key, msg in _cross_problems_of_parts(data))
        raise ConfigError(problems) from None
    if problems:
        raise ConfigError(problems)
    return env


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that rejects a key given twice in one mapping (PyYAML silently keeps the last one)."""


def _construct_mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        if key_node.tag == "tag:yaml.org,2002:merge":
            continue  # `<<: *anchor` merges are allowed and may be overridden
        key = loader.construct_object(key_node)  # type: ignore[no-untyped-call]
        if not isinstance(key, typing.Hashable):
            continue  # construct_mapping reports unhashable keys itself
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None,
                None,
                f"key '{key}' is given twice in one mapping (first at line {seen[key] + 1}); keep one",
                key_node.start_mark,
            )
        seen[key] = key_node.start_mark.line
    return loader.construct_mapping(node)


_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def load_environment(path: str | Path) -> Environment:
    """Read and validate one environment file."""
    data, shown = read_data(path)
    return parse_environment(data, shown)


def read_data(path: str | Path) -> tuple[Any, str]:
    """One environment file's parsed YAML (duplicate keys refused) and the path as problem lines show it."""
    p = Path(path)
    shown = _display(p)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError([f"{shown}: cannot read the file ({err.strerror})"]) from None
    except UnicodeDecodeError as err:
        raise ConfigError(
            [f"{shown}: not UTF-8 text (byte 0x{err.object[err.start]:02x} at offset {err.start}); save the file as UTF-8"]
        ) from None
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        problem = str(getattr(err, "problem", None) or err)
        if not isinstance(err, yaml.constructor.ConstructorError):  # a syntax error, not a duplicate key
            problem += "; check the indentation and quoting on that line and the one before"
        raise ConfigError([f"{shown}: not valid YAML{where}: {problem}"]) from None
    return data, shown


def _display(p: Path) -> str:
    try:
        return str(p.resolve().relative_to(Path.cwd()))
    except ValueError:
        return str(p)


def environment_files(directory: str | Path = "environments") -> list[Path]:
    return sorted(Path(directory).glob("*.yaml"))


def load_all(directory: str | Path = "environments", only: str | None = None) -> list[Environment]:
    """Load every environment (or the one named ``only``); collects problems across files."""
    files = environment_files(directory)
    if only is not None:
        files = [f for f in files if f.stem == only]
        if not files:
            known = ", ".join(f.stem for f in environment_files(directory)) or "none"
            raise ConfigError([f"{directory}/{only}.yaml: no such environment; known environments: {known}"])
    envs, problems = [], []
    for f in files:
        try:
            envs.append(load_environment(f))
        except ConfigError as err:
            problems.extend(err.problems)
    if problems:
        raise ConfigError(problems)
    return envs
