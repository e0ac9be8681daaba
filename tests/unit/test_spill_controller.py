"""The GPU spill controller offline: the pure decision through recorded timelines, and the Lambda handler against a fake
Kubernetes API server (recorded JSON under tests/fixtures/spill/) asserting the exact PATCH of the scale subresource."""

from __future__ import annotations

import base64
import datetime as dt
import json
import urllib.parse
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from neuronkit.lambdas.spill import handler as spill
from neuronkit.lambdas.spill.handler import Memory, Observed, decide
from tests.fake_kube_api import FakeApi

FIXTURES = Path(__file__).parents[1] / "fixtures" / "spill"
T0 = dt.datetime(2026, 11, 26, 10, 0, tzinfo=dt.UTC)
SPILL, RETURN = 5, 30


def _replay(states: list[tuple[int, int, int, bool]], *, spill_after: int = SPILL, max_gpu: int = 8) -> list[int]:
    """Run the controller once a minute through ``(minute, wanted, ready, unschedulable)`` states, carrying the memory
    and the GPU replicas from run to run as the handler does; the GPU replicas after each run."""
    memory, gpu, out = Memory(), 0, []
    since: dt.datetime | None = None
    for minute, wanted, ready, pending in states:
        now = T0 + dt.timedelta(minutes=minute)
        since = (since or now) if pending else None  # a pod's condition keeps its lastTransitionTime while it stays
        d = decide(
            Observed(
                now=now, neuron_wanted=wanted, neuron_ready=ready, gpu_replicas=gpu, unschedulable_since=since, memory=memory
            ),
            spill_after_minutes=spill_after,
            return_after_minutes=RETURN,
            max_gpu_replicas=max_gpu,
        )
        memory, gpu = d.memory, d.gpu_replicas
        out.append(gpu)
    return out


def test_short_for_less_than_spill_after_does_not_spill() -> None:
    # Two Neuron pods unschedulable for 4 minutes (their nodes were still launching), then Ready.
    gpu = _replay([(m, 4, 2, True) for m in range(5)] + [(5, 4, 4, False), (6, 4, 4, False)])
    assert gpu == [0] * 7


def test_short_for_spill_after_spills_the_shortfall() -> None:
    gpu = _replay([(m, 4, 1, True) for m in range(8)])
    assert gpu[:5] == [0] * 5  # minutes 0..4: waiting
    assert gpu[5:] == [3, 3, 3]  # from minute 5: GPU == wanted - Ready


def test_a_capacity_failure_spills_like_an_unschedulable_pod_and_zero_spill_after_is_at_once() -> None:
    obs = Observed(now=T0, neuron_wanted=3, neuron_ready=1, gpu_replicas=0, capacity_failed_at=T0 - dt.timedelta(minutes=1))
    assert decide(obs, spill_after_minutes=0, return_after_minutes=RETURN, max_gpu_replicas=8).gpu_replicas == 2
    assert decide(obs, spill_after_minutes=5, return_after_minutes=RETURN, max_gpu_replicas=8).gpu_replicas == 0
    stale = Observed(now=T0, neuron_wanted=3, neuron_ready=1, gpu_replicas=0, capacity_failed_at=T0 - dt.timedelta(hours=2))
    assert decide(stale, spill_after_minutes=0, return_after_minutes=RETURN, max_gpu_replicas=8).action == "none"


def test_the_shortfall_is_capped_and_a_loading_pod_is_not_a_reason_to_spill() -> None:
    assert _replay([(m, 12, 0, True) for m in range(7)], max_gpu=4)[-1] == 4
    # Wanted 4, Ready 2, but no pod is unschedulable: the other two are loading the model on their nodes.
    assert _replay([(m, 4, 2, False) for m in range(40)]) == [0] * 40


def test_neuron_ready_for_return_after_returns_gpu_to_zero() -> None:
    states = [(m, 4, 1, True) for m in range(6)] + [(m, 4, 4, False) for m in range(6, 6 + RETURN + 2)]
    gpu = _replay(states)
    assert gpu[5] == 3
    ready_at = 6
    assert gpu[ready_at : ready_at + RETURN] == [3] * RETURN  # held while Neuron has been Ready less than return_after
    assert gpu[ready_at + RETURN] == 0


