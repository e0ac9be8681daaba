"""The desired size of an autoscaled node group (issue 47, fix 4): the handler's clamp as a pure function on
DescribeNodegroup answers, its EKS call against moto, its CloudFormation answer, and the construct on a bare stack.

EKS API reference, NodegroupScalingConfig: "If this parameter is given a value that is smaller than the current number
of running worker nodes, the necessary number of worker nodes are terminated"; "When creating a node group, you must
specify all or none of the properties"; an update whose minSize exceeds the desired size is refused ("Minimum capacity
N can't be greater than desired size M")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from neuronkit.lambdas.node_group_size import handler as code

ANSWERS = Path(__file__).parents[1] / "fixtures" / "describe-nodegroup"


def _answer(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((ANSWERS / f"{name}.json").read_text())
    return data


@pytest.mark.parametrize(
    ("answer", "minimum", "maximum", "expected", "why"),
    [
        ("scaled-out", 1, 8, 5, "an unchanged deploy keeps the 5 nodes Cluster Autoscaler runs"),
        ("scaled-out", 2, 8, 5, "raising min_size to 2 keeps 5 nodes (aws-cdk-lib wrote 2 and terminated 3)"),
        ("scaled-out", 6, 8, 6, "a min_size above the current size lifts it to the minimum (EKS refuses min > desired)"),
        ("scaled-out", 1, 3, 3, "lowering max_size below the current size brings it down to the maximum"),
        ("at-minimum", 0, 4, 0, "an idle group stays empty"),
        ("at-minimum", 1, 4, 1, "a new minimum of 1 starts one node"),
    ],
)  # fmt: skip
def test_the_desired_size_is_the_running_size_within_the_new_bounds(
    answer: str, minimum: int, maximum: int, expected: int, why: str
) -> None:
    assert code.desired_size(_answer(answer), minimum=minimum, maximum=maximum, initial=minimum) == expected, why


def test_a_group_that_does_not_exist_yet_starts_at_its_initial_size() -> None:
    assert code.desired_size(None, minimum=1, maximum=8, initial=2) == 2
    assert code.desired_size(None, minimum=3, maximum=8, initial=1) == 3
    with pytest.raises(ValueError, match="min size 5 is above max size 4"):
        code.desired_size(None, minimum=5, maximum=4, initial=4)


def test_the_eks_call_against_moto_reads_the_groups_desired_size_and_none_for_a_missing_group(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-2")
    with mock_aws():
        eks = boto3.client("eks", region_name="us-east-2")
        eks.create_cluster(name="eks", roleArn="arn:aws:iam::123456789012:role/eks", resourcesVpcConfig={})
        eks.create_nodegroup(
            clusterName="eks", nodegroupName="eks-chat", nodeRole="arn:aws:iam::123456789012:role/node",
            subnets=["subnet-0a1b2c3d4e5f67890"], scalingConfig={"minSize": 1, "maxSize": 8, "desiredSize": 5},
        )  # fmt: skip
        answer = code._describe("eks", "eks-chat")
        assert answer is not None and answer["nodegroup"]["scalingConfig"]["desiredSize"] == 5
        assert code.desired_size(answer, minimum=2, maximum=8, initial=2) == 5
        assert code._describe("eks", "eks-missing") is None


class _Recorder:
    """CloudFormation's pre-signed response URL: records what the function PUTs."""

    def __init__(self) -> None:
        self.bodies: list[dict[str, Any]] = []

    def __call__(self, request: Any, timeout: int = 0) -> Any:
        self.bodies.append(json.loads(request.data))

        class _Response:
            status = 200

            def __enter__(self) -> _Response:
                return self

            def __exit__(self, *_: object) -> None:
                return None

        return _Response()


def _event(kind: str, **props: Any) -> dict[str, Any]:
    return {
        "RequestType": kind, "ResponseURL": "https://cloudformation-custom-resource-response.example/",
        "StackId": "arn:aws:cloudformation:us-east-2:123456789012:stack/eks-eks/1", "RequestId": "r1",
        "LogicalResourceId": "Size", "ResourceProperties": {"ClusterName": "eks", "NodegroupName": "eks-chat", **props},
    }  # fmt: skip


def test_the_function_answers_cloudformation_on_update_delete_and_failure(monkeypatch: pytest.MonkeyPatch) -> None:
    recorder = _Recorder()
    monkeypatch.setattr(code.urllib.request, "urlopen", recorder)
    monkeypatch.setattr(code, "_describe", lambda cluster, group: _answer("scaled-out"))
    code.handler(_event("Update", MinSize="2", MaxSize="8", Initial="2"), None)
    code.handler(_event("Delete", MinSize="2", MaxSize="8", Initial="2"), None)
    code.handler(_event("Update", MinSize="9", MaxSize="8", Initial="9"), None)
    update, delete, failed = recorder.bodies
    assert update["Status"] == "SUCCESS" and update["Data"] == {"DesiredSize": 5}
    assert update["PhysicalResourceId"] == "eks/eks-chat/desired-size"
    assert delete["Status"] == "SUCCESS" and delete["Data"] == {}
    assert failed["Status"] == "FAILED" and "above max size" in failed["Reason"]


