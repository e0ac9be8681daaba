"""monitoring and budget: alarm thresholds, the day/night shift and their rules."""

from __future__ import annotations

import zoneinfo
from typing import Annotated, Literal

from pydantic import Field, model_validator

from neuronkit.config.base import LOG_RETENTION_DAYS, Strict, _raise_all
from neuronkit.config.inference import InferenceFleet
from neuronkit.config.training import CapacityBlock, Odcr, TrainingCluster


class Alarms(Strict):
    """Alarm thresholds; each has a default that suits most environments."""

    idle_utilization_percent: float = Field(default=5.0, ge=0, le=100)
    idle_minutes: int = Field(default=60, ge=5, le=1440, description="One-minute alarm points: at most a day.")
    p99_latency_ms: int | None = Field(
        default=None,
        ge=1,
        description="The latency alarm of every fleet without its own inference[].p99_latency_seconds; unset, each "
        "fleet's defaults to half its idle timeout (a non-streaming completion counts whole).",
    )
    error_5xx_percent: float = Field(default=5.0, ge=0, le=100)
    fallback_hours: int = Field(
        default=6, ge=1, le=168, description="GPU fallback instances in service for longer than this (at most a week)."
    )
    lustre_free_percent: float = Field(default=10.0, ge=0, le=100)
    quota_usage_percent: float = Field(default=80.0, ge=1, le=100)
    execution_errors: int = Field(
        default=0, ge=0, description="Neuron execution errors per pool in 5 minutes above which the alarm fires."
    )


class DayNight(Strict):
    """Serve by day, train by night: scheduled capacity for the inference fleets and training clusters."""

    time_zone: str = Field(default="UTC", description="IANA time zone, e.g. America/New_York.")
    day_starts: str = Field(default="08:00", pattern=r"^([01]\d|2[0-3]):[0-5]\d$")
    night_starts: str = Field(default="20:00", pattern=r"^([01]\d|2[0-3]):[0-5]\d$")
    inference_day_desired: int = Field(ge=0)
    inference_night_desired: int = Field(ge=0)
    training_night_desired: int = Field(ge=0)
    training_day_desired: int = Field(default=0, ge=0)

    @model_validator(mode="after")
    def _check(self) -> DayNight:
        problems: list[tuple[str, str]] = []
        try:
            zoneinfo.ZoneInfo(self.time_zone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError):
            problems.append(
                ("time_zone", f"'{self.time_zone}' is not an IANA time zone; use e.g. America/New_York, Europe/Paris or UTC")
            )
        if self.day_starts == self.night_starts:
            problems.append(
                ("night_starts", f"equals day_starts ({self.day_starts}); the day and the night need different start times")
            )
        _raise_all(problems)
        return self


class Monitoring(Strict):
    emails: list[Annotated[str, Field(pattern=r"^[^@\s]+@[^@\s]+\.[^@\s]+$")]] = Field(default_factory=list)
    log_retention_days: int = Field(default=30, ge=1)
    namespace: str = Field(default="Neuronkit", description="CloudWatch namespace of the Neuron metrics.")
    alarms: Alarms = Alarms()
    day_night: DayNight | None = None

    @model_validator(mode="after")
    def _check(self) -> Monitoring:
        if self.log_retention_days not in LOG_RETENTION_DAYS:
            close = min(LOG_RETENTION_DAYS, key=lambda d: abs(d - self.log_retention_days))
            allowed = ", ".join(map(str, LOG_RETENTION_DAYS))
            _raise_all(
                [
                    (
                        "log_retention_days",
                        f"{self.log_retention_days} is not a CloudWatch Logs retention; use e.g. {close} ({allowed})",
                    )
                ]
            )
        return self


class Budget(Strict):
    """The environment's monthly budget: an AWS Budgets budget with notifications, and a gate on pull requests."""

    monthly_usd: float = Field(gt=0, description="Monthly limit; notifications at 80% and 100%.")
    enforce: Literal["desired", "max", "off"] = Field(
        default="desired",
        description=(
            "Which estimate `neuronkit validate` and `neuronkit cost` hold against monthly_usd: the pools at their "
            "desired sizes (desired), at their max sizes (max), or none (off); above it they exit 1. The estimate "
            "adds the fixed charges (NAT gateways, endpoints, load balancers, Lustre). To let a bigger environment "
            "through, raise monthly_usd in the file, where the pull request shows it."
        ),
    )


def _day_night_problems(
    shift: DayNight | None, clusters: list[TrainingCluster], fleets: list[InferenceFleet]
) -> list[tuple[str, str]]:
    """Each day/night capacity must lie within the size limits of every group it is applied to."""
    if shift is None:
        return []
    out: list[tuple[str, str]] = []
    key = "monitoring.day_night"
    for field, value in (
        ("inference_day_desired", shift.inference_day_desired),
        ("inference_night_desired", shift.inference_night_desired),
    ):
        for i, f in enumerate(fleets):
            if not f.min_size <= value <= f.max_size:
                out.append(
                    (
                        f"{key}.{field}",
                        f"{value} is outside inference[{i}] ({f.name})'s min_size {f.min_size} .. max_size {f.max_size}; pick a value in that range",
                    )
                )
    for field, value in (
        ("training_night_desired", shift.training_night_desired),
        ("training_day_desired", shift.training_day_desired),
    ):
        for i, c in enumerate(clusters):
            if c.scheduler != "none" or isinstance(c.capacity, CapacityBlock):
                continue  # Batch sizes its own compute environment; a Capacity Block cluster follows the block's schedule
            if not c.min_size <= value <= c.max_size:
                out.append(
                    (
                        f"{key}.{field}",
                        f"{value} is outside training[{i}] ({c.name})'s min_size {c.min_size} .. max_size {c.max_size}; pick a value in that range",
                    )
                )
    return out


def idle_reservation_problems(
    region: str | None, shift: DayNight | None, clusters: list[TrainingCluster]
) -> list[tuple[str, str]]:
    """A stack-created ODCR bills whether used or not: a schedule or idle scale-down that empties the cluster
    pays for nothing, unless the file says it accepts that (capacity.keep_when_idle)."""
    from neuronkit.catalog.pricing import load_prices

    out: list[tuple[str, str]] = []
    for i, c in enumerate(clusters):
        cap = c.capacity
        if not isinstance(cap, Odcr) or not cap.create or cap.keep_when_idle or c.scheduler != "none":
            continue
        lows = []
        if c.idle_scale_down:
            lows.append((c.min_size, f"idle_scale_down scales it to min_size {c.min_size}"))
        if shift is not None:
            lows.append((shift.training_day_desired, f"monitoring.day_night gives it {shift.training_day_desired} nodes by day"))
        for running, why in lows:
            idle = cap.instance_count - running
            if idle <= 0:
                continue
            hourly = load_prices().hourly(c.instance_type, region) if region else None
            cost = f", about ${idle * hourly * load_prices().hours_per_month:,.0f} a month for nothing" if hourly else ""
            out.append(
                (
                    f"training[{i}].capacity.keep_when_idle",
                    f"{why}, leaving {idle} of the {cap.instance_count} reserved {c.instance_type} idle while the "
                    f"reservation bills{cost}; lower capacity.instance_count, drop the schedule or idle_scale_down, "
                    "or set capacity.keep_when_idle: true to accept the cost",
                )
            )
            break
    return out
