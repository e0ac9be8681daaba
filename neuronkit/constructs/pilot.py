"""The pilot's constructs: the training comparison dashboard, and the serving pilot's load job (docs/adoption.md)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from aws_cdk import CfnOutput, Stack, Token
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecs as ecs
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from neuronkit import userdata
from neuronkit.adoption.pilot_metrics import NAMESPACE, SIDES
from neuronkit.adoption.pilot_serving import OUTPUT_SECURITY_GROUP, OUTPUT_SUBNET
from neuronkit.catalog import pricing
from neuronkit.constructs import durations, values
from neuronkit.constructs.compliance import acknowledge
from neuronkit.constructs.network import log_group


class PilotDashboard(Construct):
    """A CloudWatch dashboard ``neuronkit-<environment>-pilot-<pilot>``: loss, tokens per second and step time
    of both sides (the metrics ``neuronkit.adoption.pilot_metrics`` reports), and the cost per million tokens of each
    side from the catalog's On-Demand price of its instance type times ``nodes``.

    ``instance_types`` maps a side (``neuron``, ``gpu``) to its type. Works in any stack with a concrete
    region (prices are per region; an environment-agnostic stack gets no cost widget). Public attributes:
    ``dashboard``, ``cost_per_million_tokens`` (side -> math expression, absent when a type has no price).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        environment: str,
        pilot: str,
        instance_types: dict[str, str],
        nodes: int = 1,
    ) -> None:
        super().__init__(scope, id)
        if set(instance_types) != set(SIDES):
            raise ValueError(f"instance_types: give a type for each side ({', '.join(SIDES)})")
        if nodes < 1:
            raise ValueError("nodes: at least 1")

        def metric(name: str, side: str, statistic: str = "Average") -> cloudwatch.Metric:
            return cloudwatch.Metric(
                namespace=NAMESPACE,
                metric_name=name,
                dimensions_map={"Environment": environment, "Pilot": pilot, "Side": side},
                statistic=statistic,
                period=durations.minutes(5),
                label=f"{side} ({instance_types[side]})",
            )

        region = Stack.of(self).region
        table = pricing.load_prices()
        self.cost_per_million_tokens: dict[str, cloudwatch.MathExpression] = {}
        notes: list[str] = []
        for side in SIDES:
            price = None if Token.is_unresolved(region) else table.hourly(instance_types[side], region)
            if price is None:
                notes.append(f"{instance_types[side]} has no list price here: no cost line for {side}")
                continue
            # $/hour of the side's nodes over the tokens it processes an hour, per million tokens.
            self.cost_per_million_tokens[side] = cloudwatch.MathExpression(
                expression=f"{nodes * price:.6g} / (tps_{side} * 3600) * 1000000",
                using_metrics={f"tps_{side}": metric("TokensPerSecond", side)},
                label=f"{side}: $ per million tokens ({nodes} x {instance_types[side]} at ${price:g}/h)",
                period=durations.minutes(5),
            )
        text = (
            f"# Pilot {pilot}: Trainium against GPU\n"
            f"Neuron side: {nodes} x {instance_types['neuron']}; GPU side: {nodes} x {instance_types['gpu']}. "
            f"Metrics from `neuronkit.adoption.pilot_metrics` (namespace `{NAMESPACE}`); prices from catalog/prices.json "
            f"as of {table.as_of}. `neuronkit pilot report` compares runs step by step (docs/adoption.md)."
            + ("".join(f"\n- {n}" for n in notes))
        )
        widgets: list[cloudwatch.IWidget] = [
            cloudwatch.TextWidget(markdown=text, width=24, height=3),
            cloudwatch.GraphWidget(title="Loss", left=[metric("Loss", s) for s in SIDES], width=12, height=6),
            cloudwatch.GraphWidget(
                title="Tokens per second", left=[metric("TokensPerSecond", s) for s in SIDES], width=12, height=6
            ),
            cloudwatch.GraphWidget(title="Step time (s)", left=[metric("StepTime", s) for s in SIDES], width=12, height=6),
        ]
        if self.cost_per_million_tokens:
            widgets.append(
                cloudwatch.GraphWidget(
                    title="$ per million tokens", left=list(self.cost_per_million_tokens.values()), width=12, height=6
                )
            )
        self.dashboard = cloudwatch.Dashboard(self, "Dashboard", dashboard_name=f"neuronkit-{environment}-pilot-{pilot}")
        self.dashboard.add_widgets(*widgets)


