"""The monitoring stacks: every alarm (metric, threshold, action), the budget, the schedules, the dashboard,
idle scale-down, node observability and the cost-allocation tags. Reuses the session synth of both examples."""

from __future__ import annotations

import json
from typing import Any

import pytest

from neuronkit import catalog
from neuronkit.catalog import pricing
from neuronkit.catalog import serving as catalog_serving
from tests.conftest import ROOT, Synth, reserved_prod
from tests.project import environment_of, monitoring_stack
from tests.project import environments as project_environments

# Every environment of the project: the examples, a user's own files and an EKS file (tests/project.py).
ENVS = project_environments()
PRICES = pricing.load_prices()


def resources(synth: Synth, stack: str, type_: str) -> dict[str, dict[str, Any]]:
    return synth.resources(stack, type_)


def watch(env: str) -> str:
    """The stack with the environment's alarms, topic, dashboard and budget (ENV-monitoring, or ENV-eks on EKS)."""
    return monitoring_stack(ENVS[env])


def alarms(synth: Synth, env: str) -> dict[str, dict[str, Any]]:
    return {
        r["Properties"]["AlarmName"]: r["Properties"] for r in resources(synth, watch(env), "AWS::CloudWatch::Alarm").values()
    }


def topic_ref(synth: Synth, env: str) -> dict[str, str]:
    (logical_id,) = resources(synth, watch(env), "AWS::SNS::Topic")
    return {"Ref": logical_id}


def dims(metric: dict[str, Any]) -> dict[str, Any]:
    return {d["Name"]: d["Value"] for d in metric.get("Dimensions", [])}


def query(props: dict[str, Any], id_: str) -> dict[str, Any]:
    return next(m for m in props["Metrics"] if m["Id"] == id_)


def expression(props: dict[str, Any]) -> str:
    (expr,) = [m["Expression"] for m in props["Metrics"] if "Expression" in m]
    return str(expr)


