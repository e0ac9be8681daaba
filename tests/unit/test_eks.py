"""The EKS constructs in a bare stack: the cluster (endpoint, access, secrets key, pinned versions) and node groups
(launch templates with the kit's EFA layout, hop limit 1, the catalog's image, Capacity Block schedule)."""

from __future__ import annotations

import base64
import datetime as dt
import json
from typing import Any

import pytest
from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2

from neuronkit import catalog
from neuronkit.constructs.eks import ClusterSpec, NeuronEksCluster, NeuronNodeGroup, NodeGroupSpec, node_user_data
from neuronkit.constructs.training_cluster import CapacitySpec
from tests.templates import VPC_ID, bare_stack, group_name, one, resources, template

EKS = catalog.eks_facts()
ADMIN = "arn:aws:iam::123456789012:role/platform-admin"
VIEWER = "arn:aws:iam::123456789012:role/ml-engineers"
SUBNETS = ("subnet-0aaaaaaaaaaaaaaa1", "subnet-0aaaaaaaaaaaaaaa2")
START, END = dt.datetime(2030, 3, 1, 11, 30, tzinfo=dt.UTC), dt.datetime(2030, 3, 15, 11, 30, tzinfo=dt.UTC)


def _vpc(stack: Stack) -> ec2.IVpc:
    return ec2.Vpc.from_vpc_attributes(
        stack, "Vpc", vpc_id=VPC_ID, availability_zones=["us-east-1a", "us-east-1b"], private_subnet_ids=list(SUBNETS)
    )


def _cluster(stack: Stack, **spec: Any) -> NeuronEksCluster:
    vpc = _vpc(stack)
    return NeuronEksCluster(
        stack,
        "Eks",
        spec=ClusterSpec(name="team", admins=[ADMIN], viewers=[VIEWER], **spec),
        vpc=vpc,
        subnets=vpc.private_subnets,
    )


@pytest.fixture(scope="module")
def cluster_template() -> dict[str, Any]:
    stack = bare_stack()
    _cluster(stack)
    return template(stack)


@pytest.fixture(scope="module")
def nodes_template() -> dict[str, Any]:
    stack = bare_stack()
    cluster = _cluster(stack)
    subnets = cluster.cluster.vpc.private_subnets
    NeuronNodeGroup(
        stack, "Train", environment="team", cluster=cluster, subnets=subnets[:1], script="#!/bin/bash\necho check\n",
        spec=NodeGroupSpec(
            name="pretrain", instance_types=["trn2.48xlarge"], max_size=16,
            capacity=CapacitySpec(kind="capacity-block", reservation_id="cr-0a1b2c3d4e5f60718", start=START, end=END),
        ),
    )  # fmt: skip
    NeuronNodeGroup(
        stack, "Serve", environment="team", cluster=cluster, subnets=subnets, script="#!/bin/bash\necho check\n", role="inference",
        spec=NodeGroupSpec(name="chat", instance_types=["inf2.48xlarge", "inf2.24xlarge"], min_size=1, max_size=4, efa=False),
    )  # fmt: skip
    NeuronNodeGroup(
        stack, "Gpu", environment="team", cluster=cluster, subnets=subnets[:1], script="#!/bin/bash\necho check\n",
        spec=NodeGroupSpec(name="pretrain-gpu", instance_types=["p5.48xlarge"], max_size=2), role="training-gpu",
    )  # fmt: skip
    return template(stack)


def _arn(value: Any) -> str:
    """An ARN written as Fn::Join of arn:, the partition and the rest, in the aws partition."""
    if isinstance(value, str):
        return value
    return "".join(p if isinstance(p, str) else "aws" for p in value["Fn::Join"][1])


def _group(data: dict[str, Any], name: str) -> dict[str, Any]:
    found = [r for r in resources(data, "AWS::EKS::Nodegroup").values() if group_name(r) == f"team-{name}"]
    assert len(found) == 1, name
    return found[0]


