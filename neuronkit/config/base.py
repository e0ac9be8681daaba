"""Shared pieces of the environment file: patterns, limits, the error type and the strict base model."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict

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


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


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
        add(key, f"{instance_type} is not offered in {', '.join(missing)} ({region}); offered in: {', '.join(offered) or 'none'}")
