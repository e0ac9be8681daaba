"""An Inferentia inference fleet behind a load balancer, with GPU fallback in the same Auto Scaling group."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from aws_cdk import Aws, CfnAutoScalingRollingUpdate, CfnAutoScalingScheduledAction, CfnUpdatePolicy, Duration, Fn, Stack
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from neuronkit import catalog, userdata
from neuronkit.compliance import acknowledge
from neuronkit.constructs.groups import grant_node_lifecycle, launch_hook, lifecycle_values, notifications
from neuronkit.constructs.launch_template import AcceleratorLaunchTemplate, AmiSpec
from neuronkit.constructs.node_role import node_role
from neuronkit.constructs.observability import DEFAULT_LOG_RETENTION_DAYS, NodeObservability, ObservabilitySpec
from neuronkit.constructs.rebalancer import Rebalancer

# The systemd unit inference-node.sh runs the model server as; its journal goes to the server log group.
SERVER_UNIT = "neuronkit-model-server.service"

# CloudFormation waits at most one hour for the signals of a rolling update batch (PauseTime).
_MAX_PAUSE_SECONDS = 3600
# Processes AWS recommends suspending during a rolling update, so that health-check replacements,
# alarms (target tracking) and schedules do not fight the update.
_SUSPEND_DURING_UPDATE = ["HealthCheck", "ReplaceUnhealthy", "AZRebalance", "AlarmNotification", "ScheduledActions"]
# Scale-in removes the lowest-priority type first (AllocationStrategy: for the prioritized On-Demand
# strategy, the last overrides, i.e. the GPU fallback types), then the default criteria.
TERMINATION_POLICIES = ["AllocationStrategy", "Default"]


@dataclass(frozen=True)
class HealthCheckSpec:
    """The target group's health check; ``port`` defaults to the fleet's serving port."""

    path: str = "/health"
    port: int | None = None
    protocol: Literal["HTTP", "TCP"] = "HTTP"
    interval_seconds: int = 15
    healthy_threshold: int = 2
    unhealthy_threshold: int = 3


@dataclass(frozen=True)
class ScheduleSpec:
    """A recurring change of the group's sizes (cron in UTC, e.g. ``0 8 * * 1-5``)."""

    name: str
    cron: str
    min_size: int | None = None
    max_size: int | None = None
    desired_size: int | None = None


@dataclass(frozen=True)
class ServeSpec:
    """Server commands per accelerator family; ``$MODEL_DIR`` and ``$PORT`` are set for them."""

    neuron: str
    gpu: str | None = None


