"""Serving on EKS: a fleet's model behind a CloudFormation-owned internal ALB, from the Auto Scaling path's profile.

:class:`LoadBalancerController` installs the AWS Load Balancer Controller once per cluster (pinned chart, on the
system node group, its documented policy by pod identity) and the serving namespace labelled for readiness gates.
:class:`EksServingFleet` is one fleet: the ALB, listener and IP target group of the Auto Scaling path's helpers
(``load_balancing.application_load_balancer``), an ECR pull-through cache the nodes pull through, the pods' role by
pod identity (the model prefix read, the model's compiled-artifact cache read/write; nodes get no S3 rights for it),
and the manifests of :mod:`neuronkit.kubernetes.serving` (Service, TargetGroupBinding, Deployments, PDBs, compile
Jobs). docs/eks.md ("Serving") explains the choices.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from aws_cdk import CfnResource, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_ecr as ecr
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from constructs import Construct

from neuronkit.catalog import serving
from neuronkit.constructs import durations, pseudo, values
from neuronkit.constructs.compliance import acknowledge, acknowledge_each, iam5
from neuronkit.constructs.eks.adopt import adopting_manifest
from neuronkit.constructs.eks.cluster import EksClusterLike
from neuronkit.constructs.eks.pools import require_pools
from neuronkit.constructs.eks.workloads import pod_identity, pod_role
from neuronkit.constructs.load_balancing import access_logs_bucket, application_load_balancer, client_ingress
from neuronkit.constructs.serving_specs import HealthCheckSpec, ServingSpec, TlsSpec
from neuronkit.kubernetes import load_balancer_controller as lbc
from neuronkit.kubernetes import scheduling
from neuronkit.kubernetes import serving as manifests


class LoadBalancerController(Construct):
    """The AWS Load Balancer Controller chart (``chart``, pinned in catalog/eks.yaml), its pod identity ``role`` with
    the controller's documented policy, and the serving namespace manifest (``namespace``), labelled so that the
    controller injects target-health readiness gates into serving pods."""

    def __init__(self, scope: Construct, id: str, *, cluster: EksClusterLike, environment: str, install: bool = True) -> None:
        """``install`` false: the cluster runs the controller already (TargetGroupBinding elbv2.k8s.aws/v1beta1); only
        the serving namespace is applied (``chart`` is None)."""
        super().__init__(scope, id)
        facts = lbc.chart_facts()
        self.version = str(facts["version"])
        self.namespace = eks.KubernetesManifest(
            self, "Namespace", cluster=cluster.cluster, manifest=[manifests.namespace()], removal_policy=RemovalPolicy.DESTROY
        )
        self.chart: eks.HelmChart | None = None
        if install:
            self._install(cluster, environment, facts)

    def _install(self, cluster: EksClusterLike, environment: str, facts: Mapping[str, Any]) -> None:
        self.role = pod_role(self, "Role", f"{environment}: AWS Load Balancer Controller {facts['app_version']}")
        document = lbc.iam_policy_document()
        policy = iam.Policy(self, "Policy", document=iam.PolicyDocument.from_json(document["policy"]), roles=[self.role])
        acknowledge_each(policy, _policy_reasons(document["policy"]))
        association = pod_identity(
            self, "PodIdentity", cluster=cluster.cluster, namespace=str(facts["namespace"]),
            service_account=str(facts["service_account"]), role=self.role,
        )  # fmt: skip
        self.chart = eks.HelmChart(
            self,
            "Chart",
            cluster=cluster.cluster,
            repository=str(facts["repository"]),
            chart=str(facts["chart"]),
            version=self.version,
            release=str(facts["chart"]),  # named after its chart: preflight knows the kit's release by it
            namespace=str(facts["namespace"]),
            values=lbc.values(cluster_name=cluster.spec.name, region=pseudo.REGION, vpc_id=cluster.cluster.vpc.vpc_id),
            # Helm --wait: the fleets' TargetGroupBindings go through the controller's webhooks (failurePolicy Fail),
            # which answer only once its pods run; CDK's apply retries only i/o timeouts (docs/eks.md, "Serving").
            wait=True,
            timeout=durations.minutes(int(facts["install_timeout_minutes"])),
        )
        self.chart.node.add_dependency(association)
        self.chart.node.add_dependency(policy)


def _policy_reasons(policy: Mapping[str, Any]) -> dict[str, str]:
    """cdk-nag IAM5 findings of the controller's documented policy, each with its reason."""
    reasons: dict[str, str] = {}
    for statement in policy["Statement"]:
        resources = statement.get("Resource", [])
        for r in [resources] if isinstance(resources, str) else resources:
            if "*" in r:
                reasons[f"AwsSolutions-IAM5[Resource::{r}]"] = (
                    "the AWS Load Balancer Controller's documented policy (kubernetes-sigs/aws-load-balancer-controller "
                    "docs/install/iam_policy.json at the pinned appVersion), unchanged; its writes are conditioned on the "
                    "controller's elbv2.k8s.aws/cluster tags"
                )
        actions = statement.get("Action", [])
        for a in [actions] if isinstance(actions, str) else actions:
            if a.endswith("*"):
                reasons[f"AwsSolutions-IAM5[Action::{a}]"] = "the controller's documented policy, unchanged"
    return reasons


