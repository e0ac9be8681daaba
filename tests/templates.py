"""Shared helpers for construct tests: bare stacks and lookups in synthesized templates.

Construct tests build the construct they test in a bare ``Stack`` with explicit arguments (the example
environments are for snapshots, compliance and "the examples synthesize"), so an edit to an example never
breaks a construct test and options the examples don't use are tested too.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import App, Environment, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template

ACCOUNT = "123456789012"
REGION = "us-east-1"
VPC_ID = "vpc-0a1b2c3d4e5f67890"
SUBNET_ID = "subnet-0a1b2c3d4e5f67890"


def bare_stack(name: str = "Test", *, account: str = ACCOUNT, region: str = REGION) -> Stack:
    """A stack in a bare App: CDK's default feature flags, no cdk.json context (as in a user's app)."""
    return Stack(App(builtin_cloud_formation_validation=False), name, env=Environment(account=account, region=region))


def imported_vpc(stack: Stack, cidr: str = "10.0.0.0/16") -> ec2.IVpc:
    return ec2.Vpc.from_vpc_attributes(
        stack, "Vpc", vpc_id=VPC_ID, vpc_cidr_block=cidr, availability_zones=[f"{stack.region}a"], private_subnet_ids=[SUBNET_ID]
    )


def template(stack: Stack) -> dict[str, Any]:
    data: dict[str, Any] = Template.from_stack(stack).to_json()
    return data


def resources(data: dict[str, Any], type_: str) -> dict[str, dict[str, Any]]:
    """Logical id -> resource, for every resource of ``type_``."""
    return {k: v for k, v in data["Resources"].items() if v["Type"] == type_}


def one(data: dict[str, Any], type_: str) -> dict[str, Any]:
    """The one resource of ``type_`` (fails when there are none or several)."""
    found = list(resources(data, type_).values())
    assert len(found) == 1, f"{len(found)} {type_}"
    return found[0]


def pinned_image(context: dict[str, Any], *, account: str, region: str, name: str, description: str | None = None) -> str:
    """The image id pinned in a CDK context (cdk.context.json) for an AMI lookup by name (and description)."""
    for key, value in context.items():
        if (
            key.startswith("ami:")
            and f"account={account}:" in key
            and key.endswith(f"region={region}")
            and f"filters.name.0={name}:" in key
            and (description is None or f"filters.description.0={description}:" in key)
        ):
            return str(value)
    raise KeyError(f"no pinned AMI for {name} ({description}) in {account}/{region}")


def logical_id(data: dict[str, Any], type_: str) -> str:
    found = list(resources(data, type_))
    assert len(found) == 1, f"{len(found)} {type_}"
    return found[0]


def pool_image(context: dict[str, Any], env: Any, key_path: str) -> str:
    """The image a pool of ``env`` boots, by its AMI key in the file (``inference[0].neuron_ami``,
    ``training[0].gpu_pool.ami`` ...): its pinned ``ami_id``, else the value of its lookup in ``context`` (a
    synth's context: cdk.context.json and the stand-ins of unpinned lookups)."""
    from neuronkit.config.lookups import image_lookups

    node: Any = env
    for part in key_path.split("."):
        name, _, index = part.partition("[")
        node = getattr(node, name)
        if index:
            node = node[int(index.rstrip("]"))]
    if node.ami_id:
        return str(node.ami_id)
    for lookup in image_lookups(env):
        if lookup.key_path == key_path:
            return str(context[lookup.context_key])
    raise KeyError(f"{env.name}: {key_path} neither pins an ami_id nor makes a lookup")


def group_name(nodegroup: dict[str, Any]) -> str:
    """A synthesized ``AWS::EKS::Nodegroup``'s stable name ``ENV-POOL``: its ``NodegroupName`` without the digest of
    its create-only properties (``neuronkit/constructs/eks/nodegroup_name.py``)."""
    from neuronkit.constructs.eks.nodegroup_name import prefix_of

    return prefix_of(str(nodegroup["Properties"]["NodegroupName"]))