def flatten(value: Any) -> str:
    """A Fn::Join'ed string with its tokens replaced by TOKEN (for the dashboard body)."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return str(sep).join(flatten(p) for p in parts)
    return "TOKEN"


def dashboard(synth: Synth, env: str) -> dict[str, Any]:
    (board,) = resources(synth, watch(env), "AWS::CloudWatch::Dashboard").values()
    body: dict[str, Any] = json.loads(flatten(board["Properties"]["DashboardBody"]))
    return body


EXPECTED_ALARMS = {
    "dev": {
        "dev-dev-ecc-uncorrected",
        "dev-dev-execution-errors",
        "dev-dev-idle",
        "dev-serve-ecc-uncorrected",
        "dev-serve-execution-errors",
        "dev-serve-p99-latency",
        "dev-serve-5xx-rate",
        "dev-serve-gpu-fallback",
        "dev-lustre-free-capacity",
        "dev-vcpu-quota-trn",
        "dev-vcpu-quota-inf",
        "dev-vcpu-quota-g",
        "dev-serve-rebalancer-errors",
        "dev-serve-no-healthy-hosts",
        "dev-dev-driver-versions",
        "dev-dev-boot-failures",
        "dev-serve-boot-failures",
    },
    "prod": {
        "prod-pretrain-ecc-uncorrected",
        "prod-pretrain-execution-errors",
        "prod-pretrain-idle",
        "prod-pretrain-gpu-idle",
        "prod-chat-ecc-uncorrected",
        "prod-chat-execution-errors",
        "prod-chat-p99-latency",
        "prod-chat-5xx-rate",
        "prod-chat-gpu-fallback",
        "prod-lustre-free-capacity",
        "prod-vcpu-quota-trn",
        "prod-vcpu-quota-inf",
        "prod-vcpu-quota-p",
        "prod-vcpu-quota-g",
        "prod-chat-rebalancer-errors",
        "prod-chat-no-healthy-hosts",
        "prod-pretrain-driver-versions",
        "prod-pretrain-capacity-block-ending",
        "prod-pretrain-boot-failures",
        "prod-pretrain-gpu-boot-failures",
        "prod-chat-boot-failures",
    },
}


# --------------------------------------------------------------------------------------------
# alarms
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("env", sorted(ENVS))
def test_every_pool_alarms_on_repeated_boot_failures(synth: Synth, env: str) -> None:
    """Nodes publish NodeBootFailures (Environment, Pool) before they go (docs/node-lifecycle.md): two in an hour alarm."""
    found = alarms(synth, env)
    boot = {name: props for name, props in found.items() if name.endswith("-boot-failures")}
    assert boot, f"{env}: no pool alarms on boot failures"
    for name, props in boot.items():
        assert props["MetricName"] == "NodeBootFailures" and props["Statistic"] == "Sum" and props["Period"] == 3600, name
        dims = {d["Name"]: d["Value"] for d in props["Dimensions"]}
        assert dims == {"Environment": env, "Pool": name[len(env) + 1 : -len("-boot-failures")]}, name
        assert props["Threshold"] == 2 and props["ComparisonOperator"] == "GreaterThanOrEqualToThreshold", name
        assert props["AlarmActions"] == [topic_ref(synth, env)], name


@pytest.mark.parametrize("env", sorted(ENVS))
def test_every_expected_alarm_exists_and_notifies_the_topic(synth: Synth, env: str) -> None:
    found = alarms(synth, env)
    if env in EXPECTED_ALARMS:  # the example files; a user's own file gets the checks below
        assert set(found) == EXPECTED_ALARMS[env]
    assert found
    for name, props in found.items():
        assert props["AlarmActions"] == [topic_ref(synth, env)], name
        # AWS::CloudWatch::Alarm ActionsEnabled: "Indicates whether actions should be executed during any changes to
        # the alarm state. The default is TRUE." (CloudFormation User Guide): absent is enabled; False never.
        assert props.get("ActionsEnabled", True) is True, name
        assert flatten(props["AlarmDescription"]).strip(), name  # on EKS it names a group read at deploy time


@pytest.mark.parametrize("env", sorted(ENVS))
def test_email_subscriptions_come_from_the_file(synth: Synth, env: str) -> None:
    subs = resources(synth, watch(env), "AWS::SNS::Subscription").values()
    assert sorted(s["Properties"]["Endpoint"] for s in subs) == sorted(ENVS[env].monitoring.emails)
    assert all(s["Properties"]["Protocol"] == "email" and s["Properties"]["TopicArn"] == topic_ref(synth, env) for s in subs)


@pytest.mark.parametrize(("env", "pool"), [("prod", "pretrain"), ("prod", "chat"), ("dev", "dev"), ("dev", "serve")])
def test_ecc_and_execution_error_alarms_read_the_publishers_pool_metrics(synth: Synth, env: str, pool: str) -> None:
    found = alarms(synth, env)
    ns = ENVS[env].monitoring.namespace
    ecc = found[f"{env}-{pool}-ecc-uncorrected"]
    assert (ecc["Namespace"], ecc["MetricName"], ecc["Statistic"], ecc["Period"]) == (ns, "EccUncorrected", "Sum", 300)
    assert dims(ecc) == {"Environment": env, "Pool": pool}
    assert (ecc["Threshold"], ecc["ComparisonOperator"], ecc["EvaluationPeriods"]) == (0, "GreaterThanThreshold", 1)
    assert ecc["TreatMissingData"] == "notBreaching"
    errors = found[f"{env}-{pool}-execution-errors"]
    assert (errors["MetricName"], errors["Statistic"], dims(errors)) == (
        "ExecutionErrors",
        "Sum",
        {"Environment": env, "Pool": pool},
    )
    assert errors["Threshold"] == ENVS[env].monitoring.alarms.execution_errors == 0


@pytest.mark.parametrize(
    ("env", "pool", "group", "metric", "namespace"),
    [
        ("prod", "pretrain", "prod-pretrain", "NeuronCoreUtilization", "Neuronkit"),
        ("prod", "pretrain-gpu", "prod-pretrain-gpu", "nvidia_smi_utilization_gpu", "Neuronkit"),
        ("dev", "dev", "dev-dev", "NeuronCoreUtilization", "Neuronkit"),
    ],
)
def test_idle_alarm_fires_on_low_utilization_while_instances_run(
    synth: Synth, env: str, pool: str, group: str, metric: str, namespace: str
) -> None:
    a = ENVS[env].monitoring.alarms
    props = alarms(synth, env)[f"{env}-{pool}-idle"]
    # Neuron pools are idle only when no node is busy (a job's marker or an open /dev/neuron*: compile phases).
    busy = " AND FILL(busy, 0) < 1" if metric == "NeuronCoreUtilization" else ""
    assert expression(props) == f"IF(FILL(inservice, 0) > 0 AND FILL(util, 100) < {a.idle_utilization_percent:g}{busy}, 1, 0)"
    if busy:
        held = query(props, "busy")["MetricStat"]
        assert (held["Metric"]["MetricName"], held["Stat"]) == ("NodeBusy", "Maximum")
    inservice = query(props, "inservice")["MetricStat"]
    assert (inservice["Metric"]["Namespace"], inservice["Metric"]["MetricName"]) == ("AWS/AutoScaling", "GroupInServiceInstances")
    assert dims(inservice["Metric"]) == {"AutoScalingGroupName": group}
    util = query(props, "util")["MetricStat"]
    assert (util["Metric"]["Namespace"], util["Metric"]["MetricName"], util["Stat"]) == (namespace, metric, "Average")
    assert dims(util["Metric"]) == {"Environment": env, "Pool": pool}
    assert inservice["Period"] == util["Period"] == 60
    # prod: 10% for 45 minutes; dev: the defaults, 5% for 60 minutes.
    assert props["EvaluationPeriods"] == props["DatapointsToAlarm"] == a.idle_minutes
    assert (props["Threshold"], props["ComparisonOperator"]) == (1, "GreaterThanOrEqualToThreshold")
    assert props["TreatMissingData"] == "notBreaching"


def test_idle_thresholds_are_the_files(synth: Synth) -> None:
    assert (ENVS["prod"].monitoring.alarms.idle_utilization_percent, ENVS["prod"].monitoring.alarms.idle_minutes) == (10, 45)
    assert "FILL(util, 100) < 10 " in expression(alarms(synth, "prod")["prod-pretrain-idle"])
    assert "FILL(util, 100) < 5 " in expression(alarms(synth, "dev")["dev-dev-idle"])


@pytest.mark.parametrize(("env", "pool"), [("prod", "chat"), ("dev", "serve")])
def test_fleet_latency_and_5xx_alarms_watch_the_load_balancer(synth: Synth, env: str, pool: str) -> None:
    a = ENVS[env].monitoring.alarms
    found = alarms(synth, env)
    latency = found[f"{env}-{pool}-p99-latency"]
    assert (latency["Namespace"], latency["MetricName"], latency["ExtendedStatistic"]) == (
        "AWS/ApplicationELB",
        "TargetResponseTime",
        "p99",
    )
    lb = dims(latency)["LoadBalancer"]
    assert "Fn::ImportValue" in lb and f"Fleet{pool}LoadBalancer" in lb["Fn::ImportValue"]
    (fleet,) = [f for f in ENVS[env].inference if f.name == pool]
    # The fleet's own p99_latency_seconds, else monitoring.alarms.p99_latency_ms (prod: 3000 ms), else half the idle
    # timeout (catalog/serving.yaml latency_alarm).
    expected = (
        fleet.p99_latency_seconds
        if fleet.p99_latency_seconds is not None
        else a.p99_latency_ms / 1000
        if a.p99_latency_ms is not None
        else catalog_serving.default_p99_latency_seconds(fleet.idle_timeout_seconds)
    )
    assert latency["Threshold"] == expected
    assert (latency["EvaluationPeriods"], latency["ComparisonOperator"]) == (5, "GreaterThanThreshold")
    rate = found[f"{env}-{pool}-5xx-rate"]
    assert expression(rate) == "100 * (FILL(target5xx, 0) + FILL(elb5xx, 0)) / requests"
    for id_, name in (
        ("target5xx", "HTTPCode_Target_5XX_Count"),
        ("elb5xx", "HTTPCode_ELB_5XX_Count"),
        ("requests", "RequestCount"),
    ):
        stat = query(rate, id_)["MetricStat"]
        assert (stat["Metric"]["MetricName"], stat["Stat"], dims(stat["Metric"])) == (name, "Sum", {"LoadBalancer": lb})
    assert rate["Threshold"] == a.error_5xx_percent and rate["EvaluationPeriods"] == 5
    assert ENVS["prod"].monitoring.alarms.p99_latency_ms == 3000


@pytest.mark.parametrize(("env", "pool"), [("prod", "chat"), ("dev", "serve")])
def test_gpu_fallback_alarm_counts_gpu_instances_hour_after_hour(synth: Synth, env: str, pool: str) -> None:
    props = alarms(synth, env)[f"{env}-{pool}-gpu-fallback"]
    # The rebalancer's metric (neuronkit/lambdas/rebalancer/handler.py).
    assert (props["Namespace"], props["MetricName"], props["Statistic"], props["Period"]) == (
        "Neuronkit",
        "InstancesInService",
        "Minimum",
        3600,
    )
    assert dims(props) == {"Environment": env, "Pool": pool, "Family": "gpu"}
    assert props["EvaluationPeriods"] == ENVS[env].monitoring.alarms.fallback_hours == 6
    assert (props["Threshold"], props["ComparisonOperator"]) == (0, "GreaterThanThreshold")


@pytest.mark.parametrize("env", sorted(ENVS))
def test_lustre_free_capacity_alarm_is_a_share_of_the_files_size(synth: Synth, env: str) -> None:
    lustre = ENVS[env].storage.lustre
    if lustre is None:  # a file without Lustre has no file system to watch
        assert f"{env}-lustre-free-capacity" not in alarms(synth, env)
        return
    props = alarms(synth, env)[f"{env}-lustre-free-capacity"]
    assert (props["Namespace"], props["MetricName"], props["Statistic"]) == ("AWS/FSx", "FreeDataStorageCapacity", "Minimum")
    assert "Fn::ImportValue" in dims(props)["FileSystemId"]
    # prod: 10% of 4800 GiB; dev: 10% of 1200 GiB.
    assert props["Threshold"] == lustre.size_gib * 1024**3 * ENVS[env].monitoring.alarms.lustre_free_percent / 100
    assert props["ComparisonOperator"] == "LessThanThreshold"


@pytest.mark.parametrize(
    ("env", "classes"),
    [
        ("prod", {"trn": "Trn/OnDemand", "inf": "Inf/OnDemand", "p": "P/OnDemand", "g": "G/OnDemand"}),
        ("dev", {"trn": "Trn/OnDemand", "inf": "Inf/OnDemand", "g": "G/OnDemand"}),
    ],
)
def test_vcpu_quota_alarms_compare_usage_with_the_service_quota(synth: Synth, env: str, classes: dict[str, str]) -> None:
    found = alarms(synth, env)
    for short, usage_class in classes.items():
        props = found[f"{env}-vcpu-quota-{short}"]
        assert expression(props) == "100 * usage / SERVICE_QUOTA(usage)"
        stat = query(props, "usage")["MetricStat"]
        assert (stat["Metric"]["Namespace"], stat["Metric"]["MetricName"], stat["Stat"]) == (
            "AWS/Usage",
            "ResourceCount",
            "Maximum",
        )
        assert dims(stat["Metric"]) == {"Service": "EC2", "Type": "Resource", "Resource": "vCPU", "Class": usage_class}
        assert props["Threshold"] == ENVS[env].monitoring.alarms.quota_usage_percent == 80
        assert props["ComparisonOperator"] == "GreaterThanThreshold"


def _group_names(synth: Synth, env: str) -> list[Any]:
    """The names of the environment's Auto Scaling groups as the templates give them: the kit's own groups, or on
    EKS the node groups' groups, read at deploy time (a GetAtt of each node group's Custom::AWS lookup)."""
    if ENVS[env].platform == "eks":
        return [
            {"Fn::GetAtt": [lid, "nodegroup.resources.autoScalingGroups.0.name"]}
            for lid in resources(synth, watch(env), "Custom::AWS")
            if "AutoScalingGroupName" in lid
        ]
    return [
        r["Properties"]["AutoScalingGroupName"]
        for stack in synth.templates
        if environment_of(stack, strict=False) == env
        for r in resources(synth, stack, "AWS::AutoScaling::AutoScalingGroup").values()
    ]


def test_launch_failures_of_every_group_go_to_the_topic(synth: Synth) -> None:
    for env in ENVS:
        groups = _group_names(synth, env)
        assert groups
        (rule,) = [
            r["Properties"]
            for r in resources(synth, watch(env), "AWS::Events::Rule").values()
            if r["Properties"].get("EventPattern", {}).get("detail-type") == ["EC2 Instance Launch Unsuccessful"]
        ]
        assert rule["EventPattern"]["source"] == ["aws.autoscaling"]
        named = rule["EventPattern"]["detail"]["AutoScalingGroupName"]
        assert sorted(map(json.dumps, named)) == sorted(map(json.dumps, groups))
        (target,) = rule["Targets"]
        assert target["Arn"] == topic_ref(synth, env)
        assert "$.detail.StatusMessage" in json.dumps(target["InputTransformer"])


# --------------------------------------------------------------------------------------------
# budget and the topic's policy
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("env", sorted(ENVS))
def test_budget_filters_on_the_environment_tag_and_notifies_at_80_and_100_percent(synth: Synth, env: str) -> None:
    budgets = resources(synth, watch(env), "AWS::Budgets::Budget").values()
    if ENVS[env].budget is None:  # a file without budget: has none
        assert not budgets
        return
    (budget,) = budgets
    props = budget["Properties"]
    data = props["Budget"]
    assert ENVS[env].budget is not None
    assert data["BudgetLimit"] == {"Amount": ENVS[env].budget.monthly_usd, "Unit": "USD"}  # type: ignore[union-attr]
    assert (data["BudgetType"], data["TimeUnit"], data["BudgetName"]) == ("COST", "MONTHLY", f"neuronkit-{env}")
    assert data["CostFilters"] == {"TagKeyValue": [f"user:neuronkit:environment${env}"]}
    notes = {
        (n["Notification"]["NotificationType"], n["Notification"]["Threshold"], n["Notification"]["ThresholdType"])
        for n in props["NotificationsWithSubscribers"]
    }
    assert notes == {("ACTUAL", 80, "PERCENTAGE"), ("ACTUAL", 100, "PERCENTAGE"), ("FORECASTED", 100, "PERCENTAGE")}
    for n in props["NotificationsWithSubscribers"]:
        assert n["Subscribers"] == [{"Address": topic_ref(synth, env), "SubscriptionType": "SNS"}]
    tags = {t["Key"]: t["Value"] for t in props["ResourceTags"]}
    assert tags["neuronkit:environment"] == env and tags["cost-center"] == ENVS[env].cost_center


@pytest.mark.parametrize("env", sorted(ENVS))
def test_budgets_may_publish_to_the_encrypted_topic(synth: Synth, env: str) -> None:
    (policy,) = resources(synth, watch(env), "AWS::SNS::TopicPolicy").values()
    statements = policy["Properties"]["PolicyDocument"]["Statement"]
    allowed = [s for s in statements if s["Effect"] == "Allow" and s["Action"] == "sns:Publish"]
    services = {
        svc
        for s in allowed
        for svc in ([s["Principal"]["Service"]] if isinstance(s["Principal"]["Service"], str) else s["Principal"]["Service"])
    }
    assert "budgets.amazonaws.com" in services
    (topic,) = resources(synth, watch(env), "AWS::SNS::Topic").values()
    key = resources(synth, watch(env), "AWS::KMS::Key")[topic["Properties"]["KmsMasterKeyId"]["Fn::GetAtt"][0]]
    principals = json.dumps(key["Properties"]["KeyPolicy"])
    for service in ("budgets.amazonaws.com", "cloudwatch.amazonaws.com", "events.amazonaws.com"):
        assert service in principals


# --------------------------------------------------------------------------------------------
# day/night shift and idle scale-down
# --------------------------------------------------------------------------------------------
def test_prod_day_night_schedule(synth: Synth) -> None:
    shift = ENVS["prod"].monitoring.day_night
    assert shift is not None
    actions = {
        (r["Properties"]["AutoScalingGroupName"], r["Properties"]["Recurrence"]): r["Properties"]
        for r in resources(synth, "prod-monitoring", "AWS::AutoScaling::ScheduledAction").values()
    }
    fleet_min = ENVS["prod"].inference[0].min_size
    # prod.yaml: day from 07:00, night from 21:00, America/New_York; serve 8 by day and 2 by night. The pretrain
    # cluster runs on a Capacity Block: it follows the block's start and end, never the shift.
    assert actions == {
        ("prod-chat", "0 7 * * *"): {
            "AutoScalingGroupName": "prod-chat",
            "Recurrence": "0 7 * * *",
            "TimeZone": "America/New_York",
            "DesiredCapacity": 8,
            "MinSize": 8,
        },
        ("prod-chat", "0 21 * * *"): {
            "AutoScalingGroupName": "prod-chat",
            "Recurrence": "0 21 * * *",
            "TimeZone": "America/New_York",
            "DesiredCapacity": 2,
            "MinSize": fleet_min,
        },
    }
    assert (shift.inference_day_desired, shift.inference_night_desired, shift.training_night_desired) == (8, 2, 0)
    # Scheduled actions name groups of other stacks: the monitoring stack deploys after them.
    deps = synth.app.node.find_child("prod-monitoring").dependencies
    assert {d.stack_name for d in deps} >= {"prod-training", "prod-inference"}


def test_dev_has_no_schedule_and_no_idle_scale_down(synth: Synth) -> None:
    assert resources(synth, "dev-monitoring", "AWS::AutoScaling::ScheduledAction") == {}
    assert resources(synth, "dev-monitoring", "AWS::Lambda::Function") == {}


@pytest.fixture(scope="module")
def idle(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """prod with idle scale-down on its reserved cluster (keeping the reservation: keep_when_idle)."""
    from neuronkit.config import parse_environment
    from neuronkit.constructs import compliance
    from neuronkit.stacks import build_environment
    from tests.conftest import new_app

    data = reserved_prod()
    data["training"][0]["idle_scale_down"] = True
    data["training"][0]["capacity"]["keep_when_idle"] = True
    outdir = tmp_path_factory.mktemp("idle-cdk.out")
    app = new_app(outdir)
    build_environment(app, parse_environment(data, "environments/prod.yaml"))
    compliance.apply(app)
    assembly = app.synth()
    return Synth(outdir=outdir, templates={s.stack_name: s.template for s in assembly.stacks}, app=app)


def test_a_reserved_cluster_emptied_by_idle_scale_down_is_refused_unless_the_file_accepts_the_cost(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from neuronkit.config import ConfigError, parse_environment

    data = reserved_prod()
    data["training"][0]["idle_scale_down"] = True
    with pytest.raises(ConfigError) as err:
        parse_environment(data, "environments/prod.yaml")
    (line,) = err.value.problems
    # trn2.48xlarge has no On-Demand list price in the catalog: the line says what idles, without an amount.
    assert pricing.load_prices().hourly("trn2.48xlarge", "us-east-2") is None
    assert line == (
        "environments/prod.yaml: training[0].capacity.keep_when_idle: idle_scale_down scales it to min_size 0, leaving 16 of "
        "the 16 reserved trn2.48xlarge idle while the reservation bills; lower "
        "capacity.instance_count, drop the schedule or idle_scale_down, or set capacity.keep_when_idle: true to accept the cost"
    )
    # With a price, the line says what the idle reservation costs a month.
    import dataclasses

    table = pricing.load_prices()
    priced = dataclasses.replace(
        table, prices={**table.prices, "us-east-2": {**table.prices["us-east-2"], "trn2.48xlarge": 30.0}}
    )
    monkeypatch.setattr(pricing, "load_prices", lambda *a, **k: priced)
    with pytest.raises(ConfigError) as err:
        parse_environment(data, "environments/prod.yaml")
    monthly = f"${16 * 30.0 * table.hours_per_month:,.0f}"
    assert f"idle while the reservation bills, about {monthly} a month for nothing; lower" in err.value.problems[0]
    data["monitoring"]["day_night"]["training_day_desired"] = 4
    data["training"][0]["idle_scale_down"] = False
    with pytest.raises(ConfigError) as err:
        parse_environment(data, "environments/prod.yaml")
    assert "monitoring.day_night gives it 4 nodes by day, leaving 12 of the 16 reserved" in err.value.problems[0]


def test_prod_idle_alarms_trigger_the_scale_down_function(idle: Synth) -> None:
    synth = idle
    (fn,) = resources(synth, "prod-monitoring", "AWS::Lambda::Function").values()
    props = fn["Properties"]
    assert props["Runtime"].startswith("python3.") and props["Handler"] == "handler.handler"
    assert json.loads(props["Environment"]["Variables"]["GROUPS"]) == {
        "prod-pretrain-idle": "prod-pretrain",
        "prod-pretrain-gpu-idle": "prod-pretrain-gpu",
    }
    alarm_ids = {
        logical_id: r["Properties"]["AlarmName"]
        for logical_id, r in resources(synth, "prod-monitoring", "AWS::CloudWatch::Alarm").items()
    }
    (rule,) = [
        r["Properties"]
        for r in resources(synth, "prod-monitoring", "AWS::Events::Rule").values()
        if r["Properties"]["EventPattern"].get("detail-type") == ["CloudWatch Alarm State Change"]
    ]
    pattern = rule["EventPattern"]
    assert pattern["source"] == ["aws.cloudwatch"] and pattern["detail"] == {"state": {"value": ["ALARM"]}}
    assert sorted(alarm_ids[r["Fn::GetAtt"][0]] for r in pattern["resources"]) == ["prod-pretrain-gpu-idle", "prod-pretrain-idle"]
    (target,) = rule["Targets"]
    fn_id = next(iter(resources(synth, "prod-monitoring", "AWS::Lambda::Function")))
    assert target["Arn"] == {"Fn::GetAtt": [fn_id, "Arn"]}


def test_scale_down_function_may_touch_only_the_idle_clusters_groups(idle: Synth) -> None:
    synth = idle
    (policy,) = resources(synth, "prod-monitoring", "AWS::IAM::Policy").values()
    statements = {s["Sid"]: s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
    assert set(statements) == {"Logs", "ReadGroups", "ScaleDownOwnGroups"}
    assert statements["ReadGroups"]["Action"] == "autoscaling:DescribeAutoScalingGroups"
    own = statements["ScaleDownOwnGroups"]
    assert sorted(own["Action"]) == ["autoscaling:SetInstanceProtection", "autoscaling:UpdateAutoScalingGroup"]
    arns = json.dumps(own["Resource"])
    assert "autoScalingGroupName/prod-pretrain" in arns and "autoScalingGroupName/prod-pretrain-gpu" in arns
    assert "prod-chat" not in arns
    (logs,) = resources(synth, "prod-monitoring", "AWS::Logs::LogGroup").values()
    assert logs["Properties"]["RetentionInDays"] == ENVS["prod"].monitoring.log_retention_days == 90


# --------------------------------------------------------------------------------------------
# dashboard
# --------------------------------------------------------------------------------------------
def test_dashboard_shows_every_section(synth: Synth) -> None:
    body = dashboard(synth, "prod")
    drivers = next(w for w in body["widgets"] if w["properties"].get("title", "").startswith("Nodes per Neuron driver"))
    assert 'MetricName=\\"NeuronDriverInfo\\"' in json.dumps(drivers) and 'Pool=\\"pretrain\\"' in json.dumps(drivers)
    titles = {w["properties"].get("title") for w in body["widgets"]}
    assert titles >= {
        "Nodes per Neuron driver version (training pools)",
        "NeuronCore utilization (%)",
        "Neuron device memory used (%)",
        "Neuron execution errors (per 5 minutes)",
        "Neuron execution latency p50 / p99 (ms)",
        "Hardware ECC events (per 5 minutes)",
        "GPU utilization of GPU and fallback pools (%)",
        "Instances in service per pool (Neuron / GPU)",
        "Estimated cost of what runs ($/hour)",
        "Estimated cost now ($/hour)",
        "Load balancer requests (per minute)",
        "Target response time p50 / p99 (s)",
        "5xx responses (per minute)",
        "Lustre throughput (MiB/s)",
        "Lustre free capacity (GiB)",
        "Alarms",
    }
    text = json.dumps(body)
    for metric in (
        "NeuronCoreUtilization",
        "DeviceMemoryUtilization",
        "EccUncorrected",
        "nvidia_smi_utilization_gpu",
        "DataReadBytes",
        "DataWriteBytes",
        "FreeDataStorageCapacity",
        "RequestCount",
        "TargetResponseTime",
    ):
        assert metric in text, metric


def test_dashboard_counts_instances_per_pool_and_family(synth: Synth) -> None:
    body = dashboard(synth, "prod")
    (widget,) = [w for w in body["widgets"] if w["properties"].get("title") == "Instances in service per pool (Neuron / GPU)"]
    labels = {m[-1]["label"] for m in widget["properties"]["metrics"]}
    assert labels == {"pretrain (neuron)", "pretrain-gpu (gpu)", "chat (neuron)", "chat (gpu)"}
    text = json.dumps(widget)
    assert "GroupInServiceInstances" in text and "InstancesInService" in text and '"Family"' in text


@pytest.mark.parametrize("env", sorted(ENVS))
def test_cost_per_hour_multiplies_in_service_instances_by_catalog_prices(synth: Synth, env: str) -> None:
    body = dashboard(synth, env)
    (widget,) = [w for w in body["widgets"] if w["properties"].get("title") == "Estimated cost now ($/hour)"]
    (expr,) = [m[0]["expression"] for m in widget["properties"]["metrics"] if isinstance(m[0], dict) and "expression" in m[0]]
    e = ENVS[env]
    expected: list[str] = []
    for c in e.training:
        if c.scheduler == "batch":
            continue  # AWS Batch owns those nodes: no Auto Scaling group to count (docs/monitoring.md)
        if c.capacity.type != "capacity-block":  # paid up front: the widget leaves it out (its text says so)
            expected.append(f"{PRICES.hourly(c.instance_type, e.region):g}")
        if c.gpu_pool is not None:
            expected.append(f"{PRICES.hourly(c.gpu_pool.instance_type, e.region):g}")
    for f in e.inference:
        expected.append(f"{PRICES.hourly(f.neuron_types[0], e.region):g}")
        if e.platform == "eks":  # a GPU node group per fallback type of a served fleet, each priced at its first type
            expected += [f"{PRICES.hourly(types[0], e.region):g}" for _, types in _eks_gpu_groups(f)]
        elif f.fallback_types:
            expected.append(f"{PRICES.hourly(f.fallback_types[0], e.region):g}")
    prices = [term.split(" * ")[1] for term in expr.split(" + ")]
    assert sorted(prices) == sorted(expected)
    assert all(term.startswith("FILL(") for term in expr.split(" + "))
    assert PRICES.as_of in json.dumps(widget)


# --------------------------------------------------------------------------------------------
# nodes: log groups, permissions, the node kit
# --------------------------------------------------------------------------------------------
def _eks_gpu_groups(f: Any) -> list[tuple[str, list[str]]]:
    """A fleet's GPU fallback node groups on EKS (one per type when it serves a model), as the stack builds them."""
    from neuronkit.reports.pools import eks_fallback_groups

    return eks_fallback_groups(f.name, list(f.fallback_types), f.model is not None)


