"""Issue 47, fix 5: node groups CloudFormation can replace, the Auto Scaling group name read again after a replacement,
and the managed add-ons created over EKS's self-managed ones. Construct tests on a bare stack (tests/unit/test_eks.py's
cluster); the example and every environment are checked in tests/contracts/test_eks_contracts.py."""

from __future__ import annotations

import json
from typing import Any

import pytest

from neuronkit.constructs.eks import NeuronNodeGroup, NodeGroupSpec
from neuronkit.constructs.eks import nodegroup_name as naming
from neuronkit.constructs.training_cluster import CapacitySpec
from tests.templates import bare_stack, group_name, resources, template
from tests.unit.test_eks import END, START, _cluster

SCRIPT = "#!/bin/bash\necho check\n"


def _synth(environment: str = "team", subnets: slice = slice(None), **spec: Any) -> dict[str, Any]:
    """One node group ``pool`` (inf2, 1..4 nodes unless ``spec`` says otherwise) in a bare stack: its template."""
    stack = bare_stack()
    cluster = _cluster(stack)
    values: dict[str, Any] = {"name": "pool", "instance_types": ["inf2.48xlarge"], "min_size": 1, "max_size": 4, "efa": False}
    NeuronNodeGroup(
        stack, "Group", environment=environment, cluster=cluster, script=SCRIPT, role="inference",
        subnets=cluster.cluster.vpc.private_subnets[subnets], spec=NodeGroupSpec(**{**values, **spec}),
    )  # fmt: skip
    return template(stack)


