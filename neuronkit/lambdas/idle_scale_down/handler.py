"""Idle scale-down: when a training cluster's idle alarm goes to ALARM, scale the cluster to its minimum.

EventBridge invokes :func:`handler` with the "CloudWatch Alarm State Change" event CloudWatch sends when
an alarm changes state (source ``aws.cloudwatch``; ``detail.alarmName``, ``detail.state.value``). The rule
matches only the idle alarms of clusters whose environment file sets ``idle_scale_down: true`` and only
the ALARM state; the handler checks both again, so a wider rule or a replayed event does no harm.

For the alarm's group (``GROUPS``: a JSON object alarm name -> Auto Scaling group name) it:

1. removes scale-in protection from every instance of the group (training nodes start protected so a
   scale-in never cuts a job; an idle cluster has no job to protect), in batches of 50 instances
   (SetInstanceProtection's limit);
2. sets the desired capacity to the group's minimum size.

The group then terminates the surplus nodes. A group already at its minimum is left alone. The only
dependency is boto3, which the Lambda runtime provides.
"""

from __future__ import annotations

import json
import logging
import os
from typing import Any

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

DETAIL_TYPE = "CloudWatch Alarm State Change"
SOURCE = "aws.cloudwatch"
PROTECTION_BATCH = 50  # SetInstanceProtection takes at most 50 instance IDs per call


def groups_from_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """Alarm name -> Auto Scaling group name, from the function's ``GROUPS`` environment variable."""
    raw = (os.environ if env is None else env).get("GROUPS", "{}")
    groups = json.loads(raw)
    if not isinstance(groups, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in groups.items()):
        raise ValueError(f"GROUPS must be a JSON object of alarm name -> group name, got {raw!r}")
    return groups


def scale_to_minimum(autoscaling: Any, group_name: str) -> dict[str, Any]:
    """Unprotect every instance of the group and set its desired capacity to its minimum; what was done."""
    found = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[group_name])["AutoScalingGroups"]
    if not found:
        LOG.warning("group %s does not exist; nothing to scale down", group_name)
        return {"group": group_name, "action": "missing"}
    group = found[0]
    minimum, desired = group["MinSize"], group["DesiredCapacity"]
    protected = [i["InstanceId"] for i in group.get("Instances", []) if i.get("ProtectedFromScaleIn")]
    if desired <= minimum and not protected:
        LOG.info("group %s is already at its minimum (%d)", group_name, minimum)
        return {"group": group_name, "action": "none", "desired": desired, "min": minimum}
    for start in range(0, len(protected), PROTECTION_BATCH):
        autoscaling.set_instance_protection(
            AutoScalingGroupName=group_name,
            InstanceIds=protected[start : start + PROTECTION_BATCH],
            ProtectedFromScaleIn=False,
        )
    if desired > minimum:
        autoscaling.update_auto_scaling_group(AutoScalingGroupName=group_name, DesiredCapacity=minimum)
    LOG.info(
        "group %s: removed scale-in protection from %d instance(s), desired capacity %d -> %d",
        group_name,
        len(protected),
        desired,
        minimum,
    )
    return {"group": group_name, "action": "scaled-down", "unprotected": len(protected), "desired": minimum, "was": desired}


def handle(event: dict[str, Any], autoscaling: Any, groups: dict[str, str]) -> dict[str, Any]:
    """Act on one EventBridge event; returns what was done (also for events it ignores)."""
    if event.get("source") != SOURCE or event.get("detail-type") != DETAIL_TYPE:
        LOG.info("ignoring an event that is not a CloudWatch alarm state change: %s", event.get("detail-type"))
        return {"action": "ignored", "reason": "not an alarm state change"}
    detail = event.get("detail") or {}
    alarm = detail.get("alarmName", "")
    state = (detail.get("state") or {}).get("value")
    if state != "ALARM":
        return {"action": "ignored", "reason": f"{alarm} is {state}, not ALARM"}
    group = groups.get(alarm)
    if group is None:
        LOG.warning("alarm %s is not an idle alarm this function scales down for", alarm)
        return {"action": "ignored", "reason": f"{alarm} has no group"}
    LOG.info("%s: %s", alarm, (detail.get("state") or {}).get("reason", ""))
    return scale_to_minimum(autoscaling, group)


def handler(event: dict[str, Any], context: Any) -> dict[str, Any]:
    import boto3  # here, not at the top: the kit imports this module at synth, without boto3's cost

    return handle(event, boto3.client("autoscaling"), groups_from_env())
