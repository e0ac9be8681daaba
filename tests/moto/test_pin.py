"""`neuronkit pin` against moto: a new account's lookups are asked of DescribeImages (owner, name, description,
newest first) and written into cdk.context.json under CDK's own keys (tests/conftest.py's synth checks that
these keys are the ones CDK asks for); the wrong account, no credentials and no match are clear lines."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from moto import mock_aws

from neuronkit.cli import main
from neuronkit.config.lookups import ImageLookup, image_lookups, read_context, unpinned_lookups
from tests.conftest import ROOT
from tests.project import LOOKUP_SUFFIX, environments, sources

NAME = f"lab{LOOKUP_SUFFIX}"  # tests/fixtures/user_environments/lab.yaml without its pins: a new account's file
ENV = environments()[NAME]


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "environments").mkdir()
    (tmp_path / "environments" / f"{NAME}.yaml").write_text(sources()[f"{NAME}.yaml"])
    for name in ("cdk.json", "cdk.context.json"):
        shutil.copy(ROOT / name, tmp_path / name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def aws(aws_credentials: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    from moto.ec2.models import ec2_backends

    monkeypatch.setenv("MOTO_ACCOUNT_ID", ENV.account)
    with mock_aws():
        ec2_backends[ENV.account][ENV.region].amis.clear()  # moto bundles real images: only the seeded ones here
        yield


def seed(lookup: ImageLookup, image_id: str, days_old: int, *, owner: str = "amazon") -> None:
    """An image DescribeImages returns for this lookup: its name and description fill the patterns' wildcards."""
    from moto.ec2.models import ec2_backends
    from moto.ec2.models.amis import Ami

    ec2 = ec2_backends[lookup.account][lookup.region]
    ec2.amis[image_id] = Ami(
        ec2,
        image_id,
        name=lookup.name.replace("*", "20261101"),
        description=(lookup.description or "an image").replace("*", " "),
        owner_alias=owner,
        public=True,
        root_device_name=lookup.root_device_name,
        region_name=lookup.region,
        creation_date=dt.datetime(2026, 11, 20, tzinfo=dt.UTC) - dt.timedelta(days=days_old),
    )


def test_pin_writes_the_newest_image_of_each_lookup_under_cdks_key(
    project: Path, aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    wanted = unpinned_lookups(ENV, read_context(project))
    assert {lookup.key_path for lookup in wanted} == {lookup.key_path for lookup in image_lookups(ENV)} and wanted
    newest = {}
    for n, lookup in enumerate(dict((lookup.context_key, lookup) for lookup in wanted).values()):
        seed(lookup, f"ami-0{n:016x}", days_old=30)
        newest[lookup.context_key] = f"ami-1{n:016x}"
        seed(lookup, newest[lookup.context_key], days_old=1)
        seed(lookup, f"ami-2{n:016x}", days_old=0, owner="999999999999")  # someone else's image: never chosen
    before = read_context(project)
    assert main(["pin", "--env", NAME]) == 0
    out = capsys.readouterr().out
    after = read_context(project)
    assert {k: v for k, v in after.items() if k not in before} == newest
    assert list(after)[: len(before)] == list(before) and all(after[k] == v for k, v in before.items())
    assert (project / "cdk.context.json").read_text().endswith("}\n")
    json.loads((project / "cdk.context.json").read_text())
    for lookup in wanted:
        assert f"{NAME} {lookup.key_path}: {newest[lookup.context_key]} " in out
    assert unpinned_lookups(ENV, after) == []
    # Pinned now: validate names nothing, and a second pin has nothing to do.
    assert main(["validate", "--env", NAME]) == 0
    assert "not pinned" not in capsys.readouterr().err
    assert main(["pin", "--env", NAME]) == 0
    assert "nothing to look up" in capsys.readouterr().out


def test_credentials_of_another_account_are_refused_before_anything_is_written(
    project: Path, aws_credentials: None, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("MOTO_ACCOUNT_ID", "999999999999")
    before = (project / "cdk.context.json").read_bytes()
    with mock_aws():
        assert main(["pin", "--env", NAME]) == 2
    err = capsys.readouterr().err
    assert f"the credentials are for account 999999999999, but {NAME} deploys into {ENV.account}" in err
    assert "iam/neuronkit-pin-policy.json" in err and "Traceback" not in err
    assert (project / "cdk.context.json").read_bytes() == before


def test_a_lookup_without_a_match_names_the_pool_and_the_fix(
    project: Path, aws: None, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["pin", "--env", NAME]) == 1  # nothing seeded: no image matches
    out = capsys.readouterr().out
    for lookup in image_lookups(ENV):
        assert f"{NAME} {lookup.key_path}: no image owned by amazon matches" in out
        assert f"set {lookup.key_path}.ami_id and root_device_name" in out


def test_the_policy_allows_what_pin_calls() -> None:
    policy = json.loads((ROOT / "iam" / "neuronkit-pin-policy.json").read_text())
    (statement,) = policy["Statement"]
    assert set(statement["Action"]) == {"sts:GetCallerIdentity", "ec2:DescribeImages", "eks:DescribeCluster"}
    assert not any(a.split(":")[1].startswith(("Create", "Delete", "Put", "Run", "Modify")) for a in statement["Action"])
