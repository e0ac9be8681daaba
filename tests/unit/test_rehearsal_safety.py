"""neuronkit.rehearsal.safety: a rehearsal talks only to loopback, with no AWS setting of the caller.

No moto and no CDK CLI here: the refusals happen before either would start.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from neuronkit.rehearsal import Rehearsal, UnsafeEndpointError, safety
from tests.conftest import ROOT


@pytest.mark.parametrize(
    "host",
    ["ec2.us-east-1.amazonaws.com", "169.254.169.254", "10.0.0.5", "127.0.0.1.nip.io", "[::ffff:10.0.0.5]"],
)
def test_a_rehearsal_with_a_non_loopback_endpoint_refuses_before_creating_anything(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, host: str
) -> None:
    monkeypatch.setattr(safety, "ENDPOINT_HOST", host)
    work = tmp_path / "work"
    with pytest.raises(UnsafeEndpointError) as err:
        Rehearsal(ROOT, work_dir=work)
    assert err.value.code == 2 and "refusing to rehearse" in err.value.message
    assert not work.exists()  # no work folder, no server, no CLI


@pytest.mark.parametrize(
    "url", ["http://169.254.169.254/latest/meta-data", "http://[::ffff:10.0.0.5]:5000", "https://[2001:db8::1]"]
)
def test_metadata_and_mapped_addresses_are_not_loopback(url: str) -> None:
    with pytest.raises(UnsafeEndpointError, match="not a loopback address"):
        safety.assert_local_endpoint(url)


def test_cli_environment_drops_aws_settings_in_any_case(tmp_path: Path) -> None:
    base = {"PATH": "/usr/bin", "aws_profile": "production", "Aws_Session_Token": "real", "MOTO_ACCOUNT_ID": "999999999999"}
    env = safety.cli_environment(
        "http://127.0.0.1:5000",
        access_key_id="AKIAMOTO",
        secret_access_key="moto",
        region="eu-west-1",
        blank_file=tmp_path / "blank",
        cdk_home=tmp_path,
        base=base,
    )
    assert "aws_profile" not in env and "Aws_Session_Token" not in env and "MOTO_ACCOUNT_ID" not in env
    assert env["AWS_ENDPOINT_URL"] == "http://127.0.0.1:5000" and env["AWS_REGION"] == "eu-west-1"
    assert "localhost" in env["NO_PROXY"].split(",") and "127.0.0.1" in env["NO_PROXY"].split(",")


def test_without_env_hides_and_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MOTO_ACCOUNT_ID", "999999999999")
    with safety.without_env("MOTO_ACCOUNT_ID"):
        assert "MOTO_ACCOUNT_ID" not in os.environ
    assert os.environ["MOTO_ACCOUNT_ID"] == "999999999999"
