"""Reuse footguns (issue 49, "Reuse"): a pool name no node group of the cluster has is refused before synthesis in one
line naming the construct, the key and the pools that exist; a construct that needs an access-log bucket makes one
when none is given (cdk-nag's ELB2 passes instead of failing synthesis with a traceback)."""

from __future__ import annotations

from typing import Any

import pytest
from aws_cdk import Stack
from aws_cdk import aws_sns as sns
from aws_cdk.assertions import Template

from neuronkit.catalog import releases, serving
from neuronkit.constructs import compliance
from neuronkit.constructs.eks import (
    EksServingFleet,
    EksServingSpec,
    LoadBalancerController,
    NeuronNodeGroup,
    NeuronWorkloads,
    NodeGroupSpec,
    TrainingJobs,
    TrainingJobsSpec,
    TrainingPool,
    WorkloadsSpec,
)
from neuronkit.constructs.eks.pools import cluster_pools
from neuronkit.constructs.inference_fleet import InferenceFleet
from neuronkit.constructs.node_pool import FleetNodesSpec
from neuronkit.constructs.serving_specs import ServingSpec
from neuronkit.constructs.storage import StorageAccess
from tests.templates import bare_stack, resources, template
from tests.unit.test_eks import _cluster
from tests.unit.test_eks_serving import _asg_vpc

LLAMA_8B = serving.ModelSpec(id="meta-llama/Llama-3.1-8B-Instruct", s3_prefix="models/llama/", parameters_billion=8.0)
STORAGE = StorageAccess(datasets_bucket="d", checkpoints_bucket="c", artifacts_bucket="a")


def _with_groups(stack: Stack, groups: dict[str, list[str]]) -> Any:
    cluster = _cluster(stack)
    for name, types in groups.items():
        NeuronNodeGroup(
            stack, f"Group-{name}", environment="team", cluster=cluster, subnets=cluster.cluster.vpc.private_subnets,
            role="inference", script="#!/bin/bash\necho check\n",
            spec=NodeGroupSpec(name=name, instance_types=types, max_size=2, efa=False),
        )  # fmt: skip
    return cluster


def _serving(stack: Stack, cluster: Any, gpu_pool: str) -> EksServingFleet:
    controller = LoadBalancerController(stack, "Lbc", cluster=cluster, environment="team")
    return EksServingFleet(
        stack, "Chat", environment="team", cluster=cluster, controller=controller,
        spec=EksServingSpec(
            name="chat", serving=ServingSpec(model=LLAMA_8B, neuron_release=releases.release("2.31.1")),
            neuron_type="inf2.8xlarge", neuron_pool="chat", gpu_type="g6e.2xlarge", gpu_pool=gpu_pool,
        ),
        vpc=cluster.cluster.vpc, subnets=cluster.cluster.vpc.private_subnets[:2], artifacts_bucket="team-artifacts",
        ingress_cidr="10.0.0.0/16",
    )  # fmt: skip


def test_the_clusters_pools_are_its_node_groups() -> None:
    stack = bare_stack()
    cluster = _with_groups(stack, {"chat": ["inf2.8xlarge"], "chat-gpu": ["g6e.2xlarge"]})
    assert cluster_pools(cluster) == ["chat", "chat-gpu"]
    other = _cluster(bare_stack("Other"))
    assert cluster_pools(other) == []


def test_a_serving_fleet_refuses_a_gpu_pool_no_node_group_has_in_one_line() -> None:
    stack = bare_stack()
    cluster = _with_groups(stack, {"chat": ["inf2.8xlarge"], "chat-gpu": ["g6e.2xlarge"]})
    with pytest.raises(ValueError) as e:
        _serving(stack, cluster, "chat-gpus")
    message = str(e.value)
    assert "\n" not in message
    assert message.startswith("EksServingFleet chat: gpu_pool 'chat-gpus' is no node group of cluster team")
    assert "(its pools: chat, chat-gpu)" in message
    # The right name passes; a cluster with none of the kit's node groups is not checked (the construct alone).
    good = bare_stack("Good")
    fleet = _serving(good, _with_groups(good, {"chat": ["inf2.8xlarge"], "chat-gpu": ["g6e.2xlarge"]}), "chat-gpu")
    assert [w.pool for w in fleet.workloads] == ["chat", "chat-gpu"]
    alone = bare_stack("Alone")
    assert _serving(alone, _with_groups(alone, {}), "anything").gpu_deployment == "chat-gpu"