def test_a_replaced_group_starts_at_the_size_of_the_group_it_replaces(monkeypatch: pytest.MonkeyPatch) -> None:
    """A create-only change renames the group (ENV-POOL-<digest>): CloudFormation updates the size resource with the new
    name before it creates the group. The answer is the old group's running size (5), not the initial size (1), so a
    replacement starts as large as the group it replaces; a plain update and a create read only their own name."""
    recorder = _Recorder()
    monkeypatch.setattr(code.urllib.request, "urlopen", recorder)
    asked: list[str] = []

    def describe(cluster: str, group: str, **_: Any) -> dict[str, Any] | None:
        asked.append(group)
        return _answer("scaled-out") if group == "eks-chat-0a1b2c3d" else None

    monkeypatch.setattr(code, "_describe", describe)
    replaced = _event("Update", NodegroupName="eks-chat-9f8e7d6c", MinSize="1", MaxSize="8", Initial="1")
    replaced["OldResourceProperties"] = {**replaced["ResourceProperties"], "NodegroupName": "eks-chat-0a1b2c3d"}
    code.handler(replaced, None)
    assert recorder.bodies[-1]["Data"] == {"DesiredSize": 5} and asked == ["eks-chat-9f8e7d6c", "eks-chat-0a1b2c3d"]
    asked.clear()
    code.handler(_event("Create", NodegroupName="eks-chat-9f8e7d6c", MinSize="1", MaxSize="8", Initial="1"), None)
    assert recorder.bodies[-1]["Data"] == {"DesiredSize": 1} and asked == ["eks-chat-9f8e7d6c"]
    same = _event("Update", NodegroupName="eks-chat-9f8e7d6c", MinSize="1", MaxSize="8", Initial="1")
    same["OldResourceProperties"] = dict(same["ResourceProperties"])
    assert code.replaced_group(same) is None and code.replaced_group(replaced) == "eks-chat-0a1b2c3d"


