"""Training jobs on the kit's EKS cluster: JobSet and Kueue through Helm, and per training pool its queue, service
account (pod identity: the pool's checkpoint prefix), the Lustre claim in ``neuronkit-training`` and, for a Capacity
Block pool, the CronJob that asks running jobs to checkpoint at ``E - L`` (docs/training-on-eks.md).

Manifests come from :mod:`neuronkit.kubernetes.training_job`; versions from ``catalog/eks.yaml`` (``training_jobs``).
Both controllers run on the system node group (``scheduling.system_node_selector``).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml
from aws_cdk import CfnOutput, Duration, RemovalPolicy
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct

from neuronkit.catalog import releases
from neuronkit.constructs.eks.adopt import adopting_manifest
from neuronkit.constructs.eks.cluster import EksClusterLike
from neuronkit.constructs.eks.pools import require_pools
from neuronkit.constructs.eks.workloads import LustreVolume, pod_identity, pod_role
from neuronkit.constructs.storage import StorageAccess
from neuronkit.kubernetes import lustre, pod_security, scheduling
from neuronkit.kubernetes import training_job as tj


@dataclass(frozen=True)
class TrainingPool:
    """One training pool: its node group's name and type, its size, Neuron release and, for a Capacity Block, the
    block's end and the lead time L (``training_job.lead_minutes``)."""

    name: str
    instance_type: str
    max_nodes: int
    release: str
    block_end: dt.datetime | None = None
    lead_minutes: int | None = None
    cluster_queue: str | None = None

    def __post_init__(self) -> None:
        if self.max_nodes < 1:
            raise ValueError(f"training pool {self.name}: max_nodes {self.max_nodes}; a pool has at least one node")
        if (self.block_end is None) != (self.lead_minutes is None):
            raise ValueError(f"training pool {self.name}: give block_end and lead_minutes together (a Capacity Block)")


@dataclass(frozen=True)
class TrainingJobsSpec:
    """``pools``: the Trainium pools jobs run on (at least one); ``lustre``: the environment's file system (the claim
    in ``neuronkit-training``; jobs need it for the compile cache, checkpoints and the checkpoint sentinel)."""

    environment: str
    pools: Sequence[TrainingPool]
    lustre: LustreVolume | None = None
    install_jobset: bool = True
    install_kueue: bool = True

    def __post_init__(self) -> None:
        if not self.pools:
            raise ValueError("TrainingJobs: no training pools; add a Trainium pool or leave the construct out")