# --------------------------------------------------------------------------------------------
# the serving pilot's load job
# --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class LoadSide:
    """One side the load job measures: its endpoint and what serves it (for the report's labels)."""

    url: str  # http://<load balancer>:<port> (may be a token)
    instance_type: str
    nodes: int
    image: str  # the upstream pinned image the fleet runs
    vllm_version: str
    plugin: str = ""  # the Neuron side's vLLM plugin (catalog/pilot.yaml gpu_vllm_for_neuron)


@dataclass(frozen=True)
class LoadJobSpec:
    """What the load job sends: vLLM's random dataset at ``seed`` with ``input_len``/``output_len`` tokens,
    ``prompts`` requests at each of ``rates`` (requests per second), after ``warmup_requests`` per side; an
    optional ``dataset_s3_key`` (JSON lines with a ``prompt`` key, under the datasets bucket) swept after it.
    ``terms`` (SLO and tolerances) travel into the run's run.json for the offline report. After ``rates`` each
    side is bisected to ``resolution`` requests per second (at most ``max_extra_runs`` more runs, rates up to
    ``max_rate``), then measured once at saturation; ``evalset_s3_key`` (a JSONL file under the datasets bucket)
    is scored beside the kit's evaluation set."""

    pilot: str
    model_id: str
    model_s3_prefix: str  # the tokenizer is read from the model's files under the artifacts bucket
    neuron: LoadSide
    gpu: LoadSide
    client_image: str  # the pinned vLLM image `vllm bench serve` runs from (its pull URI)
    helper_image: str  # the AWS CLI image that fetches inputs and uploads results (its pull URI)
    seed: int
    input_len: int
    output_len: int
    rates: tuple[float, ...]
    prompts: int = 200
    warmup_requests: int = 16
    dataset_s3_key: str | None = None
    evalset_s3_key: str | None = None
    resolution: float = 0.25
    max_rate: float = 64.0
    max_extra_runs: int = 12
    compile_marker_key: str | None = None  # the Neuron side's compiled-artifact key + _COMPLETE
    terms: Mapping[str, float] = field(default_factory=dict)
    health_timeout_seconds: int = 7200
    cpu_units: int = 8192
    memory_mib: int = 32768
    ephemeral_gib: int = 100

    def __post_init__(self) -> None:
        if not self.rates or any(r <= 0 for r in self.rates):
            raise ValueError("rates: give at least one request rate above 0")
        if self.resolution <= 0 or self.max_rate < max(self.rates):
            raise ValueError("resolution above 0 and max_rate at least the highest rate")
        if self.input_len < 1 or self.output_len < 1:
            raise ValueError("input_len and output_len: at least 1 token each")

    @property
    def rates_text(self) -> str:
        return " ".join(f"{r:g}" for r in self.rates)


