"""An Inferentia inference fleet behind a load balancer, with GPU fallback in the same Auto Scaling group."""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from aws_cdk import (
    Annotations,
    CfnAutoScalingRollingUpdate,
    CfnAutoScalingScheduledAction,
    CfnCreationPolicy,
    CfnResourceSignal,
    CfnUpdatePolicy,
    Fn,
    Stack,
)
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_sns as sns
from constructs import Construct

from neuronkit import catalog, userdata
from neuronkit.catalog import serving
from neuronkit.constructs import durations, placement, pseudo, values
from neuronkit.constructs.compliance import acknowledge, acknowledge_each, iam5
from neuronkit.constructs.groups import (
    acknowledge_group_arn,
    grant_node_lifecycle,
    group_arn,
    group_tags,
    launch_hook,
    lifecycle_values,
    notifications,
)
from neuronkit.constructs.launch_template import AcceleratorLaunchTemplate, AmiSpec
from neuronkit.constructs.load_balancing import access_logs_bucket as access_logs_bucket_of
from neuronkit.constructs.load_balancing import application_load_balancer, client_ingress, tls_policy
from neuronkit.constructs.node_pool import FleetNodesSpec
from neuronkit.constructs.node_role import node_role
from neuronkit.constructs.observability import DEFAULT_LOG_RETENTION_DAYS, NodeObservability, ObservabilitySpec
from neuronkit.constructs.rebalancer import Rebalancer
from neuronkit.constructs.serving_specs import HealthCheckSpec, ScheduleSpec, ServeSpec, ServingSpec, TlsSpec
from neuronkit.reports.pools import COMPILE_METADATA_KEY, pool_metadata

# The specs and load balancer helpers moved to modules both platforms import (0.3); importable from here as before.
__all__ = [
    "HealthCheckSpec",
    "InferenceFleet",
    "ScheduleSpec",
    "ServeSpec",
    "ServingSpec",
    "TERMINATION_POLICIES",
    "TlsSpec",
    "application_load_balancer",
    "client_ingress",
]

# The systemd unit inference-node.sh runs the model server as; its journal goes to the server log group.
SERVER_UNIT = "neuronkit-model-server.service"

# CloudFormation waits at most one hour for the signals of a rolling update batch (PauseTime).
_MAX_PAUSE_SECONDS = 3600
# A lifecycle hook's heartbeat timeout is at most 7200 s (Auto Scaling API reference, PutLifecycleHook).
_MAX_HEARTBEAT_SECONDS = 7200
# A CreationPolicy's ResourceSignal timeout is at most 12 hours (CloudFormation, CreationPolicy attribute).
_MAX_CREATION_SIGNAL_SECONDS = 43200
# Processes AWS recommends suspending during a rolling update, so that health-check replacements,
# alarms (target tracking) and schedules do not fight the update.
_SUSPEND_DURING_UPDATE = ["HealthCheck", "ReplaceUnhealthy", "AZRebalance", "AlarmNotification", "ScheduledActions"]
# Scale-in removes the lowest-priority type first (AllocationStrategy: for the prioritized On-Demand
# strategy, the last overrides, i.e. the GPU fallback types), then the default criteria.
TERMINATION_POLICIES = ["AllocationStrategy", "Default"]