def _node_pools(env: str) -> tuple[str, list[str]]:
    """The stack of the environment's training nodes and their pools (on EKS: every node group, one stack)."""
    e = ENVS[env]
    clusters = [c for c in e.training if c.scheduler == "none"]
    pools = [c.name for c in clusters] + [f"{c.name}-gpu" for c in clusters if c.gpu_pool]
    if e.platform == "eks":
        pools += [f.name for f in e.inference] + [name for f in e.inference for name, _ in _eks_gpu_groups(f)]
        return f"{env}-eks", pools
    return f"{env}-training", pools


@pytest.mark.parametrize("env", sorted(ENVS))
def test_node_log_groups_have_the_files_retention(synth: Synth, env: str) -> None:
    stack, pools = _node_pools(env)
    groups = {
        r["Properties"]["LogGroupName"]: r
        for r in resources(synth, stack, "AWS::Logs::LogGroup").values()
        if str(r["Properties"].get("LogGroupName", "")).startswith("/neuronkit/")  # not a token-named group
        and r["Properties"]["LogGroupName"].endswith(("/boot", "/server"))
    }
    assert set(groups) == {f"/neuronkit/{env}/{p}/{kind}" for p in pools for kind in ("boot", "server")}
    for group in groups.values():
        assert group["Properties"]["RetentionInDays"] == ENVS[env].monitoring.log_retention_days
        assert group["DeletionPolicy"] == "Delete"