@dataclass(frozen=True)
class GpuFallback:
    """One GPU fallback type of a fleet on EKS and the node group its Deployment runs on."""

    instance_type: str
    pool: str


@dataclass(frozen=True)
class EksServingSpec:
    """One fleet on EKS: ``serving`` (the model, release, overrides and images: the Auto Scaling path's ServingSpec),
    the Neuron type and node group (``neuron_type``, ``neuron_pool``), the GPU fallback (``gpu_type``, ``gpu_pool``,
    or None; or ``gpu_fallbacks``, several GPU types in priority order, each on its own node group: the spill fills
    them in that order), ``replicas`` of the Neuron Deployment (None: a scaler such as :class:`FleetScaling` owns it;
    the GPU ones start at zero and the spill controller owns them), the port, health check, TLS and idle
    timeout (default the catalog's ALB default, 600 s)."""

    name: str
    serving: ServingSpec
    neuron_type: str
    neuron_pool: str
    gpu_type: str | None = None
    gpu_pool: str | None = None
    gpu_fallbacks: tuple[GpuFallback, ...] = ()
    replicas: int | None = 1
    port: int = 8080
    health_check: HealthCheckSpec = field(default_factory=HealthCheckSpec)
    tls: TlsSpec | None = None
    idle_timeout_seconds: int | None = None

    def __post_init__(self) -> None:
        if (self.gpu_type is None) != (self.gpu_pool is None):
            raise ValueError(f"{self.name}: give gpu_type and gpu_pool together (the GPU fallback Deployment)")
        if self.gpu_type is not None and self.gpu_fallbacks:
            raise ValueError(f"{self.name}: give gpu_type/gpu_pool (one GPU type) or gpu_fallbacks (several), not both")
        types = [g.instance_type for g in self.fallbacks]
        if len(set(types)) != len(types):
            raise ValueError(f"{self.name}: gpu_fallbacks names a type twice ({', '.join(types)}); list each once")
        if self.health_check.port is not None and self.health_check.port != self.port:
            raise ValueError(f"{self.name}: health_check.port differs from port; serve both on one port")

    @property
    def fallbacks(self) -> tuple[GpuFallback, ...]:
        """The fleet's GPU fallback types in priority order (``gpu_type`` alone, or ``gpu_fallbacks``)."""
        if self.gpu_type is not None and self.gpu_pool is not None:
            return (GpuFallback(self.gpu_type, self.gpu_pool),)
        return tuple(self.gpu_fallbacks)


