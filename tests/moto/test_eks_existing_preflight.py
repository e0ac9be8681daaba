"""`neuronkit preflight` on a file with eks.existing (issue 51): read-only checks of the user's cluster against moto's
EKS (DescribeCluster, ListAddons), and the WARN line for what needs the Kubernetes API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
from moto import mock_aws

from neuronkit.config import load_environment
from neuronkit.kubernetes.preflight import check_existing_cluster, pinned_addons

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "fixtures" / "user_environments" / "ownk8s.yaml"


def _cluster(eks: Any, version: str) -> None:
    role = boto3.client("iam", region_name="us-east-1").create_role(RoleName="c", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    eks.create_cluster(name="platform-prod", version=version, roleArn=role, resourcesVpcConfig={"subnetIds": []})


def test_the_users_cluster_is_read_and_what_the_kit_cannot_see_is_said(aws_credentials: None) -> None:
    env = load_environment(FIXTURE)
    with mock_aws():
        eks = boto3.client("eks", region_name="us-east-1")
        assert [c.status for c in check_existing_cluster(env, eks)] == ["FAIL"]  # no such cluster yet
        _cluster(eks, "1.34")
        checks = {c.name: c for c in check_existing_cluster(env, eks)}
    version = checks["EKS cluster platform-prod version"]
    assert version.status == "FAIL" and "1.34" in version.detail and '"1.34"' in version.fix
    # moto's cluster has its own endpoint and CA: preflight says they differ from the file's and how to copy them.
    assert checks["EKS cluster platform-prod endpoint"].status == "FAIL"
    assert "describe-cluster --name platform-prod" in checks["EKS cluster platform-prod endpoint"].fix
    # The core add-ons default to existing on a user's cluster: moto 5 answers ListAddons "Not yet implemented", so the
    # add-ons are one WARN line naming what was not checked.
    addons = checks["EKS cluster platform-prod add-ons"]
    assert addons.status == "WARN" and "vpc-cni" in addons.detail and "not checked" in addons.detail
    # kueue and cluster_autoscaler are existing, and the device plugins' DaemonSets too: read through the Kubernetes
    # API (tests/unit/test_eks_cluster_api.py), no line names unchecked components.
    assert "EKS cluster platform-prod components not checked" not in checks


def test_the_kit_checks_no_pins_of_add_ons_it_does_not_install() -> None:
    env = load_environment(FIXTURE)
    assert not {"vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent"} & set(pinned_addons(env))


class _Recorded:
    """DescribeCluster and ListAddons answers of a cluster matching the file (recorded shape; moto 5 has no ListAddons)."""

    def __init__(self, env: Any, mode: str) -> None:
        ex = env.eks.existing
        self._cluster = {
            "version": ex.kubernetes_version, "endpoint": ex.endpoint, "certificateAuthority": {"data": ex.certificate_authority},
            "resourcesVpcConfig": {"clusterSecurityGroupId": ex.cluster_security_group_id},
            "accessConfig": {"authenticationMode": mode},
        }  # fmt: skip

    def describe_cluster(self, name: str) -> dict[str, Any]:
        return {"cluster": self._cluster}

    def list_addons(self, clusterName: str) -> dict[str, Any]:  # noqa: N803 - boto3's keyword
        return {"addons": ["vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent"]}


def test_a_matching_cluster_passes_and_config_map_fails_with_the_command() -> None:
    env = load_environment(FIXTURE)
    checks = check_existing_cluster(env, _Recorded(env, "API_AND_CONFIG_MAP"))
    assert {c.status for c in checks if "not checked" not in c.name} == {"PASS"}
    assert len([c for c in checks if " add-on " in c.name]) == 4
    mode = next(c for c in check_existing_cluster(env, _Recorded(env, "CONFIG_MAP")) if c.name.endswith("authentication mode"))
    assert mode.status == "FAIL" and "authenticationMode=API_AND_CONFIG_MAP" in mode.fix
