"""The desired size of a node group Cluster Autoscaler scales: read from the running group at deploy time (issue 47).

aws-cdk-lib's ``Nodegroup`` always writes ``ScalingConfig.DesiredSize`` (``desiredSize ?? minSize``), so raising
``min_size`` changed ``DesiredSize`` and resized a group Cluster Autoscaler had scaled out, terminating serving nodes
(EKS API reference, NodegroupScalingConfig: "If this parameter is given a value that is smaller than the current number
of running worker nodes, the necessary number of worker nodes are terminated"). Leaving it out is no way out: "When
creating a node group, you must specify all or none of the properties" (same page), and EKS refuses a ``minSize``
above the current desired size on update. :class:`AutoscaledSize` therefore writes ``DesiredSize`` as the answer of a
small custom resource (``neuronkit/lambdas/node_group_size/handler.py``): clamp(current desired, min, max), or the
initial size while the group does not exist. The template's ``DesiredSize`` is the same text on every synth, whatever
``min_size`` is; docs/eks.md ("Day two") explains it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from aws_cdk import CustomResource, Stack, Token
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

from neuronkit.constructs import pseudo, values
from neuronkit.constructs.compliance import acknowledge, iam5
from neuronkit.constructs.network import log_group
from neuronkit.constructs.python_function import python_function
from neuronkit.lambdas.node_group_size import handler as code

CODE_DIR = Path(code.__file__).parent
# One function per stack answers for every autoscaled group of it.
_FUNCTION_ID = "NodeGroupSizeFunction"


@dataclass(frozen=True)
class AutoscaledSizeSpec:
    """A node group Cluster Autoscaler scales: ``cluster`` and ``nodegroup`` names (as EKS knows them; ``nodegroup`` may
    be the kit's ``ENV-POOL-<digest>`` token), ``min_size`` <= ``initial_size`` <= ``max_size`` (``initial_size``: the
    size a new group starts at). ``nodegroup_pattern`` (default ``nodegroup``): the name in the function's IAM
    resource, a wildcard such as ``ENV-POOL-????????`` that also covers the group a replacement leaves behind, whose size
    a replacement group starts from (docs/eks.md, "Day two"). ``previous_names``: names the group had before the kit
    named groups by digest (``ENV-POOL``): the first deploy after that rename reads the old group's size under its old
    name, so the function may describe it too (without it, IAM refuses that call and the deploy rolls back: outside
    review of issue 47, fix 5)."""

    cluster: str
    nodegroup: str
    min_size: int
    max_size: int
    initial_size: int
    nodegroup_pattern: str | None = None
    previous_names: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not 0 <= self.min_size <= self.initial_size <= self.max_size:
            raise ValueError(
                f"{self.nodegroup}: sizes min {self.min_size}, initial {self.initial_size}, max {self.max_size} must "
                "satisfy 0 <= min <= initial <= max"
            )


class AutoscaledSize(Construct):
    """Sets ``nodegroup``'s ``ScalingConfig.DesiredSize`` to the custom resource's answer (see the module docstring).

    ``refresh``: further values that, when they change, make CloudFormation ask again (the launch template version: an
    update of the group then carries a fresh desired size). Public attributes: ``resource`` (the custom resource),
    ``desired_size`` (its answer, a deploy-time number), ``function`` (the stack's one handler function).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        nodegroup: eks.Nodegroup,
        spec: AutoscaledSizeSpec,
        refresh: tuple[str, ...] = (),
    ) -> None:
        super().__init__(scope, id)
        self.spec = spec
        self.function = _function(Stack.of(self), spec)
        self.resource = CustomResource(
            self,
            "Resource",
            service_token=self.function.function_arn,
            resource_type="Custom::NeuronkitNodegroupDesiredSize",
            properties={
                "ClusterName": spec.cluster, "NodegroupName": spec.nodegroup, "MinSize": spec.min_size,
                "MaxSize": spec.max_size, "Initial": spec.initial_size, "Refresh": list(refresh),
                # Read, when the group does not exist yet, for the size of the group it replaces (a Create too: an
                # environment deployed before this resource existed meets it first as a Create).
                **({"PreviousNames": list(spec.previous_names)} if spec.previous_names else {}),
            },
        )  # fmt: skip
        self.desired_size = Token.as_number(self.resource.get_att("DesiredSize"))
        cfn = nodegroup.node.default_child
        assert isinstance(cfn, eks.CfnNodegroup)
        # The L2 always writes desiredSize (desiredSize ?? minSize): replace it with the running group's, clamped.
        cfn.add_property_override("ScalingConfig.DesiredSize", self.resource.get_att("DesiredSize"))


def _function(stack: Stack, spec: AutoscaledSizeSpec) -> lambda_.Function:
    """The stack's handler function (created once), allowed to describe ``spec``'s node group."""
    existing = stack.node.try_find_child(_FUNCTION_ID)
    if existing is None:
        scope = Construct(stack, _FUNCTION_ID)
        logs = log_group(scope, "Logs", 30)
        role = iam.Role(
            scope, "Role", assumed_by=values.service_principal("lambda.amazonaws.com"),
            description="neuronkit: reads the desired size of autoscaled node groups",
        )  # fmt: skip
        role.add_to_policy(
            iam.PolicyStatement(sid="Logs", actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[logs.log_group_arn])
        )
        python_function(
            scope, "Function", code_dir=CODE_DIR, role=role, log_group=logs, retry_attempts=0, timeout_seconds=60,
            description="neuronkit: the desired size of an autoscaled node group, clamped to its new bounds",
            environment={},
        )  # fmt: skip
        existing = scope
    function = existing.node.find_child("Function")
    role = existing.node.find_child("Role")
    assert isinstance(function, lambda_.Function) and isinstance(role, iam.Role)
    # The node group's ARN ends in an id EKS picks; the name before it is the kit's.
    names = [spec.nodegroup_pattern or spec.nodegroup, *spec.previous_names]
    arns = [f"arn:{pseudo.PARTITION}:eks:{pseudo.REGION}:{pseudo.ACCOUNT_ID}:nodegroup/{spec.cluster}/{n}/*" for n in names]
    role.add_to_policy(iam.PolicyStatement(actions=["eks:DescribeNodegroup"], resources=arns))
    for arn in arns:
        acknowledge(
            role, iam5(arn), "the node group's ARN ends in an id EKS assigns at creation; its name is the kit's, the ? "
            "after ENV-POOL- the digest of a group and of its replacement (a bare ENV-POOL: its name before digests)",
        )  # fmt: skip
    return function


__all__ = ["AutoscaledSize", "AutoscaledSizeSpec"]