@pytest.mark.parametrize("env", sorted(ENVS))
def test_node_roles_publish_only_into_the_namespace_and_their_log_groups(synth: Synth, env: str) -> None:
    stack, _ = _node_pools(env)
    # The pools' node roles (on EKS the system node group runs add-ons only: it publishes nothing and ships no logs).
    roles = {k: r for k, r in resources(synth, stack, "AWS::IAM::Role").items() if "NodeRole" in k and "SystemNode" not in k}
    assert roles
    for logical_id, role in roles.items():
        managed = json.dumps(role["Properties"].get("ManagedPolicyArns", []))
        assert "CloudWatchAgentServerPolicy" not in managed, logical_id
    # Each role's default policy (other policies, such as a served fleet's image pulls, are attached beside it).
    policies = [
        p
        for k, p in resources(synth, stack, "AWS::IAM::Policy").items()
        if "NodeRoleDefaultPolicy" in k and any(r["Ref"] in roles for r in p["Properties"]["Roles"])
    ]
    assert len(policies) == len(roles)
    for policy in policies:
        statements = {s.get("Sid"): s for s in policy["Properties"]["PolicyDocument"]["Statement"]}
        metrics = statements["PublishMetrics"]
        assert metrics["Action"] == "cloudwatch:PutMetricData"
        assert metrics["Condition"] == {"StringEquals": {"cloudwatch:namespace": ENVS[env].monitoring.namespace}}
        logs = statements["ShipLogs"]
        assert sorted(logs["Action"]) == ["logs:CreateLogStream", "logs:DescribeLogStreams", "logs:PutLogEvents"]
        resources_ = json.dumps(logs["Resource"])
        assert resources_.count(f"log-group:/neuronkit/{env}/") == 2 and "log-group:*" not in resources_
        kit = statements["ReadNodeKit"]
        assert kit["Action"] == "s3:GetObject" and ".zip" in json.dumps(kit["Resource"])


