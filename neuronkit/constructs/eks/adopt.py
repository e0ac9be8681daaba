"""A kubectl manifest that may find its object already there: it adopts it on Create and never deletes it.

aws-cdk-lib 2.275.0's kubectl handler (``kubectl-handler/apply/__init__.py``) runs ``kubectl create`` on Create, or
``kubectl apply`` when the manifest sets ``overwrite``, and ``kubectl delete`` on Delete. The kit's objects that can
exist before their manifest resource is created:

- the charts' namespaces (``keda``, ``jobset-system``, ``kueue-system``) that Helm's ``--create-namespace`` made in an
  environment deployed before, and the node problem detector's namespace; on ``eks.existing`` any of them may be the
  user's own;
- each served fleet's Service, which an environment deployed before holds in the fleet's manifest.

Such a manifest must adopt (``overwrite``: ``kubectl apply``) and must not delete on Delete: CloudFormation deletes a
resource the failed operation created during the rollback's cleanup, so a first deploy after an upgrade that fails
later in the stack would ``kubectl delete`` the adopted Service (the load balancer controller then deregisters every
target: an outage) or namespace (the controllers in it, leaving their failurePolicy-Fail webhooks), and deleting a
stack on ``eks.existing`` would delete a namespace the user had before. So DeletionPolicy (and UpdateReplacePolicy)
``Retain``. CloudFormation honours it for a resource the rolled-back operation created: the UpdateStack, CreateStack
and ExecuteChangeSet parameter ``RetainExceptOnCreate`` reads "When set to true, newly created resources are deleted
when the operation rolls back. This includes newly created resources marked with a deletion policy of Retain. Default: false" (the CDK
CLI's ``cdk deploy`` does not set it; ``cdk rollback``, and ``cdk deploy`` after a ``--no-rollback`` failure, do:
docs/eks.md, "Objects the kit adopts"). Not ``RetainExceptOnCreate`` as a DeletionPolicy: "If the stack operation
that created the resource is rolled back, CloudFormation deletes the resource" (aws-cdk-lib
``CfnDeletionPolicy.RETAIN_EXCEPT_ON_CREATE``, after the DeletionPolicy attribute page).

What it costs: removing a served fleet leaves its Service (selecting no pods, no binding naming it), and deleting the
stack leaves the charts' namespaces (empty once Helm uninstalled the releases) on a cluster the stack does not delete.
A later Create adopts them again.
"""

from __future__ import annotations

from typing import Any

from aws_cdk import RemovalPolicy
from aws_cdk import aws_eks_v2 as eks
from constructs import Construct


def adopting_manifest(
    scope: Construct, id: str, *, cluster: eks.ICluster, manifest: list[dict[str, Any]]
) -> eks.KubernetesManifest:
    """A manifest applied with ``kubectl apply`` on Create (adopting what is there) and retained on delete, on a
    rollback's cleanup and on replacement (module docstring)."""
    return eks.KubernetesManifest(
        scope, id, cluster=cluster, manifest=manifest, overwrite=True, removal_policy=RemovalPolicy.RETAIN
    )
