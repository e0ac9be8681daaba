"""Shared pieces of the environment file: patterns, limits, the error type and the strict base model."""

from __future__ import annotations

import types
import typing
from typing import Any

from pydantic import BaseModel, ConfigDict, model_validator

from neuronkit import catalog

ACCOUNT_RE = r"^\d{12}$"
REGION_RE = r"^[a-z]{2}(-gov)?-[a-z]+-\d$"
AZ_ID_RE = r"^[a-z]{2,5}\d-az\d+$"
NAME_RE = r"^[a-z][a-z0-9-]{0,23}$"
RESERVATION_RE = r"^cr-[0-9a-f]{8}([0-9a-f]{9})?$"

SERVE_COMMAND_MAX = 1024
CRON_RE = r"^\s*(\S+\s+){4}\S+\s*$"

LUSTRE_THROUGHPUT = {"PERSISTENT_2": (125, 250, 500, 1000)}
# The retention periods CloudWatch Logs accepts (AWS::Logs::LogGroup RetentionInDays).
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653)

# Interface endpoints nodes use, so S3/SSM/logs/metrics/ECR traffic never crosses the NAT gateway.
DEFAULT_INTERFACE_ENDPOINTS = (
    "ssm",
    "ssmmessages",
    "ec2messages",
    "logs",
    "monitoring",
    "sts",
    "ecr.api",
    "ecr.dkr",
)


class ConfigError(Exception):
    """One or more problems in environment files; ``problems`` holds one line each."""

    def __init__(self, problems: list[str]):
        self.problems = problems
        super().__init__("\n".join(problems))


def _scalar_kinds(annotation: Any) -> set[type]:
    """The number/boolean types a field annotation accepts (int | None -> {int})."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _scalar_kinds(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return {k for a in typing.get_args(annotation) for k in _scalar_kinds(a)}
    return {annotation} & {int, float, bool}


def _accepts_text(annotation: Any) -> bool:
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _accepts_text(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return any(_accepts_text(a) for a in typing.get_args(annotation))
    return annotation is str or typing.get_origin(annotation) is typing.Literal


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    @model_validator(mode="before")
    @classmethod
    def _numbers_are_not_text(cls, data: Any) -> Any:
        # One strictness everywhere: an account id must be quoted text, so a number or a boolean must not be
        # (port: "8080" is refused the way account: 111111111111 is).
        if isinstance(data, dict):
            problems = []
            for key, value in data.items():
                field = cls.model_fields.get(key) if isinstance(key, str) else None
                if field is None or not isinstance(value, str):
                    continue
                kinds = _scalar_kinds(field.annotation)
                if kinds and not _accepts_text(field.annotation):
                    what = "true or false" if kinds == {bool} else "a number"
                    problems.append((key, f"{value!r} is text; write {what} without quotes"))
            _raise_all(problems)
        return data


class _MultiProblem(ValueError):
    """Raised by a validator with every problem it found, as (key path relative to the model, message)."""

    def __init__(self, problems: list[tuple[str, str]]):
        self.problems = problems
        super().__init__("; ".join(f"{k}: {m}" if k else m for k, m in problems))


def _raise_all(problems: list[tuple[str, str]]) -> None:
    # Validators collect every problem of their section, so one run reports all of them.
    if problems:
        raise _MultiProblem(problems)


def _az_prefix(region: str) -> str:
    """AZ-ID prefix of a region: us-east-1 -> use1, ap-southeast-2 -> apse2, us-gov-west-1 -> usgw1."""
    parts = region.split("-")
    geo, direction, number = parts[0] + ("g" if "gov" in parts else ""), parts[-2], parts[-1]
    abbrev = {"east": "e", "west": "w", "north": "n", "south": "s", "central": "c", "northeast": "ne",
              "southeast": "se", "northwest": "nw", "southwest": "sw"}.get(direction, direction[0])  # fmt: skip
    return f"{geo}{abbrev}{number}"


def _foreign_az(az: str, region: str) -> str | None:
    """The problem with an AZ ID that belongs to another region, or None."""
    prefix = _az_prefix(region)
    if az.startswith(prefix + "-"):
        return None
    known = sorted({z for t in catalog.instance_types().values() for z in t.az_ids(region)})
    fix = f"use one of {', '.join(known)}" if known else f"AZ IDs of {region} start with '{prefix}-'"
    return f"'{az}' is not an AZ ID of {region}; {fix}"


def _offered(add: Any, key: str, instance_type: str, az_ids: list[str], region: str | None) -> None:
    if region is None:
        return
    offered = catalog.get(instance_type).az_ids(region)
    missing = [a for a in az_ids if a not in offered]
    if missing:
        add(
            key,
            f"{instance_type} is not offered in {', '.join(missing)} ({region}; {catalog.offerings_source()}); "
            f"offered in: {', '.join(offered) or 'none'}",
        )
