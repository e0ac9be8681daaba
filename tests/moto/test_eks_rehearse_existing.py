"""`neuronkit rehearse` against a cluster created outside the kit (issue 51): the embedded mock first holds the user's
cluster (VPC, subnets, cluster security group under the ownk8s file's ids, then `eks.create_cluster`), then the real
CDK CLI deploys the kit's stacks against it. What the mock can show: the stacks create no AWS::EKS::Cluster and moto
holds no second cluster, the kit's node groups are on the user's cluster, and the access entries (which moto does not
model) are named in the report."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from neuronkit.config import load_environment
from neuronkit.constructs.eks.nodegroup_name import prefix_of
from neuronkit.rehearsal import EnvironmentReport, Rehearsal, render_report
from tests.conftest import ROOT

pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse .* not supported by moto:UserWarning")
FILE = ROOT / "tests" / "fixtures" / "user_environments" / "ownk8s.yaml"
ENV = load_environment(FILE)
CLUSTER = ENV.eks.existing.cluster_name  # type: ignore[union-attr]


@pytest.fixture(scope="module")
def rehearsed() -> Iterator[tuple[Rehearsal, EnvironmentReport]]:
    with Rehearsal(ROOT, env_file=FILE, progress=lambda _: None) as r:
        (report,) = r.deploy()
        yield r, report


def test_the_kit_deploys_onto_the_users_cluster_and_creates_none(rehearsed: tuple[Rehearsal, EnvironmentReport]) -> None:
    r, report = rehearsed
    assert report.ok, report.problems
    assert [s.name for s in report.stacks] == [f"{ENV.name}-network", f"{ENV.name}-storage", f"{ENV.name}-eks"]
    assert not any(s.resources("AWS::EKS::Cluster") for s in r.stacks(ENV.name))
    eks = r.client("eks", ENV.account, ENV.region)
    assert eks.list_clusters()["clusters"] == [CLUSTER]  # the user's, and no second one
    groups = eks.list_nodegroups(clusterName=CLUSTER)["nodegroups"]
    pools = [c.name for c in ENV.training] + [f.name for f in ENV.inference]
    assert {prefix_of(g) for g in groups} >= {f"{ENV.name}-system", *(f"{ENV.name}-{p}" for p in pools)}, groups
    for group in groups:
        assert eks.describe_nodegroup(clusterName=CLUSTER, nodegroupName=group)["nodegroup"]["clusterName"] == CLUSTER
    # The kit's VPC is the user's: its network stack created none.
    ec2 = r.client("ec2", ENV.account, ENV.region)
    assert [v["VpcId"] for v in ec2.describe_vpcs()["Vpcs"] if not v.get("IsDefault")] == [ENV.network.existing.vpc_id]  # type: ignore[union-attr]


def test_the_report_says_what_the_mock_held_and_what_it_does_not_model(rehearsed: tuple[Rehearsal, EnvironmentReport]) -> None:
    _, report = rehearsed
    (held,) = report.seeded
    assert f"the mock holds EKS cluster {CLUSTER}, created outside the kit" in held
    version = ENV.eks.version  # type: ignore[union-attr]
    assert any(line.startswith(f"cluster {CLUSTER}: Kubernetes {version}, created outside the kit") for line in report.eks)
    # The kubectl handler's entry and the spill function's (the fleet has a GPU fallback): moto models no access entry.
    assert len(report.unmodelled["AWS::EKS::AccessEntry"]) == 2
    text = render_report(report)
    assert "held by the mock before the deploy:" in text and f"cluster {CLUSTER}" in text