def _pool(data: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    (found,) = [(k, g) for k, g in resources(data, "AWS::EKS::Nodegroup").items() if "neuronkit" in g.get("Metadata", {})]
    return found


def _name(data: dict[str, Any]) -> str:
    return str(_pool(data)[1]["Properties"]["NodegroupName"])


@pytest.fixture(scope="module")
def base() -> dict[str, Any]:
    return _synth()


def test_a_change_of_a_create_only_property_renames_the_group_and_other_changes_keep_its_name(base: dict[str, Any]) -> None:
    """CloudFormation replaces a node group when a create-only property changes, creating the new group first: under
    the old name that create fails. The name is ENV-POOL-<digest of the create-only properties>: instance types,
    capacity type and subnets give a new name; sizes, labels and the node image release keep it (they update in
    place, and a new name would replace the group for nothing)."""
    name = _name(base)
    assert name.startswith("team-pool-") and group_name(_pool(base)[1]) == "team-pool"
    assert name == _name(_synth()), "the same file gives the same name"
    renamed = {
        "instance types": _synth(instance_types=["inf2.24xlarge"]),
        "subnets": _synth(subnets=slice(0, 1)),
        "capacity type": _synth(
            instance_types=["inf2.48xlarge"],
            capacity=CapacitySpec(kind="capacity-block", reservation_id="cr-0a1b2c3d4e5f60718", start=START, end=END),
        ),  # fmt: skip
    }
    for what, data in renamed.items():
        assert _name(data) != name and _name(data).startswith("team-pool-"), what
    kept = {
        "sizes": _synth(min_size=2, max_size=8),
        "labels": _synth(labels={"team": "search"}),
        "release version": _synth(release_version="1.35.6-20260625"),
    }
    for what, data in kept.items():
        assert _name(data) == name, what


def test_the_name_is_the_digest_the_template_holds(base: dict[str, Any]) -> None:
    """Recomputed from the synthesized resource, the name is the same: the digest covers the create-only properties
    exactly as CloudFormation receives them (a raw override of one would escape it and fail here)."""
    _, group = _pool(base)
    assert naming.name_of_template_resource("team-pool", group) == group["Properties"]["NodegroupName"]
    props = {k: group["Properties"].get(k) for k in naming.facts()["create_only_properties"]}
    assert props["AmiType"] and props["InstanceTypes"] and props["Subnets"] and props["NodeRole"]
    for key in ("AmiType", "InstanceTypes", "Subnets", "NodeRole", "CapacityType", "ClusterName"):
        assert naming.compose("team-pool", {**props, key: "changed"}) != group["Properties"]["NodegroupName"], key


def test_long_names_are_cut_to_eks_limit_deterministically_and_bad_ones_refused() -> None:
    """EKS User Guide, "Create a managed node group": "The node group name can't be longer than 63 characters. It must
    start with letter or digit, but can also include hyphens and underscores for the remaining characters." """
    f = naming.facts()
    long_prefix = "research-environment-with-a-long-name-" + "inference-fleet-for-chat-traffic"
    name = naming.compose(long_prefix, {"InstanceTypes": ["inf2.xlarge"]})
    assert (
        len(name) <= f["max_length"]
        and len(name) > len(long_prefix) // 2
        and name == naming.compose(long_prefix, {"InstanceTypes": ["inf2.xlarge"]})
    )
    assert name != naming.compose(long_prefix, {"InstanceTypes": ["inf2.8xlarge"]})
    assert name.startswith(naming.prefix_of(name)) and long_prefix.startswith(naming.prefix_of(name))
    with pytest.raises(ValueError, match="start with a letter or digit"):
        naming.compose("-team-pool", {})


def test_the_auto_scaling_group_name_is_read_again_when_its_group_is_replaced(base: dict[str, Any]) -> None:
    """The custom resource that reads a node group's Auto Scaling group name (DescribeNodegroup) makes the call on
    update too, and its call names the node group through Fn::GetAtt NodegroupName: a replaced group (a new name)
    changes the property, so CloudFormation updates it and the dashboard, alarms, schedules and spill read the new
    group. Without the update call CloudFormation's update would return no name."""
    logical, _ = _pool(base)
    lookups = [
        r["Properties"] for r in resources(base, "Custom::AWS").values() if "describeNodegroup" in json.dumps(r["Properties"])
    ]
    assert len(lookups) == 1
    for phase in ("Create", "Update"):
        call = json.dumps(lookups[0].get(phase))
        assert "describeNodegroup" in call, f"{phase}: no DescribeNodegroup call"
        assert json.dumps({"Fn::GetAtt": [logical, "NodegroupName"]}) in call, f"{phase}: the call does not name the group"
    # Its policy names the group and its replacements by pattern, so a replacement leaves the policy's text alone and
    # the call right after it never waits on an IAM change (outside review of fix 5).
    policies = [json.dumps(r) for r in resources(base, "AWS::IAM::Policy").values() if "eks:DescribeNodegroup" in json.dumps(r)]
    assert any("-????????/*" in p for p in policies) and not any("NodegroupArn" in p for p in policies), policies


def test_the_size_function_may_describe_the_group_and_its_replacements_only() -> None:
    """The desired-size function reads the group a replacement leaves behind (its size is the new group's start):
    its IAM resource is ``ENV-POOL-????????`` (IAM's ``?`` is one character: the digest), not one digest, and no other
    pool's groups (``team-chat-gpu-<digest>`` is longer)."""
    from aws_cdk import aws_eks_v2 as eks

    from neuronkit.constructs.eks.node_group_size import AutoscaledSize, AutoscaledSizeSpec

    stack = bare_stack()
    cluster = _cluster(stack)
    group = NeuronNodeGroup(
        stack, "Group", environment="team", cluster=cluster, script=SCRIPT, role="inference",
        subnets=cluster.cluster.vpc.private_subnets,
        spec=NodeGroupSpec(name="chat", instance_types=["inf2.48xlarge"], min_size=1, max_size=4, efa=False),
    )  # fmt: skip
    assert isinstance(group.nodegroup, eks.Nodegroup)
    AutoscaledSize(
        stack, "Size", nodegroup=group.nodegroup,
        spec=AutoscaledSizeSpec(cluster="team", nodegroup=group.nodegroup_name, nodegroup_pattern=group.replaceable_name.pattern,
                                min_size=1, max_size=4, initial_size=1),
    )  # fmt: skip
    data = template(stack)
    policy = json.dumps([p for p in resources(data, "AWS::IAM::Policy").values() if "eks:DescribeNodegroup" in json.dumps(p)])
    assert "nodegroup/team/team-chat-????????/*" in policy and "team-chat-*" not in policy
    (size,) = resources(data, "Custom::NeuronkitNodegroupDesiredSize").values()
    assert size["Properties"]["NodegroupName"] == _pool(data)[1]["Properties"]["NodegroupName"]


def test_the_addons_created_over_eks_self_managed_ones_overwrite_conflicts() -> None:
    """EKS installs vpc-cni, coredns and kube-proxy self-managed when it creates a cluster; the kit's managed add-ons of
    the same names are created over them. CreateAddon, resolveConflicts: "None - If the self-managed version of the
    add-on is installed on your cluster, Amazon EKS doesn't change the value. Creation of the add-on might fail." The
    kit sets OVERWRITE on those (and on every add-on it configures)."""
    from neuronkit import catalog

    stack = bare_stack()
    _cluster(stack)
    addons = {a["Properties"]["AddonName"]: a["Properties"] for a in resources(template(stack), "AWS::EKS::Addon").values()}
    bootstrapped = catalog.eks_facts()["bootstrapped_addons"]["names"]
    assert set(bootstrapped) <= set(addons)
    for name in bootstrapped:
        assert addons[name].get("ResolveConflicts") == "OVERWRITE", name
