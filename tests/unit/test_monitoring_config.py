"""Validation of the monitoring section: time zone, shift times, log retention and day/night capacities.

Each case edits prod.yaml's monitoring section and checks the exact line a user sees (file, key, fix).
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from neuronkit.config import ConfigError, parse_environment
from tests.conftest import ROOT, reserved_prod

PROD = yaml.safe_load((ROOT / "environments" / "prod.yaml").read_text())
FILE = "environments/prod.yaml"


def problems(base: dict[str, Any] | None = None, **monitoring: Any) -> list[str]:
    data = copy.deepcopy(base or PROD)
    for key, value in monitoring.items():
        if key == "day_night":
            data["monitoring"]["day_night"].update(value)
        else:
            data["monitoring"][key] = value
    with pytest.raises(ConfigError) as err:
        parse_environment(data, FILE)
    return err.value.problems


def test_the_examples_are_valid() -> None:
    env = parse_environment(copy.deepcopy(PROD), FILE)
    assert env.monitoring.day_night is not None and env.monitoring.day_night.time_zone == "America/New_York"
    assert env.monitoring.alarms.execution_errors == 0  # the default


def test_time_zone_must_be_an_iana_zone() -> None:
    assert problems(day_night={"time_zone": "EST5EDT-ish"}) == [
        f"{FILE}: monitoring.day_night.time_zone: 'EST5EDT-ish' is not an IANA time zone; use e.g. America/New_York, Europe/Paris or UTC"
    ]
    assert problems(day_night={"time_zone": "../etc/passwd"})[0].startswith(
        f"{FILE}: monitoring.day_night.time_zone: '../etc/passwd'"
    )


def test_day_and_night_need_different_start_times() -> None:
    assert problems(day_night={"day_starts": "07:00", "night_starts": "07:00"}) == [
        f"{FILE}: monitoring.day_night.night_starts: equals day_starts (07:00); the day and the night need different start times"
    ]


def test_log_retention_must_be_one_cloudwatch_accepts() -> None:
    (line,) = problems(log_retention_days=45)
    assert line.startswith(f"{FILE}: monitoring.log_retention_days: 45 is not a CloudWatch Logs retention; use e.g. 30 (1, 3, 5,")


def test_shift_capacities_must_fit_every_group() -> None:
    # prod's chat fleet runs 2..12 nodes; its pretrain cluster follows a Capacity Block, so the shift never sizes it.
    assert problems(day_night={"inference_day_desired": 20, "training_night_desired": 17}) == [
        f"{FILE}: monitoring.day_night.inference_day_desired: 20 is outside inference[0] (chat)'s min_size 2 .. max_size 12; "
        "pick a value in that range",
    ]
    # On an On-Demand Capacity Reservation the same cluster (0..16 nodes) follows the shift and is checked.
    assert problems(reserved_prod(), day_night={"inference_day_desired": 20, "training_night_desired": 17}) == [
        f"{FILE}: monitoring.day_night.inference_day_desired: 20 is outside inference[0] (chat)'s min_size 2 .. max_size 12; "
        "pick a value in that range",
        f"{FILE}: monitoring.day_night.training_night_desired: 17 is outside training[0] (pretrain)'s min_size 0 .. max_size 16; "
        "pick a value in that range",
    ]
    assert problems(day_night={"inference_night_desired": 1})[0].startswith(
        f"{FILE}: monitoring.day_night.inference_night_desired: 1 is outside inference[0] (chat)'s min_size 2"
    )


def test_alarm_windows_stay_within_what_cloudwatch_evaluates() -> None:
    (line,) = problems(alarms={"idle_minutes": 2000})
    assert line.startswith(f"{FILE}: monitoring.alarms.idle_minutes: ")
    (line,) = problems(alarms={"fallback_hours": 200})
    assert line.startswith(f"{FILE}: monitoring.alarms.fallback_hours: ")
