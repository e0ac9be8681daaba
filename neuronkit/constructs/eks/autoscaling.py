"""Scaling on demand on EKS: Cluster Autoscaler and the KEDA operator (cluster-wide), and a fleet's ScaledObject.

Charts go through ``aws_eks_v2.HelmChart`` at the catalog's pins (``neuronkit/catalog/eks.yaml``: ``node_autoscaler``,
``keda``), on the system node group, each with a role by pod identity of the least policy its documents give.
Manifests come from :mod:`neuronkit.kubernetes.autoscaler` and :mod:`neuronkit.kubernetes.keda`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_elasticloadbalancingv2 as elbv2
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct

from neuronkit.constructs import pseudo
from neuronkit.constructs.compliance import acknowledge, acknowledge_each
from neuronkit.constructs.eks.adopt import adopting_manifest
from neuronkit.constructs.eks.cluster import EksClusterLike
from neuronkit.constructs.eks.workloads import pod_identity, pod_role
from neuronkit.kubernetes import autoscaler, keda, pod_security


@dataclass(frozen=True)
class ScaledGroup:
    """An Auto Scaling group Cluster Autoscaler may resize (a node group's, named by EKS: a token is fine), between
    ``min_size`` and ``max_size``."""

    name: str
    min_size: int
    max_size: int

    def __post_init__(self) -> None:
        if not 0 <= self.min_size <= self.max_size or self.max_size < 1:
            raise ValueError(
                f"{self.name}: sizes min {self.min_size}, max {self.max_size} must satisfy 0 <= min <= max, max >= 1"
            )


@dataclass(frozen=True)
class AutoscalingSpec:
    """``environment`` names the roles; ``node_autoscaler`` installs Cluster Autoscaler (default on), ``keda`` the KEDA
    operator (default on). ``groups``: the only groups the autoscaler resizes, and its role may change (the kit passes
    its inference fleets' node groups); empty, it discovers every group EKS tags for the cluster and its role may
    change any of them. The Kubernetes version is the cluster's (its spec): the autoscaler's pin follows it."""

    environment: str
    node_autoscaler: bool = True
    keda: bool = True
    groups: Sequence[ScaledGroup] = ()


class ClusterAutoscaling(Construct):
    """Cluster Autoscaler (``autoscaler_chart``, role ``autoscaler_role``) and the KEDA operator (``keda_chart``, role
    ``keda_role``), each on the system node group with a pod identity association.

    Cluster Autoscaler resizes the groups of ``spec.groups`` only (its role may change those and no other), or,
    without them, discovers the node groups by the tags EKS puts on their Auto Scaling groups
    (``k8s.io/cluster-autoscaler/enabled`` and ``k8s.io/cluster-autoscaler/<cluster>``) and may change only groups
    tagged with this cluster's name; it reads what the autoscaler's AWS README lists. KEDA's operator role may call ``cloudwatch:GetMetricData`` and nothing else. ``chart_versions`` (chart ->
    pinned version) feeds the reports.
    """

    def __init__(self, scope: Construct, id: str, *, cluster: EksClusterLike, spec: AutoscalingSpec) -> None:
        super().__init__(scope, id)
        self.spec = spec
        self._cluster = cluster
        self.chart_versions: dict[str, str] = {}
        problems = autoscaler.version_problems(cluster.spec.version)
        if spec.node_autoscaler and problems:
            raise ValueError(f"node_autoscaler: {problems[0]}; pin one in neuronkit/catalog/eks.yaml or use a pinned version")
        self.autoscaler_chart = self._autoscaler() if spec.node_autoscaler else None
        self.keda_chart = self._keda() if spec.keda else None

    def _pod_identity(self, id: str, namespace: str, service_account: str, role: iam.IRole) -> eks.CfnPodIdentityAssociation:
        return pod_identity(
            self, id, cluster=self._cluster.cluster, namespace=namespace, service_account=service_account, role=role
        )

    def _autoscaler(self) -> eks.HelmChart:
        f = autoscaler.facts()
        name = self._cluster.spec.name
        self.autoscaler_role = pod_role(self, "AutoscalerRole", f"{self.spec.environment}: Cluster Autoscaler")
        self.autoscaler_role.add_to_policy(iam.PolicyStatement(sid="Discover", actions=list(f["read_actions"]), resources=["*"]))
        prefix = f"arn:{pseudo.PARTITION}:autoscaling:{pseudo.REGION}:{pseudo.ACCOUNT_ID}:autoScalingGroup:*"
        groups = list(self.spec.groups)
        reasons = {
            "AwsSolutions-IAM5[Resource::*]": "the describe calls Cluster Autoscaler makes have no resource-level "
            "permissions (its AWS README's policy)"
        }
        if groups:
            # The autoscaler's "Minimal IAM Permissions Policy": writes on the named groups only.
            arns = [f"{prefix}:autoScalingGroupName/{g.name}" for g in groups]
            statement = iam.PolicyStatement(sid="ScaleOwnGroups", actions=list(f["write_actions"]), resources=arns)
            for arn in arns:
                reasons[f"AwsSolutions-IAM5[Resource::{arn}]"] = "a node group's own Auto Scaling group; the * is its id"
        else:
            # EKS tags its managed node groups' Auto Scaling groups for the autoscaler (k8s.io/cluster-autoscaler/
            # <cluster>): only groups carrying this cluster's tag, whatever its value.
            statement = iam.PolicyStatement(
                sid="ScaleOwnGroups",
                actions=list(f["write_actions"]),
                resources=[prefix],
                conditions={"Null": {f"autoscaling:ResourceTag/k8s.io/cluster-autoscaler/{name}": "false"}},
            )
            reasons[
                "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:autoscaling:<AWS::Region>:<AWS::AccountId>:autoScalingGroup:*]"
            ] = (
                "EKS names the node groups' Auto Scaling groups; SetDesiredCapacity and "
                "TerminateInstanceInAutoScalingGroup are limited to groups tagged k8s.io/cluster-autoscaler/<cluster>"
            )
        self.autoscaler_role.add_to_policy(statement)
        acknowledge_each(self.autoscaler_role, reasons)
        version = self._cluster.spec.version
        chart_version = str(autoscaler.pin(version)["chart_version"])
        chart = eks.HelmChart(
            self,
            "AutoscalerChart",
            cluster=self._cluster.cluster,
            repository=str(f["repository"]),
            chart=str(f["chart"]),
            version=chart_version,
            release=str(f["chart"]),  # named after its chart: preflight knows the kit's release by it
            namespace=str(f["namespace"]),
            values=autoscaler.values(
                cluster_name=name,
                region=Stack.of(self).region,
                kubernetes_version=version,
                groups=[(g.name, g.min_size, g.max_size) for g in groups],
            ),
        )
        chart.node.add_dependency(
            self._pod_identity("AutoscalerPodIdentity", str(f["namespace"]), str(f["service_account"]), self.autoscaler_role)
        )
        self.chart_versions[str(f["chart"])] = chart_version
        return chart

    def _keda(self) -> eks.HelmChart:
        f = keda.facts()
        self.keda_role = pod_role(self, "KedaRole", f"{self.spec.environment}: KEDA operator (CloudWatch triggers)")
        self.keda_role.add_to_policy(iam.PolicyStatement(sid="ReadMetrics", actions=list(f["actions"]), resources=["*"]))
        acknowledge(
            self.keda_role, "AwsSolutions-IAM5[Resource::*]", "cloudwatch:GetMetricData has no resource-level permissions"
        )
        # The namespace is the kit's, labelled before the chart's pods exist (Helm's createNamespace makes it bare).
        # Adopted: Create runs `kubectl apply` over the namespace Helm created in an environment deployed before (or
        # the user's own), and it is retained, never deleted (constructs/eks/adopt.py; docs/eks.md, "Pod Security").
        self.keda_namespace = adopting_manifest(
            self, "KedaNamespace", cluster=self._cluster.cluster,
            manifest=[pod_security.chart_namespace(str(f["namespace"]), str(f["pod_security"]))],
        )  # fmt: skip
        chart = eks.HelmChart(
            self,
            "KedaChart",
            cluster=self._cluster.cluster,
            repository=str(f["repository"]),
            chart=str(f["chart"]),
            version=str(f["version"]),
            release=str(f["chart"]),  # named after its chart: preflight knows the kit's release by it
            namespace=str(f["namespace"]),
            create_namespace=False,
            values=keda.chart_values(),
        )
        chart.node.add_dependency(self.keda_namespace)
        chart.node.add_dependency(
            self._pod_identity("KedaPodIdentity", str(f["namespace"]), str(f["service_account"]), self.keda_role)
        )
        self.chart_versions[str(f["chart"])] = str(f["version"])
        return chart


class FleetScaling(Construct):
    """A fleet's Neuron Deployment scaled by KEDA on its target group's requests: a TriggerAuthentication (the KEDA
    operator's own role) and a ScaledObject (``manifest``; documents in ``documents``).

    ``requests_per_replica_per_minute``: what one Neuron replica serves (the fleet's ``requests_per_target``);
    ``min_replicas``/``max_replicas`` bound the Neuron Deployment. ``after``: constructs the manifest waits for (the
    KEDA chart, whose CRDs it needs, and the Deployment it scales).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: eks.ICluster,
        fleet: str,
        target_group: elbv2.IApplicationTargetGroup,
        load_balancer: elbv2.IApplicationLoadBalancer,
        requests_per_replica_per_minute: int,
        min_replicas: int,
        max_replicas: int,
        after: Sequence[IConstruct] = (),
    ) -> None:
        super().__init__(scope, id)
        self.documents: list[dict[str, Any]] = [
            keda.trigger_authentication(fleet),
            keda.scaled_object(
                fleet=fleet,
                region=Stack.of(self).region,
                load_balancer_full_name=load_balancer.load_balancer_full_name,
                target_group_full_name=target_group.target_group_full_name,
                requests_per_replica_per_minute=requests_per_replica_per_minute,
                min_replicas=min_replicas,
                max_replicas=max_replicas,
            ),
        ]
        self.manifest = eks.KubernetesManifest(self, "ScaledObject", cluster=cluster, manifest=self.documents, overwrite=True)
        for construct in after:
            self.manifest.node.add_dependency(construct)


__all__ = ["AutoscalingSpec", "ClusterAutoscaling", "FleetScaling", "ScaledGroup"]