class PilotLoadJob(Construct):
    """The serving pilot's load job: an ECS task definition on Fargate (x86_64; ``spec.cpu_units``,
    ``memory_mib``, ``ephemeral_gib``, defaults 8 vCPU, 32 GiB, 100 GiB) and a cluster to run it in, placed in
    ``subnet_id`` (a private subnet; the kit uses the fleet's first AZ ID); it may reach TCP ports in ``vpc_cidr``
    (defaults to the VPC's CIDR) and HTTPS anywhere (the VPC endpoints). Three containers share ``/work``:
    ``fetch`` (AWS CLI) copies the tokenizer, the kit's probe and evaluation set and the optional dataset;
    ``bench`` (the pinned vLLM image) runs ``neuronkit/userdata/pilot-load.sh``: health, warm-up, quality, then
    ``vllm bench serve`` at each rate on both sides; ``upload`` (AWS CLI) copies the results to
    ``s3://<artifacts_bucket>/pilot/<pilot>/<run>/``. ``neuronkit pilot start`` runs the task with the run id
    (``PILOT_RUN``). Public attributes: ``cluster``, ``task_definition``, ``security_group``, ``results_prefix``,
    ``bench_container``, ``subnet_id``."""

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        environment: str,
        spec: LoadJobSpec,
        vpc: ec2.IVpc,
        subnet_id: str,
        artifacts_bucket: str,
        datasets_bucket: str,
        vpc_cidr: str | None = None,
        log_retention_days: int = 30,
    ) -> None:
        super().__init__(scope, id)
        self.spec = spec
        self.results_prefix = f"pilot/{spec.pilot}/"
        self.subnet_id = subnet_id
        self.cluster = ecs.Cluster(
            self, "Cluster", vpc=vpc, cluster_name=f"{environment}-pilot", container_insights_v2=ecs.ContainerInsights.ENABLED
        )
        self.security_group = ec2.SecurityGroup(
            self, "SecurityGroup", vpc=vpc, description=f"{environment} pilot load job", allow_all_outbound=False
        )
        self.security_group.add_egress_rule(
            ec2.Peer.ipv4(vpc_cidr or vpc.vpc_cidr_block), ec2.Port.all_tcp(), "The fleets' load balancers"
        )
        self.security_group.add_egress_rule(values.any_ipv4(), values.tcp(443), "S3, ECR and CloudWatch Logs endpoints")
        self._task(environment, log_retention_days)
        self._inputs()
        self._grants(artifacts_bucket, datasets_bucket)
        self._containers(artifacts_bucket, datasets_bucket)
        # `neuronkit pilot start` reads where to run the task from the stack's outputs.
        CfnOutput(self, "Subnet", key=OUTPUT_SUBNET, value=subnet_id)
        CfnOutput(self, "SecurityGroupId", key=OUTPUT_SECURITY_GROUP, value=self.security_group.security_group_id)

    def _task(self, environment: str, log_retention_days: int) -> None:
        self.log_group = log_group(self, "Logs", log_retention_days, name=f"/neuronkit/{environment}/pilot/{self.spec.pilot}")
        self.task_definition = ecs.FargateTaskDefinition(
            self,
            "Task",
            family=f"{environment}-pilot-{self.spec.pilot}",
            cpu=self.spec.cpu_units,
            memory_limit_mib=self.spec.memory_mib,
            ephemeral_storage_gib=self.spec.ephemeral_gib,
            runtime_platform=ecs.RuntimePlatform(
                cpu_architecture=ecs.CpuArchitecture.X86_64, operating_system_family=ecs.OperatingSystemFamily.LINUX
            ),
            volumes=[ecs.Volume(name="work")],
        )
        acknowledge(
            self.task_definition,
            "AwsSolutions-ECS2",
            "the variables are the benchmark's settings (rates, seed, lengths, endpoints); no secret travels in them",
        )

    def _inputs(self) -> None:
        here = Path(__file__).resolve().parent.parent / "adoption"
        self.probe = s3_assets.Asset(self, "Probe", path=str(here / "pilot_eval.py"))
        self.evalset = s3_assets.Asset(self, "EvalSet", path=str(here / "pilot_evalset.json"))

    def _grants(self, artifacts_bucket: str, datasets_bucket: str) -> None:
        role = self.task_definition.task_role
        stack = Stack.of(self)
        arn = f"arn:{stack.partition}:s3:::"
        reads = [f"{arn}{artifacts_bucket}/{self.spec.model_s3_prefix}*"]
        if self.spec.compile_marker_key:
            reads.append(f"{arn}{artifacts_bucket}/{self.spec.compile_marker_key}")
        if self.spec.dataset_s3_key:
            reads.append(f"{arn}{datasets_bucket}/{self.spec.dataset_s3_key}")
        if self.spec.evalset_s3_key:
            reads.append(f"{arn}{datasets_bucket}/{self.spec.evalset_s3_key}")
        role.add_to_principal_policy(iam.PolicyStatement(sid="ReadInputs", actions=["s3:GetObject"], resources=reads))
        role.add_to_principal_policy(
            iam.PolicyStatement(sid="ListModel", actions=["s3:ListBucket"], resources=[f"{arn}{artifacts_bucket}"])
        )
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="WriteResults", actions=["s3:PutObject"], resources=[f"{arn}{artifacts_bucket}/{self.results_prefix}*"]
            )
        )
        # The two asset objects exactly (Asset.grant_read would grant s3:GetObject*, s3:List* on the whole bucket).
        role.add_to_principal_policy(
            iam.PolicyStatement(
                sid="ReadKit",
                actions=["s3:GetObject"],
                resources=[f"{arn}{a.s3_bucket_name}/{a.s3_object_key}" for a in (self.probe, self.evalset)],
            )
        )
        execution = self.task_definition.obtain_execution_role()
        repositories = sorted({_repository_arn(stack, i) for i in (self.spec.client_image, self.spec.helper_image)})
        execution.add_to_principal_policy(
            iam.PolicyStatement(
                sid="PullImages",
                actions=[
                    "ecr:BatchGetImage",
                    "ecr:GetDownloadUrlForLayer",
                    "ecr:BatchCheckLayerAvailability",
                    "ecr:BatchImportUpstreamImage",
                    "ecr:CreateRepository",
                ],
                resources=repositories,
            )
        )
        execution.add_to_principal_policy(
            iam.PolicyStatement(sid="EcrLogin", actions=["ecr:GetAuthorizationToken"], resources=["*"])
        )
        for resource in [reads[0], f"{arn}{artifacts_bucket}/{self.results_prefix}*"]:
            acknowledge(
                role,
                f"AwsSolutions-IAM5[Resource::{resource}]",
                "object-level access under the model's prefix (tokenizer files) and the pilot's results prefix only",
            )
        acknowledge(execution, "AwsSolutions-IAM5[Resource::*]", "ecr:GetAuthorizationToken has no resource-level permissions")

    def _containers(self, artifacts_bucket: str, datasets_bucket: str) -> None:
        s = self.spec
        logging = ecs.LogDrivers.aws_logs(stream_prefix="pilot", log_group=self.log_group)
        mount = ecs.MountPoint(container_path="/work", source_volume="work", read_only=False)
        model = f"s3://{artifacts_bucket}/{s.model_s3_prefix}"
        fetch_lines = [
            "set -eu",
            "mkdir -p /work/kit /work/tokenizer /work/data /work/results/compile",
            # The model's small files: tokenizer and configuration, not the weights.
            f'aws s3 cp --recursive --only-show-errors --exclude "*" --include "*.json" --include "*.model" '
            f'--include "*.txt" --include "*.tiktoken" "{model}" /work/tokenizer/',
            f'aws s3 cp --only-show-errors "{self.probe.s3_object_url}" /work/kit/pilot_eval.py',
            f'aws s3 cp --only-show-errors "{self.evalset.s3_object_url}" /work/kit/pilot_evalset.json',
        ]
        if s.dataset_s3_key:
            fetch_lines.append(
                f'aws s3 cp --only-show-errors "s3://{datasets_bucket}/{s.dataset_s3_key}" /work/data/prompts.jsonl'
            )
        if s.evalset_s3_key:
            fetch_lines.append(
                f'aws s3 cp --only-show-errors "s3://{datasets_bucket}/{s.evalset_s3_key}" /work/data/evalset.jsonl'
            )
        if s.compile_marker_key:
            fetch_lines.append(
                f'aws s3 cp --only-show-errors "s3://{artifacts_bucket}/{s.compile_marker_key}" /work/results/compile/neuron.json '
                '|| echo "no compile marker"'
            )
        fetch = self.task_definition.add_container(
            "fetch",
            image=ecs.ContainerImage.from_registry(s.helper_image),
            entry_point=["/bin/sh", "-c"],
            command=["\n".join(fetch_lines)],
            essential=False,
            logging=logging,
        )
        fetch.add_mount_points(mount)
        self.bench_container = self.task_definition.add_container(
            "bench",
            image=ecs.ContainerImage.from_registry(s.client_image),
            entry_point=["/bin/bash", "-c"],
            command=[userdata.script_path("pilot-load.sh").read_text()],
            environment=self._environment(),
            essential=False,
            logging=logging,
        )
        self.bench_container.add_mount_points(mount)
        self.bench_container.add_container_dependencies(
            ecs.ContainerDependency(container=fetch, condition=ecs.ContainerDependencyCondition.SUCCESS)
        )
        upload = self.task_definition.add_container(
            "upload",
            image=ecs.ContainerImage.from_registry(s.helper_image),
            entry_point=["/bin/sh", "-c"],
            command=[
                f'aws s3 cp --recursive --only-show-errors /work/results/ "s3://{artifacts_bucket}/{self.results_prefix}$PILOT_RUN/"'
            ],
            environment={"PILOT_RUN": "set-by-neuronkit-pilot-start"},
            essential=True,
            logging=logging,
        )
        upload.add_mount_points(mount)
        upload.add_container_dependencies(
            ecs.ContainerDependency(container=self.bench_container, condition=ecs.ContainerDependencyCondition.COMPLETE)
        )

    def _environment(self) -> dict[str, str]:
        s = self.spec
        return {
            "PILOT_NAME": s.pilot,
            "PILOT_RUN": "set-by-neuronkit-pilot-start",
            "PILOT_REGION": Stack.of(self).region,
            "MODEL_ID": s.model_id,
            "NEURON_URL": s.neuron.url,
            "GPU_URL": s.gpu.url,
            "NEURON_TYPE": s.neuron.instance_type,
            "GPU_TYPE": s.gpu.instance_type,
            "NEURON_NODES": str(s.neuron.nodes),
            "GPU_NODES": str(s.gpu.nodes),
            "NEURON_IMAGE": s.neuron.image,
            "GPU_IMAGE": s.gpu.image,
            "NEURON_VLLM": s.neuron.vllm_version,
            "NEURON_PLUGIN": s.neuron.plugin,
            "RESOLUTION": f"{s.resolution:g}",
            "MAX_RATE": f"{s.max_rate:g}",
            "MAX_EXTRA_RUNS": str(s.max_extra_runs),
            "EVALSET": "/work/data/evalset.jsonl" if s.evalset_s3_key else "",
            "GPU_VLLM": s.gpu.vllm_version,
            "SEED": str(s.seed),
            "INPUT_LEN": str(s.input_len),
            "OUTPUT_LEN": str(s.output_len),
            "RATES": s.rates_text,
            "PROMPTS": str(s.prompts),
            "WARMUP_REQUESTS": str(s.warmup_requests),
            "HEALTH_TIMEOUT_SECONDS": str(s.health_timeout_seconds),
            "DATASET": "/work/data/prompts.jsonl" if s.dataset_s3_key else "",
            "TERMS": json.dumps(dict(s.terms), sort_keys=True),
        }


def _repository_arn(stack: Stack, uri: str) -> str:
    """The ECR repository ARN of a pull URI ``<registry>/<repository>:<tag>`` (the registry may be a token)."""
    repository = uri.split("/", 1)[1].rsplit(":", 1)[0]
    return f"arn:{stack.partition}:ecr:{stack.region}:{stack.account}:repository/{repository}"
