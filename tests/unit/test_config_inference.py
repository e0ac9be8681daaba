"""Validation of ``inference:`` fleets: each mistake is one exact line naming the key and the fix."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from neuronkit import catalog
from neuronkit.config import ConfigError, parse_environment

FILE = "environments/serve.yaml"
GPU_TYPES = ", ".join(sorted(n for n, t in catalog.instance_types().items() if t.accelerator == "gpu"))
INFERENTIA = ", ".join(
    sorted(n for n, t in catalog.instance_types().items() if t.accelerator == "inferentia" and t.family != "inf1")
)
BASE: dict[str, Any] = {
    "name": "serve",
    "account": "123456789012",
    "region": "us-east-1",
    "network": {"az_ids": ["use1-az6", "use1-az4"]},
    "inference": [
        {
            "name": "chat",
            "neuron_types": ["inf2.48xlarge", "inf2.24xlarge"],
            "fallback_types": ["g6e.12xlarge", "g5.12xlarge"],
            "az_ids": ["use1-az6", "use1-az4"],
            "min_size": 1,
            "max_size": 4,
            "port": 8080,
            "model_s3_prefix": "models/chat/neuron/",
            "serve": {"neuron": "vllm serve $MODEL_DIR --device neuron --port 8080", "gpu": "vllm serve $MODEL_DIR --port 8080"},
        }
    ],
}


def fleet(**changes: Any) -> dict[str, Any]:
    """BASE with the first fleet's keys changed (a value of None removes the key)."""
    data = copy.deepcopy(BASE)
    f = data["inference"][0]
    for key, value in changes.items():
        if value is None:
            f.pop(key, None)
        else:
            f[key] = value
    return data


def problems(data: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as err:
        parse_environment(data, FILE)
    return err.value.problems


def test_the_base_fleet_is_valid() -> None:
    env = parse_environment(copy.deepcopy(BASE), FILE)
    (f,) = env.inference
    assert f.neuron_types == ["inf2.48xlarge", "inf2.24xlarge"] and f.serve.gpu


@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        pytest.param(
            {"fallback_types": ["g5.12xlarge", "inf2.xlarge"]},
            [f"{FILE}: inference[0].fallback_types[1]: 'inf2.xlarge' has no GPU; fallback types must be GPU types: {GPU_TYPES}"],
            id="fallback-type-without-gpu",
        ),
        pytest.param(
            {"fallback_types": ["m7i.large"]},
            [f"{FILE}: inference[0].fallback_types[0]: 'm7i.large' has no GPU; fallback types must be GPU types: {GPU_TYPES}"],
            id="fallback-type-unknown",
        ),
        pytest.param(
            {"neuron_types": ["inf2.48xlarge", "g5.12xlarge"]},
            [f"{FILE}: inference[0].neuron_types[1]: 'g5.12xlarge' is not an Inferentia or Trainium type; use e.g. {INFERENTIA}"],
            id="neuron-type-is-a-gpu",
        ),
        pytest.param(
            {"serve": {"neuron": "vllm serve $MODEL_DIR --device neuron"}},
            [
                f"{FILE}: inference[0].serve.gpu: required when fallback_types is set: "
                "the command that starts the server on GPU nodes"
            ],
            id="serve-gpu-missing-with-fallback",
        ),
        pytest.param(
            {"serve": {"neuron": "a", "gpu": "b", "gpu_port": 9000}},
            [
                f"{FILE}: inference[0].serve.gpu_port: GPU nodes would serve on 9000 but Neuron nodes on 8080; "
                "one target group serves both, so start both servers on the same port"
            ],
            id="different-ports",
        ),
        pytest.param(
            {"serve": {"neuron": "a", "gpu": "b", "gpu_health_check_path": "/healthz"}},
            [
                f"{FILE}: inference[0].serve.gpu_health_check_path: '/healthz' differs from health_check.path '/health'; "
                "one target group checks both families, so serve the same health path on both"
            ],
            id="different-health-paths",
        ),
        pytest.param(
            {"health_check": {"port": 9090}},
            [
                f"{FILE}: inference[0].health_check.port: 9090 differs from port 8080; Neuron and GPU nodes share one "
                "target group, so the server must answer health checks on its serving port"
            ],
            id="health-check-on-another-port",
        ),
        pytest.param(
            {"health_check": {"protocol": "TCP"}},
            [
                f"{FILE}: inference[0].health_check.protocol: an ALB checks health over HTTP; use protocol: HTTP or load_balancer: nlb"
            ],
            id="alb-with-tcp-health-check",
        ),
        pytest.param(
            {"az_ids": ["use1-az6", "use1-az2"]},
            [f"{FILE}: inference[0].az_ids[1]: 'use1-az2' is not in network.az_ids; add it there"],
            id="az-outside-the-network",
        ),
        pytest.param(
            {"precompile": True},
            [
                f"{FILE}: inference[0].precompile: applies to a fleet served with model: (the kit compiles its keys); "
                "with serve: your server compiles nothing the kit knows of; remove precompile"
            ],
            id="precompile-with-serve",
        ),
        pytest.param(
            {"min_size": 5},
            [f"{FILE}: inference[0].min_size: min_size 5 is greater than max_size 4; raise max_size or lower min_size"],
            id="min-above-max",
        ),
    ],
)
def test_each_mistake_is_one_exact_line(changes: dict[str, Any], expected: list[str]) -> None:
    assert problems(fleet(**changes)) == expected