def _pool_groups(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The node groups that are pools (they carry the pool Metadata); the system node group is not one."""
    return {k: g for k, g in resources(data, "AWS::EKS::Nodegroup").items() if "neuronkit" in g.get("Metadata", {})}


def _template_of(data: dict[str, Any], group: dict[str, Any]) -> dict[str, Any]:
    ref = group["Properties"]["LaunchTemplate"]["Id"]["Ref"]
    return dict(data["Resources"][ref]["Properties"]["LaunchTemplateData"])


def test_the_endpoint_is_private_and_the_creator_gets_no_admin(cluster_template: dict[str, Any]) -> None:
    props = one(cluster_template, "AWS::EKS::Cluster")["Properties"]
    assert props["ResourcesVpcConfig"]["EndpointPrivateAccess"] is True
    assert props["ResourcesVpcConfig"]["EndpointPublicAccess"] is False
    assert props["AccessConfig"] == {"AuthenticationMode": "API", "BootstrapClusterCreatorAdminPermissions": False}


def test_admins_and_viewers_get_scoped_access_policies(cluster_template: dict[str, Any]) -> None:
    entries = [e["Properties"] for e in resources(cluster_template, "AWS::EKS::AccessEntry").values()]
    # The file's principals, plus the kubectl handler's role (a token) that aws_eks_v2 makes cluster admin.
    policies = {
        e["PrincipalArn"]: [_arn(a["PolicyArn"]) for a in e["AccessPolicies"]]
        for e in entries
        if isinstance(e["PrincipalArn"], str)
    }
    assert len(entries) == 3
    assert policies[ADMIN] == [EKS["access_policies"]["admin"]]
    assert policies[VIEWER] == [EKS["access_policies"]["viewer"]]
    assert all(a["AccessScope"] == {"Type": "cluster"} for e in entries for a in e["AccessPolicies"])


def test_secrets_are_encrypted_with_a_retained_rotated_key(cluster_template: dict[str, Any]) -> None:
    props = one(cluster_template, "AWS::EKS::Cluster")["Properties"]
    (config,) = props["EncryptionConfig"]
    assert config["Resources"] == ["secrets"]
    key_id = config["Provider"]["KeyArn"]["Fn::GetAtt"][0]
    key = cluster_template["Resources"][key_id]
    assert key["Type"] == "AWS::KMS::Key" and key["Properties"]["EnableKeyRotation"] is True
    assert key["DeletionPolicy"] == "Retain" and key["UpdateReplacePolicy"] == "Retain"


def test_versions_and_logs_are_the_catalogs(cluster_template: dict[str, Any]) -> None:
    props = one(cluster_template, "AWS::EKS::Cluster")["Properties"]
    assert props["Version"] == EKS["kubernetes"]["version"]
    assert [t["Type"] for t in props["Logging"]["ClusterLogging"]["EnabledTypes"]] == EKS["logging"]["types"]
    addons = {a["Properties"]["AddonName"]: a["Properties"] for a in resources(cluster_template, "AWS::EKS::Addon").values()}
    assert {n: a["AddonVersion"] for n, a in addons.items()} == {
        n: v["version"] for n, v in EKS["addons"].items() if n != "source"
    }
    assert set(addons) == {"vpc-cni", "coredns", "kube-proxy", "eks-pod-identity-agent"}
    assert str(EKS["pods"]["warm_ip_target"]) in addons["vpc-cni"]["ConfigurationValues"]


def test_the_kubectl_handler_runs_in_the_private_subnets_with_the_pinned_layer(cluster_template: dict[str, Any]) -> None:
    handlers = [
        f["Properties"] for f in resources(cluster_template, "AWS::Lambda::Function").values() if "VpcConfig" in f["Properties"]
    ]
    assert handlers, "no kubectl handler in the VPC"
    assert all(h["VpcConfig"]["SubnetIds"] == list(SUBNETS) for h in handlers)
    layers = [
        layer["Properties"].get("Description", "") for layer in resources(cluster_template, "AWS::Lambda::LayerVersion").values()
    ]
    # The layer's kubectl is the cluster's minor version (kubectl supports one minor of skew; the kit allows none).
    assert any(f"/opt/kubectl/kubectl {EKS['kubernetes']['version']}." in d for d in layers), layers


def test_a_public_endpoint_needs_named_networks() -> None:
    with pytest.raises(ValueError, match="public_access_cidrs"):
        ClusterSpec(name="team", admins=[ADMIN], endpoint="public-and-private")
    with pytest.raises(ValueError, match="admins"):
        ClusterSpec(name="team")


def test_trn2_node_group_carries_every_efa_interface_with_the_cluster_group(nodes_template: dict[str, Any]) -> None:
    lt = _template_of(nodes_template, _group(nodes_template, "pretrain"))
    interfaces = lt["NetworkInterfaces"]
    efa = [i for i in interfaces if i.get("InterfaceType") == "efa-only"]
    assert len(efa) == catalog.get("trn2.48xlarge").efa_max_interfaces == 16
    cluster_sg = {"Fn::GetAtt": [next(iter(resources(nodes_template, "AWS::EKS::Cluster"))), "ClusterSecurityGroupId"]}
    assert all(cluster_sg in i["Groups"] and len(i["Groups"]) == 2 for i in interfaces)
    assert interfaces[0]["DeviceIndex"] == 0 and interfaces[0]["InterfaceType"] == "interface"


def test_nodes_keep_pods_off_the_node_role_and_name_no_image(nodes_template: dict[str, Any]) -> None:
    groups = resources(nodes_template, "AWS::EKS::Nodegroup")
    assert len(groups) == 4  # three pools and the system node group
    for group in groups.values():
        lt = _template_of(nodes_template, group)
        assert lt["MetadataOptions"]["HttpTokens"] == "required"
        assert lt["MetadataOptions"]["HttpPutResponseHopLimit"] == 1
        assert "ImageId" not in lt and "IamInstanceProfile" not in lt
        assert lt["MetadataOptions"]["InstanceMetadataTags"] == "disabled"  # EKS tags keys with "/"
        # The type is named once: the Capacity Block group's template names it, every other group lists its types.
        if group["Properties"].get("CapacityType") == "CAPACITY_BLOCK":
            assert lt["InstanceType"] == "trn2.48xlarge" and "InstanceTypes" not in group["Properties"]
        else:
            assert "InstanceType" not in lt and group["Properties"]["InstanceTypes"]
        (root,) = lt["BlockDeviceMappings"]
        assert root["DeviceName"] == "/dev/xvda" and root["Ebs"]["Encrypted"] is True
        assert group["Properties"]["NodeRepairConfig"] == {"Enabled": True}


def test_node_groups_boot_the_catalogs_image(nodes_template: dict[str, Any]) -> None:
    images = EKS["node_images"]
    for name, kind in (("pretrain", "neuron"), ("chat", "neuron"), ("pretrain-gpu", "gpu")):
        props = _group(nodes_template, name)["Properties"]
        assert props["AmiType"] == images[kind]["ami_type"]
        assert props["ReleaseVersion"] == images[kind]["release_version"]
    assert _group(nodes_template, "chat")["Properties"]["InstanceTypes"] == ["inf2.48xlarge", "inf2.24xlarge"]
    assert len(_template_of(nodes_template, _group(nodes_template, "chat"))["NetworkInterfaces"]) == 1


def test_a_capacity_block_group_starts_empty_and_scales_on_schedule(nodes_template: dict[str, Any]) -> None:
    props = _group(nodes_template, "pretrain")["Properties"]
    assert props["CapacityType"] == "CAPACITY_BLOCK"
    assert props["ScalingConfig"] == {"MinSize": 0, "MaxSize": 16, "DesiredSize": 0}
    lt = _template_of(nodes_template, _group(nodes_template, "pretrain"))
    assert lt["InstanceMarketOptions"] == {"MarketType": "capacity-block"}
    target = lt["CapacityReservationSpecification"]["CapacityReservationTarget"]
    assert target["CapacityReservationId"] == "cr-0a1b2c3d4e5f60718"
    assert "Placement" not in lt  # a block is placed already
    actions = sorted((a["Properties"]["StartTime"], a["Properties"]["DesiredCapacity"])
                     for a in resources(nodes_template, "AWS::AutoScaling::ScheduledAction").values())  # fmt: skip
    reclaim = EKS and catalog.capacity_facts()["capacity_blocks"]["reclaim_minutes_before_end"]
    stop = END - dt.timedelta(minutes=reclaim + 15)
    assert actions == [("2030-03-01T11:30:00Z", 16), (stop.strftime("%Y-%m-%dT%H:%M:%SZ"), 0)]
    for action in resources(nodes_template, "AWS::AutoScaling::ScheduledAction").values():
        name = action["Properties"]["AutoScalingGroupName"]
        assert "Fn::GetAtt" in name and "autoScalingGroups.0.name" in name["Fn::GetAtt"][1]


def test_every_node_group_turns_on_its_groups_metrics_for_the_dashboard(nodes_template: dict[str, Any]) -> None:
    # EKS creates the node group's Auto Scaling group without group metrics; the dashboard's nodes-in-service
    # widget reads GroupInServiceInstances, as on the ASG path.
    groups = _pool_groups(nodes_template)
    calls = [json.dumps(r["Properties"]) for r in resources(nodes_template, "Custom::AWS").values()]
    enabled = [c for c in calls if "enableMetricsCollection" in c and "1Minute" in c and "autoScalingGroups.0.name" in c]
    assert groups and len(enabled) == len(groups)
    policies = [
        json.dumps(r["Properties"]["PolicyDocument"])
        for lid, r in resources(nodes_template, "AWS::IAM::Policy").items()
        if "GroupMetrics" in lid
    ]
    assert len(policies) == len(groups) and all("autoscaling:EnableMetricsCollection" in p for p in policies)


def test_an_on_demand_efa_group_gets_a_cluster_placement_group(nodes_template: dict[str, Any]) -> None:
    lt = _template_of(nodes_template, _group(nodes_template, "pretrain-gpu"))
    assert "Placement" in lt
    assert (
        len([i for i in lt["NetworkInterfaces"] if i.get("InterfaceType") == "efa-only"])
        == catalog.get("p5.48xlarge").efa_max_interfaces
    )


def test_user_data_is_mime_with_max_pods_and_the_kit_script(nodes_template: dict[str, Any]) -> None:
    lt = _template_of(nodes_template, _group(nodes_template, "pretrain"))
    text = lt["UserData"]["Fn::Base64"]
    assert text == node_user_data("#!/bin/bash\necho check\n", EKS["pods"]["max_pods_per_node"])
    assert "Content-Type: application/node.eks.aws" in text and f"maxPods: {EKS['pods']['max_pods_per_node']}" in text
    assert text.index("application/node.eks.aws") < text.index("text/x-shellscript")
    assert base64.b64encode(text.encode())  # plain ASCII, as EC2 requires


def test_node_group_spec_refuses_mixed_images() -> None:
    with pytest.raises(ValueError, match="all Neuron or all GPU"):
        NodeGroupSpec(name="x", instance_types=["inf2.xlarge", "g6e.12xlarge"], max_size=1)
    with pytest.raises(ValueError, match="one instance type"):
        NodeGroupSpec(name="x", instance_types=["trn1.32xlarge", "trn1n.32xlarge"], max_size=1,
                      capacity=CapacitySpec(kind="odcr", reservation_id="cr-0a1b2c3d4e5f60718"))  # fmt: skip


def test_a_kit_part_that_leaves_eks_no_room_is_refused() -> None:
    """The kit's part of a node group's user data leaves EKS room for its NodeConfig part under EC2's 16 KB: a
    script one byte over the room fails the synth with the setting and the fix; one that fits passes."""
    from neuronkit.constructs.eks.nodegroup import user_data_room

    room = user_data_room()
    frame = len(node_user_data("", 110).encode())
    fits = "#!/bin/bash\n" + "#" * (room - frame - len("#!/bin/bash\n") - 1)
    assert len(node_user_data(fits, 110).encode()) <= room
    with pytest.raises(ValueError, match=r"over the \d+ bytes EKS leaves it.*merged_part_reserve_bytes.*artifacts bucket"):
        node_user_data(fits + "##", 110)


def test_accelerated_groups_update_terminate_first_and_serving_groups_respect_their_pdbs(
    nodes_template: dict[str, Any],
) -> None:
    """EKS API reference, NodegroupUpdateConfig: the DEFAULT strategy "launches the new instances first, before
    terminating the old instances"; MINIMAL "terminates the old instances before launching the new instances ...
    useful in scenarios where you are constrained to resources or costs (for example, with hardware accelerators such
    as GPUs)". A serving group does not force its update through PodDisruptionBudgets (ForceUpdateEnabled false);
    training groups (updated between jobs) do."""
    groups = _pool_groups(nodes_template)
    assert len(groups) == 3
    for group in groups.values():
        assert group["Properties"]["UpdateConfig"] == {"MaxUnavailable": 1, "UpdateStrategy": "MINIMAL"}
    force = {group_name(g): g["Properties"]["ForceUpdateEnabled"] for g in groups.values()}
    assert force == {"team-pretrain": True, "team-chat": False, "team-pretrain-gpu": True}


SUBMITTER = "arn:aws:iam::123456789012:role/ml-submitters"


def test_job_submitters_edit_the_training_namespace_only_and_viewers_stay_read_only() -> None:
    from neuronkit.kubernetes import scheduling
    from neuronkit.kubernetes import training_job as tj

    stack = bare_stack()
    _cluster(stack, job_submitters=[SUBMITTER, VIEWER])  # a viewer who also submits keeps one entry
    entries = {
        e["Properties"]["PrincipalArn"]: e["Properties"]
        for e in resources(template(stack), "AWS::EKS::AccessEntry").values()
        if isinstance(e["Properties"]["PrincipalArn"], str)
    }
    assert set(entries) == {ADMIN, VIEWER, SUBMITTER}
    edit = EKS["access_policies"]["job_submitter"]
    namespaced = {"Type": "namespace", "Namespaces": [scheduling.TRAINING_NAMESPACE]}
    submitter = entries[SUBMITTER]
    assert [(_arn(a["PolicyArn"]), a["AccessScope"]) for a in submitter["AccessPolicies"]] == [(edit, namespaced)]
    assert submitter["KubernetesGroups"] == [tj.SUBMITTERS_GROUP]
    viewer = sorted((_arn(a["PolicyArn"]), a["AccessScope"]["Type"]) for a in entries[VIEWER]["AccessPolicies"])
    assert viewer == sorted([(EKS["access_policies"]["viewer"], "cluster"), (edit, "namespace")])
    # viewers alone stay read-only: the default cluster has no edit policy anywhere
    plain = bare_stack()
    _cluster(plain)
    policies = [
        _arn(a["PolicyArn"])
        for e in resources(template(plain), "AWS::EKS::AccessEntry").values()
        for a in e["Properties"]["AccessPolicies"]
    ]
    assert edit not in policies


def test_the_submitter_role_grants_jobsets_in_the_training_namespace_only() -> None:
    from neuronkit.kubernetes import scheduling
    from neuronkit.kubernetes import training_job as tj

    role, binding = tj.submitter_rbac()
    assert role["metadata"]["namespace"] == binding["metadata"]["namespace"] == scheduling.TRAINING_NAMESPACE
    assert role["kind"] == "Role" and binding["kind"] == "RoleBinding"  # never cluster-wide
    jobsets = next(r for r in role["rules"] if r["resources"] == ["jobsets"])
    assert "create" in jobsets["verbs"] and jobsets["apiGroups"] == ["jobset.x-k8s.io"]
    assert binding["subjects"] == [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": tj.SUBMITTERS_GROUP}]
    assert not any("nodes" in r["resources"] for r in role["rules"])


def test_gpu_groups_carry_the_autoscalers_gpu_label_and_neuron_groups_no_startup_taint(
    nodes_template: dict[str, Any],
) -> None:
    """cluster-autoscaler 1.35.2, processors/customresources/gpu_processor.go: a Ready node with the provider's
    ``GPULabel()`` ("k8s.amazonaws.com/accelerator" on AWS) and no GPU allocatable is "Overriding status of node %v,
    which seems to have unready GPU", so a GPU node whose device plugin has not registered yet is not capacity. A
    Neuron node must not carry it (aws.amazon.com/neuron is none of utils/gpu/gpu.go's GPUVendorResourceNames: it
    would stay unready), and no Neuron group carries a ``startup-taint.cluster-autoscaler.kubernetes.io/`` taint,
    since nothing in the kit removes one (docs/eks.md, "Accelerator nodes still initialising"). For a managed group
    at zero the autoscaler reads labels and taints from DescribeNodegroup, the same properties the nodes get; the kit
    writes no node-template/label or /taint tag that could disagree with them."""
    from neuronkit.kubernetes import autoscaler

    facts = autoscaler.facts()
    key = str(facts["gpu_label"])
    groups = _pool_groups(nodes_template)
    gpu = [g for g in groups.values() if g["Properties"]["AmiType"].endswith("NVIDIA")]
    neuron = [g for g in groups.values() if g["Properties"]["AmiType"].endswith("NEURON")]
    assert gpu and neuron
    for g in gpu:
        assert g["Properties"]["Labels"][key] == "nvidia-h100"  # p5.48xlarge: EC2's GpuInfo name H100
    for g in neuron:
        assert key not in g["Properties"]["Labels"]
        taints = [t["Key"] for t in g["Properties"].get("Taints") or []]
        assert taints and not any(t.startswith(str(facts["startup_taint_prefix"])) for t in taints), taints
    for g in groups.values():
        tags = g["Properties"].get("Tags") or {}
        assert not [k for k in tags if k.startswith((facts["template_label_tag_prefix"], facts["template_taint_tag_prefix"]))]
