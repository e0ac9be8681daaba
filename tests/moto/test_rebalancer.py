"""The rebalancer Lambda against moto, invoked with the event EventBridge sends on a schedule.

Each test builds an Auto Scaling group like the inference fleet's (mixed instances policy: the Neuron
launch template, then GPU overrides with their own template). moto launches every instance from the
group's main launch template and ignores overrides, so the tests use that as the stand-in for EC2's
capacity: while the main template is the Neuron one, a replacement comes back as Neuron ("capacity
available"); switched to the GPU template, it comes back as GPU ("Neuron capacity still short").
GPU instances already in service are launched from the GPU template and attached, as the group would
have launched them during a shortage. moto records no scaling activities, so "activity in progress" is
tested with botocore's Stubber.
"""

from __future__ import annotations

import datetime as dt
import itertools
import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from neuronkit.lambdas.rebalancer import handler as rebalancer

REGION = "us-east-1"
NEURON, GPU_FIRST, GPU_LAST = "inf2.xlarge", "g6.xlarge", "g5.xlarge"
T0 = dt.datetime(2026, 11, 22, 0, 30, tzinfo=dt.UTC)
SETTINGS = {
    "ENVIRONMENT": "test",
    "NAMESPACE": "Neuronkit",
    "NEURON_TYPES": NEURON,
    "FALLBACK_TYPES": f"{GPU_FIRST},{GPU_LAST}",
    "BACKOFF_MINUTES": "120",
    "MIN_IN_SERVICE": "1",
}


def scheduled_event(when: dt.datetime) -> dict[str, Any]:
    """What EventBridge delivers for a schedule rule (``rate(30 minutes)``)."""
    return {
        "version": "0",
        "id": "53dc4d37-cffa-4f76-80c9-8b7d4a4d2eaa",
        "detail-type": "Scheduled Event",
        "source": "aws.events",
        "account": "123456789012",
        "time": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
        "region": REGION,
        "resources": ["arn:aws:events:us-east-1:123456789012:rule/test-inference-FleetchatRebalancerSchedule"],
        "detail": {},
    }


