"""GPU spill and return of one inference fleet on EKS: a scheduled Lambda in the VPC with least Kubernetes rights."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from aws_cdk import Tags
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_sns as sns
from aws_cdk import aws_ssm as ssm
from constructs import Construct

from neuronkit.constructs import durations, values
from neuronkit.constructs.compliance import acknowledge, acknowledge_each
from neuronkit.constructs.network import log_group
from neuronkit.constructs.python_function import python_function
from neuronkit.kubernetes import spill as spill_rbac
from neuronkit.kubernetes.scheduling import SERVING_NAMESPACE, gpu_deployment_name, neuron_deployment_name
from neuronkit.lambdas.spill import handler as spill_code

CODE_DIR = Path(spill_code.__file__).parent
METRICS = spill_code.METRICS
EVERY_MINUTES = 1  # EventBridge's shortest rate: spill_after and return_after count in minutes


@dataclass(frozen=True)
class SpillSpec:
    """One fleet's spill settings.

    ``spill_after_minutes`` (defaults to 5): how long Neuron pods stay unschedulable, or since a Neuron launch failed
    for capacity, before the GPU Deployment gets the shortfall (0: at once, as the Auto Scaling path);
    ``return_after_minutes`` (defaults to 30, the rebalancer's period): how long the shortfall must stay lower before
    the GPU replicas come down to it; ``max_gpu_replicas``: the most GPU replicas (the fallback node group's maximum);
    ``fallback_hours`` (defaults to 6): GPU replicas above zero every hour for that long alarm, as the Auto Scaling
    path's ``gpu-fallback``; ``metrics_namespace`` (defaults to Neuronkit) of ``GpuReplicas``, ``NeuronShortfall``,
    ``NeuronReady`` (dimensions Environment, Pool = the fleet); logs kept ``log_retention_days`` (defaults to 30).
    ``gpu_deployments``: the fleet's GPU Deployments in priority order (defaults to None: the one of a single fallback
    type, ``<fleet>-gpu``); empty: a fleet without GPU fallback, whose function only reports its rollout and compile
    state for the alarms (``max_gpu_replicas`` 0, no spill alarm, no ``patch`` right).
    """

    environment: str
    fleet: str
    max_gpu_replicas: int
    gpu_deployments: tuple[str, ...] | None = None
    spill_after_minutes: int = 5
    return_after_minutes: int = 30
    fallback_hours: int = 6
    metrics_namespace: str = "Neuronkit"
    log_retention_days: int = 30

    @property
    def deployments(self) -> tuple[str, ...]:
        """The GPU Deployments the function scales, in priority order."""
        return (gpu_deployment_name(self.fleet),) if self.gpu_deployments is None else tuple(self.gpu_deployments)

    def __post_init__(self) -> None:
        if not self.deployments:
            if self.max_gpu_replicas != 0:
                raise ValueError(f"max_gpu_replicas: {self.max_gpu_replicas} without GPU Deployments must be 0")
        elif self.max_gpu_replicas < 1:
            raise ValueError(f"max_gpu_replicas: {self.max_gpu_replicas} must be at least 1 (the fallback group's maximum)")
        if not 0 <= self.spill_after_minutes <= 60:
            raise ValueError(f"spill_after_minutes: {self.spill_after_minutes} must be 0 to 60")
        if not 1 <= self.return_after_minutes <= 24 * 60:
            raise ValueError(f"return_after_minutes: {self.return_after_minutes} must be 1 to 1440")
        if not 1 <= self.fallback_hours <= 168:
            raise ValueError(f"fallback_hours: {self.fallback_hours} must be 1 to 168")


class GpuSpill(Construct):
    """Every minute, set the fleet's GPU Deployments to the Neuron shortfall while Neuron capacity is short, and back:
    several GPU types are filled in priority order (a type whose pods get no node hands them to the next) and
    returned in reverse. Without GPU Deployments it only reports the rollout and compile state (its alarms).

    The function (``neuronkit/lambdas/spill/handler.py``) runs in ``subnets`` of the cluster's VPC (the cluster's
    private subnets: they reach the API server and the AWS endpoints) behind its own security group, which the cluster security group admits on 443; it reaches
    the API server with a token of its role. Its EKS **access entry** carries no access policy, only the Kubernetes
    group of :func:`neuronkit.kubernetes.spill.kubernetes_group`, and the Role/RoleBinding manifest
    (``rbac_manifest``) gives that group ``get`` on the fleet's Deployments, ``list`` pods in the serving
    namespace and ``patch`` on the GPU Deployments' ``deployments/scale`` only. ``neuron_group_names`` (the Neuron
    node groups' Auto Scaling groups) add launch failures for capacity as a sign, with
    ``autoscaling:DescribeScalingActivities``; ``gpu_group_names`` (each GPU Deployment's group's, in the same order)
    tell a GPU type whose launches fail for capacity. Its memory is an SSM parameter of its own (``memory``).

    Public attributes: ``function``, ``rule``, ``log_group``, ``memory``, ``security_group``, ``access_entry``,
    ``rbac_manifest``, ``fallback_alarm``, ``errors_alarm``; :meth:`metric` and :meth:`widget` for the environment's dashboard.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: eks.Cluster,
        spec: SpillSpec,
        subnets: Sequence[ec2.ISubnet],
        neuron_group_names: Sequence[str] = (),
        gpu_group_names: Sequence[str] = (),
        alarm_topic: sns.ITopic | None = None,
    ) -> None:
        super().__init__(scope, id)
        if gpu_group_names and len(gpu_group_names) != len(spec.deployments):
            raise ValueError(
                f"GpuSpill {spec.fleet}: gpu_group_names names {len(gpu_group_names)} groups for "
                f"{len(spec.deployments)} GPU Deployments ({', '.join(spec.deployments)}); give one per Deployment"
            )
        self.spec = spec
        self._cluster = cluster
        self.log_group = log_group(self, "Logs", spec.log_retention_days)
        self._memory()
        role = self._role([*neuron_group_names, *gpu_group_names])
        self._network()
        self._function(role, subnets, neuron_group_names, gpu_group_names)
        self._access(role)
        self._schedule()
        self._alarm(alarm_topic)

    def _memory(self) -> None:
        """What one run leaves for the next (a JSON document); the handler overwrites it, CloudFormation seeds it."""
        self.memory = ssm.StringParameter(
            self,
            "Memory",
            parameter_name=f"/neuronkit/{self.spec.environment}/{self.spec.fleet}/spill",
            string_value="{}",
            description=f"neuronkit: the {self.spec.fleet} spill controller's memory (written by the function)",
        )

    def _role(self, neuron_group_names: Sequence[str]) -> iam.Role:
        """Its logs, its memory parameter, and (with Neuron groups) their scaling activities; no Kubernetes rights here."""
        role = iam.Role(
            self, "Role", assumed_by=values.service_principal("lambda.amazonaws.com"), description=f"{self.spec.fleet} GPU spill"
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="Logs", actions=["logs:CreateLogStream", "logs:PutLogEvents"], resources=[self.log_group.log_group_arn]
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="Memory", actions=["ssm:GetParameter", "ssm:PutParameter"], resources=[self.memory.parameter_arn]
            )
        )
        if neuron_group_names:
            role.add_to_policy(
                iam.PolicyStatement(sid="LaunchFailures", actions=["autoscaling:DescribeScalingActivities"], resources=["*"])
            )
            acknowledge(role, "AwsSolutions-IAM5[Resource::*]", "DescribeScalingActivities has no resource-level permissions")
        return role

    def _network(self) -> None:
        """Its own security group: HTTPS out only (the API server, SSM, Auto Scaling); the cluster admits it on 443."""
        self.security_group = ec2.SecurityGroup(
            self,
            "SecurityGroup",
            vpc=self._cluster.vpc,
            description=f"neuronkit: {self.spec.fleet} spill function (HTTPS to the EKS API and AWS APIs)",
            allow_all_outbound=False,
        )
        self.security_group.add_egress_rule(values.any_ipv4(), values.tcp(443), "EKS API server and AWS service endpoints")
        ec2.CfnSecurityGroupIngress(
            self,
            "ClusterIngress",
            group_id=self._cluster.cluster_security_group_id,
            ip_protocol="tcp",
            from_port=443,
            to_port=443,
            source_security_group_id=self.security_group.security_group_id,
            description=f"neuronkit: the {self.spec.fleet} spill function calls the Kubernetes API",
        )

    def _function(self, role: iam.Role, subnets: Sequence[ec2.ISubnet], groups: Sequence[str], gpu_groups: Sequence[str]) -> None:
        s = self.spec
        self.function = python_function(
            self,
            "Function",
            code_dir=CODE_DIR,
            role=role,
            log_group=self.log_group,
            description=(
                f"neuronkit: spills {s.fleet} to its GPU Deployment{'s' if len(s.deployments) > 1 else ''} while "
                "Neuron capacity is short, and back"
                if s.deployments
                else f"neuronkit: reports {s.fleet}'s rollout and compile state (no GPU fallback)"
            ),
            # A failed run is not retried: the next run (a minute later) observes afresh.
            retry_attempts=0,
            timeout_seconds=50,
            memory_mib=256,
            vpc=self._cluster.vpc,
            vpc_subnets=ec2.SubnetSelection(subnets=list(subnets)),
            security_groups=[self.security_group],
            environment={
                "CLUSTER_NAME": self._cluster.cluster_name,
                "CLUSTER_ENDPOINT": self._cluster.cluster_endpoint,
                "CLUSTER_CA": self._cluster.cluster_certificate_authority_data,
                "FLEET_NAMESPACE": SERVING_NAMESPACE,
                "NEURON_DEPLOYMENT": neuron_deployment_name(s.fleet),
                # GPU_DEPLOYMENT: the first, as before (the handler reads GPU_DEPLOYMENTS when it is there).
                **({"GPU_DEPLOYMENT": s.deployments[0]} if s.deployments else {}),
                "GPU_DEPLOYMENTS": ",".join(s.deployments),
                "GPU_GROUPS": ",".join(gpu_groups),
                "ENVIRONMENT": s.environment,
                "POOL": s.fleet,
                "METRICS_NAMESPACE": s.metrics_namespace,
                "MEMORY_PARAMETER": self.memory.parameter_name,
                "SPILL_AFTER_MINUTES": str(s.spill_after_minutes),
                "RETURN_AFTER_MINUTES": str(s.return_after_minutes),
                "MAX_GPU_REPLICAS": str(s.max_gpu_replicas),
                "NEURON_GROUPS": ",".join(groups),
            },
        )
        acknowledge_each(
            role,
            {
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaVPCAccessExecutionRole]": (
                    "python_function attaches it to a function in a VPC: the network interfaces Lambda creates in the subnets"
                ),
            },
        )

    def _access(self, role: iam.Role) -> None:
        """An access entry with no access policy, only the fleet's group; the Role/RoleBinding give that group its rights."""
        self.access_entry = eks.CfnAccessEntry(
            self,
            "AccessEntry",
            cluster_name=self._cluster.cluster_name,
            principal_arn=role.role_arn,
            type="STANDARD",
            kubernetes_groups=[spill_rbac.kubernetes_group(self.spec.fleet)],
        )
        self.rbac_documents = spill_rbac.manifests(self.spec.fleet, self.spec.deployments)
        self.rbac_manifest = eks.KubernetesManifest(
            self, "Rbac", cluster=self._cluster, manifest=self.rbac_documents, overwrite=True
        )
        self.function.node.add_dependency(self.access_entry)

    def _schedule(self) -> None:
        self.rule = events.Rule(
            self,
            "Schedule",
            description=f"neuronkit: run the {self.spec.fleet} GPU spill controller every minute",
            schedule=events.Schedule.rate(durations.minutes(EVERY_MINUTES)),
            targets=[targets.LambdaFunction(self.function, retry_attempts=0, max_event_age=durations.minutes(EVERY_MINUTES))],
        )
        self.rule.node.add_dependency(self.rbac_manifest)

    def _alarm(self, topic: sns.ITopic | None) -> None:
        """With GPU Deployments, a fallback that lasts: GPU replicas above zero in every hour for ``fallback_hours``
        (as ``gpu-fallback``); always, the function's errors, a stalled rollout and a failed compile Job."""
        hours = self.spec.fallback_hours
        name = f"{self.spec.environment}-{self.spec.fleet}-gpu-spill"
        # Only with GPU Deployments: a fleet without fallback never spills, so a lasting spill cannot happen.
        self.fallback_alarm: cloudwatch.Alarm | None = None
        if self.spec.deployments:
            self._fallback_alarm(name, hours)
        self._other_alarms(topic)

    def _fallback_alarm(self, name: str, hours: int) -> None:
        self.fallback_alarm = cloudwatch.Alarm(
            self,
            "FallbackAlarm",
            alarm_name=name,
            metric=self.metric("GpuReplicas", period_minutes=60, labelled=False).with_(statistic="Minimum"),
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=hours,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=(
                f"{self.spec.fleet}: GPU replicas serving for more than {hours} hours: Neuron capacity is still short "
                "(check the Neuron node group's scaling activities, quotas and offerings), and the fleet costs its GPU price."
            ),
        )
        Tags.of(self.fallback_alarm).add("neuronkit:pool", self.spec.fleet)

    def _other_alarms(self, topic: sns.ITopic | None) -> None:
        # A scheduled function fails silently unless its Errors metric is watched (Lambda metrics).
        self.errors_alarm = cloudwatch.Alarm(
            self,
            "ErrorsAlarm",
            alarm_name=f"{self.spec.environment}-{self.spec.fleet}-spill-errors",
            metric=self.function.metric_errors(period=durations.minutes(5), statistic="Sum"),
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=f"The {self.spec.fleet} spill function failed in the last 5 minutes; read its log group.",
        )
        # Loud failures (issue 49): what the function reads each minute, as metrics. A Neuron rollout past its progress
        # deadline (the Deployment's, set past the compile budget and boot), and a failed compile Job.
        self.rollout_alarm = self._state_alarm(
            "RolloutStalledAlarm", "rollout-stalled", "RolloutStalled",
            f"{self.spec.fleet}: the Neuron Deployment's rollout exceeded its progress deadline (new pods never became "
            "Ready: a key that never completed, a crash loop, no node); kubectl describe deployment in neuronkit-serving.",
        )  # fmt: skip
        self.compile_alarm = self._state_alarm(
            "CompileFailedAlarm", "compile-failed", "CompileFailed",
            f"{self.spec.fleet}: a compile Job failed (deadline or retries reached); pods of its key wait and then fail. "
            "Read the Job's pod logs in neuronkit-serving.",
        )  # fmt: skip
        if topic is not None:
            for alarm in (self.fallback_alarm, self.errors_alarm, self.rollout_alarm, self.compile_alarm):
                if alarm is not None:
                    alarm.add_alarm_action(cw_actions.SnsAction(topic))

    def _state_alarm(self, id: str, suffix: str, metric: str, description: str) -> cloudwatch.Alarm:
        alarm = cloudwatch.Alarm(
            self,
            id,
            alarm_name=f"{self.spec.environment}-{self.spec.fleet}-{suffix}",
            metric=self.metric(metric, labelled=False),
            threshold=0,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_THRESHOLD,
            evaluation_periods=1,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING,
            alarm_description=description,
        )
        Tags.of(alarm).add("neuronkit:pool", self.spec.fleet)
        return alarm

    def metric(self, name: str, *, period_minutes: int = 5, labelled: bool = True) -> cloudwatch.Metric:
        """One of ``GpuReplicas``, ``NeuronShortfall``, ``NeuronReady`` of this fleet (maximum over the period)."""
        if name not in METRICS:
            raise ValueError(f"name: {name!r} is not one of {', '.join(METRICS)}")
        return cloudwatch.Metric(
            namespace=self.spec.metrics_namespace,
            metric_name=name,
            dimensions_map={"Environment": self.spec.environment, "Pool": self.spec.fleet},
            statistic="Maximum",
            period=durations.minutes(period_minutes),
            label=f"{self.spec.fleet} {name}" if labelled else None,
        )

    def widget(self) -> cloudwatch.GraphWidget:
        """The dashboard's graph: Neuron Ready and shortfall beside GPU replicas."""
        return cloudwatch.GraphWidget(
            title=f"{self.spec.fleet}: Neuron Ready, shortfall and GPU spill",
            left=[self.metric(m) for m in METRICS[:3]],
            width=12,
        )


__all__ = ["GpuSpill", "SpillSpec"]
