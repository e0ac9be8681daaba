"""Rebalancer: moves an inference fleet back from GPU fallback to Neuron, one instance at a time.

EventBridge invokes :func:`handler` on a schedule with its "Scheduled Event". Each run:

1. publishes the instances in service per accelerator family (CloudWatch metric ``InstancesInService``,
   dimensions ``Environment``, ``Pool``, ``Family`` = ``neuron`` | ``gpu``), whatever else happens, so
   an alarm can say "GPU fallback instances in service for longer than N hours";
2. when GPU fallback instances are in service and the fleet is steady (every instance InService and
   Healthy, as many in service as desired, no scaling activity in progress, no suspended process: a
   rolling update suspends some), terminates ONE GPU instance without lowering the desired capacity.
   The group launches the replacement by priority: a Neuron type first, a GPU type only when Neuron
   capacity is still short;
3. remembers what it did in a tag on the group (``neuronkit:rebalancer``: the instance, the GPU count
   and the desired capacity at that moment). On the next steady run it compares: fewer GPU instances
   means the replacement came back as Neuron and it goes on with the next one; as many GPU instances
   as before (at the same desired capacity) means the replacement came back as GPU, so Neuron capacity
   is still short: it stops and leaves the fleet alone for ``BACKOFF_MINUTES`` before trying again.

It never terminates the last ``MIN_IN_SERVICE`` instances in service (a one-node fleet would go dark
for a whole model load). Settings come from environment variables (see :class:`Settings`); the only
dependency is boto3, which the Lambda runtime provides.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from dataclasses import dataclass
from typing import Any

LOG = logging.getLogger()
LOG.setLevel(logging.INFO)

MEMORY_TAG = "neuronkit:rebalancer"
METRIC_NAME = "InstancesInService"
FAMILIES = ("neuron", "gpu")
_FINISHED = frozenset({"Successful", "Failed", "Cancelled"})
_NEURON_PREFIXES = ("inf", "trn")


@dataclass(frozen=True)
class Settings:
    """What the construct passes in the function's environment."""

    group_name: str
    environment: str
    pool: str
    namespace: str
    neuron_types: tuple[str, ...]
    fallback_types: tuple[str, ...]
    backoff_minutes: int
    min_in_service: int = 1

    @classmethod
    def from_env(cls, env: dict[str, str] | None = None) -> Settings:
        e = dict(os.environ if env is None else env)
        return cls(
            group_name=e["GROUP_NAME"],
            environment=e["ENVIRONMENT"],
            pool=e["POOL"],
            namespace=e["NAMESPACE"],
            neuron_types=tuple(t for t in e.get("NEURON_TYPES", "").split(",") if t),
            fallback_types=tuple(t for t in e.get("FALLBACK_TYPES", "").split(",") if t),
            backoff_minutes=int(e.get("BACKOFF_MINUTES", "120")),
            min_in_service=int(e.get("MIN_IN_SERVICE", "1")),
        )

    def family(self, instance_type: str) -> str:
        """``neuron`` or ``gpu``: the configured lists first, the type's family name otherwise."""
        if instance_type in self.neuron_types:
            return "neuron"
        if instance_type in self.fallback_types:
            return "gpu"
        return "neuron" if instance_type.startswith(_NEURON_PREFIXES) else "gpu"


def handler(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """Entry point for EventBridge's scheduled event (``source: aws.events``, ``detail-type: Scheduled Event``)."""
    if event.get("source") != "aws.events" or event.get("detail-type") != "Scheduled Event":
        LOG.warning("ignoring an event that is not EventBridge's scheduled event: %s", json.dumps(event)[:500])
        return {"action": "ignored", "reason": "not a scheduled event"}
    import boto3  # here, not at the top: the kit imports this module's constants at synth, without boto3's cost

    result = rebalance(
        Settings.from_env(),
        event_time(event),
        autoscaling=boto3.client("autoscaling"),
        cloudwatch=boto3.client("cloudwatch"),
    )
    LOG.info(json.dumps(result))
    return result


def event_time(event: dict[str, Any]) -> dt.datetime:
    """The time EventBridge scheduled this run (``time``: ``2026-11-22T00:30:00Z``), else now."""
    text = event.get("time")
    if isinstance(text, str):
        try:
            return _parse_time(text)
        except ValueError:
            pass
    return dt.datetime.now(dt.UTC)


def rebalance(settings: Settings, now: dt.datetime, *, autoscaling: Any, cloudwatch: Any) -> dict[str, Any]:
    """One run: publish the family counts, then decide and maybe terminate one GPU instance."""
    groups = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[settings.group_name])["AutoScalingGroups"]
    if not groups:
        raise RuntimeError(f"Auto Scaling group {settings.group_name} does not exist")
    group = groups[0]
    in_service = [i for i in group.get("Instances", []) if i.get("LifecycleState") == "InService"]
    gpu = [i for i in in_service if settings.family(i.get("InstanceType", "")) == "gpu"]
    counts = {"neuron": len(in_service) - len(gpu), "gpu": len(gpu)}
    publish(cloudwatch, settings, counts, now)
    memory = _read_memory(group)
    desired = int(group.get("DesiredCapacity", 0))

    def result(action: str, reason: str, **extra: Any) -> dict[str, Any]:
        return {"group": settings.group_name, "action": action, "reason": reason, "in_service": counts, **extra}

    if not gpu:
        if memory:
            _forget(autoscaling, settings)
        return result("nothing-to-do", "no GPU fallback instance in service")
    blocked = memory.get("blocked-until")
    if blocked and now < _parse_time(blocked):
        return result("backing-off", f"a replacement came back as GPU; Neuron capacity was short, next try after {blocked}")
    problem = _unsteady(autoscaling, group, in_service)
    if problem:
        return result("waiting", f"fleet not steady: {problem}")
    if memory.get("terminated") and memory.get("desired") == str(desired) and len(gpu) >= int(memory.get("gpu", "0")):
        until = _format_time(now + dt.timedelta(minutes=settings.backoff_minutes))
        _remember(autoscaling, settings, {"blocked-until": until, "after": memory["terminated"]})
        return result(
            "stopped",
            f"the replacement of {memory['terminated']} came back as GPU (Neuron capacity still short); next try after {until}",
        )
    if len(in_service) - 1 < settings.min_in_service:
        return result("waiting", f"{len(in_service)} in service; replacing one would leave fewer than {settings.min_in_service}")
    victim = _choose(settings, gpu)
    autoscaling.terminate_instance_in_auto_scaling_group(InstanceId=victim["InstanceId"], ShouldDecrementDesiredCapacity=False)
    _remember(
        autoscaling,
        settings,
        {"terminated": victim["InstanceId"], "gpu": str(len(gpu)), "desired": str(desired), "at": _format_time(now)},
    )
    return result(
        "terminated",
        f"replacing GPU instance {victim['InstanceId']} ({victim.get('InstanceType')}); the group launches by priority",
        instance_id=victim["InstanceId"],
    )