def kueue_values() -> dict[str, Any]:
    """Kueue's Helm values: the pinned image, the system node group, and a manager configuration whose
    ``waitForPodsReady`` makes admission all-or-nothing and whose integrations manage JobSets."""
    pin = tj.facts()["kueue"]
    repository, tag = str(pin["image"]).rsplit(":", 1)
    ready = pin["wait_for_pods_ready"]
    manager = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "health": {"healthProbeBindAddress": ":8081"},
        "metrics": {"bindAddress": ":8443"},
        "webhook": {"port": 9443},
        "leaderElection": {"leaderElect": True, "resourceName": "c1f6bfd2.kueue.x-k8s.io"},
        # recoveryTimeout unset: it defaults to timeout (catalog training_jobs.kueue.wait_for_pods_ready)
        "waitForPodsReady": {
            "timeout": str(ready["timeout"]),
            "blockAdmission": bool(ready["block_admission"]),
            "requeuingStrategy": {"timestamp": str(ready["requeuing_timestamp"])},
        },
        "integrations": {"frameworks": ["jobset.x-k8s.io/jobset", "batch/job"]},
    }
    return {
        "controllerManager": {
            "manager": {"image": {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"}},
            "nodeSelector": scheduling.system_node_selector(),
        },
        "managerConfig": {"controllerManagerConfigYaml": yaml.safe_dump(manager, sort_keys=False)},
    }


def jobset_values() -> dict[str, Any]:
    pin = tj.facts()["jobset"]
    repository, tag = str(pin["image"]).rsplit(":", 1)
    return {
        "image": {"repository": repository, "tag": tag, "pullPolicy": "IfNotPresent"},
        "controller": {"nodeSelector": scheduling.system_node_selector()},
    }


def signal_image(release: str) -> str:
    """The CronJob's image: a container of the pool's release (on the pool's nodes already; any has ``sh``)."""
    rel = releases.release(release)
    image = rel.container("training") or next(iter(rel.containers.values()), None)
    if image is None:
        raise ValueError(f"Neuron {release} pins no container; the checkpoint signal needs one with sh")
    return image


class TrainingJobs(Construct):
    """``jobset_chart``, ``kueue_chart`` (HelmChart), ``queues`` (KubernetesManifest of the flavors and queues),
    ``pool_roles`` (pool -> pod role), ``signals`` (pool -> the Capacity Block CronJob manifest),
    ``chart_versions`` for the reports."""

    def __init__(
        self, scope: Construct, id: str, *, cluster: EksClusterLike, spec: TrainingJobsSpec, storage: StorageAccess
    ) -> None:
        super().__init__(scope, id)
        # Each pool must be a node group of the cluster (issue 49): a Kueue flavor of a pool no node has admits nothing.
        require_pools("TrainingJobs", cluster, {"pools[].name": [p.name for p in spec.pools]})
        self.spec = spec
        self._cluster = cluster
        self._storage = storage
        self.chart_versions: dict[str, str] = {}
        self.pool_roles: dict[str, iam.Role] = {}
        self.signals: dict[str, dict[str, Any]] = {}
        self._controllers()
        self._namespace()
        self._queues()
        self._pools()

    def _chart(self, id: str, key: str, values: dict[str, Any]) -> eks.HelmChart:
        pin = tj.facts()[key]
        self.chart_versions[str(pin["chart"])] = str(pin["version"])
        # The namespace is the kit's, labelled before the chart's pods exist (Helm's createNamespace makes it bare).
        # Adopted: Create runs `kubectl apply` over the namespace Helm created in an environment deployed before (or
        # the user's own), and it is retained, never deleted (constructs/eks/adopt.py; docs/eks.md, "Pod Security").
        namespace = adopting_manifest(
            self, f"{id}Namespace", cluster=self._cluster.cluster,
            manifest=[pod_security.chart_namespace(str(pin["namespace"]), str(pin["pod_security"]))],
        )  # fmt: skip
        chart = eks.HelmChart(
            self,
            id,
            cluster=self._cluster.cluster,
            repository=f"{pin['repository']}/{pin['chart']}",
            chart=str(pin["chart"]),
            version=str(pin["version"]),
            release=str(pin["chart"]),
            namespace=str(pin["namespace"]),
            create_namespace=False,
            values=values,
            # helm --wait: the controllers' webhooks (failurePolicy Fail) serve before the next resource applies
            # objects they intercept (the queues after Kueue); without it the CDK handler returns at once.
            wait=True,
            timeout=Duration.minutes(int(pin["helm_wait_minutes"])),
        )
        chart.node.add_dependency(namespace)
        return chart

    def _controllers(self) -> None:
        """JobSet and Kueue unless the cluster runs them already (eks.components: existing; the kit then relies on
        JobSet v1alpha2 and Kueue v1beta2 being served)."""
        self.jobset_chart = self._chart("JobSet", "jobset", jobset_values()) if self.spec.install_jobset else None
        self.kueue_chart = self._chart("Kueue", "kueue", kueue_values()) if self.spec.install_kueue else None
        if self.kueue_chart is not None and self.jobset_chart is not None:
            self.kueue_chart.node.add_dependency(self.jobset_chart)  # Kueue's JobSet integration needs the CRD

    def _manifest(self, id: str, docs: list[dict[str, Any]]) -> eks.KubernetesManifest:
        return eks.KubernetesManifest(
            self, id, cluster=self._cluster.cluster, manifest=docs, removal_policy=RemovalPolicy.DESTROY
        )

    def _namespace(self) -> None:
        # Training pods pass Pod Security "baseline" (a namespaced safe sysctl, no host namespace or hostPath).
        labels = pod_security.labels("baseline")
        ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": scheduling.TRAINING_NAMESPACE, "labels": labels}}
        self.namespace = self._manifest("Namespace", [ns])
        # eks.job_submitters' Role (their access entries carry its group): JobSets and a read of Kueue's workloads
        self.submitter_rbac = self._manifest("SubmitterRbac", tj.submitter_rbac())
        self.submitter_rbac.node.add_dependency(self.namespace)

    def _queues(self) -> None:
        docs = [
            d
            for p in self.spec.pools
            for d in tj.kueue_manifests(
                environment=self.spec.environment,
                pool=p.name,
                instance_type=p.instance_type,
                max_nodes=p.max_nodes,
                cluster_queue=p.cluster_queue,
            )
        ]
        self.queue_documents = docs
        self.queues = self._manifest("Queues", docs)
        self.queues.node.add_dependency(self.namespace)
        if self.kueue_chart is not None:
            self.queues.node.add_dependency(self.kueue_chart)
        # What each pool naming a ClusterQueue needs added to it (printed by `neuronkit summary`, docs/training-on-eks.md).
        self.cluster_queue_stanzas = {
            p.name: tj.cluster_queue_stanza(
                environment=self.spec.environment, pool=p.name, instance_type=p.instance_type, max_nodes=p.max_nodes,
                cluster_queue=p.cluster_queue,
            )
            for p in self.spec.pools
            if p.cluster_queue is not None
        }  # fmt: skip
        for pool, stanza in self.cluster_queue_stanzas.items():
            # `cdk deploy` prints it: the resource group to add to the user's ClusterQueue (and the namespace its
            # namespaceSelector must admit).
            CfnOutput(
                self, f"ClusterQueueStanza-{pool}", value=json.dumps(stanza, sort_keys=True),
                description=f"pool {pool}: add this resource group to ClusterQueue {stanza['clusterQueue']}",
            )  # fmt: skip

    def _pools(self) -> None:
        docs: list[dict[str, Any]] = []
        if self.spec.lustre is not None:
            docs += self._lustre(self.spec.lustre)
        for i, p in enumerate(self.spec.pools):
            docs.append(
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": tj.service_account(p.name), "namespace": scheduling.TRAINING_NAMESPACE},
                }
            )
            role = pod_role(self, f"PoolRole{i}", f"{self.spec.environment}: training jobs of pool {p.name}")
            # Datasets, artifacts and every checkpoint to read; writes only under s3://CHECKPOINTS/POOL/.
            self._storage.grant_node_access(role, pool=p.name)
            pod_identity(
                self, f"PoolIdentity{i}", cluster=self._cluster.cluster, namespace=scheduling.TRAINING_NAMESPACE,
                service_account=tj.service_account(p.name), role=role,
            )  # fmt: skip
            self.pool_roles[p.name] = role
            if p.block_end is not None and p.lead_minutes is not None:
                self.signals[p.name] = tj.checkpoint_signal_cronjob(
                    pool=p.name,
                    environment=self.spec.environment,
                    at=tj.signal_at(p.block_end, p.lead_minutes),
                    image=signal_image(p.release),
                )
                docs.append(self.signals[p.name])
        self.pool_documents = docs
        self.pool_manifest = self._manifest("Pools", docs)
        self.pool_manifest.node.add_dependency(self.namespace)

    def _lustre(self, volume: LustreVolume) -> list[dict[str, Any]]:
        """A second static volume of the same file system, bound to the claim in the training namespace (a claim
        binds one volume, and the first one's claim lives in ``default``)."""
        name = f"{self.spec.environment}-lustre-training"
        pv = lustre.persistent_volume(
            environment=self.spec.environment, file_system_id=volume.file_system_id, dns_name=volume.dns_name,
            mount_name=volume.mount_name, size_gib=volume.size_gib,
        )  # fmt: skip
        pv["metadata"]["name"] = name
        pvc = lustre.persistent_volume_claim(
            environment=self.spec.environment, size_gib=volume.size_gib, namespace=scheduling.TRAINING_NAMESPACE
        )
        pvc["metadata"]["name"] = tj.lustre_claim(self.spec.environment)
        pvc["spec"]["volumeName"] = name
        return [pv, pvc]


__all__ = ["TrainingJobs", "TrainingJobsSpec", "TrainingPool", "jobset_values", "kueue_values", "signal_image"]
