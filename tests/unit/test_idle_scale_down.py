"""The idle scale-down function against moto, with the event EventBridge really delivers for an alarm.

The event is CloudWatch's "CloudWatch Alarm State Change" (Amazon CloudWatch User Guide, "Alarm events and
EventBridge"): source aws.cloudwatch, the alarm's ARN in resources, detail.alarmName and detail.state.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from neuronkit.lambdas.idle_scale_down import handler

REGION = "us-east-1"
GROUP = "prod-pretrain"
ALARM = "prod-pretrain-idle"
GROUPS = {ALARM: GROUP, "prod-pretrain-gpu-idle": "prod-pretrain-gpu"}

EVENT: dict[str, Any] = {
    "version": "0",
    "id": "c4c1c1c9-6542-e61b-6ef0-8c4d36933a92",
    "detail-type": "CloudWatch Alarm State Change",
    "source": "aws.cloudwatch",
    "account": "123456789012",
    "time": "2026-11-21T03:15:00Z",
    "region": REGION,
    "resources": [f"arn:aws:cloudwatch:{REGION}:123456789012:alarm:{ALARM}"],
    "detail": {
        "alarmName": ALARM,
        "state": {
            "value": "ALARM",
            "reason": "Threshold Crossed: 45 out of the last 45 datapoints were greater than or equal to the threshold (1.0).",
            "reasonData": '{"version":"1.0","queryDate":"2026-11-21T03:15:00.000+0000","statistic":"","period":60}',
            "timestamp": "2026-11-21T03:15:00.123+0000",
        },
        "previousState": {
            "value": "OK",
            "reason": "Threshold Crossed: 1 out of the last 45 datapoints was not greater than or equal to the threshold (1.0).",
            "timestamp": "2026-11-21T02:30:00.456+0000",
        },
        "configuration": {
            "metrics": [
                {
                    "id": "expr_1",
                    "expression": "IF(FILL(inservice, 0) > 0 AND FILL(util, 100) < 10, 1, 0)",
                    "label": "pretrain idle",
                    "returnData": True,
                }
            ],
            "description": "prod-pretrain: instances in service but NeuronCore utilization below 10% for 45 minutes.",
        },
    },
}


def event(**detail: Any) -> dict[str, Any]:
    e = copy.deepcopy(EVENT)
    e["detail"].update(detail)
    return e


@pytest.fixture
def autoscaling(aws_credentials: None) -> Iterator[Any]:
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        image = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        ec2.create_launch_template(
            LaunchTemplateName="pretrain-nodes", LaunchTemplateData={"ImageId": image, "InstanceType": "trn1.32xlarge"}
        )
        client = boto3.client("autoscaling", region_name=REGION)
        client.create_auto_scaling_group(
            AutoScalingGroupName=GROUP,
            LaunchTemplate={"LaunchTemplateName": "pretrain-nodes"},
            MinSize=1,
            MaxSize=4,
            DesiredCapacity=3,
            AvailabilityZones=[f"{REGION}a"],
            NewInstancesProtectedFromScaleIn=True,  # as training clusters launch their nodes
        )
        yield client


def group(client: Any) -> dict[str, Any]:
    (g,) = client.describe_auto_scaling_groups(AutoScalingGroupNames=[GROUP])["AutoScalingGroups"]
    return g


def test_alarm_unprotects_the_nodes_and_scales_the_cluster_to_its_minimum(autoscaling: Any) -> None:
    before = group(autoscaling)
    assert len(before["Instances"]) == 3 and all(i["ProtectedFromScaleIn"] for i in before["Instances"])
    result = handler.handle(event(), autoscaling, GROUPS)
    assert result == {"group": GROUP, "action": "scaled-down", "unprotected": 3, "desired": 1, "was": 3}
    after = group(autoscaling)
    assert after["DesiredCapacity"] == after["MinSize"] == 1
    # The group terminated the surplus nodes (none was protected any more).
    assert len(after["Instances"]) == 1
    assert not any(i["ProtectedFromScaleIn"] for i in after["Instances"])


def test_a_second_alarm_on_a_cluster_at_its_minimum_does_nothing(autoscaling: Any) -> None:
    handler.handle(event(), autoscaling, GROUPS)
    assert handler.handle(event(), autoscaling, GROUPS) == {"group": GROUP, "action": "none", "desired": 1, "min": 1}


def test_other_states_alarms_and_events_are_ignored(autoscaling: Any) -> None:
    ok = event(state={"value": "OK", "reason": "recovered", "timestamp": "2026-11-21T04:00:00.000+0000"})
    assert handler.handle(ok, autoscaling, GROUPS)["action"] == "ignored"
    assert (
        handler.handle(event(alarmName="prod-chat-p99-latency"), autoscaling, GROUPS)["reason"]
        == "prod-chat-p99-latency has no group"
    )
    scheduled = {**EVENT, "source": "aws.events", "detail-type": "Scheduled Event", "detail": {}}
    assert handler.handle(scheduled, autoscaling, GROUPS)["action"] == "ignored"
    assert group(autoscaling)["DesiredCapacity"] == 3  # untouched


def test_a_missing_group_is_reported_not_raised(autoscaling: Any) -> None:
    gpu_alarm = event(alarmName="prod-pretrain-gpu-idle")
    assert handler.handle(gpu_alarm, autoscaling, GROUPS) == {"group": "prod-pretrain-gpu", "action": "missing"}


def test_protection_is_removed_in_batches_of_50() -> None:
    calls: list[dict[str, Any]] = []

    class FakeAutoScaling:
        def describe_auto_scaling_groups(self, **kwargs: Any) -> dict[str, Any]:
            instances = [{"InstanceId": f"i-{n:017x}", "ProtectedFromScaleIn": True} for n in range(120)]
            return {"AutoScalingGroups": [{"MinSize": 0, "DesiredCapacity": 120, "Instances": instances}]}

        def set_instance_protection(self, **kwargs: Any) -> None:
            calls.append(kwargs)

        def update_auto_scaling_group(self, **kwargs: Any) -> None:
            calls.append(kwargs)

    handler.scale_to_minimum(FakeAutoScaling(), GROUP)
    assert [len(c["InstanceIds"]) for c in calls[:-1]] == [50, 50, 20]
    assert calls[-1] == {"AutoScalingGroupName": GROUP, "DesiredCapacity": 0}


def test_handler_reads_its_groups_from_the_environment(autoscaling: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GROUPS", json.dumps(GROUPS))
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    assert handler.handler(event(), None)["action"] == "scaled-down"
    monkeypatch.setenv("GROUPS", "[1]")
    with pytest.raises(ValueError, match="GROUPS must be a JSON object"):
        handler.groups_from_env()
