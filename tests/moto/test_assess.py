"""`neuronkit assess` against a moto account seeded with GPU instances, a group and a SageMaker job; Cost
Explorer (which moto does not answer for arbitrary data) through botocore's Stubber. Every figure is
computed here from the seeded spend and the catalog's prices."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from neuronkit.adoption import assess
from neuronkit.catalog import pricing
from neuronkit.cli import main
from neuronkit.config import load_environment

NOW = dt.datetime(2026, 11, 24, 12, tzinfo=dt.UTC)
REGION = "us-east-1"
MONTHS = [("2026-08-01", "2026-09-01"), ("2026-09-01", "2026-10-01"), ("2026-10-01", "2026-11-01")]
# Monthly spend per type (each of the three months): two p4d training nodes, a g5 inference group, leftovers.
SPEND = {"p4d.24xlarge": 31_000.0, "g5.12xlarge": 14_000.0, "ml.p5.48xlarge": 9_000.0, "p3.16xlarge": 2_000.0, "m5.large": 50.0}


def ce_answer() -> dict[str, Any]:
    def group(t: str, amount: float) -> dict[str, Any]:
        return {"Keys": [t], "Metrics": {"UnblendedCost": {"Amount": f"{amount:.2f}", "Unit": "USD"}}}

    return {
        "ResultsByTime": [
            {"TimePeriod": {"Start": s, "End": e}, "Groups": [group(t, v) for t, v in SPEND.items()], "Estimated": False}
            for s, e in MONTHS
        ]
    }


class Session:
    """A boto3 session whose Cost Explorer client is stubbed; everything else is moto."""

    region_name = REGION

    def __init__(self, real: boto3.Session, ce: Any) -> None:
        self.real, self.ce = real, ce

    def client(self, name: str, **kw: Any) -> Any:
        return self.ce if name == "ce" else self.real.client(name, **kw)


@pytest.fixture
def account(dummy_credentials: None) -> Iterator[Session]:
    with mock_aws():
        real = boto3.Session(region_name=REGION)
        ec2 = real.client("ec2")
        ami = ec2.describe_images(Owners=["amazon"])["Images"][0]["ImageId"]
        tags = [{"Key": "Name", "Value": "llm-pretrain"}, {"Key": "model-architecture", "Value": "llama3"}]
        ec2.run_instances(
            ImageId=ami, InstanceType="p4d.24xlarge", MinCount=2, MaxCount=2,
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
        )  # fmt: skip
        ec2.run_instances(ImageId=ami, InstanceType="m5.large", MinCount=1, MaxCount=1)  # not a GPU: ignored
        ec2.create_launch_template(LaunchTemplateName="chat", LaunchTemplateData={"ImageId": ami, "InstanceType": "g5.12xlarge"})
        real.client("autoscaling").create_auto_scaling_group(
            AutoScalingGroupName="chat", LaunchTemplate={"LaunchTemplateName": "chat", "Version": "$Latest"},
            MinSize=4, MaxSize=8, DesiredCapacity=4, AvailabilityZones=["us-east-1a"],
            Tags=[{"Key": "workload", "Value": "inference", "PropagateAtLaunch": True, "ResourceId": "chat", "ResourceType": "auto-scaling-group"}],
        )  # fmt: skip
        real.client("sagemaker").create_training_job(
            TrainingJobName="finetune-1", AlgorithmSpecification={"TrainingImage": "img", "TrainingInputMode": "File"},
            RoleArn="arn:aws:iam::123456789012:role/sagemaker", OutputDataConfig={"S3OutputPath": "s3://bucket/out"},
            ResourceConfig={"InstanceType": "ml.p5.48xlarge", "InstanceCount": 1, "VolumeSizeInGB": 50},
            StoppingCondition={"MaxRuntimeInSeconds": 3600}, HyperParameters={"model-architecture": "mistral"},
        )  # fmt: skip
        sm = real.client("sagemaker")
        sm.create_model(
            ModelName="embed", ExecutionRoleArn="arn:aws:iam::123456789012:role/sagemaker", PrimaryContainer={"Image": "img"}
        )
        sm.create_endpoint_config(
            EndpointConfigName="embed",
            ProductionVariants=[
                {"VariantName": "main", "ModelName": "embed", "InitialInstanceCount": 2, "InstanceType": "ml.p3.2xlarge"}
            ],
        )
        sm.create_endpoint(EndpointName="embed", EndpointConfigName="embed")
        ce = boto3.client("ce", region_name="us-east-1")
        stub = Stubber(ce)
        stub.add_response("get_cost_and_usage", ce_answer())
        with stub:
            yield Session(real, ce)
            stub.assert_no_pending_responses()


@pytest.fixture
def dummy_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing", "AWS_DEFAULT_REGION": REGION}.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)


def test_inventory_prices_and_verdicts(account: Session) -> None:
    result = assess.assess(account, [REGION], now=NOW)
    assert result.months == ["2026-08", "2026-09", "2026-10"]
    # Spend per type is the average month; SageMaker's ml. types fold into EC2 types; m5 is not a GPU.
    assert result.spend_by_type == pytest.approx(
        {"p4d.24xlarge": 31_000.0, "g5.12xlarge": 14_000.0, "p5.48xlarge": 9_000.0, "p3.16xlarge": 2_000.0}
    )
    assert result.unattributed == pytest.approx({"p3.16xlarge": 2_000.0})
    by_name = {p.workload.name: p for p in result.proposals}
    assert set(by_name) == {"llm-pretrain", "chat", "training jobs on ml.p5.48xlarge", "embed/main"}
    embed = by_name["embed/main"]
    # An endpoint on a GPU type the catalog does not carry (p3): listed, with no price and no Neuron type, and why.
    assert (embed.workload.source, embed.workload.instances, embed.workload.kind, embed.spend_basis) == (
        "sagemaker-endpoint",
        2.0,
        "inference",
        "list-price",
    )
    assert (embed.gpu_monthly, embed.neuron_type) == (None, None)
    assert embed.why == "p3.2xlarge is not a GPU type the catalog knows"
    table = pricing.load_prices()

    pretrain = by_name["llm-pretrain"]
    assert (pretrain.workload.source, pretrain.workload.instances, pretrain.workload.kind) == ("ec2", 2.0, "training")
    assert (pretrain.neuron_type, pretrain.release, pretrain.architecture_support) == ("trn1.32xlarge", "2.28.1", "supported")
    # 2.28.1 is the last release with PyTorch training on trn1: the proposal says so.
    assert "release: Neuron 2.28.1 is the last release with PyTorch training on trn1" in pretrain.why
    ratio = table.require("trn1.32xlarge", REGION) / table.require("p4d.24xlarge", REGION)
    assert pretrain.gpu_monthly == pytest.approx(31_000.0) and pretrain.spend_basis == "cost-explorer"
    assert pretrain.neuron_monthly == pytest.approx(31_000.0 * ratio)

    chat = by_name["chat"]
    assert (chat.workload.source, chat.workload.instances, chat.workload.kind) == ("auto-scaling-group", 4.0, "inference")
    assert chat.neuron_type is not None and chat.neuron_type.startswith("inf2")
    gpu, neuron = table.require("g5.12xlarge", REGION), table.require(chat.neuron_type, REGION)
    assert chat.neuron_monthly == pytest.approx(14_000.0 * neuron / gpu)
    assert chat.architecture_support.startswith("unknown")

    p5 = by_name["training jobs on ml.p5.48xlarge"]
    # No Trainium type offered in us-east-1 holds a p5's 640 GiB of GPU memory: no proposal, and the reason names
    # where one is offered (trn2.48xlarge), instead of a type the region does not offer.
    assert (p5.workload.source, p5.neuron_type, p5.gpu_monthly, p5.neuron_monthly) == (
        "sagemaker-training",
        None,
        pytest.approx(9_000.0),
        None,
    )
    assert p5.why.startswith("no Neuron type offered in us-east-1 holds p5.48xlarge's 655,360 MiB")
    assert "trn2.48xlarge is offered in" in p5.why

    # Training: the saving is a share of the workloads that could be priced.
    percent = (31_000.0 - 31_000.0 * ratio) / 31_000.0 * 100
    assert result.verdict("training") == assess.verdict("training", 40_000.0, 31_000.0 * (1 - ratio), 31_000.0)
    assert (percent >= 30) == result.verdict("training").startswith("migrate")
    # Inference: $14,000 a month is above the guide's $10,000.
    expected = "migrate" if neuron < gpu else "hold"
    assert result.verdict("inference").startswith(expected)
    assert result.problems == []


def test_verdict_thresholds_follow_the_guide() -> None:
    assert assess.verdict("training", 100_000, 35_000).startswith("migrate: a 35% saving")
    assert assess.verdict("training", 100_000, 25_000).startswith("hold: a 25% saving is below the guide's 30% bar")
    assert assess.verdict("inference", 9_000, 4_000).startswith("hold: $9,000 a month of inference is below the guide's $10,000")
    assert assess.verdict("inference", 50_000, 10_000).startswith("migrate: $50,000 a month is above the guide's $10,000")
    assert assess.verdict("inference", 150_000, 70_000).startswith("migrate: $150,000 a month with a 47% reduction")
    assert assess.verdict("inference", 150_000, 30_000).startswith("migrate: $150,000 a month is above")
    assert assess.verdict("inference", 50_000, -5_000).startswith("hold: $50,000 a month, but the Neuron equivalents")
    assert assess.verdict("training", 0, 0) == "no GPU spend found"


def test_command_prints_markdown_writes_json_and_a_pilot_file_that_validates(
    account: Session, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("neuronkit.cli.assess_cmd.aws_session", lambda profile: account)
    real_assess = assess.assess
    monkeypatch.setattr(assess, "assess", lambda session, regions: real_assess(session, regions, now=NOW))
    pilot_file, report = tmp_path / "pilot.yaml", tmp_path / "assess.md"
    assert main(["assess", "--region", REGION, "-o", str(report), "--pilot-output", str(pilot_file)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("# neuronkit assess") and report.read_text() in out
    assert "| llm-pretrain | ec2 | us-east-1 | p4d.24xlarge | 2 |" in out
    assert "Best candidate: llm-pretrain" in out or "Best candidate: chat" in out
    env = load_environment(pilot_file)  # the starter file validates
    assert env.pilot is not None and env.pilot.cluster == "candidate"
    cluster = env.training[0]
    assert (cluster.instance_type, cluster.scheduler, cluster.gpu_pool.instance_type) == (
        "trn1.32xlarge",
        "batch",
        "p4d.24xlarge",
    )  # type: ignore[union-attr]
    assert env.neuron_sdk == "2.28.1" and env.account == "123456789012"


def test_json_output(account: Session, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("neuronkit.cli.assess_cmd.aws_session", lambda profile: account)
    real_assess = assess.assess
    monkeypatch.setattr(assess, "assess", lambda session, regions: real_assess(session, regions, now=NOW))
    assert main(["assess", "--region", REGION, "--format", "json"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["account"] == "123456789012" and set(doc["verdicts"]) == {"training", "inference"}
    assert {w["workload"]["name"] for w in doc["workloads"]} == {
        "llm-pretrain",
        "chat",
        "training jobs on ml.p5.48xlarge",
        "embed/main",
    }


def test_an_api_the_credentials_may_not_call_is_a_line_not_a_traceback(dummy_credentials: None) -> None:
    with mock_aws():
        real = boto3.Session(region_name=REGION)
        ce = boto3.client("ce", region_name="us-east-1")
        stub = Stubber(ce)
        stub.add_client_error("get_cost_and_usage", "AccessDeniedException", "not allowed", 400)
        with stub:
            result = assess.assess(Session(real, ce), [REGION], now=NOW)
    assert result.problems == [
        "could not read Cost Explorer (AccessDeniedException); workloads are priced at list prices (enable Cost "
        "Explorer and allow ce:GetCostAndUsage)"
    ]
    assert "## Not read" in assess.render(result)


def test_the_shipped_policy_allows_every_call_assess_makes() -> None:
    policy = json.loads((Path(__file__).resolve().parents[2] / "iam" / "neuronkit-assess-policy.json").read_text())
    (statement,) = policy["Statement"]
    allowed = set(statement["Action"])
    source = Path(assess.__file__).read_text()
    calls = {
        "ec2:DescribeInstances": "describe_instances", "ec2:DescribeLaunchTemplateVersions": "describe_launch_template_versions",
        "autoscaling:DescribeAutoScalingGroups": "describe_auto_scaling_groups",
        "autoscaling:DescribeLaunchConfigurations": "describe_launch_configurations",
        "sagemaker:ListTrainingJobs": "list_training_jobs", "sagemaker:DescribeTrainingJob": "describe_training_job",
        "sagemaker:ListEndpoints": "list_endpoints", "sagemaker:DescribeEndpoint": "describe_endpoint(",
        "sagemaker:DescribeEndpointConfig": "describe_endpoint_config", "ce:GetCostAndUsage": "get_cost_and_usage",
        "sts:GetCallerIdentity": "get_caller_identity",
    }  # fmt: skip
    assert all(method in source for method in calls.values())
    assert allowed == set(calls)
    assert all(a.split(":")[1].startswith(("Describe", "List", "Get")) for a in allowed)  # read-only