def publish(cloudwatch: Any, settings: Settings, counts: dict[str, int], now: dt.datetime) -> None:
    """``InstancesInService`` per family, both families every run (zero included, so alarms always have data)."""
    cloudwatch.put_metric_data(
        Namespace=settings.namespace,
        MetricData=[
            {
                "MetricName": METRIC_NAME,
                "Dimensions": [
                    {"Name": "Environment", "Value": settings.environment},
                    {"Name": "Pool", "Value": settings.pool},
                    {"Name": "Family", "Value": family},
                ],
                "Timestamp": now,
                "Value": float(counts[family]),
                "Unit": "Count",
            }
            for family in FAMILIES
        ],
    )


def _unsteady(autoscaling: Any, group: dict[str, Any], in_service: list[dict[str, Any]]) -> str | None:
    """Why the fleet is not steady enough to replace an instance, or None."""
    desired = int(group.get("DesiredCapacity", 0))
    for i in group.get("Instances", []):
        if i.get("LifecycleState") != "InService" or i.get("HealthStatus") != "Healthy":
            return f"instance {i['InstanceId']} is {i.get('LifecycleState')}/{i.get('HealthStatus')}"
    if len(in_service) != desired:
        return f"{len(in_service)} in service, {desired} desired"
    suspended = [p.get("ProcessName") for p in group.get("SuspendedProcesses", [])]
    if suspended:
        return f"processes suspended ({', '.join(sorted(str(p) for p in suspended))}), e.g. by a rolling update"
    activities = autoscaling.describe_scaling_activities(AutoScalingGroupName=group["AutoScalingGroupName"], MaxRecords=20)
    running = [a for a in activities.get("Activities", []) if a.get("StatusCode") not in _FINISHED]
    if running:
        return f"scaling activity in progress: {running[0].get('Description', running[0].get('ActivityId'))}"
    return None


def _choose(settings: Settings, gpu: list[dict[str, Any]]) -> dict[str, Any]:
    """The lowest-priority GPU instance (last in the fallback order); ties by instance id, so runs are repeatable."""
    order = {t: n for n, t in enumerate(settings.fallback_types)}
    return max(gpu, key=lambda i: (order.get(i.get("InstanceType", ""), len(order)), i["InstanceId"]))


def _read_memory(group: dict[str, Any]) -> dict[str, str]:
    for tag in group.get("Tags", []):
        if tag.get("Key") == MEMORY_TAG:
            pairs = (part.split("=", 1) for part in str(tag.get("Value", "")).split(";") if "=" in part)
            return {k: v for k, v in pairs}
    return {}


def _remember(autoscaling: Any, settings: Settings, memory: dict[str, str]) -> None:
    autoscaling.create_or_update_tags(
        Tags=[
            {
                "ResourceId": settings.group_name,
                "ResourceType": "auto-scaling-group",
                "Key": MEMORY_TAG,
                "Value": ";".join(f"{k}={v}" for k, v in memory.items()),
                "PropagateAtLaunch": False,
            }
        ]
    )


def _forget(autoscaling: Any, settings: Settings) -> None:
    autoscaling.delete_tags(Tags=[{"ResourceId": settings.group_name, "ResourceType": "auto-scaling-group", "Key": MEMORY_TAG}])


def _parse_time(text: str) -> dt.datetime:
    when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def _format_time(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
