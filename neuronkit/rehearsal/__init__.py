"""Rehearse a deployment: the real, pinned CDK CLI deploys the synthesized app into an embedded moto server.

``neuronkit rehearse`` (``make deploy-local``) is a dress rehearsal of ``cdk deploy`` that needs no AWS
account and can never reach one (docs/rehearsal.md). One job per module:

- :mod:`~neuronkit.rehearsal.safety`: loopback-only endpoint, dummy credentials, no AWS setting of the caller;
- :mod:`~neuronkit.rehearsal.assembly`: the stacks of a cdk.out folder and what they ask of an account;
- :mod:`~neuronkit.rehearsal.runner`: the embedded server, seeding, and the CDK CLI against it;
- :mod:`~neuronkit.rehearsal.report`: reading the result back with boto3, and the tables it prints;
- :mod:`~neuronkit.rehearsal.update`: ``--base``, another revision deployed first and the working tree over it;
- :mod:`~neuronkit.rehearsal.moto_workarounds`: every patch to moto, applied by one idempotent ``apply()``.

Two deviations from a real deployment, both forced by moto 5.2: stacks are deployed with
``--method=direct`` (moto's change sets neither publish nor resolve cross-stack exports), and resource
types moto does not model are skipped (their attributes resolve to visible ``unmodelled-...``
placeholders so the stacks that read them still deploy).

moto is a test/dev dependency (``make setup`` installs it); it is imported only when a rehearsal starts.
"""

from __future__ import annotations

from neuronkit.rehearsal.assembly import NOT_A_RESOURCE, Assembly, StackInfo, read_assembly
from neuronkit.rehearsal.errors import RehearsalError
from neuronkit.rehearsal.report import (
    PROBE_KEY,
    DestroyReport,
    EnvironmentReport,
    RehearsalResult,
    render_destroy,
    render_report,
    render_verdict,
)
from neuronkit.rehearsal.runner import Rehearsal, project_root, rehearsal_wall_times, rehearse
from neuronkit.rehearsal.safety import UnsafeEndpointError, assert_local_endpoint, cli_environment

__all__ = [
    "NOT_A_RESOURCE",
    "PROBE_KEY",
    "Assembly",
    "DestroyReport",
    "EnvironmentReport",
    "Rehearsal",
    "RehearsalError",
    "RehearsalResult",
    "StackInfo",
    "UnsafeEndpointError",
    "assert_local_endpoint",
    "cli_environment",
    "project_root",
    "read_assembly",
    "rehearsal_wall_times",
    "rehearse",
    "render_destroy",
    "render_report",
    "render_verdict",
]
