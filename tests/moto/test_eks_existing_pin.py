"""`neuronkit pin` fills eks.existing from the account (issue 51): a file naming its cluster by `cluster_name` alone
gets the six attributes from moto's eks:DescribeCluster, recorded in cdk.context.json under one key per cluster; with
nothing pinned, loading (validate, synthesis) stops with one line; pinned, the file loads into the same environment,
and synthesizes the same template, as the file that gives every attribute; the file's own values win and validate
names a pin that disagrees."""

from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
import yaml
from moto import mock_aws

from neuronkit.cli import main
from neuronkit.config import ConfigError, load_environment
from neuronkit.config.cluster_pins import ATTRIBUTES, context_key
from neuronkit.config.lookups import read_context

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "user_environments" / "ownk8s.yaml"
DATA = yaml.safe_load(FIXTURE.read_text())
FULL = DATA["eks"]["existing"]
KEY = context_key(DATA["account"], DATA["region"], FULL["cluster_name"])


def _write(project: Path, existing: dict[str, Any]) -> Path:
    data = copy.deepcopy(DATA)
    data["eks"]["existing"] = existing
    path = project / "environments" / "ownk8s.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "environments").mkdir()
    for name in ("cdk.json", "cdk.context.json"):
        shutil.copy(ROOT / name, tmp_path / name)
    _write(tmp_path, {"cluster_name": FULL["cluster_name"]})
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def aws(aws_credentials: None, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("MOTO_ACCOUNT_ID", DATA["account"])
    with mock_aws():
        yield boto3.client("eks", region_name=DATA["region"])


def _create_cluster(eks: Any, version: str = FULL["kubernetes_version"]) -> dict[str, Any]:
    role = boto3.client("iam", region_name=DATA["region"]).create_role(RoleName="c", AssumeRolePolicyDocument="{}")
    eks.create_cluster(
        name=FULL["cluster_name"], version=version, roleArn=role["Role"]["Arn"], resourcesVpcConfig={"subnetIds": []},
        kubernetesNetworkConfig={"serviceIpv4Cidr": FULL["service_cidr"]},
    )  # fmt: skip
    # moto 5 keeps neither accessConfig nor the cluster security group EKS creates (its DescribeCluster leaves them
    # out): seed them in its cluster, as EKS answers (EKS API reference, Cluster).
    from moto.eks.models import eks_backends

    seeded = eks_backends[DATA["account"]][DATA["region"]].clusters[FULL["cluster_name"]]
    seeded.access_config = {"authenticationMode": FULL["authentication_mode"]}  # type: ignore[attr-defined]
    seeded.resources_vpc_config["clusterSecurityGroupId"] = "sg-0123456789abcdef0"
    cluster: dict[str, Any] = eks.describe_cluster(name=FULL["cluster_name"])["cluster"]
    return cluster


def test_without_a_pin_loading_stops_with_one_line_naming_both_fixes(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(ConfigError) as err:
        load_environment(project / "environments" / "ownk8s.yaml")
    (line,) = err.value.problems
    assert line.startswith("environments/ownk8s.yaml: eks.existing: endpoint, certificate_authority, service_cidr")
    assert "run `neuronkit pin --file environments/ownk8s.yaml` with read-only credentials" in line
    assert "or give endpoint" in line and "aws eks describe-cluster --name platform-prod" in line
    assert main(["validate", "--env", "ownk8s"]) == 1
    err_lines = capsys.readouterr().err.strip().splitlines()
    assert err_lines == [line]


def test_synthesis_without_a_pin_stops_with_the_same_one_line(project: Path) -> None:
    shutil.copy(ROOT / "app.py", project / "app.py")
    env = {k: v for k, v in os.environ.items() if k != "CDK_CLI_VERSION"}
    env.update(PYTHONPATH=str(ROOT), CDK_OUTDIR=str(project / "out"))
    done = subprocess.run([sys.executable, "app.py"], cwd=project, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-2000:]
    (line,) = [x for x in done.stderr.splitlines() if x.startswith("environments/ownk8s.yaml:")]
    assert "eks.existing: endpoint, certificate_authority" in line and "run `neuronkit pin --file" in line


def test_pin_records_the_clusters_attributes_and_the_file_then_loads_them(
    project: Path, aws: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = _create_cluster(aws)
    before = read_context(project)
    assert main(["pin", "--env", "ownk8s"]) == 0
    out = capsys.readouterr().out
    assert "cluster platform-prod: Kubernetes 1.35, API_AND_CONFIG_MAP" in out and "pinned 1 cluster(s)" in out
    after = read_context(project)
    assert {k: v for k, v in after.items() if k not in before} == {
        KEY: {
            "endpoint": cluster["endpoint"], "certificate_authority": cluster["certificateAuthority"]["data"],
            "service_cidr": FULL["service_cidr"],
            "cluster_security_group_id": cluster["resourcesVpcConfig"]["clusterSecurityGroupId"],
            "kubernetes_version": "1.35", "authentication_mode": FULL["authentication_mode"],
        }
    }  # fmt: skip
    env = load_environment(project / "environments" / "ownk8s.yaml")
    assert env.eks is not None and env.eks.existing is not None
    assert env.eks.existing.endpoint == cluster["endpoint"] and env.eks.version == "1.35"
    # Pinned: validate passes, and a second pin asks nothing.
    assert main(["validate", "--env", "ownk8s"]) == 0
    capsys.readouterr()
    assert main(["pin", "--env", "ownk8s"]) == 0
    assert "cluster platform-prod" not in capsys.readouterr().out


def test_a_pinned_file_loads_as_the_file_that_gives_every_attribute(project: Path) -> None:
    path = project / "environments" / "ownk8s.yaml"
    (project / "cdk.context.json").write_text(json.dumps({**read_context(project), KEY: {k: FULL[k] for k in ATTRIBUTES}}))
    assert load_environment(path) == load_environment(FIXTURE)


def test_the_files_value_wins_and_validate_names_a_pin_that_disagrees(project: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(project, {"cluster_name": FULL["cluster_name"], "kubernetes_version": "1.34"})
    (project / "cdk.context.json").write_text(json.dumps({**read_context(project), KEY: {k: FULL[k] for k in ATTRIBUTES}}))
    assert load_environment(path).eks.version == "1.34"  # type: ignore[union-attr]
    assert main(["validate", "--env", "ownk8s"]) == 1
    (line,) = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("warning: ")]
    assert line.startswith(
        "environments/ownk8s.yaml: eks.existing.kubernetes_version: the file says '1.34', cdk.context.json pins '1.35'"
    )
    assert "remove the key from the file" in line


def test_pin_refuses_another_accounts_credentials_and_names_a_missing_cluster(
    project: Path, aws: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    before = (project / "cdk.context.json").read_bytes()
    assert main(["pin", "--env", "ownk8s"]) == 1  # no cluster yet
    assert "eks.existing.cluster_name: no cluster platform-prod in 777788889999/us-east-1" in capsys.readouterr().out
    monkeypatch.setenv("MOTO_ACCOUNT_ID", "999999999999")
    assert main(["pin", "--env", "ownk8s"]) == 2
    err = capsys.readouterr().err
    assert "the credentials are for account 999999999999, but ownk8s deploys into 777788889999" in err
    assert "Traceback" not in err and (project / "cdk.context.json").read_bytes() == before


def test_pin_reads_the_service_block_of_an_ipv6_cluster(project: Path, aws: Any) -> None:
    """An IPv6 cluster's DescribeCluster has serviceIpv6Cidr and no serviceIpv4Cidr (EKS API reference,
    KubernetesNetworkConfigResponse: "a value for serviceIpv6Cidr or serviceIpv4Cidr, but not both")."""
    _create_cluster(aws)
    from moto.eks.models import eks_backends

    seeded = eks_backends[DATA["account"]][DATA["region"]].clusters[FULL["cluster_name"]]
    seeded.kubernetes_network_config = {"ipFamily": "ipv6", "serviceIpv6Cidr": "fd30:1c53:5f8a::/108"}
    assert "serviceIpv4Cidr" not in aws.describe_cluster(name=FULL["cluster_name"])["cluster"]["kubernetesNetworkConfig"]
    assert main(["pin", "--env", "ownk8s"]) == 0
    assert read_context(project)[KEY]["service_cidr"] == "fd30:1c53:5f8a::/108"
    env = load_environment(project / "environments" / "ownk8s.yaml")
    assert env.eks is not None and env.eks.existing is not None and env.eks.existing.service_cidr == "fd30:1c53:5f8a::/108"
