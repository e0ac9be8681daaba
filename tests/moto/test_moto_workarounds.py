"""neuronkit.rehearsal.moto_workarounds: one idempotent apply() for every moto workaround.

The workarounds themselves are exercised by the deployments that need them (each names its tests); these
tests check the entry point: applying twice changes nothing, a different moto version is reported, and
every workaround points at tests that exist.
"""

from __future__ import annotations

import inspect
import json
import re
import subprocess
import sys
import warnings
from typing import Any

import pytest

from neuronkit.rehearsal import moto_workarounds
from neuronkit.rehearsal.moto_workarounds import MARK, WORKAROUNDS, MotoVersionWarning
from tests.conftest import ROOT


def _targets() -> list[tuple[Any, str]]:
    """Every attribute of moto a workaround replaces or adds, listed here independently of the module."""
    from moto.batch import models as batch_models
    from moto.cloudformation import parsing
    from moto.cloudformation.models import Stack
    from moto.ec2.models.elastic_ip_addresses import ElasticAddress
    from moto.ec2.models.flow_logs import FlowLogs
    from moto.ec2.models.internet_gateways import InternetGateway
    from moto.ec2.models.nat_gateways import NatGateway
    from moto.ec2.models.route_tables import Route, RouteTable
    from moto.ec2.models.subnets import SubnetRouteTableAssociation
    from moto.ec2.models.vpcs import VPCEndPoint
    from moto.ec2.models.vpn_gateway import VPCGatewayAttachment
    from moto.kms import models as kms_models

    return [
        (parsing.ResourceMap, "validate_outputs"),
        (parsing, "clean_json"),
        (parsing.OutputMap, "exports"),
        (kms_models.KmsBackend, "create_key"),
        (batch_models.BatchBackend, "_validate_compute_resources"),
        (batch_models.JobDefinition, "create_from_cloudformation_json"),
        (batch_models.JobDefinition, "describe"),
        (Stack, "outputs"),
        (Stack, "exports"),
        *[
            (cls, "delete")
            for cls in (
                SubnetRouteTableAssociation,
                RouteTable,
                Route,
                VPCGatewayAttachment,
                InternetGateway,
                VPCEndPoint,
                NatGateway,
                FlowLogs,
                ElasticAddress,
            )
        ],
    ]


def _function(value: Any) -> Any:
    if isinstance(value, property):
        return value.fget
    return getattr(value, "__func__", value)


def test_applying_twice_changes_nothing() -> None:
    moto_workarounds.apply()
    before = [inspect.getattr_static(owner, attr) for owner, attr in _targets()]
    again = moto_workarounds.apply()
    after = [inspect.getattr_static(owner, attr) for owner, attr in _targets()]
    assert again.newly_applied == ()
    assert again.already_applied == tuple(w.name for w in WORKAROUNDS)
    # The very same objects: nothing was wrapped a second time.
    assert all(a is b for a, b in zip(before, after, strict=True))
    # And each is a workaround's, not moto's own.
    assert all(getattr(_function(value), MARK, None) for value in after)


def test_a_fresh_process_applies_every_workaround_once() -> None:
    # moto's classes are process-wide: a new interpreter shows the first apply() as well as the second.
    script = (
        "import json; from neuronkit.rehearsal import moto_workarounds as m; "
        "a = m.apply(); b = m.apply(); print(json.dumps([a.newly_applied, b.newly_applied, b.already_applied]))"
    )
    out = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, check=True, timeout=120)
    first, second, already = json.loads(out.stdout.strip().splitlines()[-1])
    names = [w.name for w in WORKAROUNDS]
    assert first == names and second == [] and already == names


def test_a_different_moto_version_is_reported_and_nothing_is_applied_twice() -> None:
    moto_workarounds.apply()
    with pytest.warns(MotoVersionWarning) as caught:
        status = moto_workarounds.apply(moto_version_expected="9.9.9")
    message = str(caught[0].message)
    assert f"moto {moto_workarounds.installed_moto_version()} is installed" in message
    assert "written for moto 9.9.9" in message and "moto==9.9.9" in message
    assert not status.version_matches and status.expected_version == "9.9.9"
    assert status.newly_applied == ()


def test_the_expected_version_is_the_pinned_one_and_applies_silently() -> None:
    pins = (ROOT / "requirements-dev.txt").read_text()
    (pinned,) = re.findall(r"^moto\[[^\]]*\]==(\S+)$", pins, flags=re.MULTILINE)
    assert moto_workarounds.MOTO_VERSION == pinned == moto_workarounds.installed_moto_version()
    with warnings.catch_warnings():
        warnings.simplefilter("error", MotoVersionWarning)
        assert moto_workarounds.apply().version_matches


@pytest.mark.parametrize("workaround", WORKAROUNDS, ids=lambda w: w.name)
def test_each_workaround_names_its_moto_bug_and_tests_that_exist(workaround: moto_workarounds.Workaround) -> None:
    assert len(workaround.moto_bug) > 80 and "Installed:" in workaround.moto_bug
    assert workaround.covered_by
    for where in workaround.covered_by:
        path, _, test = where.partition("::")
        assert re.search(rf"^def {re.escape(test)}\(", (ROOT / path).read_text(), flags=re.MULTILINE), where
