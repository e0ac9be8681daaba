"""docs/environment-file.md from the JSON Schema: one section per key, its type, rules, default and an example.

``entries(schema)`` walks the schema (``$ref``, ``anyOf`` with null, discriminated ``oneOf`` variants) into one
:class:`Entry` per key path (``network.az_ids``, ``training[].capacity.reservation_id``). ``render`` writes the
Markdown; each example is the value the kit's own example files set for that key (the first file that sets
it), else the default. ``neuronkit schema --format markdown`` prints it and ``make docs`` writes it.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

_MISSING = object()


@dataclass(frozen=True)
class Entry:
    path: str  # dotted; list items as []
    type: str
    description: str
    required: bool
    default: Any = _MISSING
    rules: tuple[str, ...] = ()
    variant: str | None = None  # for keys of one variant of a discriminated union, e.g. "type: odcr"

    @property
    def depth(self) -> int:
        return self.path.count(".")


def _deref(schema: Mapping[str, Any], node: Mapping[str, Any]) -> Mapping[str, Any]:
    while "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        merged = {**schema["$defs"][name], **{k: v for k, v in node.items() if k != "$ref"}}
        node = merged
    return node


def _nullable(node: Mapping[str, Any]) -> tuple[Mapping[str, Any], bool]:
    options = node.get("anyOf")
    if options and any(o.get("type") == "null" for o in options):
        rest = [o for o in options if o.get("type") != "null"]
        if len(rest) == 1:
            merged = {**rest[0], **{k: v for k, v in node.items() if k != "anyOf"}}
            return merged, True
    return node, False


def _type(schema: Mapping[str, Any], node: Mapping[str, Any]) -> str:
    node = _deref(schema, node)
    if "const" in node:
        return f"`{node['const']}`"
    if "enum" in node:
        return "one of " + ", ".join(f"`{v}`" for v in node["enum"])
    if "oneOf" in node:
        key = node.get("discriminator", {}).get("propertyName", "type")
        return f"object, by `{key}`"
    if "anyOf" in node:
        return " or ".join(_type(schema, o) for o in node["anyOf"])
    t = node.get("type", "any")
    if t == "array":
        return f"list of {_type(schema, node.get('items', {}))}"
    if t == "object" and "properties" not in node and isinstance(node.get("additionalProperties"), dict):
        return f"map of {_type(schema, node['additionalProperties'])}"
    return {"integer": "whole number", "number": "number", "string": "text", "boolean": "true/false"}.get(t, t)


def _rules(node: Mapping[str, Any]) -> tuple[str, ...]:
    out = []
    for key, say in (
        ("minimum", "at least {}"),
        ("exclusiveMinimum", "more than {}"),
        ("maximum", "at most {}"),
        ("exclusiveMaximum", "less than {}"),
        ("minItems", "at least {} item(s)"),
        ("maxItems", "at most {} item(s)"),
        ("minLength", "at least {} character(s)"),
        ("maxLength", "at most {} character(s)"),
        ("pattern", "matches `{}`"),
        ("format", "format {}"),
    ):
        if key in node:
            out.append(say.format(node[key]))
    items = node.get("items")
    if isinstance(items, dict) and "pattern" in items:
        out.append(f"each matches `{items['pattern']}`")
    return tuple(out)


def entries(schema: Mapping[str, Any]) -> list[Entry]:
    """Every key of an environment file, parents before children, in the schema's order."""
    out: list[Entry] = []

    def visit(node: Mapping[str, Any], prefix: str, variant: str | None) -> list[str]:
        node = _deref(schema, node)
        names = []
        required = set(node.get("required", ()))
        for key, raw in (node.get("properties") or {}).items():
            if key == "$schema":
                continue
            path = f"{prefix}{key}"
            prop, optional_null = _nullable(_deref(schema, raw))
            prop = _deref(schema, prop)
            entry = Entry(
                path=path,
                type=_type(schema, prop) + (" or null" if optional_null else ""),
                description=str(raw.get("description") or prop.get("description") or ""),
                required=key in required,
                default=raw.get("default", prop.get("default", _MISSING)),
                rules=_rules(prop),
                variant=variant,
            )
            out.append(entry)
            names.append(path)
            _inner(prop, path)
        return names

    def _inner(prop: Mapping[str, Any], path: str) -> list[str]:
        if prop.get("type") == "array" and isinstance(prop.get("items"), dict):
            item = _deref(schema, prop["items"])
            if "properties" in item or "oneOf" in item:
                return _inner(item, f"{path}[]")
            return []
        if "oneOf" in prop:
            key = prop.get("discriminator", {}).get("propertyName", "type")
            names = []
            for option in prop["oneOf"]:
                sub = _deref(schema, option)
                tag = (sub.get("properties", {}).get(key) or {}).get("const")
                names += visit(sub, f"{path}.", f"{key}: {tag}" if tag is not None else None)
            return names
        if "properties" in prop:
            return visit(prop, f"{path}.", None)
        return []

    visit(schema, "", None)
    # One entry per path: the variants of a union share keys (type, reservation_id); keep the first, note the rest.
    seen: dict[str, Entry] = {}
    for e in out:
        if e.path in seen:
            first = seen[e.path]
            if e.variant and first.variant and e.variant not in first.variant:
                merged = {**first.__dict__, "variant": f"{first.variant}, {e.variant}"}
                if first.type.startswith(("`", "one of `")) and e.type.startswith("`") and e.type not in first.type:
                    consts = first.type.removeprefix("one of ")
                    merged["type"] = f"one of {consts}, {e.type}"
                seen[e.path] = Entry(**merged)
            continue
        seen[e.path] = e
    return list(seen.values())


