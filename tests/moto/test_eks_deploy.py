"""Deploy each platform: eks environment of the project (a user's own EKS file among them) into moto's CloudFormation
from the session synth, and read the cluster and its node groups back with boto3: what the file asks for is what
EKS holds. moto models the cluster and node groups (neuronkit/rehearsal/moto_workarounds.py); every type it skips
must be covered by an assertion test, as in test_deploy.py."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from neuronkit import catalog
from neuronkit.constructs.eks.nodegroup_name import prefix_of
from neuronkit.rehearsal import moto_workarounds
from tests.conftest import Synth
from tests.moto.test_deploy import SKIPPED_COVERED_BY, publish_assets
from tests.project import on_platform

ENVIRONMENTS = on_platform("eks")
EKS = catalog.eks_facts()
# The EKS types moto's CloudFormation skips, and the assertion test that covers each one.
EKS_SKIPPED_COVERED_BY = {
    **SKIPPED_COVERED_BY,
    "AWS::EKS::AccessEntry": "tests/unit/test_eks.py::test_admins_and_viewers_get_scoped_access_policies",
    "AWS::EKS::Addon": "tests/unit/test_eks.py::test_versions_and_logs_are_the_catalogs",
    "AWS::EKS::PodIdentityAssociation": "tests/unit/test_eks_workloads.py",
    "Custom::AWS": "tests/unit/test_eks.py::test_every_node_group_turns_on_its_groups_metrics_for_the_dashboard",
    "Custom::AWSCDK-EKS-HelmChart": "tests/compliance/test_eks_example.py::test_the_example_carries_the_neuron_chart_the_efa_plugin_and_the_lustre_volume",
    "Custom::AWSCDK-EKS-KubernetesResource": "tests/unit/test_eks_workloads.py, tests/unit/test_eks_serving.py",
    "Custom::AWSCDK-EKS-KubernetesPatch": "tests/compliance/test_eks_day_two.py, tests/unit/test_eks_serving.py",
    "Custom::NeuronkitNodegroupDesiredSize": "tests/unit/test_node_group_size.py, tests/compliance/test_eks_day_two.py",
}


@pytest.fixture(scope="module", params=sorted(ENVIRONMENTS))
def deployed(
    request: pytest.FixtureRequest, synth: Synth, aws_credentials: None, monkeypatch_module: Any
) -> Iterator[tuple[str, Any, set[str]]]:
    env = ENVIRONMENTS[request.param]
    monkeypatch_module.setenv("MOTO_ACCOUNT_ID", env.account)
    moto_workarounds.apply()
    with mock_aws():
        session = boto3.Session(region_name=env.region)
        session.client("ssm").put_parameter(Name="/cdk-bootstrap/hnb659fds/version", Value="30", Type="String")
        cfn = session.client("cloudformation")
        if env.eks is not None and env.eks.existing is not None:
            _users_cluster(session, env)  # eks.existing: the user's cluster is there before the kit's stacks
        names = [f"{env.name}-{part}" for part in ("network", "storage", "eks")]
        assert all(n in synth.templates for n in names), sorted(synth.templates)
        skipped: set[str] = set()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for name in names:
                publish_assets(session, synth.outdir, name)
                template = json.dumps(synth.template(name))
                cfn.create_stack(StackName=name, TemplateBody=template, Capabilities=["CAPABILITY_IAM", "CAPABILITY_NAMED_IAM"])
        skipped = {str(w.message).split()[3] for w in caught if str(w.message).startswith("Tried to parse ")}
        yield request.param, session, skipped


def _users_cluster(session: Any, env: Any) -> None:
    """A cluster created outside the kit, as a user's would be (the rehearsal's helper: VPC, subnets, cluster security
    group under the file's ids, then the cluster)."""
    assert moto_workarounds.seed_users_cluster(session.client, env.account, env.region, env) == env.eks.existing.cluster_name


def cluster_name(env: Any) -> str:
    return str(env.eks.existing.cluster_name) if env.eks is not None and env.eks.existing is not None else str(env.name)


def test_stacks_reach_create_complete_and_skipped_types_are_covered(deployed: tuple[str, Any, set[str]]) -> None:
    name, session, skipped = deployed
    cfn = session.client("cloudformation")
    for part in ("network", "storage", "eks"):
        assert cfn.describe_stacks(StackName=f"{name}-{part}")["Stacks"][0]["StackStatus"] == "CREATE_COMPLETE"
    uncovered = skipped - set(EKS_SKIPPED_COVERED_BY)
    assert not uncovered, f"moto did not create {sorted(uncovered)}: cover them with assertion tests"


