"""The desired size of a managed node group that Cluster Autoscaler scales, answered to CloudFormation (issue 47).

A Lambda-backed CloudFormation custom resource. On Create and Update it reads the group's scaling configuration
(``eks:DescribeNodegroup``) and answers ``DesiredSize`` = clamp(current desired size, ``MinSize``, ``MaxSize``); the
node group's ``ScalingConfig.DesiredSize`` is that answer. So a deploy never lowers the nodes Cluster Autoscaler runs,
and a raised ``min_size`` lifts the group only to the new minimum. A group that does not exist yet (the first deploy)
gets ``Initial`` (the file's desired size, else its minimum), clamped the same way; a group CloudFormation replaces
under a new name (``ENV-POOL-<digest>``) starts from the size of the group it replaces (``OldResourceProperties``).

Why not leave ``DesiredSize`` out of the template (EKS API reference, NodegroupScalingConfig): "When creating a node
group, you must specify all or none of the properties", so a group created without it but with ``minSize`` and
``maxSize`` is refused; and a ``minSize`` above the current desired size is refused on update ("Minimum capacity N
can't be greater than desired size M"). The same reference: "If you use the Kubernetes Cluster Autoscaler, you
shouldn't change the desiredSize value directly ... If this parameter is given a value that is smaller than the
current number of running worker nodes, the necessary number of worker nodes are terminated". Clamping the current
value changes it only when it lies outside the new bounds, which is what EKS itself requires.

The construct passes ``MinSize``, ``MaxSize`` and ``Initial`` (and what else should refresh the answer); CloudFormation
calls this function again only when one of them changes. The only dependency is boto3, which the runtime provides.
"""

from __future__ import annotations

import json
import logging
import urllib.request
from typing import Any

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)


def desired_size(answer: dict[str, Any] | None, *, minimum: int, maximum: int, initial: int) -> int:
    """The desired size to write: the group's current one (``initial`` when there is no group yet) within
    ``minimum``..``maximum``. ``answer`` is a DescribeNodegroup response, or None when EKS knows no such group."""
    if minimum > maximum:
        raise ValueError(f"min size {minimum} is above max size {maximum}")
    current = initial if answer is None else int(answer["nodegroup"]["scalingConfig"]["desiredSize"])
    return max(minimum, min(maximum, current))


def replaced_group(event: dict[str, Any]) -> str | None:
    """On an Update whose node group name changed (CloudFormation replaces the group under its new name), the old
    group's name: its size is the one to keep while the new group does not exist yet. None otherwise."""
    if event.get("RequestType") != "Update":
        return None
    old = (event.get("OldResourceProperties") or {}).get("NodegroupName")
    new = event["ResourceProperties"]["NodegroupName"]
    if not old or old == new or event["ResourceProperties"]["ClusterName"] != event["OldResourceProperties"].get("ClusterName"):
        return None
    return str(old)


def _describe(cluster: str, nodegroup: str, *, replaced: bool = False) -> dict[str, Any] | None:
    """The node group, or None when it does not exist. For the group a replacement leaves behind (``replaced``), a
    refused call is None too: its size is a better start than ``min_size``, not a reason to roll the stack back."""
    import boto3
    from botocore.exceptions import ClientError

    try:
        answer: dict[str, Any] = boto3.client("eks").describe_nodegroup(clusterName=cluster, nodegroupName=nodegroup)
    except ClientError as e:
        code = e.response.get("Error", {}).get("Code")
        if code == "ResourceNotFoundException":
            return None
        if replaced and code in ("AccessDeniedException", "AccessDenied"):
            LOG.warning("%s/%s: the replaced group's size is not readable (%s): the new group starts at its initial size",
                        cluster, nodegroup, code)  # fmt: skip
            return None
        raise
    return answer


def _respond(event: dict[str, Any], context: Any, status: str, data: dict[str, Any], reason: str = "") -> None:
    """The custom resource's answer, PUT to CloudFormation's pre-signed ``ResponseURL``."""
    physical = event.get("PhysicalResourceId") or (
        f"{event['ResourceProperties']['ClusterName']}/{event['ResourceProperties']['NodegroupName']}/desired-size"
    )
    body = json.dumps({
        "Status": status, "Reason": reason or f"see {getattr(context, 'log_stream_name', 'the log')}",
        "PhysicalResourceId": physical, "StackId": event["StackId"], "RequestId": event["RequestId"],
        "LogicalResourceId": event["LogicalResourceId"], "Data": data,
    }).encode()  # fmt: skip
    request = urllib.request.Request(event["ResponseURL"], data=body, method="PUT", headers={"Content-Type": ""})
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310 (CloudFormation's https URL)
        LOG.info("answered %s: %s", status, response.status)


def handler(event: dict[str, Any], context: Any) -> None:
    try:
        data: dict[str, Any] = {}
        if event["RequestType"] in ("Create", "Update"):
            p = event["ResourceProperties"]
            answer = _describe(p["ClusterName"], p["NodegroupName"])
            # A replacement (a new name, docs/eks.md "Day two"): the new group starts at the old one's size. The old
            # name is the update's previous one or, on a Create (an environment deployed before this resource: its
            # first deploy after the rename creates it), a name the group had before digests (``PreviousNames``).
            old = replaced_group(event)
            for name in [*([old] if old else []), *(str(n) for n in p.get("PreviousNames") or [])]:
                if answer is not None:
                    break
                answer = _describe(p["ClusterName"], name, replaced=True)
            size = desired_size(answer, minimum=int(p["MinSize"]), maximum=int(p["MaxSize"]), initial=int(p["Initial"]))
            current = None if answer is None else answer["nodegroup"]["scalingConfig"].get("desiredSize")
            LOG.info("%s/%s: desired %s -> %s", p["ClusterName"], p["NodegroupName"], current, size)
            data = {"DesiredSize": size}
        _respond(event, context, "SUCCESS", data)
    except Exception as e:  # CloudFormation waits an hour for an answer that never comes: always answer
        LOG.exception("failed")
        _respond(event, context, "FAILED", {}, reason=str(e)[:500])