class EksServingFleet(Construct):
    """One fleet's model on EKS behind an internal ALB (see the module docstring).

    Public attributes: ``load_balancer`` (elbv2.ApplicationLoadBalancer), ``target_group`` (elbv2.ApplicationTargetGroup,
    IP targets), ``listener_port``, ``load_balancer_security_group``, ``namespace`` (neuronkit-serving),
    ``neuron_deployment`` and ``gpu_deployment`` (names; ``gpu_deployment`` None without a GPU type, else the first
    GPU type's), ``gpu_deployments`` (every GPU type's, in priority order), ``service``
    (name), ``binding`` (the TargetGroupBinding's name, new with each target group), ``pod_role`` (iam.Role, by pod
    identity), ``profiles`` (instance type -> ServingProfile), ``workloads`` (FleetWorkload per Deployment),
    ``documents`` (the re-applied manifests), ``manifest`` (eks.KubernetesManifest: all but the Service and the
    binding, applied after both), ``service_manifest`` and ``binding_manifest``, ``seeds`` and ``template_patches``
    (Deployment name -> the create-once manifest and the template patch of a Deployment a controller owns),
    ``timing`` (preStop and grace from the target group's deregistration delay), ``image_cache``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        environment: str,
        cluster: EksClusterLike,
        controller: LoadBalancerController,
        spec: EksServingSpec,
        vpc: ec2.IVpc,
        subnets: Sequence[ec2.ISubnet],
        artifacts_bucket: str,
        node_roles: Sequence[iam.IRole] = (),
        ingress_cidr: str | None = None,
        access_logs_bucket: s3.IBucket | None = None,
    ) -> None:
        super().__init__(scope, id)
        # Pods of a pool no node group has would stay Pending with nothing to say why (issue 49, "Reuse").
        require_pools(
            f"EksServingFleet {spec.name}", cluster,
            {"neuron_pool": [spec.neuron_pool], "gpu_pool": [g.pool for g in spec.fallbacks]},
        )  # fmt: skip
        self.spec = spec
        self.environment = environment
        self.namespace = scheduling.SERVING_NAMESPACE
        self.service = scheduling.service_name(spec.name)
        self.neuron_deployment = scheduling.neuron_deployment_name(spec.name)
        self.gpu_deployments = scheduling.gpu_deployment_names(spec.name, [g.instance_type for g in spec.fallbacks])
        self.gpu_deployment = self.gpu_deployments[0] if self.gpu_deployments else None
        self._bucket = artifacts_bucket
        self._profiles()
        self.timing = manifests.timing()
        self._security_groups(vpc, cluster, ingress_cidr)
        self._load_balancer(vpc, subnets, access_logs_bucket)
        self._image_cache(node_roles)
        self._pod_role(cluster)
        self._manifests(cluster, controller)

    def _profiles(self) -> None:
        s, spec = self.spec.serving, self.spec
        facts = serving.facts()["load_balancer"]
        self.idle_timeout_seconds = spec.idle_timeout_seconds or int(facts["alb_idle_timeout_default_seconds"])
        types = [spec.neuron_type, *(g.instance_type for g in spec.fallbacks)]
        # The Auto Scaling path's function, with the same inputs: same arguments, environment and key.
        self.profiles = {
            t: serving.fleet_profile(
                s.model, t, s.neuron_release, s.profiles.get(t), lnc=s.lnc, neuron_image=s.neuron_image,
                gpu_image=s.gpu_image, idle_timeout_seconds=self.idle_timeout_seconds,
            )
            for t in types
        }  # fmt: skip

    def _security_groups(self, vpc: ec2.IVpc, cluster: EksClusterLike, cidr: str | None) -> None:
        """Clients -> the balancer -> pods on the serving port. Pods take node addresses (VPC CNI), so the rule goes on
        the cluster security group, which every node's primary interface carries."""
        port = self.spec.port
        self.listener_port = self.spec.tls.port if self.spec.tls else port
        self.load_balancer_security_group = ec2.SecurityGroup(
            self, "LoadBalancerSecurityGroup", vpc=vpc, description=f"{self.environment}-{self.spec.name} load balancer",
            allow_all_outbound=False,
        )  # fmt: skip
        client_ingress(self, self.load_balancer_security_group, vpc, cidr, self.listener_port)
        pods = ec2.SecurityGroup.from_security_group_id(self, "ClusterSecurityGroup", cluster.cluster_security_group_id)
        self.load_balancer_security_group.add_egress_rule(pods, values.tcp(port), "Requests and health checks to the pods")
        ec2.CfnSecurityGroupIngress(
            self,
            "PodIngress",
            group_id=cluster.cluster_security_group_id,
            ip_protocol="tcp",
            from_port=port,
            to_port=port,
            source_security_group_id=self.load_balancer_security_group.security_group_id,
            description=f"{self.spec.name}: requests and health checks from its load balancer",
        )

    def _load_balancer(self, vpc: ec2.IVpc, subnets: Sequence[ec2.ISubnet], logs: s3.IBucket | None) -> None:
        logs = access_logs_bucket(self, logs)
        alb, tg, _ = application_load_balancer(
            self, vpc=vpc, subnets=subnets, security_group=self.load_balancer_security_group,
            idle_timeout_seconds=self.idle_timeout_seconds, port=self.spec.port, listener_port=self.listener_port,
            tls=self.spec.tls, health_check=self.spec.health_check, target_type=elbv2.TargetType.IP,
            access_logs_bucket=logs, log_prefix=f"elb/{self.environment}-{self.spec.name}",
            deregistration_delay_seconds=self.timing.deregistration_delay_seconds,
            # Not the Auto Scaling path's "Targets": environments deployed before bindings were named after their target
            # group replace it once, so the renamed binding never meets the old one on the same group (docs/eks.md,
            # "Day two").
            target_group_id="PodTargets",
            # Least outstanding requests: Neuron and GPU pods serve at different speeds behind one target group, and
            # round robin sends the slower side as many requests as the faster ("load_balancing.algorithm.type":
            # round_robin | least_outstanding_requests | weighted_random, ALB user guide, "Edit target group
            # attributes", Routing algorithms). A target attribute, not create-only: no replacement, same binding.
            algorithm=elbv2.TargetGroupLoadBalancingAlgorithmType.LEAST_OUTSTANDING_REQUESTS,
        )  # fmt: skip
        self.load_balancer: elbv2.ApplicationLoadBalancer = alb
        self.target_group: elbv2.ApplicationTargetGroup = tg
        self.load_balancer_full_name = alb.load_balancer_full_name
        self.target_group_full_name = tg.target_group_full_name
        self.dns_name = alb.load_balancer_dns_name

    def _image_cache(self, node_roles: Sequence[iam.IRole]) -> None:
        """Nodes (kubelet) pull the serving and helper images through an ECR pull-through cache of ECR Public, or from
        the file's own registry; the first pull through the rule creates the repository."""
        s = self.spec.serving
        self.image_cache: ecr.CfnPullThroughCacheRule | None = None
        if s.registry is not None:
            self._registry, _, self._registry_prefix = s.registry.partition("/")
            return
        self._registry_prefix = f"{self.environment}-{self.spec.name}"[:30].strip("-")
        self._registry = f"{pseudo.ACCOUNT_ID}.dkr.ecr.{pseudo.REGION}.{pseudo.URL_SUFFIX}"
        self.image_cache = ecr.CfnPullThroughCacheRule(
            self, "ImageCache", ecr_repository_prefix=self._registry_prefix,
            upstream_registry_url=serving.facts()["registry"]["upstream"],
        )  # fmt: skip
        repositories = f"arn:{pseudo.PARTITION}:ecr:{pseudo.REGION}:{pseudo.ACCOUNT_ID}:repository/{self._registry_prefix}/*"
        for i, role in enumerate(node_roles):
            policy = iam.Policy(
                self,
                f"PullThroughCache{i}",
                roles=[role],
                statements=[
                    iam.PolicyStatement(
                        actions=[
                            "ecr:BatchGetImage",
                            "ecr:GetDownloadUrlForLayer",
                            "ecr:BatchCheckLayerAvailability",
                            "ecr:BatchImportUpstreamImage",
                            "ecr:CreateRepository",
                        ],
                        resources=[repositories],
                    )
                ],
            )
            acknowledge(policy, iam5(repositories), "the serving images' repositories under the fleet's cache prefix only")

    def image_uri(self, image: str) -> str:
        if self.image_cache is not None:
            return serving.pull_through_uri(image, self._registry, self._registry_prefix)
        return f"{self._registry}/{self._registry_prefix + '/' if self._registry_prefix else ''}{image.split('/', 1)[1]}"

    def _pod_role(self, cluster: EksClusterLike) -> None:
        """The serving and compile pods' role: list and read the model's prefix, read and write its compiled-artifact
        cache (the compile Job publishes there). Nothing else of the bucket; the nodes get none of it."""
        s = self.spec.serving
        bucket_arn = f"arn:{pseudo.PARTITION}:s3:::{self._bucket}"
        cache = f"{serving.facts()['compiled_cache']['prefix']}{s.model.slug}/"
        self.pod_role = pod_role(
            self, "PodRole", f"{self.environment}-{self.spec.name}: serving pods (model and compiled artifacts)"
        )
        self.pod_role.add_to_policy(
            iam.PolicyStatement(
                sid="ListModel", actions=["s3:ListBucket"], resources=[bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{s.model.s3_prefix}*", f"{cache}*"]}},
            )
        )  # fmt: skip
        model, compiled = f"{bucket_arn}/{s.model.s3_prefix}*", f"{bucket_arn}/{cache}*"
        self.pod_role.add_to_policy(iam.PolicyStatement(sid="ReadModel", actions=["s3:GetObject"], resources=[model]))
        self.pod_role.add_to_policy(
            iam.PolicyStatement(sid="CompiledModelCache", actions=["s3:GetObject", "s3:PutObject"], resources=[compiled])
        )
        acknowledge_each(
            self.pod_role,
            {
                iam5(model): "read the fleet's model weights under this prefix only",
                iam5(compiled): "the compiled artifacts of this fleet's model, keyed by release, engine, type and parallelism",
            },
        )
        self.pod_identity = pod_identity(
            self, "PodIdentity", cluster=cluster.cluster, namespace=self.namespace,
            service_account=manifests.service_account_name(self.spec.name), role=self.pod_role,
        )  # fmt: skip

    def _workload(
        self, t: str, pool: str, replicas: int | None, *, seeded: bool = False, gpu_rank: int = 0
    ) -> manifests.FleetWorkload:
        p = self.profiles[t]
        return manifests.FleetWorkload(
            fleet=self.spec.name, pool=pool, instance_type=t, profile=p, model=self.spec.serving.model,
            image=self.image_uri(p.image), artifacts_image=self.image_uri(str(manifests.eks_facts()["artifacts_image"])),
            bucket=self._bucket, port=self.spec.port, health_path=self.spec.health_check.path, replicas=replicas,
            timing=self.timing, region=Stack.of(self).region, seeded=seeded, gpu_rank=gpu_rank,
            gpu_types=max(1, len(self.spec.fallbacks)),
        )  # fmt: skip

    def _target_group_identity(self) -> dict[str, Any]:
        """What makes CloudFormation replace the target group: its logical ID and its create-only properties
        (``createOnlyProperties`` of the AWS::ElasticLoadBalancingV2::TargetGroup resource schema, as cfn-lint ships it:
        TargetType, ProtocolVersion, Port, Name, VpcId, Protocol, IpAddressType), resolved to their template form."""
        cfn = self.target_group.node.default_child
        assert isinstance(cfn, elbv2.CfnTargetGroup)
        stack = Stack.of(self)
        props = {
            "TargetType": cfn.target_type, "ProtocolVersion": cfn.protocol_version, "Port": cfn.port, "Name": cfn.name,
            "VpcId": cfn.vpc_id, "Protocol": cfn.protocol, "IpAddressType": cfn.ip_address_type,
        }  # fmt: skip
        return {"LogicalId": stack.resolve(cfn.logical_id), **{k: stack.resolve(v) for k, v in props.items()}}

    def _manifests(self, cluster: EksClusterLike, controller: LoadBalancerController) -> None:
        spec = self.spec
        self.workloads = [self._workload(spec.neuron_type, spec.neuron_pool, spec.replicas)]
        for rank, g in enumerate(spec.fallbacks):
            # The spill controller owns the GPU replicas from the start (zero): created once, never re-applied. One
            # Deployment per GPU type, in the file's order (a pod template has one type's device count and profile).
            self.workloads.append(self._workload(g.instance_type, g.pool, 0, seeded=True, gpu_rank=rank))
        self.binding = manifests.target_group_binding_name(spec.name, self._target_group_identity())
        self.documents = manifests.fleet_manifests(
            fleet=spec.name, port=spec.port, target_group_arn=self.target_group.target_group_arn, workloads=self.workloads,
            binding_name=self.binding,
        )  # fmt: skip
        bound = [d for d in self.documents if d["kind"] == "TargetGroupBinding"]
        services = [d for d in self.documents if d["kind"] == "Service"]
        # The Service in a manifest resource of its own, applied first: the controller's pod webhook injects the
        # readiness gate `target-health.elbv2.k8s.aws/<binding>` only into pods created while a TargetGroupBinding
        # whose Service selects them exists ("injects the necessary readiness gate configuration to the pod spec via
        # mutating webhook during pod creation", docs/deploy/pod_readiness_gate.md at v3.5.0). A stable construct id:
        # a new target group never replaces it. On an environment deployed before, it is created before the fleet's
        # manifest is re-applied without the Service: `overwrite` makes that Create a `kubectl apply` (a plain Create
        # runs `kubectl create`, which fails on the existing Service), which adopts it and moves its prune label, so
        # the re-applied manifest's `--prune` no longer selects it. Retained: a rollback's cleanup of that first deploy
        # must not `kubectl delete` the Service the old manifest serves through (constructs/eks/adopt.py).
        self.service_manifest = adopting_manifest(self, "Service", cluster=cluster.cluster, manifest=services)
        self.manifest = eks.KubernetesManifest(
            self, "Manifests", cluster=cluster.cluster,
            manifest=[d for d in self.documents if d not in bound and d not in services],
            removal_policy=RemovalPolicy.DESTROY,
        )  # fmt: skip
        # The binding in a manifest resource of its own, its construct id the binding's name: when the target group is
        # replaced, CloudFormation creates the new binding and deletes the old one. `kubectl apply --prune` (the
        # manifest above) would leave it: without an allowlist kubectl prunes built-in kinds only (review of issue 47).
        self.binding_manifest = eks.KubernetesManifest(
            self, f"Binding-{self.binding}", cluster=cluster.cluster, manifest=bound, removal_policy=RemovalPolicy.DESTROY
        )
        # The controller (its webhook and the TargetGroupBinding CRD) and the labelled namespace come first, and the
        # pods' role before the pods. Then the Service, the binding that names it, and only then the pods (the
        # Deployments and compile Jobs in the manifest; the seeded GPU Deployment after it), so that every serving pod,
        # the first included, carries the readiness gate (review of issue 49). On delete the pods go first, while the
        # binding still deregisters them. An existing controller has no chart here.
        for m in (self.service_manifest, self.manifest, self.binding_manifest):
            if controller.chart is not None:
                m.node.add_dependency(controller.chart)
            m.node.add_dependency(controller.namespace)
        self.manifest.node.add_dependency(self.pod_identity)
        self.binding_manifest.node.add_dependency(self.service_manifest)
        self.manifest.node.add_dependency(self.binding_manifest)
        self._seeded(cluster)

    def _seeded(self, cluster: EksClusterLike) -> None:
        """A Deployment whose replicas a controller owns from the start (the GPU one): created once at its initial
        replicas by a manifest that never changes (``kubectl create``; CloudFormation never updates it), its template
        kept by a JSON patch (``kubectl patch``, re-run whenever the template changes), after the fleet's manifest (the
        Service, binding and config its pods need). docs/eks.md, "Day two"."""
        self.seeds: dict[str, eks.KubernetesManifest] = {}
        self.template_patches: dict[str, eks.KubernetesPatch] = {}
        for w in (w for w in self.workloads if w.seeded):
            # The first GPU type keeps the ids it always had (SeedGpu, TemplateGpu): adding a type replaces nothing.
            further = "".join(p.capitalize() for p in scheduling.type_slug(w.instance_type).split("-")) if w.gpu_rank else ""
            suffix = w.accelerator.capitalize() + further
            seed = eks.KubernetesManifest(
                self, f"Seed{suffix}", cluster=cluster.cluster, manifest=[manifests.seed_deployment(w)], overwrite=False,
                removal_policy=RemovalPolicy.DESTROY,
            )  # fmt: skip
            seed.node.add_dependency(self.manifest)
            patch = eks.KubernetesPatch(
                self, f"Template{suffix}", cluster=cluster.cluster, resource_name=f"deployment/{w.name}",
                resource_namespace=self.namespace, patch_type=eks.PatchType.JSON, apply_patch={}, restore_patch={},
            )  # fmt: skip
            # The L2 types a patch as a JSON object; a JSON patch (RFC 6902) is a list: set both on the L1. Deleting
            # the stack re-applies the same patch before the seed deletes the Deployment (a no-op).
            ops = Stack.of(self).to_json_string(manifests.template_patch(w))
            cfn = patch.node.default_child.node.default_child  # type: ignore[union-attr]
            assert isinstance(cfn, CfnResource)
            cfn.add_property_override("ApplyPatchJson", ops)
            cfn.add_property_override("RestorePatchJson", ops)
            patch.node.add_dependency(seed)
            self.seeds[w.name], self.template_patches[w.name] = seed, patch


__all__ = ["EksServingFleet", "EksServingSpec", "GpuFallback", "LoadBalancerController"]
