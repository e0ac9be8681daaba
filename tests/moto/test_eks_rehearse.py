"""`neuronkit rehearse --file examples/environments/eks.yaml`: the real CDK CLI deploys the EKS example into moto.

The cluster and its node groups are created through moto's EKS backend (neuronkit/rehearsal/moto_workarounds.py,
eks-from-cloudformation) and read back here with boto3; every EKS sub-resource and custom resource moto does not
model is named in the report."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from neuronkit import catalog
from neuronkit.config import load_environment
from neuronkit.constructs.eks.nodegroup_name import prefix_of
from neuronkit.rehearsal import EnvironmentReport, Rehearsal, render_report
from tests.conftest import ROOT

pytestmark = pytest.mark.filterwarnings("ignore:Tried to parse .* not supported by moto:UserWarning")
FILE = ROOT / "examples" / "environments" / "eks.yaml"
ENV = load_environment(FILE)
EKS = catalog.eks_facts()


@pytest.fixture(scope="module")
def rehearsed() -> Iterator[tuple[Rehearsal, EnvironmentReport]]:
    with Rehearsal(ROOT, env_file=FILE, progress=lambda _: None) as r:
        (report,) = r.deploy()
        yield r, report


def _eks(rehearsed: tuple[Rehearsal, EnvironmentReport]) -> Any:
    return rehearsed[0].client("eks", ENV.account, ENV.region)


def test_the_eks_example_rehearses_cluster_and_node_groups(rehearsed: tuple[Rehearsal, EnvironmentReport]) -> None:
    _, report = rehearsed
    assert report.ok, report.problems
    assert [s.name for s in report.stacks] == ["eks-network", "eks-storage", "eks-eks"]
    eks = _eks(rehearsed)
    cluster = eks.describe_cluster(name=ENV.name)["cluster"]
    assert cluster["version"] == EKS["kubernetes"]["version"]
    assert cluster["resourcesVpcConfig"]["endpointPrivateAccess"] is True
    assert cluster["resourcesVpcConfig"]["endpointPublicAccess"] is False
    assert cluster["encryptionConfig"][0]["resources"] == ["secrets"]
    # Keyed by ENV-POOL: EKS's names carry the digest of the create-only properties (ENV-POOL-<digest>).
    groups = {prefix_of(g): eks.describe_nodegroup(clusterName=ENV.name, nodegroupName=g)["nodegroup"]
              for g in eks.list_nodegroups(clusterName=ENV.name)["nodegroups"]}  # fmt: skip
    assert sorted(groups) == ["eks-chat", "eks-chat-gpu", "eks-chat-trn2", "eks-pretrain", "eks-pretrain-gpu", "eks-system"]
    assert groups["eks-system"]["capacityType"] == "ON_DEMAND" and groups["eks-system"]["labels"] == {
        "neuronkit.io/pool": "system"
    }
    pretrain = groups["eks-pretrain"]
    # A Capacity Block group names its type in its launch template only (EKS guide; moto then reports its default).
    assert pretrain["capacityType"] == "CAPACITY_BLOCK"
    assert pretrain["amiType"] == EKS["node_images"]["neuron"]["ami_type"]
    # 2.28.1's window ends below driver 2.29 ("requires Neuron Runtime Library 2.33 or later"): not the 20260714 image.
    assert pretrain["releaseVersion"] == "1.35.6-20260625" != groups["eks-chat-trn2"]["releaseVersion"]
    assert groups["eks-pretrain-gpu"]["amiType"] == EKS["node_images"]["gpu"]["ami_type"]
    # The node group's launch template exists in moto and carries the trn2 EFA layout.
    ec2 = rehearsed[0].client("ec2", ENV.account, ENV.region)
    lt_id = pretrain["launchTemplate"]["id"]
    data = ec2.describe_launch_template_versions(LaunchTemplateId=lt_id)["LaunchTemplateVersions"][0]["LaunchTemplateData"]
    assert len([i for i in data["NetworkInterfaces"] if i.get("InterfaceType") == "efa-only"]) == 16
    assert data["InstanceType"] == "trn2.48xlarge" and data["MetadataOptions"]["InstanceMetadataTags"] == "disabled"
    assert data["MetadataOptions"]["HttpPutResponseHopLimit"] == 1
    assert data["InstanceType"] == "trn2.48xlarge"


def test_every_eks_piece_moto_does_not_model_is_named(rehearsed: tuple[Rehearsal, EnvironmentReport]) -> None:
    _, report = rehearsed
    unmodelled = report.unmodelled
    # admin, viewer, the kubectl handler's role, and per served fleet its spill controller (every served fleet has one
    # since issue 49's second round: it reports the rollout and compile state even without GPU fallback types)
    assert len(unmodelled["AWS::EKS::AccessEntry"]) == 3 + 2
    addons = [k for k in EKS["addons"] if k != "source"] + ["aws-fsx-csi-driver"]  # the example has Lustre
    assert len(unmodelled["AWS::EKS::Addon"]) == len(addons) == 5
    # Part 2: the two Helm charts, the Lustre volume and NPD namespace manifests and the two pod identity associations
    # are named too. Part 3 (serving `chat`) adds the load balancer controller chart, the serving namespace and the
    # fleet's manifests, and the pod identity of the controller and of the fleet's pods; part 3b Cluster Autoscaler's
    # and KEDA's charts and pod identity associations, and per served fleet its ScaledObject and the spill
    # controller's Role; part 4 JobSet and Kueue, the training namespace, queues and pool manifests, and the pool's
    # pod role. The NVIDIA device plugin chart comes with the GPU node groups (pretrain-gpu, chat-gpu).
    assert len(unmodelled["Custom::AWSCDK-EKS-HelmChart"]) == 2 + 1 + 2 + 2 + 1
    # Issue 48 adds the Role that lets a pool's job submitters manage JobSets in the training namespace; chat-trn2 (the
    # second release, issue 46) its serving manifests and its ScaledObject; issue 47 the GPU Deployment's create-once
    # seed, its template patch, and the autoscaled groups' desired sizes.
    # Issue 49 (second round): the KEDA, JobSet and Kueue namespaces the kit creates labelled (3), and per served fleet
    # its Service, applied before the binding and the pods (2); the last 2 before them: a binding per fleet. The last
    # 1: chat-trn2's spill Role (every served fleet's function reads its rollout and compile state).
    manifests = unmodelled["Custom::AWSCDK-EKS-KubernetesResource"]
    assert len(manifests) == 2 + 2 + 2 + 3 + 1 + 2 + 1 + 2 + 3 + 2 + 1
    assert len(unmodelled["Custom::AWSCDK-EKS-KubernetesPatch"]) == 1
    assert len(unmodelled["Custom::NeuronkitNodegroupDesiredSize"]) == 3  # chat, chat-gpu, chat-trn2
    assert len(unmodelled["AWS::EKS::PodIdentityAssociation"]) == 2 + 2 + 2 + 1 + 1  # + chat-trn2's pods
    # Per node group: its Auto Scaling group's name (the Capacity Block schedule and the dashboard and alarms name
    # it) and the group metrics turned on for it (the dashboard's nodes in service).
    names = [r for r in unmodelled["Custom::AWS"] if "AutoScalingGroupName" in r]
    metrics = [r for r in unmodelled["Custom::AWS"] if "GroupMetrics" in r]
    assert len(names) == len(metrics) == 5 and len(unmodelled["Custom::AWS"]) == 10
    assert "AWS::EKS::Cluster" not in unmodelled and "AWS::EKS::Nodegroup" not in unmodelled
    text = render_report(report)
    assert f"cluster eks: Kubernetes {EKS['kubernetes']['version']}, private endpoint, secrets key" in text
    assert "AWS::EKS::AccessEntry x5" in text and "AWS::EKS::Addon x5" in text