class Fleet:
    """A mocked group ``test-POOL`` with a Neuron and two GPU launch templates, and helpers to shape it."""

    def __init__(self, pool: str) -> None:
        self.pool = pool
        self.name = f"test-{pool}"
        self.seen: set[str] = set()  # every instance id this group has had
        self.ec2 = boto3.client("ec2", region_name=REGION)
        self.autoscaling = boto3.client("autoscaling", region_name=REGION)
        self.cloudwatch = boto3.client("cloudwatch", region_name=REGION)
        # Stand-ins for the Neuron and GPU DLAMIs (moto's bundled AMIs are not loaded: faster).
        self.neuron_image = self.ec2.register_image(Name="neuron-dlami", RootDeviceName="/dev/sda1")["ImageId"]
        self.gpu_image = self.ec2.register_image(Name="gpu-dlami", RootDeviceName="/dev/sda1")["ImageId"]
        self.subnet = self.ec2.describe_subnets()["Subnets"][0]["SubnetId"]
        self.templates = {
            NEURON: self._template(f"{pool}-neuron", NEURON, self.neuron_image),
            GPU_FIRST: self._template(f"{pool}-gpu-g6", GPU_FIRST, self.gpu_image),
            GPU_LAST: self._template(f"{pool}-gpu-g5", GPU_LAST, self.gpu_image),
        }
        self.autoscaling.create_auto_scaling_group(
            AutoScalingGroupName=self.name,
            MinSize=0,
            MaxSize=8,
            DesiredCapacity=0,
            VPCZoneIdentifier=self.subnet,
            MixedInstancesPolicy=self._policy(NEURON),
        )

    def _template(self, name: str, instance_type: str, image: str) -> str:
        lt = self.ec2.create_launch_template(
            LaunchTemplateName=name, LaunchTemplateData={"ImageId": image, "InstanceType": instance_type}
        )
        template_id: str = lt["LaunchTemplate"]["LaunchTemplateId"]
        return template_id

    def _policy(self, main: str) -> dict[str, Any]:
        return {
            "LaunchTemplate": {
                "LaunchTemplateSpecification": {"LaunchTemplateId": self.templates[main], "Version": "$Latest"},
                "Overrides": [
                    {"InstanceType": NEURON},
                    *(
                        {
                            "InstanceType": t,
                            "LaunchTemplateSpecification": {"LaunchTemplateId": self.templates[t], "Version": "$Latest"},
                        }
                        for t in (GPU_FIRST, GPU_LAST)
                    ),
                ],
            },
            "InstancesDistribution": {"OnDemandAllocationStrategy": "prioritized", "OnDemandPercentageAboveBaseCapacity": 100},
        }

    def neuron_capacity(self, available: bool) -> None:
        """What the group launches next: Neuron when capacity is available, else the first GPU fallback."""
        self.autoscaling.update_auto_scaling_group(
            AutoScalingGroupName=self.name, MixedInstancesPolicy=self._policy(NEURON if available else GPU_FIRST)
        )

    def launch_neuron(self, count: int) -> None:
        self.autoscaling.set_desired_capacity(
            AutoScalingGroupName=self.name, DesiredCapacity=self.group()["DesiredCapacity"] + count
        )

    def attach_gpu(self, instance_type: str, count: int = 1) -> list[str]:
        """GPU instances the group launched during a shortage (from the GPU override's own template)."""
        run = self.ec2.run_instances(
            MinCount=count,
            MaxCount=count,
            SubnetId=self.subnet,
            LaunchTemplate={"LaunchTemplateId": self.templates[instance_type]},
        )
        ids = [i["InstanceId"] for i in run["Instances"]]
        self.autoscaling.attach_instances(AutoScalingGroupName=self.name, InstanceIds=ids)
        return ids

    def group(self) -> dict[str, Any]:
        groups = self.autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[self.name])["AutoScalingGroups"]
        group: dict[str, Any] = groups[0]
        self.seen |= {i["InstanceId"] for i in group["Instances"]}
        return group

    def types_in_service(self) -> list[str]:
        return sorted(i["InstanceType"] for i in self.group()["Instances"] if i["LifecycleState"] == "InService")

    def terminated(self) -> list[str]:
        """This group's instances that were terminated (by the rebalancer: nothing else terminates here)."""
        self.group()
        if not self.seen:
            return []
        reservations = self.ec2.describe_instances(
            InstanceIds=sorted(self.seen), Filters=[{"Name": "instance-state-name", "Values": ["terminated"]}]
        )
        return sorted(i["InstanceId"] for r in reservations["Reservations"] for i in r["Instances"])

    def run(self, when: dt.datetime = T0) -> dict[str, Any]:
        """One scheduled run of the rebalancer for this group."""
        self.group()
        os.environ.update(GROUP_NAME=self.name, POOL=self.pool)
        return rebalancer.handler(scheduled_event(when), None)

    def memory(self) -> str | None:
        return next((t["Value"] for t in self.group()["Tags"] if t["Key"] == rebalancer.MEMORY_TAG), None)

    def family_counts(self) -> dict[str, float]:
        """The latest InstancesInService datapoint per family, read back from CloudWatch."""
        out = {}
        for family in rebalancer.FAMILIES:
            stats = self.cloudwatch.get_metric_statistics(
                Namespace="Neuronkit",
                MetricName=rebalancer.METRIC_NAME,
                Dimensions=[
                    {"Name": "Environment", "Value": "test"},
                    {"Name": "Pool", "Value": self.pool},
                    {"Name": "Family", "Value": family},
                ],
                StartTime=T0 - dt.timedelta(days=1),
                EndTime=T0 + dt.timedelta(days=1),
                Period=60,
                Statistics=["Maximum"],
            )["Datapoints"]
            latest = max(stats, key=lambda d: d["Timestamp"])
            out[family] = latest["Maximum"]
        return out


_POOLS = itertools.count()