class InferenceFleet(Construct):
    """An Auto Scaling group of Neuron instances with GPU fallback, behind an internal load balancer.

    Placement: one subnet per AZ ID in ``subnet_ids`` (at least two). Load balancer: internal ALB
    (``load_balancer="alb"``, the default) or NLB (``"nlb"``, for gRPC/TCP servers), reachable from
    ``ingress_cidr`` only (defaults to the VPC's CIDR when the VPC view knows it). The listener is plain
    HTTP/TCP on ``port`` (defaults to 8080) unless ``tls`` names a certificate (then HTTPS/TLS on
    ``tls.port``); the target group checks ``health_check`` (defaults to HTTP ``/health`` on the serving
    port). ALB access logs go to ``access_logs_bucket`` when given.

    Serving: with ``serving`` (:class:`ServingSpec`), every type, Neuron and GPU, gets its own launch
    template carrying its profile (neuronkit/catalog/serving.py): the pinned vLLM container pulled through the
    fleet's ECR cache, the tensor-parallel degree of its NeuronCores or GPUs, and on Neuron the
    compiled-artifact key under ``compiled/`` of ``artifacts_bucket`` (the first node of a new key compiles
    and publishes, the others wait). The root volume (unless ``root_volume_gib``) and the boot time the
    health-check grace period, lifecycle-hook heartbeat and rolling-update pause follow from (unless
    ``health_check_grace_seconds``) derive from the model's size. With ``serve`` (:class:`ServeSpec`)
    instead, nodes run your commands on the files under ``model_s3_prefix`` / ``gpu_model_s3_prefix``.

    Capacity: a mixed instances policy, 100% On-Demand with the ``prioritized`` strategy: ``nodes.neuron_types``
    in the given order, then ``nodes.fallback_types`` (GPU); termination policies ``AllocationStrategy`` then
    ``Default`` remove GPU instances first. A :class:`Rebalancer` (``rebalance_minutes``, defaults to 30;
    None disables it) moves a steady fleet back to Neuron; it is created only with fallback types.

    Scaling: target tracking on ``ALBRequestCountPerTarget`` (``requests_per_target`` per minute, defaults
    to 100) with an ALB, on active TCP flows per in-service instance with an NLB; ``scheduled_actions``
    become scheduled actions. Updates: CloudFormation's ``AutoScalingRollingUpdate`` keeps
    ``min_healthy_percentage`` (defaults to 90) in service and waits for each new node's signal
    (docs/inference.md explains the choice over an instance refresh).

    Public attributes: ``auto_scaling_group`` (``CfnAutoScalingGroup``), ``group_name`` (``ENV-FLEET``),
    ``pool``, ``load_balancer``, ``load_balancer_full_name``, ``target_group``, ``target_group_full_name``,
    ``listener_port``, ``neuron_types``, ``fallback_types``, ``launch_templates`` (instance type -> launch
    template), ``profiles`` (instance type -> :class:`ServingProfile`, with ``serving``), ``image_cache``
    (the pull-through cache rule or None), ``security_group``, ``load_balancer_security_group``, ``role``,
    ``rebalancer`` (or None), ``dns_name``, ``grace_seconds``, ``compile_groups`` (Neuron type -> its compile
    group, with ``serving``: the one-node group that compiles the type's compiled-artifact key before the
    rolling update starts; ``serving.precompile=False`` turns them off).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        environment: str,
        name: str,
        nodes: FleetNodesSpec,
        vpc: ec2.IVpc,
        artifacts_bucket: str | s3.IBucket,
        subnet_ids: Mapping[str, str] | None = None,
        vpc_subnets: ec2.SubnetSelection | None = None,
        serving: ServingSpec | None = None,
        serve: ServeSpec | None = None,
        model_s3_prefix: str | None = None,
        gpu_model_s3_prefix: str | None = None,
        load_balancer: Literal["alb", "nlb"] = "alb",
        idle_timeout_seconds: int | None = None,
        port: int = 8080,
        tls: TlsSpec | None = None,
        health_check: HealthCheckSpec | None = None,
        health_check_grace_seconds: int | None = None,
        warmup_seconds: int = 600,
        requests_per_target: int = 100,
        min_healthy_percentage: int = 90,
        scheduled_actions: Sequence[ScheduleSpec] = (),
        ingress_cidr: str | None = None,
        access_logs_bucket: s3.IBucket | None = None,
        notifications_topic_arn: str | None = None,
        notifications_topic: sns.ITopic | None = None,
        rebalance_minutes: int | None = 30,
        metrics_namespace: str = "Neuronkit",
        log_retention_days: int = DEFAULT_LOG_RETENTION_DAYS,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(scope, id)
        hc = health_check or HealthCheckSpec()
        subnet_ids = placement.subnets_by_label(vpc, owner=name, subnet_ids=subnet_ids, vpc_subnets=vpc_subnets)
        artifacts_bucket = placement.bucket_name(artifacts_bucket)
        notifications_topic_arn = placement.topic_arn(notifications_topic, notifications_topic_arn, owner=name)
        neuron_types, fallback_types = nodes.neuron_types, nodes.fallback_types
        min_size, max_size, desired_size = nodes.min_size, nodes.max_size, nodes.desired_size
        self._validate(
            name=name,
            nodes=nodes,
            subnet_ids=subnet_ids,
            serving=serving,
            serve=serve,
            model_s3_prefix=model_s3_prefix,
            load_balancer=load_balancer,
            port=port,
            health_check=hc,
            min_healthy_percentage=min_healthy_percentage,
        )
        self.pool = name
        self.environment = environment
        self.group_name = f"{environment}-{name}"
        self.neuron_types = list(neuron_types)
        self.fallback_types = list(fallback_types)
        self.idle_timeout_seconds = self._idle_timeout(load_balancer, idle_timeout_seconds)
        self.profiles = self._serving_profiles(serving)
        self.grace_seconds = health_check_grace_seconds or self._derived_grace_seconds()
        subnets = self._subnets(vpc, subnet_ids)

        self._security_groups(vpc, ingress_cidr, port, tls)
        self._load_balancer(vpc, subnets, load_balancer, port, tls, hc, access_logs_bucket)
        self._node_role(environment, name, metrics_namespace, log_retention_days)
        self._model_access(artifacts_bucket, serving, model_s3_prefix, gpu_model_s3_prefix)
        self.image_cache = self._image_cache(serving)
        group = self._group(min_size, max_size, desired_size, subnet_ids, warmup_seconds, notifications_topic_arn, tags)
        values = self._boot_values(
            environment, name, artifacts_bucket, serving, serve, model_s3_prefix, gpu_model_s3_prefix, port, hc
        )
        self._launch_templates(group, values, nodes, tags)
        self._update_policy(group, max_size, min_healthy_percentage)
        self._compile_groups(group, values, nodes, subnet_ids, notifications_topic_arn, tags)
        group.cfn_options.metadata = {
            "neuronkit": self._pool_metadata(
                environment, name, min_size, max_size, desired_size, subnet_ids, load_balancer, tls, serving
            )
        }
        self._scaling(group, load_balancer, requests_per_target, scheduled_actions)
        self._rebalancer(environment, name, metrics_namespace, rebalance_minutes, group)

    def _pool_metadata(
        self,
        environment: str,
        name: str,
        min_size: int,
        max_size: int,
        desired_size: int | None,
        subnet_ids: Mapping[str, str],
        load_balancer: str,
        tls: TlsSpec | None,
        serving: ServingSpec | None,
    ) -> dict[str, Any]:
        """The pool contract of neuronkit.reports.pools on the group, with the listener and each type's serving profile."""
        return pool_metadata(
            environment=environment,
            region=Stack.of(self).region,
            pool=name,
            role="inference",
            neuron_types=self.neuron_types,
            fallback_types=self.fallback_types,
            min_size=min_size,
            max_size=max_size,
            desired_size=desired_size,
            capacity="on-demand",
            az_ids=list(subnet_ids),
            listener=f"{'HTTPS' if tls and load_balancer == 'alb' else 'TLS' if tls else 'HTTP' if load_balancer == 'alb' else 'TCP'}:{self.listener_port}",
            **({"compile_types": list(self.compile_groups)} if self.compile_groups else {}),
            **(
                {
                    "model": serving.model.id,
                    "profiles": {
                        t: {
                            "image": p.image,
                            "tensor_parallel": p.tensor_parallel,
                            **({"lnc": p.lnc} if p.lnc else {}),
                            **({"cache_key": p.cache_key} if p.cache_key else {}),
                        }
                        for t, p in self.profiles.items()
                    },
                }
                if serving is not None
                else {}
            ),
        )

    # --- serving profiles and timing ------------------------------------------------------------------
    def _serving_profiles(self, spec: ServingSpec | None) -> dict[str, serving.ServingProfile]:
        self._model = spec.model if spec else None
        self._model_id = spec.model.id if spec else ""
        self._precompile = spec.precompile if spec else False
        self._lnc = spec.lnc if spec else None
        if spec is None:
            return {}
        # The same function renders the EKS path's profiles (constructs/eks/serving.py).
        return {
            t: serving.fleet_profile(
                spec.model, t, spec.neuron_release, spec.profiles.get(t), lnc=spec.lnc, neuron_image=spec.neuron_image,
                gpu_image=spec.gpu_image, idle_timeout_seconds=self.idle_timeout_seconds,
            )
            for t in self.neuron_types + self.fallback_types
        }  # fmt: skip

    def _idle_timeout(self, kind: str, seconds: int | None) -> int:
        """The balancer's idle timeout: the catalog's LLM default on an ALB (600 s), NLB's fixed 350 s."""
        facts = serving.facts()["load_balancer"]
        if kind == "nlb":
            if seconds is not None:
                raise ValueError(
                    f"idle_timeout_seconds: an NLB's TCP idle timeout is fixed at {facts['nlb_idle_timeout_seconds']} s; remove it"
                )
            return int(facts["nlb_idle_timeout_seconds"])
        most = int(facts["alb_idle_timeout_max_seconds"])
        if seconds is not None and not 1 <= seconds <= most:
            raise ValueError(f"idle_timeout_seconds: {seconds} is not between 1 and {most} (ALB's limit)")
        return seconds or int(facts["alb_idle_timeout_default_seconds"])

    def _derived_grace_seconds(self) -> int:
        """The slowest type's boot (pull, download, load) with the catalog's safety factor; 900 s without a model."""
        if not self.profiles:
            return 900
        return min(max(p.boot_seconds for p in self.profiles.values()), _MAX_HEARTBEAT_SECONDS)

    # --- security groups: clients -> load balancer -> nodes on the serving port ------------------------
    def _subnets(self, vpc: ec2.IVpc, subnet_ids: Mapping[str, str]) -> list[ec2.ISubnet]:
        """The VPC's own subnet objects where it has them (they carry route tables), else imported by ID."""
        known = {sn.subnet_id: sn for sn in vpc.private_subnets}
        out = [known.get(sid) or ec2.Subnet.from_subnet_id(self, f"Subnet{i}", sid) for i, sid in enumerate(subnet_ids.values())]
        if any(sid not in known for sid in subnet_ids.values()):
            # Only the load balancer and the Auto Scaling group read these, and only their IDs.
            Annotations.of(self).acknowledge_warning(
                "@aws-cdk/aws-ec2:noSubnetRouteTableId", "the fleet uses subnet IDs only, never a route table"
            )
        return out

    def _security_groups(self, vpc: ec2.IVpc, cidr: str | None, port: int, tls: TlsSpec | None) -> None:
        self.load_balancer_security_group = ec2.SecurityGroup(
            self, "LoadBalancerSecurityGroup", vpc=vpc, description=f"{self.group_name} load balancer", allow_all_outbound=False
        )
        self.security_group = ec2.SecurityGroup(
            self, "NodeSecurityGroup", vpc=vpc, description=f"{self.group_name} nodes", allow_all_outbound=False
        )
        self.listener_port = tls.port if tls else port
        self._client_ingress(vpc, cidr)
        self.load_balancer_security_group.add_egress_rule(
            self.security_group, values.tcp(port), "Requests and health checks to the nodes"
        )
        self.security_group.add_ingress_rule(
            self.load_balancer_security_group, values.tcp(port), "Requests and health checks from the load balancer"
        )
        self.security_group.add_egress_rule(values.any_ipv4(), values.tcp(443), "HTTPS to S3 (the model), ECR, AWS APIs")
        self.security_group.add_egress_rule(values.any_ipv4(), values.tcp(80), "HTTP package mirrors (apt)")

    def _client_ingress(self, vpc: ec2.IVpc, cidr: str | None) -> None:
        client_ingress(self, self.load_balancer_security_group, vpc, cidr, self.listener_port)

    # --- load balancer, listener and target group -----------------------------------------------------
    def _load_balancer(
        self,
        vpc: ec2.IVpc,
        subnets: list[ec2.ISubnet],
        kind: str,
        port: int,
        tls: TlsSpec | None,
        hc: HealthCheckSpec,
        access_logs_bucket: s3.IBucket | None,
    ) -> None:
        placement = ec2.SubnetSelection(subnets=subnets)
        health_port = str(hc.port or port)
        if kind == "alb" or tls is not None:
            # Without a caller's bucket, one of the fleet's own: cdk-nag's ELB2 would fail synthesis (issue 49). A TCP
            # NLB writes no access logs (acknowledged below).
            access_logs_bucket = access_logs_bucket_of(self, access_logs_bucket)
        certificates = [elbv2.ListenerCertificate.from_arn(tls.certificate_arn)] if tls else None
        self.target_group: elbv2.ApplicationTargetGroup | elbv2.NetworkTargetGroup
        self.load_balancer: elbv2.ApplicationLoadBalancer | elbv2.NetworkLoadBalancer
        if kind == "alb":
            alb, atg, listener = application_load_balancer(
                self, vpc=vpc, subnets=subnets, security_group=self.load_balancer_security_group,
                idle_timeout_seconds=self.idle_timeout_seconds, port=port, listener_port=self.listener_port, tls=tls,
                health_check=hc, target_type=elbv2.TargetType.INSTANCE, access_logs_bucket=access_logs_bucket,
                log_prefix=f"elb/{self.group_name}",
            )  # fmt: skip
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
            if tls is None:
                acknowledge(
                    nlb,
                    "AwsSolutions-ELB2",
                    "An NLB writes access logs only for TLS listeners; this TCP listener's flows are in the VPC flow logs",
                )
            elif access_logs_bucket is not None:
                nlb.log_access_logs(access_logs_bucket, prefix=f"elb/{self.group_name}")
            ntg = elbv2.NetworkTargetGroup(
                self,
                "Targets",
                vpc=vpc,
                port=port,
                protocol=elbv2.Protocol.TCP,
                target_type=elbv2.TargetType.INSTANCE,
                health_check=elbv2.HealthCheck(
                    path=hc.path if hc.protocol == "HTTP" else None,
                    port=health_port,
                    protocol=elbv2.Protocol.HTTP if hc.protocol == "HTTP" else elbv2.Protocol.TCP,
                    interval=durations.seconds(hc.interval_seconds),
                    healthy_threshold_count=hc.healthy_threshold,
                    unhealthy_threshold_count=hc.unhealthy_threshold,
                ),
            )
            listener = nlb.add_listener(
                "Listener",
                port=self.listener_port,
                protocol=elbv2.Protocol.TLS if tls else elbv2.Protocol.TCP,
                certificates=certificates,
                default_target_groups=[ntg],
            )
            self.load_balancer, self.target_group = nlb, ntg
            if tls:
                tls_policy(listener)
        self.load_balancer_full_name = self.load_balancer.load_balancer_full_name
        self.target_group_full_name = self.target_group.target_group_full_name
        self.dns_name = self.load_balancer.load_balancer_dns_name

    # --- node role: Session Manager, CloudWatch agent, the model prefixes, its own group --------------
    def _node_role(self, environment: str, name: str, namespace: str, log_retention_days: int) -> None:
        # Metrics and logs come from NodeObservability's statements, scoped to the namespace and the
        # fleet's log groups (not the broad CloudWatchAgentServerPolicy).
        self.role = node_role(self, "NodeRole", description=f"{self.group_name} inference nodes")
        self.observability = NodeObservability(
            self,
            "Observability",
            environment=environment,
            pool=name,
            role=self.role,
            spec=ObservabilitySpec(namespace=namespace, log_retention_days=log_retention_days),
            server_log_units=(SERVER_UNIT,),
        )
        grant_node_lifecycle(self.role, self, self.group_name)
        self.role.add_to_policy(
            iam.PolicyStatement(sid="SignalRollingUpdate", actions=["cloudformation:SignalResource"], resources=[pseudo.STACK_ID])
        )

    def _model_access(self, bucket: str, spec: ServingSpec | None, model_prefix: str | None, gpu_prefix: str | None) -> None:
        if spec is None:
            assert model_prefix is not None
            self.grant_model_read(bucket, sorted({model_prefix, gpu_prefix or model_prefix}))
            return
        self.grant_model_read(bucket, [spec.model.s3_prefix])
        if any(p.cache_key for p in self.profiles.values()):
            # The compiled-model cache of this model: nodes read it, and the first node of a new key writes
            # it and its lock object (deleting the lock when done).
            cache = f"arn:{pseudo.PARTITION}:s3:::{bucket}/{serving.facts()['compiled_cache']['prefix']}{spec.model.slug}/*"
            self.role.add_to_policy(
                iam.PolicyStatement(
                    sid="CompiledModelCache", actions=["s3:GetObject", "s3:PutObject", "s3:DeleteObject"], resources=[cache]
                )
            )
            self.role.add_to_policy(
                iam.PolicyStatement(
                    sid="ListCompiledModelCache",
                    actions=["s3:ListBucket"],
                    resources=[f"arn:{pseudo.PARTITION}:s3:::{bucket}"],
                    conditions={
                        "StringLike": {"s3:prefix": [f"{serving.facts()['compiled_cache']['prefix']}{spec.model.slug}/*"]}
                    },
                )
            )
            acknowledge(
                self.role,
                iam5(cache),
                "the compiled artifacts of this fleet's model, keyed by release, type and parallelism below this prefix",
            )

    # --- container images: an ECR pull-through cache of ECR Public (or the file's registry) -----------
    def _image_cache(self, spec: ServingSpec | None) -> ecr.CfnPullThroughCacheRule | None:
        if spec is None:
            return None
        if spec.registry is not None:
            registry, _, prefix = spec.registry.partition("/")
            account, region = registry.split(".")[0], registry.split(".")[3]
            self._registry, self._registry_prefix = registry, prefix
            repositories = f"arn:{pseudo.PARTITION}:ecr:{region}:{account}:repository/{prefix + '/' if prefix else ''}*"
            rule = None
            actions = ["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"]
        else:
            # Repository prefixes are 2-30 characters; one rule per fleet, named after it.
            prefix = f"{self.environment}-{self.pool}"[:30].strip("-")
            rule = ecr.CfnPullThroughCacheRule(
                self, "ImageCache", ecr_repository_prefix=prefix, upstream_registry_url=serving.facts()["registry"]["upstream"]
            )
            self._registry = f"{pseudo.ACCOUNT_ID}.dkr.ecr.{pseudo.REGION}.{pseudo.URL_SUFFIX}"
            self._registry_prefix = prefix
            repositories = f"arn:{pseudo.PARTITION}:ecr:{pseudo.REGION}:{pseudo.ACCOUNT_ID}:repository/{prefix}/*"
            # The first pull of an image through the rule creates its repository and imports the image.
            actions = [
                "ecr:BatchGetImage",
                "ecr:GetDownloadUrlForLayer",
                "ecr:BatchCheckLayerAvailability",
                "ecr:BatchImportUpstreamImage",
                "ecr:CreateRepository",
            ]
        self.role.add_to_policy(iam.PolicyStatement(sid="PullServingImages", actions=actions, resources=[repositories]))
        self.role.add_to_policy(iam.PolicyStatement(sid="EcrLogin", actions=["ecr:GetAuthorizationToken"], resources=["*"]))
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "ecr:GetAuthorizationToken has no resource-level permissions (ECR user guide, registry authentication)",
        )
        acknowledge(
            self.role,
            iam5(repositories),
            "the serving images' repositories under the fleet's prefix only",
        )
        return rule

    def image_uri(self, image: str) -> str:
        """Where nodes pull ``image`` from: the pull-through cache (or the file's registry) path of it."""
        return (
            serving.pull_through_uri(image, self._registry, self._registry_prefix)
            if self._registry_prefix
            else f"{self._registry}/{image.split('/', 1)[1]}"
        )

    # --- the group (its launch templates are attached below, once its logical ID is known) -----------
    def _group(
        self,
        min_size: int,
        max_size: int,
        desired_size: int | None,
        subnet_ids: Mapping[str, str],
        warmup_seconds: int,
        topic_arn: str | None,
        tags: Mapping[str, str] | None,
    ) -> autoscaling.CfnAutoScalingGroup:
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
            # The node answers its launch hook only once its server passes the health check locally, and the
            # grace period starts after the hook: it covers the first ELB checks of a node already serving.
            health_check_grace_period=self.grace_seconds,
            # The boot (image pull, model download and load) must answer the hook within the heartbeat; a
            # node still compiling records heartbeats; a silent node is abandoned when the heartbeat runs out.
            lifecycle_hook_specification_list=[launch_hook(min(self.grace_seconds + 600, _MAX_HEARTBEAT_SECONDS))],
            default_instance_warmup=warmup_seconds,
            termination_policies=TERMINATION_POLICIES,
            new_instances_protected_from_scale_in=False,
            metrics_collection=[autoscaling.CfnAutoScalingGroup.MetricsCollectionProperty(granularity="1Minute")],
            notification_configurations=notifications(topic_arn),
            tags=group_tags({**(tags or {}), "neuronkit:pool": self.pool}),
        )
        self.auto_scaling_group = group
        acknowledge(
            group,
            "AwsSolutions-EC26",
            "cdk-nag's EC26 reads only the group's LaunchTemplate, not a MixedInstancesPolicy, and errors; every "
            "launch template of this group encrypts its root volume (tests/unit/test_inference_fleet.py checks each)",
        )
        return group

    def _boot_values(
        self,
        environment: str,
        name: str,
        bucket: str,
        spec: ServingSpec | None,
        serve: ServeSpec | None,
        model_prefix: str | None,
        gpu_prefix: str | None,
        port: int,
        hc: HealthCheckSpec,
    ) -> dict[str, str | int]:
        """node.env values every type of the fleet shares (per-type values are added per launch template)."""
        return {
            "ENVIRONMENT": environment,
            "FLEET": name,
            "REGION": pseudo.REGION,
            "ASG_NAME": self.group_name,
            "ARTIFACTS_BUCKET": bucket,
            "NODE_ROLE": "serve",
            "SERVE_MODE": "container" if spec is not None else "command",
            "NEURON_MODEL_PREFIX": spec.model.s3_prefix if spec else model_prefix or "",
            "GPU_MODEL_PREFIX": spec.model.s3_prefix if spec else gpu_prefix or model_prefix or "",
            "SERVE_NEURON": serve.neuron if serve else "",
            "SERVE_GPU": (serve.gpu or "") if serve else "",
            "PORT": port,
            "HEALTH_PATH": hc.path,
            "HEALTH_PROTOCOL": hc.protocol,
            "HEALTH_WAIT_SECONDS": self.grace_seconds,
            "STACK_NAME": pseudo.STACK_NAME,
            "SIGNAL_RESOURCE": Stack.of(self).get_logical_id(self.auto_scaling_group),
            "LIFECYCLE_HOOK": lifecycle_values()["LIFECYCLE_HOOK"],
            "NEURON_CAPABILITIES": " ".join(serving.facts()["neuron_capabilities"]),
            "CACHE_LOCK_TIMEOUT": serving.facts()["compiled_cache"]["lock_timeout_seconds"],
            "CACHE_POLL_SECONDS": serving.facts()["compiled_cache"]["wait_poll_seconds"],
            "LNC_FILE": catalog.trainium_facts()["lnc_file"],
        }

    def _type_values(self, instance_type: str, spec_port: int) -> dict[str, str | int]:
        """node.env values of one type: its accelerator count and, with a model, its serving profile."""
        p = self.profiles.get(instance_type)
        lnc = serving.lnc_of(instance_type, self._lnc)
        values: dict[str, str | int] = {"TENSOR_PARALLEL": serving.accelerators(instance_type, lnc), "LNC": lnc or ""}
        if p is None:
            return {**values, "SERVE_IMAGE": "", "SERVE_COMMAND_ARGS": "", "SERVE_ENV": "", "CACHE_PREFIX": "", "MODEL_ID": ""}
        return {
            "TENSOR_PARALLEL": p.tensor_parallel,
            "LNC": p.lnc or "",
            "MODEL_ID": self._model_id,
            "SERVE_IMAGE": self.image_uri(p.image),
            "SERVE_COMMAND_ARGS": " ".join(serving.server_command(p, self._model, spec_port)) if self._model else "",
            "SERVE_ENV": " ".join(f"{k}={v}" for k, v in sorted(p.env.items())),
            "CACHE_PREFIX": p.cache_key or "",
        }

    # --- launch templates: one per type, each carrying its profile ------------------------------------
    def _launch_templates(
        self,
        group: autoscaling.CfnAutoScalingGroup,
        values: dict[str, str | int],
        nodes: FleetNodesSpec,
        tags: Mapping[str, str] | None,
    ) -> None:
        self.launch_templates: dict[str, AcceleratorLaunchTemplate] = {}
        overrides = []
        for t in self.neuron_types + self.fallback_types:
            prefix = "Neuron" if t in self.neuron_types else "Gpu"
            lt = self._launch_template(f"{prefix}LaunchTemplate-{t.replace('.', '-')}", t, values, nodes, tags)
            self.launch_templates[t] = lt
            overrides.append(
                autoscaling.CfnAutoScalingGroup.LaunchTemplateOverridesProperty(
                    instance_type=t,
                    launch_template_specification=_version_of(lt),
                )
            )
        first = self.launch_templates[self.neuron_types[0]]
        group.mixed_instances_policy = autoscaling.CfnAutoScalingGroup.MixedInstancesPolicyProperty(
            launch_template=autoscaling.CfnAutoScalingGroup.LaunchTemplateProperty(
                # The version current at deploy time: a template change is a group change, which the rolling
                # update carries to every node. Each override names its own type's template.
                launch_template_specification=_version_of(first),
                overrides=overrides,
            ),
            instances_distribution=autoscaling.CfnAutoScalingGroup.InstancesDistributionProperty(
                on_demand_allocation_strategy="prioritized",
                on_demand_base_capacity=0,
                on_demand_percentage_above_base_capacity=100,
            ),
        )

    def _launch_template(
        self, id: str, t: str, values: dict[str, str | int], nodes: FleetNodesSpec, tags: Mapping[str, str] | None
    ) -> AcceleratorLaunchTemplate:
        """The launch template of type ``t``: the fleet's ``values`` with the type's own profile on top."""
        accelerator: Literal["neuron", "gpu"] = "neuron" if t in self.neuron_types else "gpu"
        p = self.profiles.get(t)
        user_data = userdata.render(
            ["observability.sh", "inference-node.sh"],
            {
                **self.observability.userdata_values(accelerator=accelerator),
                **values,
                **self._type_values(t, int(values["PORT"])),
            },
        )
        ami = (
            (nodes.neuron_ami or AmiSpec.default_for(t, "vllm-serving"))
            if accelerator == "neuron"
            else (nodes.gpu_ami or AmiSpec.default_for(t))
        )
        return AcceleratorLaunchTemplate(
            self,
            id,
            instance_type=t,
            ami=ami,
            security_group_ids=[self.security_group.security_group_id],
            user_data=user_data,
            role=self.role,
            root_volume_gib=nodes.root_volume_gib or (p.root_volume_gib if p else None),
            tags={**(tags or {}), "neuronkit:pool": self.pool},
            efa=False,  # inference nodes run no collectives across nodes
        )

    # --- compile before the rollout: a one-node group per new compiled-artifact key --------------------
    def _compile_groups(
        self,
        group: autoscaling.CfnAutoScalingGroup,
        values: dict[str, str | int],
        nodes: FleetNodesSpec,
        subnet_ids: Mapping[str, str],
        topic_arn: str | None,
        tags: Mapping[str, str] | None,
    ) -> None:
        """Per Neuron type with a compiled-artifact key, a group that compiles the key before the fleet changes.

        The group's logical ID and name carry a digest of the key, so a new key (model, release, type,
        parallelism, limits) is a new group: CloudFormation creates it, and its CreationPolicy waits for its
        one node to signal that the key is in the cache (compiled and published, or found there). The
        fleet's group depends on it, so the rolling update starts only then and its nodes only download.
        The node then leaves its group (terminating itself and decrementing the desired capacity to 0);
        after the update CloudFormation deletes the old key's group. An unchanged key keeps its group.
        """
        self.compile_groups: dict[str, autoscaling.CfnAutoScalingGroup] = {}
        if not self._precompile:
            return
        stack = Stack.of(self)
        for t in self.neuron_types:
            key = self.profiles[t].cache_key if t in self.profiles else None
            if not key:
                continue
            slug = f"{t.replace('.', '-')}-{hashlib.sha256(key.encode()).hexdigest()[:8]}"
            name = f"{self.group_name}-compile-{slug}"
            compile_group = autoscaling.CfnAutoScalingGroup(
                self,
                f"Compile-{slug}",
                auto_scaling_group_name=name,
                # One node at creation; it leaves with its desired capacity, so the group then holds none.
                min_size="0",
                max_size="1",
                desired_capacity="1",
                vpc_zone_identifier=list(subnet_ids.values()),
                notification_configurations=notifications(topic_arn),
                tags=group_tags({**(tags or {}), "neuronkit:pool": self.pool, "neuronkit:compile": key}),
            )
            # Boot (pull, download, load), the longest compile the lock allows, then the upload of the artifacts.
            cache = serving.facts()["compiled_cache"]
            work = self.profiles[t].boot_seconds + cache["lock_timeout_seconds"] + cache["publish_seconds"]
            signal_seconds = min(work, _MAX_CREATION_SIGNAL_SECONDS)
            compile_group.cfn_options.creation_policy = CfnCreationPolicy(
                resource_signal=CfnResourceSignal(count=1, timeout=durations.seconds(signal_seconds).to_iso_string())
            )
            # A later update of this group (same key, e.g. a changed boot script) keeps its size: 0 after the node left.
            compile_group.cfn_options.update_policy = CfnUpdatePolicy(
                auto_scaling_scheduled_action=CfnAutoScalingScheduledAction(ignore_unmodified_group_size_properties=True)
            )
            compile_group.cfn_options.metadata = {
                COMPILE_METADATA_KEY: {"pool": self.pool, "instance_type": t, "cache_key": key, "group": self.group_name}
            }
            compile_values = {
                **values,
                "NODE_ROLE": "compile",
                "ASG_NAME": name,
                "SIGNAL_RESOURCE": stack.get_logical_id(compile_group),
                "LIFECYCLE_HOOK": "",
            }
            lt = self._launch_template(
                f"CompileLaunchTemplate-{slug}", t, compile_values, nodes, {**(tags or {}), "neuronkit:compile": key}
            )
            compile_group.launch_template = _version_of(lt)
            group.node.add_dependency(compile_group)
            self.compile_groups[t] = compile_group
        self._grant_leaving(sorted(g.auto_scaling_group_name or "" for g in self.compile_groups.values()))

    def _grant_leaving(self, names: list[str]) -> None:
        """A compile node may terminate itself in its compile group (and lower its desired capacity), nothing more."""
        if not names:
            return
        arns = [group_arn(self, n) for n in names]
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="LeaveCompileGroup", actions=["autoscaling:TerminateInstanceInAutoScalingGroup"], resources=arns
            )
        )
        for arn, name in zip(arns, names, strict=True):
            acknowledge_group_arn(self.role, arn, f"the compile group {name}")

    # --- updates: CloudFormation's rolling update, waiting for each new node's signal -----------------
    def _update_policy(self, group: autoscaling.CfnAutoScalingGroup, max_size: int, min_healthy_percentage: int) -> None:
        # Chosen over an instance refresh (docs/inference.md): the rolling update replaces every node, waits
        # until each new one serves (cfn signal), rolls the stack back when a batch fails, and launches by
        # priority, so an update also returns to Neuron.
        batch = max(1, math.floor(max_size * (100 - min_healthy_percentage) / 100))
        group.cfn_options.update_policy = CfnUpdatePolicy(
            auto_scaling_rolling_update=CfnAutoScalingRollingUpdate(
                min_active_instances_percent=min_healthy_percentage,
                max_batch_size=batch,
                wait_on_resource_signals=True,
                min_successful_instances_percent=100,
                pause_time=durations.seconds(min(self.grace_seconds, _MAX_PAUSE_SECONDS)).to_iso_string(),
                suspend_processes=_SUSPEND_DURING_UPDATE,
            ),
            # Deploys keep the sizes that target tracking and the schedules set.
            auto_scaling_scheduled_action=CfnAutoScalingScheduledAction(ignore_unmodified_group_size_properties=True),
        )

    # --- scaling --------------------------------------------------------------------------------------
    def _scaling(
        self,
        group: autoscaling.CfnAutoScalingGroup,
        load_balancer: str,
        requests_per_target: int,
        scheduled_actions: Sequence[ScheduleSpec],
    ) -> None:
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

    def _rebalancer(
        self, environment: str, name: str, namespace: str, every_minutes: int | None, group: autoscaling.CfnAutoScalingGroup
    ) -> None:
        self.rebalancer: Rebalancer | None = None
        if self.fallback_types and every_minutes is not None:
            self.rebalancer = Rebalancer(
                self,
                "Rebalancer",
                environment=environment,
                pool=name,
                group_name=self.group_name,
                neuron_types=self.neuron_types,
                fallback_types=self.fallback_types,
                namespace=namespace,
                every_minutes=every_minutes,
            )
            # The schedule starts once the group exists (the function itself needs nothing of it at deploy).
            self.rebalancer.rule.node.add_dependency(group)

    def grant_model_read(self, bucket: str, prefixes: Sequence[str]) -> None:
        """Let the nodes list and read these prefixes of ``bucket`` (and nothing else of it)."""
        bucket_arn = f"arn:{pseudo.PARTITION}:s3:::{bucket}"
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
        acknowledge_each(
            self.role, {iam5(resource): "read the fleet's model artifacts under this prefix only" for resource in objects}
        )

    @staticmethod
    def _validate(
        *,
        name: str,
        nodes: FleetNodesSpec,
        subnet_ids: Mapping[str, str],
        serving: ServingSpec | None,
        serve: ServeSpec | None,
        model_s3_prefix: str | None,
        load_balancer: str,
        port: int,
        health_check: HealthCheckSpec,
        min_healthy_percentage: int,
    ) -> None:
        # The types and sizes are the FleetNodesSpec's checks, made when the spec is.
        neuron_types, fallback_types = nodes.neuron_types, nodes.fallback_types
        if (serving is None) == (serve is None):
            raise ValueError(f"{name}: give serving (the kit's vLLM containers) or serve (your own commands), one of them")
        if serve is not None and not model_s3_prefix:
            raise ValueError(f"{name}: model_s3_prefix is required with serve")
        if serving is not None and neuron_types and serving.neuron_release is None and serving.neuron_image is None:
            raise ValueError(f"{name}: serving.neuron_release (or neuron_image) is required with Neuron types")
        if fallback_types and serve is not None and not serve.gpu:
            raise ValueError(f"{name}: serve.gpu is required with fallback_types (the server command on GPU nodes)")
        if len(subnet_ids) < 2:
            raise ValueError(f"{name}: subnet_ids: a fleet spans at least two AZ IDs, got {len(subnet_ids)}")
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


def _version_of(lt: AcceleratorLaunchTemplate) -> autoscaling.CfnAutoScalingGroup.LaunchTemplateSpecificationProperty:
    template_id, version = lt.id_and_latest_version
    return autoscaling.CfnAutoScalingGroup.LaunchTemplateSpecificationProperty(launch_template_id=template_id, version=version)
