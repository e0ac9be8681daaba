"""Step metrics of a pilot job, in CloudWatch Embedded Metric Format (standard library only).

Any training script can call it, on Trainium or on GPUs, so the two sides of a pilot are measured the same
way (docs/adoption.md)::

    from neuronkit.adoption.pilot_metrics import StepReporter   # or copy this one file into the image

    report = StepReporter()                            # reads the pilot's variables `neuronkit pilot start` sets
    for step in range(1, steps + 1):
        loss = train_step()
        report.step(step, loss=loss, tokens=tokens_in_step, seconds=step_seconds)

Each call prints one JSON line to stdout. AWS Batch sends the job's stdout to CloudWatch Logs, which turns
the line into the metrics ``Loss``, ``TokensPerSecond`` and ``StepTime`` (namespace ``Neuronkit/Pilot``,
dimensions Environment, Pilot, Side) for the comparison dashboard, and keeps the line itself (with ``Step``
and ``RunId``) for ``neuronkit pilot report``. Only the job's first node reports (``AWS_BATCH_JOB_NODE_INDEX``
or ``RANK`` 0), so a multi-node run is not counted once per node. EMF: https://docs.aws.amazon.com/AmazonCloudWatch/latest/monitoring/CloudWatch_Embedded_Metric_Format_Specification.html
"""

from __future__ import annotations

import json
import math
import os
import sys
import time
from collections.abc import Mapping
from typing import IO, Any

NAMESPACE = "Neuronkit/Pilot"
DIMENSIONS = ("Environment", "Pilot", "Side")
METRICS = (("Loss", "None"), ("TokensPerSecond", "Count/Second"), ("StepTime", "Seconds"))
SIDES = ("neuron", "gpu")


class StepReporter:
    """Reports each step of one side of a pilot run. Values default to the job's environment variables:
    ``NEURONKIT_ENVIRONMENT``, ``NEURONKIT_PILOT``, ``NEURONKIT_PILOT_SIDE`` (neuron or gpu) and
    ``NEURONKIT_PILOT_RUN`` (the run id)."""

    def __init__(
        self,
        *,
        environment: str | None = None,
        pilot: str | None = None,
        side: str | None = None,
        run_id: str | None = None,
        out: IO[str] | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        env = os.environ if env is None else env
        self.environment = environment or env.get("NEURONKIT_ENVIRONMENT", "")
        self.pilot = pilot or env.get("NEURONKIT_PILOT", "")
        self.side = side or env.get("NEURONKIT_PILOT_SIDE", "")
        self.run_id = run_id or env.get("NEURONKIT_PILOT_RUN", "")
        missing = [k for k, v in (("environment", self.environment), ("pilot", self.pilot), ("run_id", self.run_id)) if not v]
        if missing:
            raise ValueError(f"StepReporter: {', '.join(missing)} not given and not in the job's environment")
        if self.side not in SIDES:
            raise ValueError(f"StepReporter: side must be one of {', '.join(SIDES)}, got {self.side!r}")
        node = env.get("AWS_BATCH_JOB_NODE_INDEX", env.get("RANK", "0"))
        self.enabled = node in ("", "0")
        self.out = out or sys.stdout

    def record(self, step: int, *, loss: float, tokens: float, seconds: float, now: float | None = None) -> dict[str, Any]:
        """The EMF document of one step (without printing it)."""
        if step < 0 or not math.isfinite(loss) or seconds <= 0 or tokens < 0:
            raise ValueError(f"step {step}: need step >= 0, a finite loss, seconds > 0 and tokens >= 0")
        return {
            "_aws": {
                "Timestamp": int((time.time() if now is None else now) * 1000),
                "CloudWatchMetrics": [
                    {
                        "Namespace": NAMESPACE,
                        "Dimensions": [list(DIMENSIONS)],
                        "Metrics": [{"Name": name, "Unit": unit} for name, unit in METRICS],
                    }
                ],
            },
            "Environment": self.environment,
            "Pilot": self.pilot,
            "Side": self.side,
            "RunId": self.run_id,
            "Step": step,
            "Tokens": tokens,
            "Loss": loss,
            "TokensPerSecond": tokens / seconds,
            "StepTime": seconds,
        }

    def step(self, step: int, *, loss: float, tokens: float, seconds: float) -> None:
        """Print one step's line (on the first node only)."""
        if self.enabled:
            self.out.write(json.dumps(self.record(step, loss=loss, tokens=tokens, seconds=seconds)) + "\n")
            self.out.flush()
