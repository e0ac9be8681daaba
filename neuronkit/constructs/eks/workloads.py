"""What runs on the nodes of the kit's EKS cluster: the Neuron Helm chart, the EFA device plugin, the NVIDIA device
plugin (with GPU node groups), the FSx for Lustre CSI driver and the environment's Lustre volume, each pinned in
``neuronkit/catalog/eks.yaml``.

Helm charts go through ``aws_eks_v2.HelmChart`` (the kubectl handler pulls the pinned version when the stack
deploys; nothing is fetched at synth); values and manifests come from :mod:`neuronkit.kubernetes`. Pod roles are
pod identity associations (``CfnPodIdentityAssociation``) with roles trusting ``pods.eks.amazonaws.com``.
CDK's bundled device-plugin manifest is never used: the kit adds no Auto Scaling group capacity.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from aws_cdk import RemovalPolicy, Stack
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from neuronkit import catalog
from neuronkit.constructs import pseudo, values
from neuronkit.constructs.compliance import acknowledge, acknowledge_each
from neuronkit.constructs.eks.adopt import adopting_manifest
from neuronkit.constructs.eks.cluster import EksClusterLike, addon_placement
from neuronkit.constructs.eks.pools import require_pools
from neuronkit.kubernetes import efa_chart, lustre, neuron_chart, nvidia_chart, scheduling


@dataclass(frozen=True)
class LustreVolume:
    """The environment's file system as the storage stack gives it (tokens are fine)."""

    file_system_id: str
    dns_name: str
    mount_name: str
    size_gib: int


@dataclass(frozen=True)
class WorkloadsSpec:
    """``neuron_releases``: the Neuron releases of the pools (the chart is the newest one's, see
    :func:`neuron_chart.chart_version`); ``options``: device plugin or DRA, node recovery, the Neuron groups' taints
    (the Neuron taint by default); ``efa``: install the EFA device plugin (only when a node group carries EFA);
    ``efa_taints``: the taints of the EFA node groups (default: the Neuron and GPU taints); ``lustre``: the static
    volume. The chart's Deployments select the system node group and node recovery gets the stack's region.
    ``gpu_pools``: the pool names (``neuronkit.io/pool`` labels) of the GPU node groups; with at least one, the NVIDIA
    device plugin runs on those groups only (default none: no NVIDIA chart); ``gpu_taints``: their taints (default:
    the GPU taint), which it tolerates and nothing else."""

    environment: str
    neuron_releases: Sequence[str]
    options: neuron_chart.NeuronChartOptions = neuron_chart.NeuronChartOptions(taints=(scheduling.NEURON_TAINT,))
    efa: bool = True
    efa_taints: Sequence[neuron_chart.Taint] = (scheduling.NEURON_TAINT, scheduling.GPU_TAINT)
    lustre: LustreVolume | None = None
    gpu_pools: Sequence[str] = ()
    gpu_taints: Sequence[neuron_chart.Taint] = (scheduling.GPU_TAINT,)
    neuron: bool = True
    nvidia: bool = True
    fsx_csi: bool = True


def pod_role(scope: Construct, id: str, description: str) -> iam.Role:
    """A role only pod identity assumes (``pods.eks.amazonaws.com``, with session tags)."""
    role = iam.Role(scope, id, description=description, assumed_by=values.service_principal("pods.eks.amazonaws.com"))
    trust = role.assume_role_policy
    assert trust is not None
    trust.add_statements(
        iam.PolicyStatement(actions=["sts:TagSession"], principals=[values.service_principal("pods.eks.amazonaws.com")])
    )
    return role


def pod_identity(
    scope: Construct, id: str, *, cluster: Any, namespace: str, service_account: str, role: iam.IRole
) -> eks.CfnPodIdentityAssociation:
    """Pod identity: ``service_account`` in ``namespace`` of ``cluster`` (an eks_v2 cluster) assumes ``role`` (a
    :func:`pod_role`), the one mechanism for pod roles on the kit's clusters."""
    return eks.CfnPodIdentityAssociation(
        scope, id, cluster_name=cluster.cluster_name, namespace=namespace, service_account=service_account,
        role_arn=role.role_arn,
    )  # fmt: skip


