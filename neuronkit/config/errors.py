"""Turning pydantic's validation errors into one line per problem: file, key path and fix."""

from __future__ import annotations

import difflib
import re
import typing
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from neuronkit.config.base import _MultiProblem
from neuronkit.config.environment import Environment
from neuronkit.config.training import _CAPACITY_TAGS


def _loc(parts: tuple[int | str, ...]) -> str:
    out = ""
    for i, p in enumerate(parts):
        if isinstance(p, int):
            out += f"[{p}]"
        elif p in _CAPACITY_TAGS and i and parts[i - 1] == "capacity":
            continue  # discriminated unions add the tag as a path element; it is not a key of the file
        else:
            out += ("." if out else "") + p
    return out


def _model_at(parts: tuple[int | str, ...]) -> type[BaseModel] | None:
    """The model class whose keys live at ``parts`` (a pydantic error location), or None."""
    model: type[BaseModel] | None = Environment
    for i, p in enumerate(parts):
        if isinstance(p, int) or model is None:
            continue
        if p in _CAPACITY_TAGS and i and parts[i - 1] == "capacity":
            model = _CAPACITY_TAGS[p]
            continue
        field = model.model_fields.get(p) or next((f for f in model.model_fields.values() if f.alias == p), None)
        model = _model_in(field.annotation) if field is not None else None
    return model


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _field_at(parts: tuple[int | str, ...]) -> FieldInfo | None:
    model = _model_at(parts[:-1])
    return model.model_fields.get(str(parts[-1])) if model is not None and parts else None


def _format(path: str, err: ValidationError) -> list[str]:
    lines: list[str] = []
    # Required keys missing per mapping: an unknown key next to one is most likely its misspelling.
    missing: dict[tuple[int | str, ...], list[str]] = {}
    for e in err.errors():
        if e["type"] == "missing":
            missing.setdefault(tuple(e["loc"])[:-1], []).append(str(e["loc"][-1]))
    for e in err.errors():
        parts = tuple(e["loc"])
        loc = _loc(parts)
        ctx = e.get("ctx") or {}
        value = e.get("input")
        shown = repr(value) if isinstance(value, str | int | float | bool) or value is None else None
        kind = e["type"]
        if kind == "value_error" and isinstance(ctx.get("error"), _MultiProblem):
            for key, msg in ctx["error"].problems:
                lines.append(f"{path}: {'.'.join(x for x in (loc, key) if x)}: {msg}")
        elif kind == "extra_forbidden":
            lines.append(f"{path}: {loc}: {_unknown_key(parts, missing.get(parts[:-1], []))}")
        elif kind == "missing":
            field = _field_at(parts)
            desc = (field.description or "").rstrip(".") if field is not None else ""
            if desc[:2].istitle():  # "Most nodes ..." reads "add it (most nodes ...)"; "VPC ..." stays
                desc = desc[0].lower() + desc[1:]
            what = f" ({desc})" if desc else ""
            lines.append(f"{path}: {loc}: required key is missing; add it{what}")
        elif kind == "string_pattern_mismatch":
            lines.append(f"{path}: {loc}: {shown} is malformed; {_pattern_hint(loc)}")
        elif kind == "string_type" and isinstance(value, int | float):
            lines.append(f"{path}: {loc}: {value} is a number, not text; put it in quotes: '{value}'")
        elif kind == "scalar_as_text":
            lines.append(f"{path}: {loc}: {shown} is text; write {ctx.get('what')} without quotes")
        elif kind in ("int_parsing", "int_type", "int_from_float", "float_parsing", "float_type"):
            whole = "a whole number" if kind.startswith("int") else "a number"
            lines.append(f"{path}: {loc}: {shown if shown is not None else 'this'} is not {whole}; write e.g. 4")
        elif kind in ("bool_parsing", "bool_type"):
            lines.append(f"{path}: {loc}: {shown if shown is not None else 'this'} is not true or false; write true or false")
        elif kind in ("greater_than_equal", "greater_than", "less_than_equal", "less_than"):
            bound = next(iter(ctx.values()), None)
            words = {"greater_than_equal": f"at least {bound}", "greater_than": f"more than {bound}",
                     "less_than_equal": f"at most {bound}", "less_than": f"less than {bound}"}[kind]  # fmt: skip
            lines.append(f"{path}: {loc}: {shown} is out of range; use {words}")
        elif kind in ("dict_type", "list_type", "model_type", "model_attributes_type"):
            want = {"dict_type": "a mapping (key: value lines)", "list_type": "a list ([a, b] or - lines)"}.get(kind, "a mapping")
            lines.append(f"{path}: {loc}: expected {want}, got {type(value).__name__} {shown or ''}".rstrip())
        elif kind == "union_tag_invalid":
            lines.append(f"{path}: {loc}: type {ctx.get('tag')!r} is not allowed; use one of {ctx.get('expected_tags')}")
        elif kind == "union_tag_not_found":
            lines.append(f"{path}: {loc}: add a type key: one of {', '.join(map(repr, _CAPACITY_TAGS))}")
        elif kind == "literal_error":
            lines.append(f"{path}: {loc}: {shown} is not allowed; use {ctx.get('expected')}")
        elif kind.startswith("datetime"):
            lines.append(f"{path}: {loc}: {shown} is not a date and time; use ISO 8601 in UTC, e.g. 2026-12-01T11:30:00Z")
        else:
            got = f" (got {shown})" if shown is not None else ""
            lines.append(f"{path}: {loc}: {e['msg']}{got}")
    return lines


def _unknown_key(parts: tuple[int | str, ...], missing: list[str]) -> str:
    key = str(parts[-1])
    parent = _loc(parts[:-1])
    where = f"under {parent}" if parent else "at the top level"
    model = _model_at(parts[:-1])
    allowed = [f.alias or n for n, f in model.model_fields.items() if n != "schema_"] if model is not None else []
    close = difflib.get_close_matches(key, missing, n=1, cutoff=0.4) or difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if close:
        return f"unknown key '{key}' {where}; did you mean '{close[0]}'?"
    if allowed:
        return f"unknown key '{key}' {where}; allowed keys: {', '.join(allowed)}"
    return f"unknown key '{key}' {where}; check the spelling (see schema/environment.schema.json)"


def _pattern_hint(loc: str) -> str:
    last = loc.rsplit(".", 1)[-1]
    hints = {
        "account": "use the 12-digit account id, e.g. '123456789012' (quoted)",
        "region": "use a region code such as us-east-1",
        "name": "use lower-case letters, digits and dashes, starting with a letter"
        + (" (at most 24 characters)" if loc == "name" else " (at most 16 characters)"),
        "reservation_id": "use the reservation id, e.g. cr-0123456789abcdef0",
        "vpc_id": "use a VPC id, e.g. vpc-0123456789abcdef0",
        "ami_id": "use an AMI id, e.g. ami-0123456789abcdef0",
    }
    if re.search(r"az_id", last) or "az_ids" in loc:
        return "use an AZ ID such as use1-az6 (not an AZ name like us-east-1a)"
    return hints.get(re.sub(r"\[\d+\]$", "", last), "check the format")