def test_training_nodes_run_observability_before_their_boot_script(synth: Synth) -> None:
    for logical_id, lt in resources(synth, "prod-training", "AWS::EC2::LaunchTemplate").items():
        text = flatten(lt["Properties"]["LaunchTemplateData"]["UserData"]["Fn::Base64"])
        assert text.index("/opt/neuronkit/observability.sh") < text.index("/opt/neuronkit/training-node.sh"), logical_id
        assert "METRICS_NAMESPACE='Neuronkit'" in text and "NODE_KIT_S3_URI='s3://" in text
        accelerator = "gpu" if "gpu" in logical_id.lower() else "neuron"
        assert f"ACCELERATOR='{accelerator}'" in text


# --------------------------------------------------------------------------------------------
# cost-allocation tags
# --------------------------------------------------------------------------------------------
# Types CloudFormation cannot tag (no Tags property), so the stack-wide tags cannot reach them.
UNTAGGABLE = {
    "AWS::CloudWatch::Dashboard",
    "AWS::AutoScaling::ScheduledAction",
    "AWS::SNS::Subscription",
    "AWS::SNS::TopicPolicy",
    "AWS::Lambda::Permission",
    "AWS::Lambda::EventInvokeConfig",
    "AWS::IAM::Policy",
    "AWS::CDK::Metadata",
}


