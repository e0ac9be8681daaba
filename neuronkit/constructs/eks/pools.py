"""Pool names a construct takes must be node groups of its cluster (issue 49, "Reuse"): a serving spec's
``neuron_pool``/``gpu_pool``, a training pool, the NVIDIA plugin's ``gpu_pools``. A name no node group has would
render pods whose ``neuronkit.io/pool`` node selector matches no node: they stay Pending and nothing says why.

The pools of a cluster are the kit's node groups (:class:`NeuronNodeGroup`) on it that exist in the app when the
construct is made, so create the node groups first. A cluster with none of the kit's node groups yet (a construct
used alone, its pools made elsewhere) is not checked: there is nothing to check against (docs/constructs.md).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from neuronkit.constructs.eks.cluster import EksClusterLike


def cluster_pools(cluster: EksClusterLike) -> list[str]:
    """The pool names (``neuronkit.io/pool`` labels) of the kit's node groups on ``cluster``, so far in the app."""
    from neuronkit.constructs.eks.nodegroup import NeuronNodeGroup

    path = cluster.cluster.node.path
    found = cluster.cluster.node.root.node.find_all()
    return sorted({c.spec.name for c in found if isinstance(c, NeuronNodeGroup) and c.nodegroup.cluster.node.path == path})


def require_pools(construct: str, cluster: EksClusterLike, named: Mapping[str, Iterable[str | None]]) -> None:
    """Raise one line naming the construct, the key and the pools that exist when a name in ``named`` (key -> names)
    is no node group of ``cluster``; nothing when the cluster has none of the kit's node groups yet."""
    known = cluster_pools(cluster)
    if not known:
        return
    for key, names in named.items():
        for name in names:
            if name is not None and name not in known:
                raise ValueError(
                    f"{construct}: {key} {name!r} is no node group of cluster {cluster.spec.name} (its pools: "
                    f"{', '.join(known)}); name one of them, or create its NeuronNodeGroup before this construct"
                )


__all__ = ["cluster_pools", "require_pools"]