def test_the_cluster_and_every_node_group_hold_what_the_file_asks(deployed: tuple[str, Any, set[str]]) -> None:
    name, session, _ = deployed
    env = ENVIRONMENTS[name]
    eks = session.client("eks")
    cluster = eks.describe_cluster(name=cluster_name(env))["cluster"]
    assert cluster["version"] == (env.eks.version if env.eks else None)
    assert cluster["resourcesVpcConfig"]["endpointPrivateAccess"] is True
    expected: dict[str, tuple[list[str], int, int, int]] = {}
    for c in env.training:
        expected[f"{name}-{c.name}"] = (
            [c.instance_type],
            c.min_size,
            c.min_size if c.desired_size is None else c.desired_size,
            c.max_size,
        )
        if c.gpu_pool is not None:
            g = c.gpu_pool
            expected[f"{name}-{c.name}-gpu"] = (
                [g.instance_type],
                g.min_size,
                g.min_size if g.desired_size is None else g.desired_size,
                g.max_size,
            )
    from neuronkit.kubernetes.serving import headroom_nodes
    from neuronkit.reports.pools import eks_fallback_groups

    for f in env.inference:
        # A served fleet's groups keep room above max_size for a compile Job and a surge pod (issue 49).
        room = (lambda a: headroom_nodes(a)) if f.model is not None else (lambda a: 0)
        expected[f"{name}-{f.name}"] = (
            list(f.neuron_types),
            f.min_size,
            f.min_size if f.desired_size is None else f.desired_size,
            f.max_size + room("neuron"),
        )
        # A GPU node group per fallback type of a served fleet (one of every type without a model), as the stack builds.
        for pool, types in eks_fallback_groups(f.name, list(f.fallback_types), f.model is not None):
            expected[f"{name}-{pool}"] = (types, 0, 0, f.max_size + room("gpu"))
    if env.eks is not None:  # the system node group for add-ons and controllers
        system = env.eks.system_nodes.resolved()
        expected[f"{name}-system"] = (
            [str(system["instance_type"])],
            int(system["min_size"]),
            int(system["desired_size"]),
            int(system["max_size"]),
        )
    # Keyed by ENV-POOL: EKS's names carry the digest of the create-only properties (ENV-POOL-<digest>).
    groups = {
        prefix_of(g): eks.describe_nodegroup(clusterName=cluster_name(env), nodegroupName=g)["nodegroup"]
        for g in eks.list_nodegroups(clusterName=cluster_name(env))["nodegroups"]
    }
    assert sorted(groups) == sorted(expected)
    ec2 = session.client("ec2")
    for group_name, (types, low, desired, high) in expected.items():
        group = groups[group_name]
        scaling = group["scalingConfig"]
        data = ec2.describe_launch_template_versions(LaunchTemplateId=group["launchTemplate"]["id"])["LaunchTemplateVersions"][0][
            "LaunchTemplateData"
        ]
        # A Capacity Block group names its one type in its launch template only (moto then reports its default type).
        named = [data["InstanceType"]] if group["capacityType"] == "CAPACITY_BLOCK" else group["instanceTypes"]
        assert named == types and (scaling["minSize"], scaling["desiredSize"], scaling["maxSize"]) == (low, desired, high)
        if group_name == f"{name}-system":  # the AL2023 standard image at the pools' release version
            image = {
                "ami_type": EKS["system_nodes"]["ami_type"],
                "release_version": EKS["node_images"]["neuron"]["release_version"],
            }
        elif catalog.get(types[0]).is_neuron:  # the newest image in the window of the pool's release (issue 46)
            from neuronkit.catalog import eks_images
            from neuronkit.config import pool_releases

            rel = pool_releases(env)[group_name.removeprefix(f"{name}-")].release
            assert rel is not None and env.eks is not None
            fits = eks_images.for_release(env.eks.version, rel.version)
            assert fits is not None
            image = {"ami_type": EKS["node_images"]["neuron"]["ami_type"], "release_version": fits.release_version}
        else:
            image = EKS["node_images"]["gpu"]
        assert (group["amiType"], group["releaseVersion"]) == (image["ami_type"], image["release_version"])
        assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == 1 and "ImageId" not in data
        tags = {
            t["Key"]: t["Value"] for spec in data["TagSpecifications"] if spec["ResourceType"] == "instance" for t in spec["Tags"]
        }
        assert tags["neuronkit:environment"] == name and tags["cost-center"] == env.cost_center


def test_the_alarm_topic_dashboard_and_node_log_groups_exist(deployed: tuple[str, Any, set[str]]) -> None:
    name, session, _ = deployed
    env = ENVIRONMENTS[name]
    topics = [t["TopicArn"] for t in session.client("sns").list_topics()["Topics"]]
    assert [t for t in topics if f"{name}-eks" in t and "Alarms" in t]
    dashboards = {d["DashboardName"] for d in session.client("cloudwatch").list_dashboards()["DashboardEntries"]}
    assert f"neuronkit-{name}" in dashboards
    logs = session.client("logs").describe_log_groups(logGroupNamePrefix=f"/neuronkit/{name}/")["logGroups"]
    boot = {g["logGroupName"]: g for g in logs}[f"/neuronkit/{name}/{env.training[0].name}/boot"] if env.training else None
    assert boot is None or boot["retentionInDays"] == env.monitoring.log_retention_days


def test_served_fleets_get_their_internal_alb_and_ip_target_group(deployed: tuple[str, Any, set[str]]) -> None:
    """A fleet with a model is served behind its own internal ALB whose one target group takes IP targets (the
    fleet's pods, registered by the TargetGroupBinding); a fleet without one is a node group only."""
    name, session, _ = deployed
    env = ENVIRONMENTS[name]
    served = [f for f in env.inference if f.model is not None]
    elb = session.client("elbv2")
    balancers = elb.describe_load_balancers()["LoadBalancers"]
    assert len(balancers) == len(served) and all(b["Scheme"] == "internal" for b in balancers)
    groups = elb.describe_target_groups()["TargetGroups"]
    assert len(groups) == len(served) and all(g["TargetType"] == "ip" for g in groups)
    assert sorted(g["Port"] for g in groups) == sorted(f.port for f in served)