# On EKS the monitoring shares ENV-eks with the cluster: these have no Tags property either (access entries and
# add-ons take tags but aws_eks_v2 does not pass the stack's to them; custom resources cannot be tagged).
# On EKS the monitoring shares ENV-eks with the cluster and node groups: its resources are the constructs
# stacks/eks.py creates under these ids (the rest of the stack is the cluster's).
EKS_MONITORING_IDS = ("Monitoring", "Alarms", "Budget", "CapacityBlock")


def _tags(resource: dict[str, Any]) -> dict[str, str] | None:
    props = resource.get("Properties", {})
    tags = props.get("Tags")
    if isinstance(tags, list):
        return {t["Key"]: t["Value"] for t in tags if isinstance(t.get("Value"), str)}
    if isinstance(tags, dict):
        return dict(tags)
    return None


@pytest.mark.parametrize("env", sorted(ENVS))
def test_monitoring_resources_carry_environment_and_cost_center_tags(synth: Synth, env: str) -> None:
    e = ENVS[env]
    for logical_id, resource in synth.template(watch(env))["Resources"].items():
        if resource["Type"] in UNTAGGABLE:
            continue
        if e.platform == "eks" and not logical_id.startswith(EKS_MONITORING_IDS):
            continue
        tags = _tags(resource) or {t["Key"]: t["Value"] for t in resource["Properties"].get("ResourceTags", [])}
        assert tags.get("neuronkit:environment") == env, (logical_id, resource["Type"])
        assert tags.get("cost-center") == e.cost_center, logical_id
        assert all(tags.get(k) == v for k, v in e.tags.items()), logical_id
    for name, props in alarms(synth, env).items():
        pool_tags = {t["Key"]: t["Value"] for t in props["Tags"]}
        if "-quota-" in name or "lustre" in name or name.endswith("-errors") and "execution" not in name:
            assert "neuronkit:pool" not in pool_tags
        else:
            assert name.startswith(f"{env}-{pool_tags['neuronkit:pool']}-"), name