def test_a_fleet_without_fallback_needs_no_gpu_command() -> None:
    env = parse_environment(fleet(fallback_types=[], serve={"neuron": "serve"}), FILE)
    assert env.inference[0].fallback_types == [] and env.inference[0].serve.gpu is None


def test_an_nlb_may_check_health_over_tcp() -> None:
    env = parse_environment(fleet(load_balancer="nlb", health_check={"protocol": "TCP"}), FILE)
    assert env.inference[0].health_check.protocol == "TCP"


def test_every_problem_of_a_fleet_is_reported_at_once() -> None:
    found = problems(fleet(neuron_types=["p5.48xlarge"], fallback_types=["trn1.2xlarge"], serve={"neuron": "a"}))
    assert [line.split(": ", 2)[1] for line in found] == [
        "inference[0].neuron_types[0]",
        "inference[0].fallback_types[0]",
        "inference[0].serve.gpu",
    ]


def test_two_fleets_with_one_name() -> None:
    data = copy.deepcopy(BASE)
    data["inference"].append(copy.deepcopy(data["inference"][0]))
    assert problems(data) == [
        f"{FILE}: inference[1].name: 'chat' is already the name of inference[0]; give each fleet its own name"
    ]


def test_internet_facing_fleet_quoted_command_bad_prefix_and_cron_are_refused() -> None:
    data = fleet(
        internal=False,
        serve={"neuron": "vllm serve '$MODEL_DIR'", "gpu": "vllm serve $MODEL_DIR"},
        model_s3_prefix="/models/chat",
        scheduled_actions=[{"name": "day", "cron": "8am weekdays", "desired_size": 2}, {"name": "day", "cron": "0 20 * * *"}],
    )
    assert problems(data) == [
        f"{FILE}: inference[0].internal: internet-facing load balancers are not supported (nodes sit in private subnets); "
        "set internal: true and front the fleet with your own edge (API Gateway, CloudFront)",
        f"{FILE}: inference[0].serve.neuron: may not contain single quotes or newlines (it is written into the node's "
        "environment file); use double quotes, or put a start script in the model prefix and run that",
        f"{FILE}: inference[0].model_s3_prefix: '/models/chat' is not a key prefix of the artifacts bucket; "
        "use e.g. models/llama-3-8b/neuron/ (no leading /, ends with /)",
        f"{FILE}: inference[0].scheduled_actions[0].cron: '8am weekdays' is not a cron expression of 5 fields "
        "(minute hour day month weekday), e.g. '0 8 * * 1-5'",
        f"{FILE}: inference[0].scheduled_actions[1].name: 'day' is used twice; give each scheduled action its own name",
        f"{FILE}: inference[0].scheduled_actions[1]: sets no size; give min_size, max_size or desired_size",
    ]