class NeuronWorkloads(Construct):
    """The Neuron chart (``neuron_chart``), the EFA plugin chart (``efa_chart``), the NVIDIA device plugin chart
    (``nvidia_chart``, None without GPU node groups), the FSx CSI add-on (``fsx_addon``) and the Lustre volume
    manifest (``lustre_manifest``); the roles ``npd_role`` and ``fsx_role``; ``chart_versions`` (chart or add-on
    name -> pinned version) for the reports."""

    def __init__(self, scope: Construct, id: str, *, cluster: EksClusterLike, spec: WorkloadsSpec) -> None:
        super().__init__(scope, id)
        # The NVIDIA plugin's affinity names GPU pools: each must be a node group of the cluster (issue 49).
        require_pools("NeuronWorkloads", cluster, {"gpu_pools": spec.gpu_pools})
        self.spec = spec
        self._cluster = cluster
        self.chart_versions: dict[str, str] = {}
        self.neuron_chart: eks.HelmChart | None = None
        if spec.neuron:  # false: the cluster runs the Neuron chart already (eks.components.neuron: existing)
            self._neuron()
        self.efa_chart = self._efa() if spec.efa else None
        # EKS AL2023 NVIDIA images ship no device plugin: without it no GPU node advertises nvidia.com/gpu.
        self.nvidia_chart = self._nvidia() if spec.gpu_pools and spec.nvidia else None
        self.fsx_addon: eks.Addon | None = None
        self.lustre_manifest: eks.KubernetesManifest | None = None
        if spec.lustre is not None:
            if spec.fsx_csi:
                self._fsx()
            self._volume(spec.lustre)

    def _neuron(self) -> None:
        facts = neuron_chart.chart_facts()
        version = neuron_chart.chart_version(self.spec.neuron_releases)
        given = self.spec.options
        options = dataclasses.replace(
            given,
            region=given.region or Stack.of(self).region,
            system_node_selector=given.system_node_selector or scheduling.system_node_selector(),
        )
        self.neuron_values: dict[str, Any] = neuron_chart.values(options)
        # The node problem detector's namespace, before the chart (the chart does not create it; see npd_namespace).
        # Adopted and retained: an earlier deploy, or the user's own cluster, may hold it (constructs/eks/adopt.py).
        self.npd_namespace = adopting_manifest(
            self,
            "NpdNamespace",
            cluster=self._cluster.cluster,
            manifest=[neuron_chart.npd_namespace(release="neuron", release_namespace=str(facts["namespace"]))],
        )
        self.neuron_chart = eks.HelmChart(
            self,
            "NeuronChart",
            cluster=self._cluster.cluster,
            repository=str(facts["repository"]),
            chart=str(facts["chart"]),
            version=version,
            release="neuron",
            namespace=str(facts["namespace"]),
            values=self.neuron_values,
        )
        self.neuron_chart.node.add_dependency(self.npd_namespace)
        self.chart_versions[str(facts["chart"])] = version
        npd = catalog.eks_facts()["node_problem_detector"]
        self.npd_role = pod_role(self, "NpdRole", f"{self.spec.environment}: Neuron node problem detector and recovery")
        self._npd_policy(str(npd["cloudwatch_namespace"]))
        self.neuron_chart.node.add_dependency(self._pod_identity("NpdPodIdentity", npd, self.npd_role))

    def _pod_identity(self, id: str, facts: Mapping[str, Any], role: iam.IRole) -> eks.CfnPodIdentityAssociation:
        """Pod identity: the catalog's namespace and service account assume ``role``."""
        return pod_identity(
            self, id, cluster=self._cluster.cluster, namespace=str(facts["namespace"]),
            service_account=str(facts["service_account"]), role=role,
        )  # fmt: skip

    def _npd_policy(self, namespace: str) -> None:
        """Node recovery marks the node's instance unhealthy in its (EKS-owned) group: only groups of this cluster."""
        cluster_name = self._cluster.spec.name
        self.npd_role.add_to_policy(
            iam.PolicyStatement(
                sid="MarkUnhealthy",
                actions=["autoscaling:SetInstanceHealth"],
                resources=[f"arn:{pseudo.PARTITION}:autoscaling:{pseudo.REGION}:{pseudo.ACCOUNT_ID}:autoScalingGroup:*"],
                conditions={"StringEquals": {"autoscaling:ResourceTag/eks:cluster-name": cluster_name}},
            )
        )
        self.npd_role.add_to_policy(
            iam.PolicyStatement(
                sid="Describe", actions=["autoscaling:DescribeAutoScalingInstances", "ec2:DescribeInstances"], resources=["*"]
            )
        )
        self.npd_role.add_to_policy(
            iam.PolicyStatement(
                sid="Metrics",
                actions=["cloudwatch:PutMetricData"],
                resources=["*"],
                conditions={"StringEquals": {"cloudwatch:namespace": namespace}},
            )
        )
        reasons = {
            "AwsSolutions-IAM5[Resource::arn:<AWS::Partition>:autoscaling:<AWS::Region>:<AWS::AccountId>:"
            "autoScalingGroup:*]": "EKS names the node groups' Auto Scaling groups; SetInstanceHealth is limited to "
            "groups tagged with this cluster's name (eks:cluster-name)",
            "AwsSolutions-IAM5[Resource::*]": "DescribeAutoScalingInstances and DescribeInstances have no resource-level "
            "permissions; PutMetricData is limited to the NeuronHealthCheck namespace by condition",
        }
        acknowledge_each(self.npd_role, reasons)

    def _efa(self) -> eks.HelmChart:
        facts = efa_chart.chart_facts()
        self.chart_versions[str(facts["chart"])] = str(facts["version"])
        return eks.HelmChart(
            self,
            "EfaChart",
            cluster=self._cluster.cluster,
            repository=str(facts["repository"]),
            chart=str(facts["chart"]),
            version=str(facts["version"]),
            release="efa",
            namespace=str(facts["namespace"]),
            values=efa_chart.values(self.spec.efa_taints),
        )

    def _nvidia(self) -> eks.HelmChart:
        facts = nvidia_chart.chart_facts()
        self.chart_versions[str(facts["chart"])] = str(facts["version"])
        return eks.HelmChart(
            self,
            "NvidiaChart",
            cluster=self._cluster.cluster,
            repository=str(facts["repository"]),
            chart=str(facts["chart"]),
            version=str(facts["version"]),
            release=nvidia_chart.RELEASE,
            namespace=str(facts["namespace"]),
            values=nvidia_chart.values(self.spec.gpu_pools, self.spec.gpu_taints),
        )

    def _fsx(self) -> None:
        pin = catalog.eks_facts()["storage_addons"]["aws-fsx-csi-driver"]
        self.fsx_role = pod_role(self, "FsxRole", f"{self.spec.environment}: FSx for Lustre CSI controller (static volumes)")
        # Static volumes only: the controller describes file systems, it creates none.
        self.fsx_role.add_to_policy(iam.PolicyStatement(sid="Describe", actions=["fsx:DescribeFileSystems"], resources=["*"]))
        acknowledge(
            self.fsx_role,
            "AwsSolutions-IAM5[Resource::*]",
            "fsx:DescribeFileSystems has no resource-level permissions; the role can create or change nothing",
        )
        self.fsx_addon = eks.Addon(
            self,
            "FsxCsiDriver",
            cluster=self._cluster.cluster,
            addon_name="aws-fsx-csi-driver",
            addon_version=str(pin["version"]),
            # The controller (a Deployment) on the system node group; the node DaemonSet runs everywhere (mounts).
            configuration_values=addon_placement()["aws-fsx-csi-driver"],
            preserve_on_delete=False,
        )
        self.fsx_addon.node.add_dependency(self._pod_identity("FsxPodIdentity", pin, self.fsx_role))
        # Its controller runs on the system node group and authenticates through the Pod Identity agent ("The Amazon
        # FSx CSI Driver EKS add-on requires the EKS Pod Identity Agent for authentication"): created after both, so
        # it does not sit DEGRADED while no node can run it.
        if self._cluster.system_nodegroup is not None:
            self.fsx_addon.node.add_dependency(self._cluster.system_nodegroup)
        agent = self._cluster.addons.get("eks-pod-identity-agent")
        if agent is not None:
            self.fsx_addon.node.add_dependency(agent)
        self.chart_versions["aws-fsx-csi-driver"] = str(pin["version"])

    def _volume(self, volume: LustreVolume) -> None:
        env = self.spec.environment
        self.lustre_documents = [
            lustre.persistent_volume(
                environment=env, file_system_id=volume.file_system_id, dns_name=volume.dns_name,
                mount_name=volume.mount_name, size_gib=volume.size_gib,
            ),
            lustre.persistent_volume_claim(environment=env, size_gib=volume.size_gib),
        ]  # fmt: skip
        self.lustre_manifest = eks.KubernetesManifest(
            self,
            "LustreVolume",
            cluster=self._cluster.cluster,
            manifest=self.lustre_documents,
            # The volume is Retain: deleting the stack removes the Kubernetes objects, never the file system.
            removal_policy=RemovalPolicy.DESTROY,
        )
        if self.fsx_addon is not None:
            self.lustre_manifest.node.add_dependency(self.fsx_addon)


__all__ = ["LustreVolume", "NeuronWorkloads", "WorkloadsSpec", "pod_role"]