def test_the_migration_to_digest_names_reads_the_old_group_or_starts_at_the_initial_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The first deploy after node groups took digest names renames every group (``eks-chat`` -> ``eks-chat-<digest>``).
    The size function must be allowed to read the old name (else AccessDenied rolls ``eks-eks`` back: outside review
    of fix 5), and a refused read of the group a replacement leaves behind answers the initial size, never FAILED."""
    from botocore.exceptions import ClientError

    recorder = _Recorder()
    monkeypatch.setattr(code.urllib.request, "urlopen", recorder)

    class Eks:
        def describe_nodegroup(self, clusterName: str, nodegroupName: str) -> dict[str, Any]:  # noqa: N803
            code_ = "AccessDeniedException" if nodegroupName == "eks-chat" else "ResourceNotFoundException"
            raise ClientError({"Error": {"Code": code_, "Message": "no"}}, "DescribeNodegroup")

    monkeypatch.setattr(boto3, "client", lambda *_a, **_k: Eks())
    event = _event("Update", NodegroupName="eks-chat-9f8e7d6c", MinSize="1", MaxSize="8", Initial="2")
    event["OldResourceProperties"] = {**event["ResourceProperties"], "NodegroupName": "eks-chat"}
    code.handler(event, None)
    assert recorder.bodies[-1]["Status"] == "SUCCESS" and recorder.bodies[-1]["Data"] == {"DesiredSize": 2}
    # Refused on the group itself (not a replaced one) is still a failure: the function's policy is wrong.
    monkeypatch.setattr(Eks, "describe_nodegroup", lambda self, **_: (_ for _ in ()).throw(
        ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "DescribeNodegroup")))  # fmt: skip
    code.handler(_event("Create", NodegroupName="eks-chat-9f8e7d6c", MinSize="1", MaxSize="8", Initial="2"), None)
    assert recorder.bodies[-1]["Status"] == "FAILED"


def test_a_first_size_resource_of_a_renamed_group_starts_at_the_old_groups_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """An environment deployed before the size resource existed meets it as a Create on the deploy that also renames its
    groups (``eks-chat`` -> ``eks-chat-<digest>``): the answer is the old group's running size (5), read under its name
    before digests (``PreviousNames``), not the initial size (outside review of fix 5, second round)."""
    recorder = _Recorder()
    monkeypatch.setattr(code.urllib.request, "urlopen", recorder)
    asked: list[str] = []

    def describe(cluster: str, group: str, **_: Any) -> dict[str, Any] | None:
        asked.append(group)
        return _answer("scaled-out") if group == "eks-chat" else None

    monkeypatch.setattr(code, "_describe", describe)
    code.handler(_event("Create", NodegroupName="eks-chat-9f8e7d6c", MinSize="1", MaxSize="8", Initial="1",
                        PreviousNames=["eks-chat"]), None)  # fmt: skip
    assert recorder.bodies[-1]["Data"] == {"DesiredSize": 5} and asked == ["eks-chat-9f8e7d6c", "eks-chat"]
    asked.clear()  # a group that exists answers for itself; its previous name is never read
    monkeypatch.setattr(code, "_describe", lambda c, g, **_: asked.append(g) or _answer("scaled-out"))
    code.handler(_event("Create", NodegroupName="eks-chat-9f8e7d6c", MinSize="1", MaxSize="8", Initial="1",
                        PreviousNames=["eks-chat"]), None)  # fmt: skip
    assert asked == ["eks-chat-9f8e7d6c"]


def test_the_examples_size_function_may_read_each_groups_name_before_digests(
    eks_example: tuple[Any, dict[str, dict[str, Any]]],
) -> None:
    """Service Authorization Reference, Amazon EKS, resource type nodegroup: ``arn:${Partition}:eks:${Region}:
    ${Account}:nodegroup/${ClusterName}/${NodegroupName}/${UUID}``; IAM User Guide, "IAM JSON policy elements:
    Resource": "You can use wildcard characters (* and ?) within the individual segments of an ARN". The function's
    policy names both the digest pattern (one ``?`` per digest character) and the bare ``ENV-POOL`` of every
    autoscaled group of the EKS example."""
    from neuronkit.constructs.eks.nodegroup_name import prefix_of

    (eks_t,) = [t for name, t in eks_example[1].items() if name.endswith("-eks")]
    sizes = [r for r in eks_t["Resources"].values() if r["Type"] == "Custom::NeuronkitNodegroupDesiredSize"]
    assert sizes
    policy = json.dumps([r for r in eks_t["Resources"].values()
                         if r["Type"] == "AWS::IAM::Policy" and "eks:DescribeNodegroup" in json.dumps(r)])  # fmt: skip
    for size in sizes:
        name = str(size["Properties"]["NodegroupName"])
        cluster = str(size["Properties"]["ClusterName"])
        assert f"nodegroup/{cluster}/{prefix_of(name)}/*" in policy, name
        assert f"nodegroup/{cluster}/{prefix_of(name)}-????????/*" in policy, name
        assert size["Properties"]["PreviousNames"] == [prefix_of(name)], name


def test_the_construct_writes_the_answer_as_desired_size_with_one_function_scoped_to_its_groups() -> None:
    """In a bare stack: two node groups, one function; each group's DesiredSize is its custom resource's answer, and the
    function may describe exactly those two groups."""
    from aws_cdk import aws_eks_v2 as eks

    from neuronkit.constructs.eks.node_group_size import AutoscaledSize, AutoscaledSizeSpec
    from tests.templates import bare_stack, resources, template
    from tests.unit.test_eks import _cluster

    stack = bare_stack()
    cluster = _cluster(stack)
    for name, (low, high) in {"chat": (1, 8), "chat-gpu": (0, 4)}.items():
        group = eks.Nodegroup(stack, f"Group-{name}", cluster=cluster.cluster, nodegroup_name=f"team-{name}",
                              min_size=low, max_size=high)  # fmt: skip
        AutoscaledSize(
            stack, f"Size-{name}", nodegroup=group,
            spec=AutoscaledSizeSpec(cluster="team", nodegroup=f"team-{name}", min_size=low, max_size=high, initial_size=low),
        )  # fmt: skip
    t = template(stack)
    sizes = resources(t, "Custom::NeuronkitNodegroupDesiredSize")
    groups = {
        k: g
        for k, g in resources(t, "AWS::EKS::Nodegroup").items()
        if not str(g["Properties"]["NodegroupName"]).startswith("team-system-")
    }
    assert len(sizes) == len(groups) == 2 and len(resources(t, "AWS::Lambda::Function")) >= 1
    for logical, size in sizes.items():
        group = next(g for g in groups.values() if g["Properties"]["NodegroupName"] == size["Properties"]["NodegroupName"])
        assert group["Properties"]["ScalingConfig"]["DesiredSize"] == {"Fn::GetAtt": [logical, "DesiredSize"]}
    functions = [k for k, f in resources(t, "AWS::Lambda::Function").items() if "desired size" in json.dumps(f)]
    assert len(functions) == 1
    assert all(s["Properties"]["ServiceToken"] == {"Fn::GetAtt": [functions[0], "Arn"]} for s in sizes.values())
    policy = json.dumps([p for p in resources(t, "AWS::IAM::Policy").values() if "eks:DescribeNodegroup" in json.dumps(p)])
    assert "nodegroup/team/team-chat/*" in policy and "nodegroup/team/team-chat-gpu/*" in policy
    assert "eks:UpdateNodegroupConfig" not in policy  # CloudFormation resizes, with the answer; the function only reads