def test_training_jobs_and_workloads_refuse_a_pool_no_node_group_has() -> None:
    stack = bare_stack()
    cluster = _with_groups(stack, {"pretrain": ["trn2.48xlarge"], "pretrain-gpu": ["g6e.2xlarge"]})
    pools = [TrainingPool(name="pretrian", instance_type="trn2.48xlarge", max_nodes=2, release="2.28.1")]
    with pytest.raises(ValueError, match=r"^TrainingJobs: pools\[\]\.name 'pretrian' is no node group of cluster team"):
        TrainingJobs(stack, "Jobs", cluster=cluster, spec=TrainingJobsSpec(environment="team", pools=pools), storage=STORAGE)
    with pytest.raises(ValueError, match=r"^NeuronWorkloads: gpu_pools 'train-gpu' is no node group .*pretrain, pretrain-gpu"):
        NeuronWorkloads(
            stack, "Workloads", cluster=cluster,
            spec=WorkloadsSpec(environment="team", neuron_releases=["2.28.1"], gpu_pools=["train-gpu"]),
        )  # fmt: skip


def test_an_inference_fleet_without_an_access_logs_bucket_makes_its_own_and_passes_cdk_nag() -> None:
    stack = bare_stack("Fleet")
    app = stack.node.root
    InferenceFleet(
        stack, "Fleet", environment="team", name="chat",
        nodes=FleetNodesSpec(neuron_types=["inf2.8xlarge"], min_size=1, max_size=2),
        vpc=_asg_vpc(stack), subnet_ids={"use1-az1": "subnet-1", "use1-az2": "subnet-2"}, artifacts_bucket="team-artifacts",
        serving=ServingSpec(model=LLAMA_8B, neuron_release=releases.release("2.28.1")),
        notifications_topic=sns.Topic(stack, "Notifications", enforce_ssl=True, master_key=None),
    )  # fmt: skip
    compliance.apply(app)
    t = Template.from_stack(stack).to_json()  # cdk-nag findings raise here
    buckets = [k for k in resources(t, "AWS::S3::Bucket") if "AccessLogs" in k]
    assert len(buckets) == 1
    (alb,) = resources(t, "AWS::ElasticLoadBalancingV2::LoadBalancer").values()
    attrs = {a["Key"]: a["Value"] for a in alb["Properties"]["LoadBalancerAttributes"]}
    assert attrs["access_logs.s3.enabled"] == "true"


def test_a_given_access_logs_bucket_is_used_and_none_made() -> None:
    from aws_cdk import aws_s3 as s3

    stack = bare_stack()
    logs = s3.Bucket.from_bucket_name(stack, "Logs", "team-access-logs")
    InferenceFleet(
        stack, "Fleet", environment="team", name="chat",
        nodes=FleetNodesSpec(neuron_types=["inf2.8xlarge"], min_size=1, max_size=2),
        vpc=_asg_vpc(stack), subnet_ids={"use1-az1": "subnet-1", "use1-az2": "subnet-2"}, artifacts_bucket="team-artifacts",
        serving=ServingSpec(model=LLAMA_8B, neuron_release=releases.release("2.28.1")), access_logs_bucket=logs,
    )  # fmt: skip
    t = template(stack)
    assert not resources(t, "AWS::S3::Bucket")
    (alb,) = resources(t, "AWS::ElasticLoadBalancingV2::LoadBalancer").values()
    attrs = {a["Key"]: a["Value"] for a in alb["Properties"]["LoadBalancerAttributes"]}
    assert attrs["access_logs.s3.bucket"] == "team-access-logs"
