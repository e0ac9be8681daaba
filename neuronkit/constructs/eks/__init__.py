"""Amazon EKS constructs (platform: eks): the cluster and the managed node groups that are the kit's pools."""

from neuronkit.constructs.eks.cluster import ClusterSpec, NeuronEksCluster, SystemNodesSpec
from neuronkit.constructs.eks.nodegroup import NeuronNodeGroup, NodeGroupSpec, eks_boot_script, node_user_data
from neuronkit.constructs.eks.workloads import LustreVolume, NeuronWorkloads, WorkloadsSpec

__all__ = [
    "ClusterSpec", "LustreVolume", "NeuronEksCluster", "NeuronNodeGroup", "NeuronWorkloads", "NodeGroupSpec",
    "SystemNodesSpec", "WorkloadsSpec", "eks_boot_script", "node_user_data",
]  # fmt: skip