class InferenceFleet(Construct):
    """An Auto Scaling group of Neuron instances with GPU fallback, behind an internal load balancer.

    Placement: one subnet per AZ ID in ``subnet_ids`` (at least two). Load balancer: internal ALB
    (``load_balancer="alb"``, the default) or NLB (``"nlb"``, for gRPC/TCP servers) listening on
    ``port`` (defaults to 8080), reachable from ``ingress_cidr`` only (defaults to the VPC's CIDR when
    the VPC view knows it), its target group checking ``health_check`` (defaults to HTTP ``/health``
    on the serving port). The group uses ELB health checks after ``health_check_grace_seconds``
    (defaults to 900: Neuron models take minutes to load) and counts a new node for scaling after
    ``warmup_seconds`` (defaults to 600). ALB access logs go to ``access_logs_bucket`` when given.

    Capacity: a mixed instances policy, 100% On-Demand with the ``prioritized`` strategy. Overrides are
    ``neuron_types`` in the given order, then ``fallback_types`` (GPU); the Neuron types share the
    group's launch template (Neuron DLAMI, ``neuron_ami`` defaults to the catalog's default Neuron
    family), each GPU type carries its own launch template (GPU Deep Learning AMI, ``gpu_ami`` defaults
    to the catalog's default GPU family). Termination policies ``AllocationStrategy`` then ``Default``:
    scale-in removes GPU instances first. A :class:`Rebalancer` (``rebalance_minutes``, defaults to 30;
    None disables it) moves a steady fleet back to Neuron; it is created only with fallback types.

    Scaling: target tracking on ``ALBRequestCountPerTarget`` (``requests_per_target`` per minute,
    defaults to 100) with an ALB; with an NLB, on active TCP flows per in-service instance (the NLB has
    no per-target request metric; the same target value). Both are accelerator-agnostic, so they keep
    working while GPU instances serve. ``scheduled_actions`` become scheduled actions.

    Updates: a change to any launch template (AMI, model prefix, server command) rolls through the
    group with CloudFormation's ``AutoScalingRollingUpdate`` policy, keeping ``min_healthy_percentage``
    (defaults to 90) of the instances in service; each new node signals CloudFormation once its server
    passes the health check locally, and a batch that does not signal within the grace period (at most
    one hour) rolls the update back.

    Model delivery: each node fetches ``model_s3_prefix`` (Neuron) or ``gpu_model_s3_prefix`` (GPU,
    defaults to ``model_s3_prefix``) from ``artifacts_bucket`` to local disk and runs ``serve.neuron``
    or ``serve.gpu`` as a systemd unit (``neuronkit/userdata/inference-node.sh``); the node role can
    read only those prefixes.

    Public attributes: ``auto_scaling_group`` (``CfnAutoScalingGroup``), ``group_name``
    (``ENV-FLEET``), ``pool``, ``load_balancer``, ``load_balancer_full_name``, ``target_group``,
    ``target_group_full_name``, ``neuron_types``, ``fallback_types``, ``launch_templates`` (instance
    type -> launch template; the Neuron types share one), ``security_group``, ``load_balancer_security_group``,
    ``role``, ``rebalancer`` (or None), ``dns_name``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        environment: str,
        name: str,
        neuron_types: Sequence[str],
        vpc: ec2.IVpc,
        subnet_ids: Mapping[str, str],
        max_size: int,
        artifacts_bucket: str,
        model_s3_prefix: str,
        serve: ServeSpec,
        fallback_types: Sequence[str] = (),
        gpu_model_s3_prefix: str | None = None,
        min_size: int = 1,
        desired_size: int | None = None,
        load_balancer: Literal["alb", "nlb"] = "alb",
        port: int = 8080,
        health_check: HealthCheckSpec | None = None,
        health_check_grace_seconds: int = 900,
        warmup_seconds: int = 600,
        requests_per_target: int = 100,
        min_healthy_percentage: int = 90,
        scheduled_actions: Sequence[ScheduleSpec] = (),
        neuron_ami: AmiSpec | None = None,
        gpu_ami: AmiSpec | None = None,
        ingress_cidr: str | None = None,
        access_logs_bucket: s3.IBucket | None = None,
        notifications_topic_arn: str | None = None,
        root_volume_gib: int | None = None,
        rebalance_minutes: int | None = 30,
        metrics_namespace: str = "Neuronkit",
        log_retention_days: int = DEFAULT_LOG_RETENTION_DAYS,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(scope, id)
        hc = health_check or HealthCheckSpec()
        self._validate(
            name=name,
            neuron_types=neuron_types,
            fallback_types=fallback_types,
            subnet_ids=subnet_ids,
            min_size=min_size,
            max_size=max_size,
            desired_size=desired_size,
            serve=serve,
            load_balancer=load_balancer,
            port=port,
            health_check=hc,
            min_healthy_percentage=min_healthy_percentage,
        )
        stack = Stack.of(self)
        self.pool = name
        self.group_name = f"{environment}-{name}"
        self.neuron_types = list(neuron_types)
        self.fallback_types = list(fallback_types)
        gpu_prefix = gpu_model_s3_prefix or model_s3_prefix
        health_port = hc.port or port
        subnets = [ec2.Subnet.from_subnet_id(self, f"Subnet{i}", s) for i, s in enumerate(subnet_ids.values())]

        # --- security groups: clients -> load balancer -> nodes on the serving port ---------------
        cidr = ingress_cidr or vpc.vpc_cidr_block
        self.load_balancer_security_group = ec2.SecurityGroup(
            self, "LoadBalancerSecurityGroup", vpc=vpc, description=f"{self.group_name} load balancer", allow_all_outbound=False
        )
        self.security_group = ec2.SecurityGroup(
            self, "NodeSecurityGroup", vpc=vpc, description=f"{self.group_name} nodes", allow_all_outbound=False
        )
        self.load_balancer_security_group.add_ingress_rule(ec2.Peer.ipv4(cidr), ec2.Port.tcp(port), "Clients in the VPC")
        self.load_balancer_security_group.add_egress_rule(
            self.security_group, ec2.Port.tcp(port), "Requests and health checks to the nodes"
        )
        self.security_group.add_ingress_rule(
            self.load_balancer_security_group, ec2.Port.tcp(port), "Requests and health checks from the load balancer"
        )
        self.security_group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), "HTTPS to S3 (the model), AWS APIs")
        self.security_group.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(80), "HTTP package mirrors (apt)")

        # --- load balancer, listener and target group ---------------------------------------------
        placement = ec2.SubnetSelection(subnets=subnets)
        self.target_group: elbv2.ApplicationTargetGroup | elbv2.NetworkTargetGroup
        self.load_balancer: elbv2.ApplicationLoadBalancer | elbv2.NetworkLoadBalancer
        if load_balancer == "alb":
            alb = elbv2.ApplicationLoadBalancer(
                self,
                "LoadBalancer",
                vpc=vpc,
                internet_facing=False,
                vpc_subnets=placement,
                security_group=self.load_balancer_security_group,
                drop_invalid_header_fields=True,
            )
            if access_logs_bucket is not None:
                alb.log_access_logs(access_logs_bucket, prefix=f"elb/{self.group_name}")
            atg = elbv2.ApplicationTargetGroup(
                self,
                "Targets",
                vpc=vpc,
                port=port,
                protocol=elbv2.ApplicationProtocol.HTTP,
                target_type=elbv2.TargetType.INSTANCE,
                health_check=elbv2.HealthCheck(
                    path=hc.path,
                    port=str(health_port),
                    protocol=elbv2.Protocol.HTTP,
                    interval=Duration.seconds(hc.interval_seconds),
                    healthy_threshold_count=hc.healthy_threshold,
                    unhealthy_threshold_count=hc.unhealthy_threshold,
                ),
            )
            # open=False: the security group above admits the VPC only (the L2 default opens 0.0.0.0/0).
            alb.add_listener(
                "Listener", port=port, protocol=elbv2.ApplicationProtocol.HTTP, default_target_groups=[atg], open=False
            )
            self.load_balancer, self.target_group = alb, atg
        else:
            nlb = elbv2.NetworkLoadBalancer(
                self,
                "LoadBalancer",
                vpc=vpc,
                internet_facing=False,
                vpc_subnets=placement,
                security_groups=[self.load_balancer_security_group],
                cross_zone_enabled=True,
            )
            acknowledge(
                nlb,
                "AwsSolutions-ELB2",
                "An NLB writes access logs only for TLS listeners; this TCP listener's flows are in the VPC flow logs",
            )
            ntg = elbv2.NetworkTargetGroup(
                self,
                "Targets",
                vpc=vpc,
                port=port,
                protocol=elbv2.Protocol.TCP,
                target_type=elbv2.TargetType.INSTANCE,
                health_check=elbv2.HealthCheck(
                    path=hc.path if hc.protocol == "HTTP" else None,
                    port=str(health_port),
                    protocol=elbv2.Protocol.HTTP if hc.protocol == "HTTP" else elbv2.Protocol.TCP,
                    interval=Duration.seconds(hc.interval_seconds),
                    healthy_threshold_count=hc.healthy_threshold,
                    unhealthy_threshold_count=hc.unhealthy_threshold,
                ),
            )
            nlb.add_listener("Listener", port=port, protocol=elbv2.Protocol.TCP, default_target_groups=[ntg])
            self.load_balancer, self.target_group = nlb, ntg
        self.load_balancer_full_name = self.load_balancer.load_balancer_full_name
        self.target_group_full_name = self.target_group.target_group_full_name
        self.dns_name = self.load_balancer.load_balancer_dns_name

        # --- node role: Session Manager, CloudWatch agent, the model prefixes, its own group -------
        # Metrics and logs come from NodeObservability's statements, scoped to the namespace and the
        # fleet's log groups (not the broad CloudWatchAgentServerPolicy).
        self.role = node_role(self, "NodeRole", description=f"{self.group_name} inference nodes")
        self.observability = NodeObservability(
            self,
            "Observability",
            environment=environment,
            pool=name,
            role=self.role,
            spec=ObservabilitySpec(namespace=metrics_namespace, log_retention_days=log_retention_days),
            server_log_units=(SERVER_UNIT,),
        )
        self.grant_model_read(artifacts_bucket, sorted({model_s3_prefix, gpu_prefix}))
        grant_node_lifecycle(self.role, self, self.group_name)
        self.role.add_to_policy(
            iam.PolicyStatement(sid="SignalRollingUpdate", actions=["cloudformation:SignalResource"], resources=[Aws.STACK_ID])
        )

        # --- the group (its launch templates are attached below, once its logical ID is known) ----
        group = autoscaling.CfnAutoScalingGroup(
            self,
            "Group",
            auto_scaling_group_name=self.group_name,
            min_size=str(min_size),
            max_size=str(max_size),
            desired_capacity=str(desired_size) if desired_size is not None else None,
            vpc_zone_identifier=list(subnet_ids.values()),
            target_group_arns=[self.target_group.target_group_arn],
            health_check_type="ELB",
            health_check_grace_period=health_check_grace_seconds,
            # The boot (model download and load included) must answer the hook within the grace period and
            # the local health wait; a silent node is abandoned when the heartbeat runs out.
            lifecycle_hook_specification_list=[launch_hook(min(health_check_grace_seconds + 600, 7200))],
            default_instance_warmup=warmup_seconds,
            termination_policies=TERMINATION_POLICIES,
            new_instances_protected_from_scale_in=False,
            metrics_collection=[autoscaling.CfnAutoScalingGroup.MetricsCollectionProperty(granularity="1Minute")],
            notification_configurations=notifications(notifications_topic_arn),
            tags=[
                autoscaling.CfnAutoScalingGroup.TagPropertyProperty(key=k, value=v, propagate_at_launch=False)
                for k, v in sorted({**(tags or {}), "neuronkit:pool": name}.items())
            ],
        )
        self.auto_scaling_group = group
        acknowledge(
            group,
            "AwsSolutions-EC26",
            "cdk-nag's EC26 reads only the group's LaunchTemplate, not a MixedInstancesPolicy, and errors; every "
            "launch template of this group encrypts its root volume (tests/unit/test_inference_fleet.py checks each)",
        )
        # The grace period bounds how long a node may take to boot, fetch and load the model.
        health_wait = health_check_grace_seconds
        values: dict[str, str | int] = {
            "ENVIRONMENT": environment,
            "FLEET": name,
            "REGION": Aws.REGION,
            "ASG_NAME": self.group_name,
            "ARTIFACTS_BUCKET": artifacts_bucket,
            "NEURON_MODEL_PREFIX": model_s3_prefix,
            "GPU_MODEL_PREFIX": gpu_prefix,
            "SERVE_NEURON": serve.neuron,
            "SERVE_GPU": serve.gpu or "",
            "PORT": port,
            "HEALTH_PATH": hc.path,
            "HEALTH_PROTOCOL": hc.protocol,
            "HEALTH_WAIT_SECONDS": health_wait,
            "STACK_NAME": Aws.STACK_NAME,
            "SIGNAL_RESOURCE": stack.get_logical_id(group),
            "LIFECYCLE_HOOK": lifecycle_values()["LIFECYCLE_HOOK"],
        }

        def script(accelerator: Literal["neuron", "gpu"]) -> str:
            # Each launch template boots one family, so its observability (neuron-monitor or the GPU
            # metrics of the CloudWatch agent) is fixed per template; inference-node.sh still detects it.
            return userdata.render(
                ["observability.sh", "inference-node.sh"],
                {**self.observability.userdata_values(accelerator=accelerator), **values},
            )

        lt_tags = {**(tags or {}), "neuronkit:pool": name}
        neuron_lt = AcceleratorLaunchTemplate(
            self,
            "NeuronLaunchTemplate",
            instance_type=self.neuron_types[0],
            ami=neuron_ami or AmiSpec.default_for(self.neuron_types[0], "vllm-serving"),
            security_group_ids=[self.security_group.security_group_id],
            user_data=script("neuron"),
            role=self.role,
            root_volume_gib=root_volume_gib,
            tags=lt_tags,
            efa=False,  # inference nodes run no collectives across nodes
        )
        self.launch_templates: dict[str, AcceleratorLaunchTemplate] = dict.fromkeys(self.neuron_types, neuron_lt)
        overrides = [autoscaling.CfnAutoScalingGroup.LaunchTemplateOverridesProperty(instance_type=t) for t in self.neuron_types]
        for t in self.fallback_types:
            # Each GPU override carries its own launch template: the GPU AMI boots it, and the same
            # boot script detects the GPU and starts serve.gpu.
            gpu_lt = AcceleratorLaunchTemplate(
                self,
                f"GpuLaunchTemplate-{t.replace('.', '-')}",
                instance_type=t,
                ami=gpu_ami or AmiSpec.default_for(t),
                security_group_ids=[self.security_group.security_group_id],
                user_data=script("gpu"),
                role=self.role,
                root_volume_gib=root_volume_gib,
                tags=lt_tags,
                efa=False,
            )
            self.launch_templates[t] = gpu_lt
            overrides.append(
                autoscaling.CfnAutoScalingGroup.LaunchTemplateOverridesProperty(
                    instance_type=t,
                    launch_template_specification=autoscaling.CfnAutoScalingGroup.LaunchTemplateSpecificationProperty(
                        launch_template_id=gpu_lt.launch_template.ref,
                        version=gpu_lt.launch_template.attr_latest_version_number,
                    ),
                )
            )
        group.mixed_instances_policy = autoscaling.CfnAutoScalingGroup.MixedInstancesPolicyProperty(
            launch_template=autoscaling.CfnAutoScalingGroup.LaunchTemplateProperty(
                launch_template_specification=autoscaling.CfnAutoScalingGroup.LaunchTemplateSpecificationProperty(
                    launch_template_id=neuron_lt.launch_template.ref,
                    # The version current at deploy time: a template change is a group change, which
                    # the rolling update below carries to every node.
                    version=neuron_lt.launch_template.attr_latest_version_number,
                ),
                overrides=overrides,
            ),
            instances_distribution=autoscaling.CfnAutoScalingGroup.InstancesDistributionProperty(
                on_demand_allocation_strategy="prioritized",
                on_demand_base_capacity=0,
                on_demand_percentage_above_base_capacity=100,
            ),
        )

        # --- updates: CloudFormation's rolling update, waiting for each new node's signal ----------
        # Chosen over an instance refresh: CloudFormation has no update policy that starts one (it
        # would take a custom resource, and the stack would finish before the refresh does, so a bad
        # AMI or model would not roll back), and an instance refresh with skip-matching would keep GPU
        # fallback nodes because they match an override. The rolling update replaces every node,
        # waits until each new one serves its health check (cfn signal), and rolls the stack back
        # when a batch fails; replacements launch by priority, so an update also returns to Neuron.
        batch = max(1, math.floor(max_size * (100 - min_healthy_percentage) / 100))
        group.cfn_options.update_policy = CfnUpdatePolicy(
            auto_scaling_rolling_update=CfnAutoScalingRollingUpdate(
                min_active_instances_percent=min_healthy_percentage,
                max_batch_size=batch,
                wait_on_resource_signals=True,
                min_successful_instances_percent=100,
                pause_time=Duration.seconds(min(health_check_grace_seconds, _MAX_PAUSE_SECONDS)).to_iso_string(),
                suspend_processes=_SUSPEND_DURING_UPDATE,
            ),
            # Deploys keep the sizes that target tracking and the schedules set.
            auto_scaling_scheduled_action=CfnAutoScalingScheduledAction(ignore_unmodified_group_size_properties=True),
        )
        group.cfn_options.metadata = {
            "neuronkit": {
                "environment": environment,
                "region": stack.region,
                "pool": name,
                "role": "inference",
                "instance_types": self.neuron_types + self.fallback_types,
                "neuron_types": self.neuron_types,
                "fallback_types": self.fallback_types,
                "min_size": min_size,
                "max_size": max_size,
                "desired_size": desired_size if desired_size is not None else min_size,
                "capacity": "on-demand",
                "az_ids": list(subnet_ids),
            }
        }

        # --- scaling -------------------------------------------------------------------------------
        if load_balancer == "alb":
            tracking = autoscaling.CfnScalingPolicy.TargetTrackingConfigurationProperty(
                predefined_metric_specification=autoscaling.CfnScalingPolicy.PredefinedMetricSpecificationProperty(
                    predefined_metric_type="ALBRequestCountPerTarget",
                    resource_label=Fn.join("/", [self.load_balancer_full_name, self.target_group_full_name]),
                ),
                target_value=requests_per_target,
            )
        else:
            # An NLB has no per-target request metric: track its active TCP flows per in-service
            # instance (metric math over the group's own metric), as accelerator-agnostic as requests.
            tracking = autoscaling.CfnScalingPolicy.TargetTrackingConfigurationProperty(
                customized_metric_specification=autoscaling.CfnScalingPolicy.CustomizedMetricSpecificationProperty(
                    metrics=[
                        _query("flows", "AWS/NetworkELB", "ActiveFlowCount_TCP", "LoadBalancer", self.load_balancer_full_name),
                        _query("nodes", "AWS/AutoScaling", "GroupInServiceInstances", "AutoScalingGroupName", self.group_name),
                        autoscaling.CfnScalingPolicy.TargetTrackingMetricDataQueryProperty(
                            id="flowsPerNode", expression="flows / nodes", label="Active TCP flows per node", return_data=True
                        ),
                    ]
                ),
                target_value=requests_per_target,
            )
        self.scaling_policy = autoscaling.CfnScalingPolicy(
            self,
            "TargetTracking",
            auto_scaling_group_name=group.ref,
            policy_type="TargetTrackingScaling",
            target_tracking_configuration=tracking,
        )
        for action in scheduled_actions:
            autoscaling.CfnScheduledAction(
                self,
                f"Schedule-{action.name}",
                auto_scaling_group_name=group.ref,
                recurrence=action.cron,
                min_size=action.min_size,
                max_size=action.max_size,
                desired_capacity=action.desired_size,
            )

        self.rebalancer: Rebalancer | None = None
        if self.fallback_types and rebalance_minutes is not None:
            self.rebalancer = Rebalancer(
                self,
                "Rebalancer",
                environment=environment,
                pool=name,
                group_name=self.group_name,
                neuron_types=self.neuron_types,
                fallback_types=self.fallback_types,
                namespace=metrics_namespace,
                every_minutes=rebalance_minutes,
            )
            # The schedule starts once the group exists (the function itself needs nothing of it at deploy).
            self.rebalancer.rule.node.add_dependency(group)

    def grant_model_read(self, bucket: str, prefixes: Sequence[str]) -> None:
        """Let the nodes list and read these prefixes of ``bucket`` (and nothing else of it)."""
        bucket_arn = f"arn:{Aws.PARTITION}:s3:::{bucket}"
        objects = [f"{bucket_arn}/{p}*" for p in prefixes]
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="ListModel",
                actions=["s3:ListBucket"],
                resources=[bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{p}*" for p in prefixes]}},
            )
        )
        self.role.add_to_policy(iam.PolicyStatement(sid="ReadModel", actions=["s3:GetObject"], resources=objects))
        for resource in objects:
            rendered = resource.replace(Aws.PARTITION, "<AWS::Partition>")
            acknowledge(
                self.role, f"AwsSolutions-IAM5[Resource::{rendered}]", "read the fleet's model artifacts under this prefix only"
            )

    @staticmethod
    def _validate(
        *,
        name: str,
        neuron_types: Sequence[str],
        fallback_types: Sequence[str],
        subnet_ids: Mapping[str, str],
        min_size: int,
        max_size: int,
        desired_size: int | None,
        serve: ServeSpec,
        load_balancer: str,
        port: int,
        health_check: HealthCheckSpec,
        min_healthy_percentage: int,
    ) -> None:
        types = catalog.instance_types()
        if not neuron_types:
            raise ValueError(f"{name}: neuron_types: give at least one Inferentia or Trainium type")
        for t in neuron_types:
            if t not in types or not types[t].is_neuron:
                raise ValueError(f"{name}: neuron_types: '{t}' is not an Inferentia or Trainium type")
        for t in fallback_types:
            if t not in types or types[t].gpus == 0:
                raise ValueError(f"{name}: fallback_types: '{t}' has no GPU; fallback types must be GPU types")
        if fallback_types and not serve.gpu:
            raise ValueError(f"{name}: serve.gpu is required with fallback_types (the server command on GPU nodes)")
        if len(subnet_ids) < 2:
            raise ValueError(f"{name}: subnet_ids: a fleet spans at least two AZ IDs, got {len(subnet_ids)}")
        if min_size > max_size:
            raise ValueError(f"{name}: min_size {min_size} is greater than max_size {max_size}")
        if desired_size is not None and not min_size <= desired_size <= max_size:
            raise ValueError(f"{name}: desired_size {desired_size} must lie between min_size and max_size")
        if load_balancer == "alb" and health_check.protocol != "HTTP":
            raise ValueError(f"{name}: an ALB checks health over HTTP; use protocol HTTP or load_balancer='nlb'")
        if health_check.port is not None and health_check.port != port:
            raise ValueError(f"{name}: health_check.port {health_check.port} differs from port {port}; serve both on one port")
        if not 0 <= min_healthy_percentage <= 100:
            raise ValueError(f"{name}: min_healthy_percentage {min_healthy_percentage} must lie between 0 and 100")


def _query(
    id: str, namespace: str, metric: str, dimension: str, value: str
) -> autoscaling.CfnScalingPolicy.TargetTrackingMetricDataQueryProperty:
    return autoscaling.CfnScalingPolicy.TargetTrackingMetricDataQueryProperty(
        id=id,
        metric_stat=autoscaling.CfnScalingPolicy.TargetTrackingMetricStatProperty(
            metric=autoscaling.CfnScalingPolicy.MetricProperty(
                namespace=namespace,
                metric_name=metric,
                dimensions=[autoscaling.CfnScalingPolicy.MetricDimensionProperty(name=dimension, value=value)],
            ),
            stat="Average",
        ),
        return_data=False,
    )