# --- the latency alarm's threshold, per fleet (issue 49) ---------------------------------------------------------------
@pytest.mark.parametrize(
    ("changes", "expected"),
    [
        pytest.param(
            {"p99_latency_seconds": 600},
            f"{FILE}: inference[0].p99_latency_seconds: 600 s is not below the listener's idle timeout of 600 s, where "
            "the load balancer cuts a non-streaming completion (504) before it is measured; set it lower or raise "
            "idle_timeout_seconds",
            id="at-the-idle-timeout",
        ),
        pytest.param(
            {"p99_latency_seconds": 90, "idle_timeout_seconds": 60},
            f"{FILE}: inference[0].p99_latency_seconds: 90 s is not below the listener's idle timeout of 60 s, where "
            "the load balancer cuts a non-streaming completion (504) before it is measured; set it lower or raise "
            "idle_timeout_seconds",
            id="beyond-the-fleets-idle-timeout",
        ),
        pytest.param(
            {"p99_latency_seconds": 30, "load_balancer": "nlb", "health_check": {"protocol": "TCP"}},
            f"{FILE}: inference[0].p99_latency_seconds: an NLB publishes no target response time to alarm on; remove it "
            "or use load_balancer: alb",
            id="on-an-nlb",
        ),
    ],
)
def test_a_nonsense_latency_threshold_is_one_line(changes: dict[str, Any], expected: str) -> None:
    assert problems(fleet(**changes)) == [expected]


@pytest.mark.parametrize("value", [0, -5, "fast"])
def test_a_latency_threshold_that_is_no_positive_number_is_one_line(value: Any) -> None:
    (line,) = problems(fleet(p99_latency_seconds=value))
    assert line.startswith(f"{FILE}: inference[0].p99_latency_seconds: ") and "\n" not in line


def test_the_latency_threshold_is_the_fleets_then_the_environments_then_half_the_idle_timeout() -> None:
    """A 2 s p99 fired on any non-streaming completion (review of issue 49): a fleet names its own; an environment's
    monitoring.alarms.p99_latency_ms still applies to fleets that do not; without either, half the idle timeout
    (catalog/serving.yaml ``latency_alarm``, from the ALB's documented idle timeout)."""
    from neuronkit.catalog import serving
    from neuronkit.config.inference import p99_latency_alarm_seconds

    own = parse_environment(fleet(p99_latency_seconds=45), FILE)
    assert p99_latency_alarm_seconds(own.inference[0], 3000) == 45
    plain = parse_environment(fleet(), FILE)
    assert p99_latency_alarm_seconds(plain.inference[0], 3000) == 3.0
    assert plain.monitoring.alarms.p99_latency_ms is None
    share = float(serving.facts()["latency_alarm"]["default_share_of_idle_timeout"])
    default_idle = int(serving.facts()["load_balancer"]["alb_idle_timeout_default_seconds"])
    assert p99_latency_alarm_seconds(plain.inference[0], None) == share * default_idle
    longer = parse_environment(fleet(idle_timeout_seconds=1200), FILE)
    assert p99_latency_alarm_seconds(longer.inference[0], None) == share * 1200
    assert 0 < share < 1  # an alarm before the balancer cuts completions, never after


def test_an_environment_latency_threshold_beyond_a_fleets_idle_timeout_is_one_line() -> None:
    """The environment-wide threshold applies to fleets without their own, so it must lie below each one's idle
    timeout too; a fleet with its own threshold is not held to it."""
    data = fleet(idle_timeout_seconds=120)
    data["monitoring"] = {"alarms": {"p99_latency_ms": 150000}}
    assert problems(data) == [
        f"{FILE}: monitoring.alarms.p99_latency_ms: 150000 ms is not below inference[0]'s idle timeout of 120 s, where the "
        "load balancer cuts a non-streaming completion (504) before it is measured; lower it or set that fleet's "
        "p99_latency_seconds"
    ]
    data["inference"][0]["p99_latency_seconds"] = 60
    assert parse_environment(data, FILE).monitoring.alarms.p99_latency_ms == 150000