def _lookup(data: Any, parts: Sequence[str]) -> Any:
    if not parts:
        return data
    head, rest = parts[0], parts[1:]
    many = head.endswith("[]")
    key = head.removesuffix("[]")
    if not isinstance(data, dict) or key not in data:
        return _MISSING
    value = data[key]
    if many:
        for item in value if isinstance(value, list) else []:
            found = _lookup(item, rest)
            if found is not _MISSING:
                return found
        return _MISSING
    return _lookup(value, rest)


def example_values(files: Iterable[Path], paths: Iterable[str]) -> dict[str, tuple[Any, str]]:
    """For each path, the value the first file sets and that file's name."""
    docs = []
    for f in files:
        try:
            docs.append((f, yaml.safe_load(f.read_text())))
        except (OSError, yaml.YAMLError):
            continue
    out: dict[str, tuple[Any, str]] = {}
    for path in paths:
        for f, data in docs:
            value = _lookup(data, path.split("."))
            if value is not _MISSING:
                out[path] = (value, f.as_posix())
                break
    return out


def _snippet(path: str, value: Any) -> str:
    key = path.rsplit(".", 1)[-1].removesuffix("[]")
    text = yaml.safe_dump({key: value}, sort_keys=False, default_flow_style=False, width=100).rstrip()
    lines = text.splitlines()
    return "\n".join(lines[:20] + (["# ..."] if len(lines) > 20 else []))


def render(schema: Mapping[str, Any], example_files: Sequence[Path], root: Path | None = None) -> str:
    items = entries(schema)
    examples = example_values(example_files, [e.path for e in items])
    names = ", ".join(f"`{(f.relative_to(root) if root else f).as_posix()}`" for f in example_files)
    lines = [
        "# The environment file, key by key",
        "",
        "<!-- Generated by `neuronkit schema --format markdown` (make docs) from schema/environment.schema.json; do not edit. -->",
        "",
        "An environment file (`environments/NAME.yaml`) describes one environment. Unknown keys are errors.",
        "Each section below is one key: its type, whether it is required, its rules and default, and an",
        f"example, taken from the kit's example files ({names}) or, where none sets the key, its default.",
        "`neuronkit validate` checks a file against these rules and against those that span keys (a type",
        "offered in an AZ ID, a Neuron release that supports the workload, a model that fits a type), which",
        "docs/neuron-releases.md, docs/serving.md and docs/capacity-blocks.md explain.",
        "",
    ]
    for e in items:
        level = "#" * min(2 + e.depth, 6)
        lines += [f"{level} `{e.path}`", ""]
        if e.description:
            lines += [e.description, ""]
        facts = [f"type: {e.type}", "required" if e.required else "optional"]
        if e.variant:
            facts.append(f"with {e.variant}")
        if e.default is not _MISSING:
            facts.append(f"default: `{json.dumps(e.default)}`")
        facts += list(e.rules)
        lines += ["- " + "; ".join(facts), ""]
        found = examples.get(e.path)
        if found is not None:
            value, source = found
            src = Path(source)
            shown = src.relative_to(root).as_posix() if root and src.is_absolute() and src.is_relative_to(root) else source
            lines += [f"Example (from `{shown}`):", "", "```yaml", _snippet(e.path, value), "```", ""]
        elif e.default is not _MISSING and e.default is not None:
            lines += ["Example (the default):", "", "```yaml", _snippet(e.path, e.default), "```", ""]
    return "\n".join(lines).rstrip() + "\n"


def example_files(root: Path) -> list[Path]:
    """The kit's example environment files, when present: dev, prod, then examples/environments/."""
    named = [root / "environments" / "dev.yaml", root / "environments" / "prod.yaml"]
    return [f for f in named if f.is_file()] + sorted((root / "examples" / "environments").glob("*.yaml"))
