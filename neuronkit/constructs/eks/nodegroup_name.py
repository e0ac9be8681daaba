"""Node group names that let CloudFormation replace a group (issue 47, fix 5).

A change of a create-only property of ``AWS::EKS::Nodegroup`` (instance types, capacity type, AMI type, subnets, node
role ...: the resource schema's ``createOnlyProperties``, listed in ``catalog/eks.yaml`` ``nodegroup_names``) makes
CloudFormation replace the group: it creates the new one, then deletes the old one. Under a fixed name the create
fails while the old group holds it (CloudFormation User Guide, "Name type": "If you must replace the resource, specify
a new name"). So the kit names a group ``ENV-POOL-<digest>``, the digest over exactly those properties' values as they
are synthesized (a reference to another resource is its ``Ref``/``Fn::GetAtt``/``Fn::ImportValue`` text, a stable
placeholder of the logical ID): a change of any of them gives a new name, anything else keeps it.

The name is written at synthesis time (a ``Lazy`` that resolves the node group's own properties), so the digest is what
the template holds: :func:`name_of_template_resource` recomputes it from a synthesized resource, and a contract test
compares the two over every template.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import jsii
from aws_cdk import IResolveContext, IStringProducer, Lazy
from aws_cdk import aws_eks_v2 as eks

from neuronkit import catalog


def facts() -> dict[str, Any]:
    """``catalog/eks.yaml`` ``nodegroup_names``: the create-only properties, the digest length and EKS's name rule."""
    out: dict[str, Any] = catalog.eks_facts()["nodegroup_names"]
    return out


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def digest(values: dict[str, Any]) -> str:
    """The hex digest of the create-only properties' values (property -> resolved value; absent ones as null)."""
    text = json.dumps({k: values.get(k) for k in facts()["create_only_properties"]}, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[: int(facts()["digest_chars"])]


def cut(prefix: str) -> str:
    """``prefix`` checked against EKS's name rule and cut (deterministically) so that ``-<digest>`` fits EKS's limit;
    a cut prefix keeps its start and ends in a letter or digit. Raises ValueError for a prefix EKS refuses."""
    f = facts()
    if not re.match(str(f["pattern"]), prefix):
        raise ValueError(
            f"node group name {prefix!r}: EKS names start with a letter or digit and hold only letters, digits, '-' and "
            "'_' (rename the environment or the pool)"
        )
    room = int(f["max_length"]) - 1 - int(f["digest_chars"])
    return prefix[:room].rstrip("-_")


def compose(prefix: str, values: dict[str, Any]) -> str:
    """``PREFIX-<digest>`` of ``values`` (:func:`digest`), the prefix :func:`cut` to fit EKS's limit."""
    return f"{cut(prefix)}-{digest(values)}"


def prefix_of(name: str) -> str:
    """The stable part of a composed name (``ENV-POOL``, maybe cut): an IAM resource pattern ``prefix_of(n) + "-*"``
    covers the group and every replacement of it."""
    return name.rsplit("-", 1)[0]


def name_of_template_resource(prefix: str, resource: dict[str, Any]) -> str:
    """The name :func:`compose` gives a synthesized ``AWS::EKS::Nodegroup`` (its template dict)."""
    props = resource.get("Properties") or {}
    return compose(prefix, {k: props.get(k) for k in facts()["create_only_properties"]})


@jsii.implements(IStringProducer)
class _Name:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.resource: eks.CfnNodegroup | None = None

    def produce(self, context: IResolveContext) -> str:
        assert self.resource is not None, "replaceable_name: the node group was never attached"
        values = {p: context.resolve(getattr(self.resource, _snake(p))) for p in facts()["create_only_properties"]}
        return compose(self.prefix, values)


class ReplaceableName:
    """A node group name ``PREFIX-<digest>`` to pass as ``nodegroup_name``; :meth:`attach` names the L1 it digests.

    ``prefix`` (``ENV-POOL``) is checked against EKS's name rule now; ``name`` is a token until synthesis.
    ``pattern`` (``PREFIX-????????``, one ``?`` per digest character) covers the group and its replacements, for IAM."""

    def __init__(self, prefix: str) -> None:
        self.prefix = cut(prefix)  # a bad prefix is refused here, at construction, with the setting named
        self._producer = _Name(prefix)
        self.name: str = Lazy.uncached_string(self._producer)
        # IAM's "?" matches "any single character" (IAM User Guide, "IAM JSON policy elements: Resource", "Using
        # wildcards in resource ARNs"): exactly the digest, so a sibling pool (ENV-POOL-gpu-...) does not match.
        self.pattern = f"{self.prefix}-" + "?" * int(facts()["digest_chars"])

    def attach(self, nodegroup: eks.Nodegroup) -> None:
        cfn = nodegroup.node.default_child
        assert isinstance(cfn, eks.CfnNodegroup)
        # Create-only properties must be set as L1 attributes, never as raw overrides, which the producer does not
        # read (a contract test recomputes every synthesized name from the template and would fail).
        self._producer.resource = cfn


__all__ = ["ReplaceableName", "compose", "cut", "digest", "facts", "name_of_template_resource", "prefix_of"]
