"""The instance role every accelerator node starts from: Session Manager access and nothing else."""

from __future__ import annotations

from collections.abc import Mapping

from aws_cdk import aws_iam as iam
from constructs import Construct

from neuronkit.constructs import values
from neuronkit.constructs.compliance import acknowledge_each

SESSION_MANAGER = "AmazonSSMManagedInstanceCore"

# The AWS-managed policies of an EKS node role (Amazon EKS User Guide, "Amazon EKS node IAM role"), each with the reason
# cdk-nag records: the cluster's system node group and every kit node group use them.
EKS_NODE_POLICIES = {
    "AmazonEKSWorkerNodePolicy": "AWS-managed policy EKS documents for every node role (kubelet, describe calls)",
    "AmazonEC2ContainerRegistryPullOnly": "AWS-managed policy EKS documents for nodes pulling images from ECR",
    "AmazonEKS_CNI_Policy": "AWS-managed policy the VPC CNI needs to attach interfaces and addresses to the node",
    SESSION_MANAGER: "AWS-maintained Session Manager policy: nodes have no key pair and are reached only through SSM",
}


def node_role(
    scope: Construct, id: str, *, description: str | None = None, also_managed: Mapping[str, str] | None = None
) -> iam.Role:
    """A role EC2 nodes assume, with the AWS-managed Session Manager policy (nodes have no key pair).

    ``also_managed`` adds further AWS-managed policies, each with the reason cdk-nag records for it
    (e.g. the ECS container-instance policy on AWS Batch nodes). Everything else a node does is granted
    by the constructs that need it (storage, observability, its own group).
    """
    extra = dict(also_managed or {})
    role = iam.Role(
        scope,
        id,
        assumed_by=values.service_principal("ec2.amazonaws.com"),
        description=description,
        managed_policies=[values.aws_managed_policy(n) for n in (SESSION_MANAGER, *extra)],
    )
    reasons = {SESSION_MANAGER: "AWS-maintained Session Manager policy: nodes have no key pair and are reached only through SSM"}
    acknowledge_each(
        role,
        {
            f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{name}]": r
            for name, r in {**reasons, **extra}.items()
        },
    )
    return role


def eks_node_role(scope: Construct, id: str, *, description: str) -> iam.Role:
    """The role of an EKS node group's instances: the AWS-managed policies of ``EKS_NODE_POLICIES``, each acknowledged
    for cdk-nag with its reason (the cluster's system nodes and every kit node group)."""
    role = iam.Role(
        scope,
        id,
        assumed_by=values.service_principal("ec2.amazonaws.com"),
        description=description,
        managed_policies=[values.aws_managed_policy(n) for n in EKS_NODE_POLICIES],
    )
    acknowledge_each(
        role,
        {f"AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/{n}]": r for n, r in EKS_NODE_POLICIES.items()},
    )
    return role