@pytest.mark.parametrize("env", sorted(ENVS))
def test_every_instance_and_volume_an_auto_scaling_group_launches_carries_the_cost_tags(synth: Synth, env: str) -> None:
    e = ENVS[env]
    for stack in (s for s in synth.templates if environment_of(s, strict=False) == env):
        templates = resources(synth, stack, "AWS::EC2::LaunchTemplate")
        for logical_id, group in resources(synth, stack, "AWS::AutoScaling::AutoScalingGroup").items():
            # A pool's group, or a fleet's compile group (its pool is the fleet's).
            pool = (group["Metadata"].get("neuronkit") or group["Metadata"]["neuronkit-precompile"])["pool"]
            props = group["Properties"]
            refs = []
            if "LaunchTemplate" in props:
                refs.append(props["LaunchTemplate"]["LaunchTemplateId"])
            mixed = props.get("MixedInstancesPolicy", {}).get("LaunchTemplate", {})
            if mixed:
                refs.append(mixed["LaunchTemplateSpecification"]["LaunchTemplateId"])
                refs.extend(
                    o["LaunchTemplateSpecification"]["LaunchTemplateId"]
                    for o in mixed.get("Overrides", [])
                    if "LaunchTemplateSpecification" in o
                )
            assert refs, logical_id
            for ref in refs:
                lt = templates[ref["Ref"]]
                specs = {
                    s["ResourceType"]: {t["Key"]: t["Value"] for t in s["Tags"]}
                    for s in lt["Properties"]["LaunchTemplateData"]["TagSpecifications"]
                }
                for kind in ("instance", "volume"):
                    tags = specs.get(kind, {})
                    assert tags.get("neuronkit:environment") == env, (stack, logical_id, kind)
                    assert tags.get("neuronkit:pool") == pool, (stack, logical_id, kind)
                    assert tags.get("cost-center") == e.cost_center, (stack, logical_id, kind)