@pytest.fixture(scope="module")
def mocked(aws_credentials: None) -> Iterator[None]:
    """One mock for the module (each test has its own group): moto's bundled AMIs are not loaded, which is faster."""
    mp = pytest.MonkeyPatch()
    mp.setenv("AWS_DEFAULT_REGION", REGION)
    mp.setenv("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
    for key, value in SETTINGS.items():
        mp.setenv(key, value)
    with mock_aws():
        try:
            yield
        finally:
            # Before moto resets: its reset rebuilds the (cached) backends with the settings of that moment,
            # and later modules expect the bundled AMIs.
            mp.undo()


@pytest.fixture
def fleet(mocked: None, monkeypatch: pytest.MonkeyPatch) -> Fleet:
    monkeypatch.setenv("GROUP_NAME", "unset")  # restored after the test; Fleet.run sets this group's
    monkeypatch.setenv("POOL", "unset")
    return Fleet(f"chat{next(_POOLS)}")


def test_nothing_to_do_without_gpu_instances(fleet: Fleet) -> None:
    fleet.launch_neuron(3)
    result = fleet.run()
    assert result["action"] == "nothing-to-do"
    assert result["in_service"] == {"neuron": 3, "gpu": 0}
    assert fleet.terminated() == [] and fleet.group()["DesiredCapacity"] == 3
    assert fleet.memory() is None


def test_terminates_exactly_one_gpu_instance_the_lowest_priority_and_keeps_desired(fleet: Fleet) -> None:
    fleet.launch_neuron(1)
    (first,) = fleet.attach_gpu(GPU_FIRST)
    (last,) = fleet.attach_gpu(GPU_LAST)
    assert fleet.group()["DesiredCapacity"] == 3
    result = fleet.run()
    assert result["action"] == "terminated" and result["instance_id"] == last  # g5 is last in fallback_types
    assert fleet.terminated() == [last]
    group = fleet.group()
    assert group["DesiredCapacity"] == 3  # not decremented: the group launched a replacement by priority
    assert fleet.types_in_service() == sorted([NEURON, NEURON, GPU_FIRST])
    assert fleet.memory() == f"terminated={last};gpu=2;desired=3;at=2026-11-22T00:30:00Z"
    # The replacement came back as Neuron: the next run replaces the next GPU instance, then stops having work.
    second = fleet.run(T0 + dt.timedelta(minutes=30))
    assert second["action"] == "terminated" and second["instance_id"] == first
    assert fleet.types_in_service() == [NEURON] * 3
    third = fleet.run(T0 + dt.timedelta(minutes=60))
    assert third["action"] == "nothing-to-do" and fleet.memory() is None
    assert sorted(fleet.terminated()) == sorted([first, last])


def test_stops_when_the_replacement_comes_back_as_gpu_and_retries_after_the_backoff(fleet: Fleet) -> None:
    fleet.launch_neuron(1)
    fleet.attach_gpu(GPU_FIRST, 2)
    fleet.neuron_capacity(available=False)
    first = fleet.run()
    assert first["action"] == "terminated"
    assert fleet.types_in_service() == sorted([NEURON, GPU_FIRST, GPU_FIRST])  # the replacement is GPU again
    stopped = fleet.run(T0 + dt.timedelta(minutes=30))
    assert stopped["action"] == "stopped" and "came back as GPU" in stopped["reason"]
    assert len(fleet.terminated()) == 1  # nothing more was terminated
    assert fleet.memory() == f"blocked-until=2026-11-22T03:00:00Z;after={first['instance_id']}"
    waiting = fleet.run(T0 + dt.timedelta(minutes=60))
    assert waiting["action"] == "backing-off" and len(fleet.terminated()) == 1
    # After the backoff, with Neuron capacity back, it tries again and the fleet moves to Neuron.
    fleet.neuron_capacity(available=True)
    retry = fleet.run(T0 + dt.timedelta(minutes=160))
    assert retry["action"] == "terminated" and len(fleet.terminated()) == 2
    assert fleet.types_in_service() == sorted([NEURON, NEURON, GPU_FIRST])


def test_does_nothing_while_an_instance_is_unhealthy(fleet: Fleet) -> None:
    fleet.launch_neuron(1)
    (gpu,) = fleet.attach_gpu(GPU_FIRST)
    neuron = next(i["InstanceId"] for i in fleet.group()["Instances"] if i["InstanceType"] == NEURON)
    fleet.autoscaling.set_instance_health(InstanceId=neuron, HealthStatus="Unhealthy")
    result = fleet.run()
    assert result["action"] == "waiting" and f"instance {neuron} is InService/Unhealthy" in result["reason"]
    assert fleet.terminated() == []
    assert gpu in [i["InstanceId"] for i in fleet.group()["Instances"]]


def test_does_nothing_while_an_instance_is_in_standby_or_processes_are_suspended(fleet: Fleet) -> None:
    fleet.launch_neuron(2)
    fleet.attach_gpu(GPU_FIRST)
    neuron = next(i["InstanceId"] for i in fleet.group()["Instances"] if i["InstanceType"] == NEURON)
    fleet.autoscaling.enter_standby(AutoScalingGroupName=fleet.name, InstanceIds=[neuron], ShouldDecrementDesiredCapacity=False)
    assert fleet.run()["action"] == "waiting"
    fleet.autoscaling.exit_standby(AutoScalingGroupName=fleet.name, InstanceIds=[neuron])
    # A rolling update suspends processes for its duration.
    fleet.autoscaling.suspend_processes(AutoScalingGroupName=fleet.name, ScalingProcesses=["AlarmNotification"])
    result = fleet.run()
    assert result["action"] == "waiting" and "AlarmNotification" in result["reason"]
    assert fleet.terminated() == []


def test_never_replaces_the_only_instance_in_service(fleet: Fleet) -> None:
    fleet.attach_gpu(GPU_FIRST)
    result = fleet.run()
    assert result["action"] == "waiting" and "fewer than 1" in result["reason"]
    assert fleet.terminated() == []


def test_publishes_instances_in_service_per_family_every_run(fleet: Fleet) -> None:
    fleet.launch_neuron(2)
    fleet.attach_gpu(GPU_FIRST)
    fleet.attach_gpu(GPU_LAST)
    fleet.autoscaling.suspend_processes(AutoScalingGroupName=fleet.name, ScalingProcesses=["Launch"])
    assert fleet.run()["action"] == "waiting"  # published even when it does nothing else
    assert fleet.family_counts() == {"neuron": 2.0, "gpu": 2.0}
    metrics = fleet.cloudwatch.list_metrics(
        Namespace="Neuronkit", MetricName=rebalancer.METRIC_NAME, Dimensions=[{"Name": "Pool", "Value": fleet.pool}]
    )["Metrics"]
    assert {tuple(sorted((d["Name"], d["Value"]) for d in m["Dimensions"])) for m in metrics} == {
        (("Environment", "test"), ("Family", "gpu"), ("Pool", fleet.pool)),
        (("Environment", "test"), ("Family", "neuron"), ("Pool", fleet.pool)),
    }


def test_ignores_events_that_are_not_scheduled_events(fleet: Fleet) -> None:
    fleet.launch_neuron(1)
    fleet.attach_gpu(GPU_FIRST)
    event = {**scheduled_event(T0), "source": "aws.autoscaling", "detail-type": "EC2 Instance Launch Successful"}
    assert rebalancer.handler(event, None)["action"] == "ignored"
    assert fleet.terminated() == []


def test_waits_while_a_scaling_activity_is_in_progress(aws_credentials: None) -> None:
    """moto records no scaling activities: the in-progress case runs against botocore's Stubber."""
    client = boto3.client("autoscaling", region_name=REGION)
    group = {
        "AutoScalingGroupName": "test-chat",
        "DesiredCapacity": 2,
        "Instances": [
            {"InstanceId": f"i-{n:017x}", "InstanceType": t, "LifecycleState": "InService", "HealthStatus": "Healthy"}
            for n, t in enumerate((NEURON, GPU_FIRST))
        ],
        "SuspendedProcesses": [],
    }
    with Stubber(client) as stub:
        stub.add_response(
            "describe_scaling_activities",
            {
                "Activities": [
                    {
                        "ActivityId": "a1",
                        "AutoScalingGroupName": "test-chat",
                        "Cause": "an instance was taken out of service in response to a user request",
                        "StartTime": T0,
                        "StatusCode": "InProgress",
                        "Description": "Launching a new EC2 instance: i-0000000000000000f",
                    }
                ]
            },
            {"AutoScalingGroupName": "test-chat", "MaxRecords": 20},
        )
        reason = rebalancer._unsteady(client, group, group["Instances"])
    assert reason == "scaling activity in progress: Launching a new EC2 instance: i-0000000000000000f"
