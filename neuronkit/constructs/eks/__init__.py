"""Amazon EKS constructs (platform: eks): the cluster and the managed node groups that are the kit's pools."""

from neuronkit.constructs.eks.autoscaling import AutoscalingSpec, ClusterAutoscaling, FleetScaling, ScaledGroup
from neuronkit.constructs.eks.cluster import ClusterSpec, NeuronEksCluster, SystemNodesSpec
from neuronkit.constructs.eks.existing_cluster import ExistingClusterSpec, ExistingEksCluster
from neuronkit.constructs.eks.nodegroup import NeuronNodeGroup, NodeGroupSpec, eks_boot_script, node_user_data
from neuronkit.constructs.eks.serving import EksServingFleet, EksServingSpec, GpuFallback, LoadBalancerController
from neuronkit.constructs.eks.spill import GpuSpill, SpillSpec
from neuronkit.constructs.eks.training_jobs import TrainingJobs, TrainingJobsSpec, TrainingPool
from neuronkit.constructs.eks.workloads import LustreVolume, NeuronWorkloads, WorkloadsSpec

__all__ = [
    "AutoscalingSpec", "ClusterAutoscaling", "ClusterSpec", "EksServingFleet", "ExistingClusterSpec", "ExistingEksCluster", "EksServingSpec", "FleetScaling",
    "GpuFallback", "GpuSpill", "LoadBalancerController", "LustreVolume", "NeuronEksCluster", "NeuronNodeGroup", "NeuronWorkloads",
    "NodeGroupSpec", "ScaledGroup", "SpillSpec", "SystemNodesSpec", "TrainingJobs", "TrainingJobsSpec", "TrainingPool",
    "WorkloadsSpec", "eks_boot_script", "node_user_data",
]  # fmt: skip