def test_catalog_quota_classes_cover_every_accelerated_family() -> None:
    from neuronkit.catalog import quotas

    accelerated = {t.family for t in catalog.instance_types().values() if t.accelerator in {"trainium", "inferentia", "gpu"}}
    uncovered = {f for f in accelerated if (q := quotas.quota_for_family(f)) is None or not q.usage_class}
    assert not uncovered, sorted(uncovered)


# --------------------------------------------------------------------------------------------
# construct arguments a user can get wrong
# --------------------------------------------------------------------------------------------
def test_constructs_refuse_arguments_that_cannot_work() -> None:
    from aws_cdk import App, Stack
    from aws_cdk import aws_iam as iam
    from aws_cdk import aws_sns as sns

    from neuronkit.constructs.budget import CostBudget
    from neuronkit.constructs.day_night import DayNightSchedule, ShiftCapacity, daily_cron
    from neuronkit.constructs.monitoring import AlarmThresholds, EnvironmentMonitoring, WatchedPool
    from neuronkit.constructs.observability import NodeObservability, ObservabilitySpec

    stack = Stack(App(), "Checks", env={"account": "111111111111", "region": "us-east-1"})
    topic = sns.Topic(stack, "Topic")
    assert daily_cron("07:05") == "5 7 * * *"
    with pytest.raises(ValueError, match="is not a time of day"):
        daily_cron("7am")
    with pytest.raises(ValueError, match="give the shifts different start times"):
        DayNightSchedule(stack, "Same", day=[ShiftCapacity("g", 1)], night=[], day_starts="08:00", night_starts="08:00")
    with pytest.raises(ValueError, match="given twice for the day"):
        DayNightSchedule(stack, "Twice", day=[ShiftCapacity("g", 1), ShiftCapacity("g", 2)], night=[])
    with pytest.raises(ValueError, match="monthly_usd: 0 must be positive"):
        CostBudget(stack, "Zero", environment="dev", monthly_usd=0, topic=topic)
    pool = WatchedPool(pool="p", group_name="dev-p", role="training", neuron_types=("trn1.2xlarge",), idle_alarm=True)
    with pytest.raises(ValueError, match="p appear more than once"):
        EnvironmentMonitoring(stack, "Twice-p", environment="dev", topic=topic, pools=[pool, pool])
    with pytest.raises(ValueError, match="idle_minutes: 2000 must be 1 to 1440"):
        EnvironmentMonitoring(
            stack, "Long", environment="dev", topic=topic, pools=[pool], thresholds=AlarmThresholds(idle_minutes=2000)
        )
    role = iam.Role(stack, "Role", assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"))
    with pytest.raises(ValueError, match="log retention 45 days is not one CloudWatch Logs accepts"):
        NodeObservability(stack, "Obs", environment="dev", pool="p", role=role, spec=ObservabilitySpec(log_retention_days=45))


def test_a_day_night_shift_that_scales_training_down_really_stops_nodes() -> None:
    """A scheduled action cannot remove scale-in protection: clusters the shift scales down start unprotected."""
    import copy

    import yaml

    from neuronkit.config import parse_environment
    from neuronkit.stacks.training import protected

    data = copy.deepcopy(yaml.safe_load((ROOT / "environments" / "dev.yaml").read_text()))
    data["monitoring"]["day_night"] = {
        "inference_day_desired": 1,
        "inference_night_desired": 0,
        "training_night_desired": 1,
        "training_day_desired": 0,
    }
    env = parse_environment(data, "environments/dev.yaml")
    assert env.training[0].scale_in_protection is True
    assert protected(env, env.training[0]) is False
    data["monitoring"]["day_night"]["training_day_desired"] = 1
    env = parse_environment(data, "environments/dev.yaml")
    assert protected(env, env.training[0]) is True


def test_every_fleets_latency_alarm_has_the_fleets_threshold(synth: Synth, eks_example: Any) -> None:
    """ALB metrics: TargetResponseTime is "the time elapsed, in seconds, after the request leaves the load balancer
    until a response from the target is received", so a non-streaming completion counts whole and one environment-wide
    2 s fired on any (review of issue 49). On both platforms, in every environment of the project and the EKS example
    (whose chat fleet sets 45 s): each ALB fleet's p99 alarm uses its own p99_latency_seconds, else the file's
    monitoring.alarms.p99_latency_ms, else half its idle timeout."""
    from neuronkit.config import load_environment
    from neuronkit.config.inference import p99_latency_alarm_seconds

    example = load_environment(ROOT / "examples" / "environments" / "eks.yaml")
    cases = [(env, synth.templates[monitoring_stack(env)]) for env in ENVS.values()]
    cases.append((example, next(t for name, t in eks_example[1].items() if name.endswith("-eks"))))
    checked, platforms, own = 0, set(), 0
    for env, template in cases:
        found = {
            r["Properties"]["AlarmName"]: r["Properties"]
            for r in template["Resources"].values()
            if r["Type"] == "AWS::CloudWatch::Alarm"
        }
        for f in env.inference:
            name = f"{env.name}-{f.name}-p99-latency"
            if f.load_balancer != "alb" or (env.platform == "eks" and f.model is None):
                assert name not in found
                continue
            assert found[name]["Threshold"] == p99_latency_alarm_seconds(f, env.monitoring.alarms.p99_latency_ms), name
            checked, own = checked + 1, own + (f.p99_latency_seconds is not None)
            platforms.add(env.platform)
    assert checked and own and platforms == {"asg", "eks"}, (checked, own, platforms)