def test_flapping_neuron_readiness_does_not_flap_the_gpu_replicas() -> None:
    spilled = [(m, 4, 0, True) for m in range(6)]
    # Then the Neuron side flips between all Ready and two unschedulable every 10 minutes, for 2 hours.
    flapping = [(m, 4, 4 if (m // 10) % 2 == 0 else 2, (m // 10) % 2 == 1) for m in range(6, 126)]
    gpu = _replay(spilled + flapping)
    assert gpu[5] == 4
    after = gpu[5:]
    # Never back to zero while the shortfall keeps coming back within return_after, never up and down again: at most
    # one step down, to the highest shortfall of a return_after window (2).
    assert 0 not in after and after == sorted(after, reverse=True) and set(after) == {4, 2}
    assert after.index(2) == RETURN + 1  # the first return_after window after the spill ends at minute 36
    # An unschedulable pod that comes and goes every other minute never spills.
    assert set(_replay([(m, 4, 3, m % 2 == 0) for m in range(60)])) == {0}


def test_a_partial_return_keeps_the_highest_shortfall_of_the_window() -> None:
    states = [(m, 6, 0, True) for m in range(6)]  # GPU 6
    states += [(m, 6, 4 if m % 3 else 3, m % 3 == 0) for m in range(6, 6 + RETURN + 1)]  # shortfall 2..3
    gpu = _replay(states)
    assert gpu[5] == 6 and gpu[-1] == 3


def test_memory_survives_a_round_trip_and_garbage() -> None:
    m = Memory(trouble_since="2026-11-26T10:00:00Z", below_since=None, below_peak=2)
    assert Memory.parse(m.dumps()) == m
    assert Memory.parse("not json") == Memory() and Memory.parse("[1]") == Memory() and Memory.parse(None) == Memory()


# ----------------------------------------------------------------------------------------------------------------
# Issue 49: spill on a broken Neuron side, not on an ordinary scale-up (recorded states under tests/fixtures/spill/).
# ----------------------------------------------------------------------------------------------------------------
def _items(name: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = json.loads((FIXTURES / name).read_text())["items"]
    return items


def _observe(now: dt.datetime, pods: str, events: str, memory: Memory, gpu: int) -> Observed:
    """What the handler observes from recorded answers (Neuron 4 wanted; Ready counted from the pods)."""
    items, evs = _items(pods), _items(events)
    ready = sum(1 for p in items if spill._ready(p))
    return Observed(
        now=now, neuron_wanted=4, neuron_ready=ready, gpu_replicas=gpu, memory=memory,
        unschedulable_since=spill.unschedulable_since(items), broken_since=spill.broken_since(items),
        scale_up_at=spill.scale_up_at(items, evs),
    )  # fmt: skip


def _run(timeline: list[tuple[int, str, str]]) -> list[tuple[int, str]]:
    """One run per (minute after T0, pods file, events file), memory and GPU replicas carried over: (GPU, action)."""
    memory, gpu, out = Memory(), 0, []
    for minute, pods, events in timeline:
        d = decide(
            _observe(T0 + dt.timedelta(minutes=minute), pods, events, memory, gpu),
            spill_after_minutes=SPILL, return_after_minutes=RETURN, max_gpu_replicas=8,
        )  # fmt: skip
        memory, gpu = d.memory, d.gpu_replicas
        out.append((gpu, d.action))
    return out


def test_a_crash_looping_neuron_side_spills_after_spill_after() -> None:
    """Two Neuron pods are scheduled but broken (a server in CrashLoopBackOff since 10:00:30, an init container that
    gave up at 10:01): nothing is unschedulable and no launch failed, yet the fleet is short by two. It waits
    spill_after (5 min from the first failure) and then spills the shortfall."""
    items = _items("pods-crashloop.json")
    assert spill.unschedulable_since(items) is None
    assert spill.broken_since(items) == T0 + dt.timedelta(seconds=30)
    got = _run([(m, "pods-crashloop.json", "events-none.json") for m in range(1, 8)])
    assert [g for g, _ in got] == [0, 0, 0, 0, 0, 2, 2], got  # 10:06 is the first run 5 min after 10:00:30
    assert got[4][1] == "wait" and got[5][1] == "spill"


def test_a_crash_loop_keeps_its_first_failure_while_each_restart_moves_the_last_one() -> None:
    """In a crash loop the container's lastState.terminated.finishedAt moves with every restart; the controller keeps
    the earliest failure in its memory, so the loop still spills after spill_after."""
    memory, gpu, actions = Memory(), 0, []
    for minute in range(1, 8):
        items = _items("pods-crashloop.json")
        for p in items:
            for c in [*p["status"].get("initContainerStatuses", []), *p["status"].get("containerStatuses", [])]:
                if c.get("lastState"):  # every broken container failed again half a minute before this run
                    c["lastState"]["terminated"]["finishedAt"] = f"2026-11-26T10:0{minute - 1}:30Z"
        assert spill.broken_since(items) == T0 + dt.timedelta(minutes=minute - 1, seconds=30)
        now = T0 + dt.timedelta(minutes=minute)
        observed = Observed(
            now=now, neuron_wanted=4, neuron_ready=2, gpu_replicas=gpu, memory=memory,
            broken_since=spill.broken_since(items),
        )  # fmt: skip
        d = decide(observed, spill_after_minutes=SPILL, return_after_minutes=RETURN, max_gpu_replicas=8)
        memory, gpu = d.memory, d.gpu_replicas
        actions.append(d.action)
    assert actions[-2:] == ["spill", "hold"], actions


def test_a_loading_pod_is_not_broken() -> None:
    """Pods that run and load their model (never restarted, not Ready yet) are not trouble, however long they load."""
    assert spill.broken_since(_items("pods-loading.json")) is None
    assert spill.broken_since(_items("pods-ready.json")) is None


def test_a_scale_up_whose_node_arrives_in_8_minutes_does_not_spill() -> None:
    """Two Neuron pods are unschedulable from 10:00 and 10:03; Cluster Autoscaler triggered a scale-up for each
    (TriggeredScaleUp at 10:00:10 and 10:03:10); the nodes join at 10:08 and the pods load until 10:14. The
    controller waits for the autoscaler and never spills."""
    timeline = [(m, "pods-short.json", "events-scale-up.json") for m in range(1, 8)]
    timeline += [(m, "pods-loading.json", "events-scale-up.json") for m in range(8, 14)]
    timeline += [(14, "pods-ready.json", "events-none.json")]
    got = _run(timeline)
    assert all(g == 0 for g, _ in got), got
    assert got[6][1] == "wait"  # 10:07: short by two while the autoscaler adds nodes


def test_without_the_autoscalers_scale_up_the_same_timeline_spills() -> None:
    """The control for the test above: the same pending pods with no TriggeredScaleUp (nothing is adding a node)
    spill at 10:05, 5 minutes after the first became unschedulable."""
    got = _run([(m, "pods-short.json", "events-none.json") for m in range(1, 8)])
    assert [g for g, _ in got] == [0, 0, 0, 0, 2, 2, 2], got


def test_a_declined_or_overdue_scale_up_counts_as_short_capacity_again() -> None:
    """A later NotTriggerScaleUp (the group is at its maximum) ends the wait; so does a scale-up older than the
    autoscaler's own provision time (SCALE_UP_BUDGET_MINUTES)."""
    items = _items("pods-short.json")
    assert spill.scale_up_at(items, _items("events-scale-up.json")) == T0 + dt.timedelta(minutes=3, seconds=10)
    # The first pod's scale-up was declined at 10:20; the second's still stands.
    assert spill.scale_up_at(items, _items("events-declined.json")) == T0 + dt.timedelta(minutes=3, seconds=10)
    overdue = T0 + dt.timedelta(minutes=3, seconds=10 + 60 * spill.SCALE_UP_BUDGET_MINUTES + 60)
    d = decide(
        _observe(overdue, "pods-short.json", "events-scale-up.json", Memory(), 0),
        spill_after_minutes=SPILL, return_after_minutes=RETURN, max_gpu_replicas=8,
    )  # fmt: skip
    assert d.action == "spill" and d.gpu_replicas == 2
    # A launch that failed for capacity after the scale-up was triggered ends the wait too.
    failed = T0 + dt.timedelta(minutes=6)
    observed = _observe(T0 + dt.timedelta(minutes=7), "pods-short.json", "events-scale-up.json", Memory(), 0)
    d = decide(
        replace(observed, capacity_failed_at=failed, memory=Memory(trouble_since="2026-11-26T10:00:00Z")),
        spill_after_minutes=SPILL, return_after_minutes=RETURN, max_gpu_replicas=8,
    )  # fmt: skip
    assert d.action == "spill"


def test_the_handler_waits_for_a_triggered_scale_up(credentials: None) -> None:
    """Through the fake API: pending pods with the autoscaler's TriggeredScaleUp events, run at 10:07: the handler
    lists the namespace's pod events, sends no PATCH and logs "wait"."""
    ssm, stub = _ssm("{}", None)
    with FakeApi(_routes("pods-short.json", "events-scale-up.json"), FIXTURES) as api:
        kube = spill.KubernetesApi(api.endpoint, "k8s-aws-v1.token")
        record = spill.run(_settings(api.endpoint), T0 + dt.timedelta(minutes=7), kube=kube, ssm=ssm, autoscaling=None)
    stub.assert_no_pending_responses()
    assert record["action"] == "wait" and "autoscaler adds a node" in record["reason"]
    assert not [r for r in api.requests if r["method"] == "PATCH"]
    (events,) = [r for r in api.requests if r["path"].endswith("/events")]
    assert events["query"] == {"fieldSelector": ["involvedObject.kind=Pod"]}


def test_a_stalled_rollout_and_a_failed_compile_job_are_reported_from_recorded_state() -> None:
    """The alarms' inputs: the Deployment controller's ProgressDeadlineExceeded, a compile Job's Failed condition."""
    stalled = json.loads((FIXTURES / "neuron-deployment-stalled.json").read_text())
    healthy = json.loads((FIXTURES / "neuron-deployment.json").read_text())
    assert spill.rollout_stalled(stalled) and not spill.rollout_stalled(healthy)
    assert spill.compile_failed(_items("jobs-failed.json")) == 1 and spill.compile_failed(_items("jobs-complete.json")) == 0


def test_the_handler_reports_a_failed_compile_job_and_a_stalled_rollout(credentials: None) -> None:
    """Through the fake API: the record carries RolloutStalled 1 and CompileFailed 1 (the alarms' metrics), and the
    Jobs are listed by the fleet's compile labels."""
    ssm, stub = _ssm("{}", None)
    routes = {**_routes("pods-ready.json"), f"GET {DEPLOYMENTS}/chat-neuron": "neuron-deployment-stalled.json",
              f"GET /apis/batch/v1/namespaces/{NS}/jobs": "jobs-failed.json"}  # fmt: skip
    with FakeApi(routes, FIXTURES) as api:
        kube = spill.KubernetesApi(api.endpoint, "k8s-aws-v1.token")
        record = spill.run(_settings(api.endpoint), T0, kube=kube, ssm=ssm, autoscaling=None)
    assert record["RolloutStalled"] == 1 and record["CompileFailed"] == 1
    (jobs,) = [r for r in api.requests if r["path"].endswith("/jobs")]
    assert jobs["query"] == {"labelSelector": ["neuronkit.io/fleet=chat,neuronkit.io/role=compile"]}
    metrics = {m["Name"] for m in record["_aws"]["CloudWatchMetrics"][0]["Metrics"]}
    assert {"RolloutStalled", "CompileFailed"} <= metrics


# ----------------------------------------------------------------------------------------------------------------
# The handler against a fake Kubernetes API server.
# ----------------------------------------------------------------------------------------------------------------
NS = "neuronkit-serving"
DEPLOYMENTS = f"/apis/apps/v1/namespaces/{NS}/deployments"


def _routes(pods: str, events: str = "events-none.json") -> dict[str, str]:
    return {
        f"GET {DEPLOYMENTS}/chat-neuron": "neuron-deployment.json",
        f"GET {DEPLOYMENTS}/chat-gpu": "gpu-deployment.json",
        f"GET /api/v1/namespaces/{NS}/pods": pods,
        f"GET /api/v1/namespaces/{NS}/events": events,
        f"GET /apis/batch/v1/namespaces/{NS}/jobs": "jobs-complete.json",
        f"PATCH {DEPLOYMENTS}/chat-gpu/scale": "",  # echoes the patch
    }


def _settings(endpoint: str, groups: tuple[str, ...] = ()) -> spill.Settings:
    return spill.Settings.from_env(
        {
            "CLUSTER_NAME": "team", "CLUSTER_ENDPOINT": endpoint, "AWS_REGION": "us-east-1", "FLEET_NAMESPACE": NS,
            "NEURON_DEPLOYMENT": "chat-neuron", "GPU_DEPLOYMENT": "chat-gpu", "ENVIRONMENT": "team", "POOL": "chat",
            "METRICS_NAMESPACE": "Neuronkit", "MEMORY_PARAMETER": "/neuronkit/team/chat/spill",
            "SPILL_AFTER_MINUTES": "5", "RETURN_AFTER_MINUTES": "30", "MAX_GPU_REPLICAS": "4",
            "NEURON_GROUPS": ",".join(groups),
        }
    )  # fmt: skip


@pytest.fixture
def credentials(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAEXAMPLEEXAMPLE00")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "secret")
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    yield


def _ssm(memory: str, expect_put: str | None) -> tuple[Any, Stubber]:
    client = boto3.client("ssm", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")
    stub = Stubber(client)
    name = "/neuronkit/team/chat/spill"
    stub.add_response("get_parameter", {"Parameter": {"Name": name, "Value": memory, "Type": "String"}}, {"Name": name})
    if expect_put is not None:
        stub.add_response(
            "put_parameter", {"Version": 2}, {"Name": name, "Value": expect_put, "Type": "String", "Overwrite": True}
        )
    stub.activate()
    return client, stub


def test_the_handler_patches_the_gpu_scale_subresource_with_the_shortfall(credentials: None) -> None:
    """Neuron 2/4 Ready, pods unschedulable since 10:00, run at 10:06 with spill_after 5: one PATCH, GPU 2."""
    now = "2026-11-26T10:06:00Z"
    remembered = Memory(trouble_since="2026-11-26T10:00:00Z").dumps()
    ssm, stub = _ssm(remembered, expect_put=None)
    session = boto3.session.Session(region_name="us-east-1")
    with FakeApi(_routes("pods-short.json"), FIXTURES) as api:
        kube = spill.KubernetesApi(api.endpoint, spill.eks_token(session, "team", "us-east-1"))
        record = spill.run(_settings(api.endpoint), spill._time(now), kube=kube, ssm=ssm, autoscaling=None)  # type: ignore[arg-type]
    stub.assert_no_pending_responses()
    patches = [r for r in api.requests if r["method"] == "PATCH"]
    assert len(patches) == 1
    patch = patches[0]
    assert patch["path"] == f"{DEPLOYMENTS}/chat-gpu/scale"
    assert patch["headers"]["Content-Type"] == "application/merge-patch+json"
    assert json.loads(patch["body"]) == {"spec": {"replicas": 2}}
    # The pods were listed by the Neuron Deployment's own selector, and every call carried the EKS token.
    pods = next(r for r in api.requests if r["path"].endswith("/pods"))
    assert pods["query"]["labelSelector"] == [
        "app.kubernetes.io/name=chat,app.kubernetes.io/part-of=neuronkit,neuronkit.io/accelerator=neuron,neuronkit.io/fleet=chat"
    ]
    assert all(r["headers"]["Authorization"].startswith("Bearer k8s-aws-v1.") for r in api.requests)
    assert record["action"] == "spill" and record["GpuReplicas"] == 2 and record["NeuronShortfall"] == 2
    assert record["_aws"]["CloudWatchMetrics"][0]["Metrics"][0] == {"Name": "GpuReplicas", "Unit": "Count"}


def test_the_handler_sends_no_patch_before_spill_after_and_remembers_the_trouble(credentials: None) -> None:
    ssm, stub = _ssm("{}", expect_put=Memory(trouble_since="2026-11-26T10:00:00Z").dumps())
    with FakeApi(_routes("pods-short.json"), FIXTURES) as api:
        kube = spill.KubernetesApi(api.endpoint, "k8s-aws-v1.test")
        record = spill.run(_settings(api.endpoint), spill._time("2026-11-26T10:02:00Z"), kube=kube, ssm=ssm, autoscaling=None)  # type: ignore[arg-type]
    stub.assert_no_pending_responses()
    assert [r for r in api.requests if r["method"] == "PATCH"] == []
    assert record["action"] == "wait" and record["GpuReplicas"] == 0


def test_the_handler_reads_a_capacity_failure_of_the_neuron_node_group(credentials: None) -> None:
    """All pods Ready-or-pending aside, a launch that failed for InsufficientInstanceCapacity at 10:01:33 counts."""
    ssm, _ = _ssm(Memory(trouble_since="2026-11-26T10:00:00Z").dumps(), expect_put=None)
    asg = boto3.client("autoscaling", region_name="us-east-1", aws_access_key_id="a", aws_secret_access_key="b")
    activities = json.loads((FIXTURES / "scaling-activities.json").read_text())
    for a in activities["Activities"]:
        for k in ("StartTime", "EndTime"):
            a[k] = spill._time(a[k].replace(".000", ""))
    with Stubber(asg) as stub:
        stub.add_response(
            "describe_scaling_activities", activities, {"AutoScalingGroupName": "eks-chat-neuron-20c9a1b2", "MaxRecords": 20}
        )
        assert spill.capacity_failed_at(asg, ("eks-chat-neuron-20c9a1b2",)) == dt.datetime(2026, 11, 26, 10, 1, 33, tzinfo=dt.UTC)


def test_the_eks_token_is_a_presigned_get_caller_identity_for_the_cluster(credentials: None) -> None:
    token = spill.eks_token(boto3.session.Session(region_name="us-east-1"), "team", "us-east-1")
    assert token.startswith("k8s-aws-v1.") and "=" not in token
    url = base64.urlsafe_b64decode(token[len("k8s-aws-v1.") :] + "==").decode()
    parts = urllib.parse.urlsplit(url)
    query = urllib.parse.parse_qs(parts.query)
    assert parts.netloc == "sts.us-east-1.amazonaws.com"
    assert query["Action"] == ["GetCallerIdentity"] and query["X-Amz-Expires"] == ["60"]
    assert "x-k8s-aws-id" in query["X-Amz-SignedHeaders"][0].split(";")


def test_the_handler_ignores_other_events() -> None:
    assert spill.handler({"source": "aws.s3"})["action"] == "ignored"


def test_the_lambda_entry_point_spills_through_the_fake_api_and_remembers_in_ssm(
    credentials: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """handler() as Lambda runs it: settings from the environment, the token from the role's credentials, the memory
    parameter in SSM (moto), the Kubernetes API a local server; EventBridge's event time is the run's clock."""
    from moto import mock_aws

    with mock_aws(), FakeApi(_routes("pods-short.json"), FIXTURES) as api:
        ssm = boto3.client("ssm", region_name="us-east-1")
        ssm.put_parameter(Name="/neuronkit/team/chat/spill", Value="{}", Type="String")
        env = {
            "CLUSTER_NAME": "team", "CLUSTER_ENDPOINT": api.endpoint, "CLUSTER_CA": "", "AWS_REGION": "us-east-1",
            "FLEET_NAMESPACE": NS, "NEURON_DEPLOYMENT": "chat-neuron", "GPU_DEPLOYMENT": "chat-gpu",
            "ENVIRONMENT": "team", "POOL": "chat", "METRICS_NAMESPACE": "Neuronkit",
            "MEMORY_PARAMETER": "/neuronkit/team/chat/spill", "SPILL_AFTER_MINUTES": "5", "RETURN_AFTER_MINUTES": "30",
            "MAX_GPU_REPLICAS": "4", "NEURON_GROUPS": "",
        }  # fmt: skip
        for k, v in env.items():
            monkeypatch.setenv(k, v)
        event = {"source": "aws.events", "detail-type": "Scheduled Event", "time": "2026-11-26T10:02:00Z"}
        first = spill.handler(event)
        assert first["action"] == "wait" and not [r for r in api.requests if r["method"] == "PATCH"]
        remembered = json.loads(ssm.get_parameter(Name="/neuronkit/team/chat/spill")["Parameter"]["Value"])
        assert remembered["trouble_since"] == "2026-11-26T10:00:00Z"
        second = spill.handler({**event, "time": "2026-11-26T10:05:00Z"})
    assert second["action"] == "spill" and second["GpuReplicas"] == 2
    [patch] = [r for r in api.requests if r["method"] == "PATCH"]
    assert patch["path"] == f"{DEPLOYMENTS}/chat-gpu/scale" and json.loads(patch["body"]) == {"spec": {"replicas": 2}}


def test_the_scale_up_budget_is_the_autoscalers_provision_time() -> None:
    """The spill gives a triggered scale-up exactly as long as Cluster Autoscaler waits for the node (review of
    issue 49: 15 minutes against the kit's 20 spilled nodes the autoscaler was still waiting for)."""
    text = (Path(__file__).parents[2] / "neuronkit" / "kubernetes" / "autoscaler.py").read_text()
    assert f'"max-node-provision-time": "{spill.SCALE_UP_BUDGET_MINUTES}m0s"' in text


def test_an_old_restart_does_not_date_a_new_trouble() -> None:
    """lastState.terminated keeps the last restart for the pod's life: a pod that restarted long ago and is not Ready
    only since now is in trouble since now, so the spill still waits spill_after (review of issue 49)."""
    now = dt.datetime(2026, 11, 24, 12, 0, tzinfo=dt.UTC)
    pod = {
        "metadata": {"name": "chat-neuron-abc"},
        "spec": {"nodeName": "node-1"},
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "PodScheduled", "status": "True"},
                {"type": "Ready", "status": "False", "lastTransitionTime": "2026-11-24T11:59:00Z"},
            ],
            "containerStatuses": [
                {"name": "server", "restartCount": 1, "state": {"running": {}},
                 "lastState": {"terminated": {"finishedAt": "2026-11-20T08:00:00Z", "exitCode": 1}}}
            ],
        },
    }  # fmt: skip
    assert spill.broken_since([pod]) == now - dt.timedelta(minutes=1)


# ----------------------------------------------------------------------------------------------------------------
# Several GPU fallback types (issue 49): filled in the file's order, returned in reverse.
# ----------------------------------------------------------------------------------------------------------------
AT_1006 = dt.datetime(2026, 11, 26, 10, 6, tzinfo=dt.UTC)


def _side(name: str, replicas: int, placed: int = 0, blocked: bool = False) -> spill.GpuSide:
    return spill.GpuSide(name, replicas, placed=placed, blocked=blocked, reason="no node" if blocked else "")


def test_a_spill_whose_first_gpu_type_cannot_be_had_fills_the_second() -> None:
    first, second = "chat-gpu", "chat-gpu-g5-2xlarge"
    # A new spill skips a blocked first type; pending replicas of a blocked type move on, placed ones stay.
    assert spill.distribute(2, (_side(first, 0, blocked=True), _side(second, 0))) == (0, 2)
    assert spill.distribute(2, (_side(first, 2, placed=0, blocked=True), _side(second, 0))) == (0, 2)
    assert spill.distribute(3, (_side(first, 3, placed=1, blocked=True), _side(second, 0))) == (1, 2)
    # A type that can be had takes the spill (and a growth) first.
    assert spill.distribute(2, (_side(first, 0), _side(second, 0))) == (2, 0)
    assert spill.distribute(4, (_side(first, 1, placed=1), _side(second, 2))) == (2, 2)
    # Blocked all along the chain: the last type keeps what reaches it.
    assert spill.distribute(2, (_side(first, 2, blocked=True), _side(second, 2, placed=0, blocked=True))) == (0, 2)


def test_a_return_empties_the_second_gpu_type_before_the_first() -> None:
    first, second = "chat-gpu", "chat-gpu-g5-2xlarge"
    sides = (_side(first, 2, placed=2), _side(second, 2, placed=2))
    assert spill.distribute(3, sides) == (2, 1)
    assert spill.distribute(2, sides) == (2, 0)
    assert spill.distribute(1, sides) == (1, 0)
    assert spill.distribute(0, sides) == (0, 0)
    # One type: the total, as before.
    assert spill.distribute(3, (_side(first, 1),)) == (3,)


def test_a_gpu_type_is_blocked_by_a_declined_scale_up_a_capacity_failure_or_a_long_wait_not_by_a_scale_up() -> None:
    pods, declined = _items("pods-gpu-pending.json"), _items("events-gpu-declined.json")
    at = dt.datetime(2026, 11, 26, 10, 5, tzinfo=dt.UTC)
    blocked, why = spill.gpu_blocked(at, pods, declined, None, wait_minutes=5)
    assert blocked and "declined" in why
    assert spill.gpu_blocked(at, pods, [], None, wait_minutes=5) == (False, "")  # pending 1 min, no event yet
    assert spill.gpu_blocked(at + dt.timedelta(minutes=4), pods, [], None, wait_minutes=5)[0]
    triggered = [{**e, "reason": spill.SCALE_UP_TRIGGERED, "message": "pod triggered scale-up: [...]"} for e in declined]
    assert spill.gpu_blocked(at + dt.timedelta(minutes=10), pods, triggered, None, wait_minutes=5) == (False, "")
    assert spill.gpu_blocked(at + dt.timedelta(minutes=25), pods, triggered, None, wait_minutes=5)[0]
    assert spill.gpu_blocked(at, [], [], at - dt.timedelta(minutes=3), wait_minutes=5)[0]
    assert spill.gpu_blocked(at, [], [], None, wait_minutes=5) == (False, "")


def _two_gpu_routes(first: str, first_pods: str, events: str) -> dict[str, str]:
    routes = _routes("pods-short.json", events)
    del routes[f"GET {DEPLOYMENTS}/chat-gpu"], routes[f"PATCH {DEPLOYMENTS}/chat-gpu/scale"]
    return {
        f"GET /api/v1/namespaces/{NS}/pods|neuronkit.io/gpu-type=g5-2xlarge": "pods-none.json",
        f"GET /api/v1/namespaces/{NS}/pods|!neuronkit.io/gpu-type": first_pods,
        **routes,
        f"GET {DEPLOYMENTS}/chat-gpu": first,
        f"GET {DEPLOYMENTS}/chat-gpu-g5-2xlarge": "gpu-g5-deployment.json",
        f"PATCH {DEPLOYMENTS}/chat-gpu/scale": "",
        f"PATCH {DEPLOYMENTS}/chat-gpu-g5-2xlarge/scale": "",
    }


def _two_gpu_settings(endpoint: str) -> spill.Settings:
    base = _settings(endpoint)
    return replace(base, gpu_deployments=("chat-gpu", "chat-gpu-g5-2xlarge"))


def test_the_handler_moves_the_first_types_unplaceable_pods_to_the_second_on_recorded_state(credentials: None) -> None:
    """Neuron 2/4 Ready and short since 10:00; chat-gpu at 2 with both pods unschedulable and Cluster Autoscaler's
    NotTriggerScaleUp on them at 10:04:10: at 10:06 the second type gets 2 (first) and the first goes to 0 (then)."""
    remembered = Memory(trouble_since="2026-11-26T10:00:00Z").dumps()
    ssm, stub = _ssm(remembered, expect_put=None)
    routes = _two_gpu_routes("gpu-deployment-pending.json", "pods-gpu-pending.json", "events-gpu-declined.json")
    with FakeApi(routes, FIXTURES) as api:
        kube = spill.KubernetesApi(api.endpoint, "k8s-aws-v1.test")
        record = spill.run(_two_gpu_settings(api.endpoint), AT_1006, kube=kube, ssm=ssm, autoscaling=None)
    stub.assert_no_pending_responses()
    patches = [
        (r["path"].split("/")[-2], json.loads(r["body"])["spec"]["replicas"]) for r in api.requests if r["method"] == "PATCH"
    ]
    assert patches == [("chat-gpu-g5-2xlarge", 2), ("chat-gpu", 0)]
    assert record["GpuReplicas"] == 2 and record["gpu"] == {"chat-gpu": 0, "chat-gpu-g5-2xlarge": 2}
    assert "declined" in record["blocked"]["chat-gpu"]
    # Each GPU Deployment's pods were listed by its own selector; the first's without the further types' pods.
    selectors = [r["query"]["labelSelector"][0] for r in api.requests if r["path"].endswith("/pods")]
    assert any(q.endswith(",!neuronkit.io/gpu-type") and "accelerator=gpu" in q for q in selectors)
    assert any("neuronkit.io/gpu-type=g5-2xlarge" in q for q in selectors)


def test_a_new_spill_goes_to_the_first_gpu_type_when_it_can_be_had(credentials: None) -> None:
    ssm, _ = _ssm(Memory(trouble_since="2026-11-26T10:00:00Z").dumps(), expect_put=None)
    routes = _two_gpu_routes("gpu-deployment.json", "pods-none.json", "events-none.json")
    with FakeApi(routes, FIXTURES) as api:
        kube = spill.KubernetesApi(api.endpoint, "k8s-aws-v1.test")
        record = spill.run(_two_gpu_settings(api.endpoint), AT_1006, kube=kube, ssm=ssm, autoscaling=None)
    patches = [
        (r["path"].split("/")[-2], json.loads(r["body"])["spec"]["replicas"]) for r in api.requests if r["method"] == "PATCH"
    ]
    assert patches == [("chat-gpu", 2)] and record["gpu"] == {"chat-gpu": 2, "chat-gpu-g5-2xlarge": 0}


def test_a_fleet_without_gpu_types_reports_its_state_and_scales_nothing(credentials: None) -> None:
    ssm, _ = _ssm(Memory(trouble_since="2026-11-26T10:00:00Z").dumps(), expect_put=None)
    routes = _routes("pods-short.json")
    routes[f"GET {DEPLOYMENTS}/chat-neuron"] = "neuron-deployment-stalled.json"
    routes[f"GET /apis/batch/v1/namespaces/{NS}/jobs"] = "jobs-failed.json"
    with FakeApi(routes, FIXTURES) as api:
        kube = spill.KubernetesApi(api.endpoint, "k8s-aws-v1.test")
        settings = replace(_settings(api.endpoint), gpu_deployments=(), max_gpu_replicas=0)
        record = spill.run(settings, AT_1006, kube=kube, ssm=ssm, autoscaling=None)
    assert [r for r in api.requests if r["method"] == "PATCH"] == []
    assert not [r for r in api.requests if "/deployments/chat-gpu" in r["path"]]
    assert record["GpuReplicas"] == 0 and record["RolloutStalled"] == 1 and record["CompileFailed"] == 1


def test_settings_read_several_gpu_deployments_and_groups_and_the_single_name_of_older_functions() -> None:
    env = {
        "CLUSTER_NAME": "team", "CLUSTER_ENDPOINT": "http://x", "FLEET_NAMESPACE": NS, "NEURON_DEPLOYMENT": "chat-neuron",
        "ENVIRONMENT": "team", "POOL": "chat", "METRICS_NAMESPACE": "N", "MEMORY_PARAMETER": "/m",
        "SPILL_AFTER_MINUTES": "5", "RETURN_AFTER_MINUTES": "30", "MAX_GPU_REPLICAS": "4",
    }  # fmt: skip
    several = spill.Settings.from_env({**env, "GPU_DEPLOYMENTS": "chat-gpu,chat-gpu-g5-2xlarge", "GPU_GROUPS": "a,b"})
    assert several.gpu_deployments == ("chat-gpu", "chat-gpu-g5-2xlarge") and several.gpu_groups == ("a", "b")
    assert spill.Settings.from_env({**env, "GPU_DEPLOYMENT": "chat-gpu"}).gpu_deployments == ("chat-gpu",)
    assert spill.Settings.from_env({**env, "GPU_DEPLOYMENTS": ""}).gpu_deployments == ()


def test_the_functions_gpu_type_label_is_the_kits() -> None:
    from neuronkit.kubernetes import scheduling

    assert spill.GPU_TYPE_LABEL == scheduling.GPU_TYPE_LABEL
