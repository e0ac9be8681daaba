"""``eks.existing`` pinned from the account: the cluster attributes ``neuronkit pin`` records in cdk.context.json.

A file may name its own cluster with ``eks.existing.cluster_name`` alone. ``neuronkit pin`` then asks
``eks:DescribeCluster`` (read-only) for the six attributes synthesis needs offline and records them in the committed
``cdk.context.json``, like the AMI lookups (:mod:`neuronkit.config.lookups`), under one key per account, region and
cluster::

    "neuronkit-eks-cluster:account=777788889999:clusterName=platform-prod:region=us-east-1": {
      "endpoint": "https://....eks.amazonaws.com", "certificate_authority": "LS0t...", "service_cidr": "172.20.0.0/16",
      "cluster_security_group_id": "sg-...", "kubernetes_version": "1.35", "authentication_mode": "API_AND_CONFIG_MAP"}

so a PR shows them. When the file is read (:func:`complete`, before validation), an attribute the file does not give is
taken from that pin; **an attribute the file gives wins** (the file is what its owner edits and reviews), and
``neuronkit validate`` reports a pinned value that disagrees with it (:func:`disagreements`). An attribute that is
neither in the file nor pinned stops validation and synthesis with one line naming both fixes. Nothing here calls AWS
(neuronkit/account/pin.py does). Which DescribeCluster field holds each attribute: EKS API reference, ``Cluster``
(``endpoint``, ``certificateAuthority.data``, ``kubernetesNetworkConfig.serviceIpv4Cidr`` or, on an IPv6 cluster,
``serviceIpv6Cidr``,
``resourcesVpcConfig.clusterSecurityGroupId``, ``version``, ``accessConfig.authenticationMode``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

CONTEXT_FILE = "cdk.context.json"
KEY_PREFIX = "neuronkit-eks-cluster"

# eks.existing key -> its path in DescribeCluster's ``cluster`` (EKS API reference, data type Cluster).
ATTRIBUTES: dict[str, tuple[str, ...]] = {
    "endpoint": ("endpoint",),
    "certificate_authority": ("certificateAuthority", "data"),
    "service_cidr": ("kubernetesNetworkConfig", "serviceIpv4Cidr"),
    "cluster_security_group_id": ("resourcesVpcConfig", "clusterSecurityGroupId"),
    "kubernetes_version": ("version",),
    "authentication_mode": ("accessConfig", "authenticationMode"),
}
# Where DescribeCluster holds an attribute when the path above is absent: an IPv6 cluster's service block is
# kubernetesNetworkConfig.serviceIpv6Cidr (EKS API reference, KubernetesNetworkConfigResponse: "The response contains a
# value for serviceIpv6Cidr or serviceIpv4Cidr, but not both").
FALLBACKS: dict[str, tuple[str, ...]] = {"service_cidr": ("kubernetesNetworkConfig", "serviceIpv6Cidr")}


@dataclass(frozen=True)
class ClusterLookup:
    """One file's existing cluster: who asks, where, and which attributes the file gives itself."""

    environment: str
    account: str
    region: str
    cluster_name: str
    given: tuple[str, ...]  # the attributes the file gives

    @property
    def context_key(self) -> str:
        return context_key(self.account, self.region, self.cluster_name)

    @property
    def missing(self) -> tuple[str, ...]:
        return tuple(a for a in ATTRIBUTES if a not in self.given)


def context_key(account: str, region: str, cluster_name: str) -> str:
    """The cdk.context.json key of one cluster's pin (sorted ``name=value`` parts, as CDK's own context keys)."""
    return f"{KEY_PREFIX}:account={account}:clusterName={cluster_name}:region={region}"


def cluster_lookup(data: Any) -> ClusterLookup | None:
    """The existing cluster of raw (parsed YAML) file data; None without ``eks.existing.cluster_name``."""
    if not isinstance(data, dict):
        return None
    eks = data.get("eks")
    existing = eks.get("existing") if isinstance(eks, dict) else None
    if not isinstance(existing, dict) or not isinstance(existing.get("cluster_name"), str):
        return None
    return ClusterLookup(
        environment=str(data.get("name") or ""),
        account=str(data.get("account") or ""),
        region=str(data.get("region") or ""),
        cluster_name=existing["cluster_name"],
        given=tuple(a for a in ATTRIBUTES if existing.get(a) is not None),
    )


def from_describe(cluster: dict[str, Any]) -> dict[str, str]:
    """The attributes of a DescribeCluster ``cluster`` (those it carries), keyed as eks.existing names them."""
    out: dict[str, str] = {}
    for key, path in ATTRIBUTES.items():
        value = _at(cluster, path)
        if value is None and key in FALLBACKS:
            value = _at(cluster, FALLBACKS[key])
        if value is not None:
            out[key] = str(value)
    return out


def _at(cluster: dict[str, Any], path: tuple[str, ...]) -> Any:
    value: Any = cluster
    for part in path:
        value = value.get(part) if isinstance(value, dict) else None
    return value


def pinned(context: dict[str, Any], lookup: ClusterLookup) -> dict[str, str]:
    """The attributes cdk.context.json pins for this cluster (empty when none)."""
    value = context.get(lookup.context_key)
    return {k: str(v) for k, v in value.items() if k in ATTRIBUTES and v is not None} if isinstance(value, dict) else {}


def project_context() -> dict[str, Any]:
    """cdk.context.json of the project around the working folder (where the CDK CLI and ``neuronkit pin`` keep it)."""
    from neuronkit.config.lookups import find_project, read_context

    project = find_project()
    return read_context(project) if project is not None else {}


def complete(data: Any, path: str, context: dict[str, Any] | None = None) -> tuple[Any, list[str]]:
    """Raw file data with ``eks.existing``'s absent attributes taken from their pin (the file's own win), and the one
    problem line when some are neither given nor pinned. ``context`` defaults to the project's cdk.context.json, read
    only when the file leaves an attribute out."""
    lookup = cluster_lookup(data)
    if lookup is None or not lookup.missing:
        return data, []
    pins = pinned(project_context() if context is None else context, lookup)
    still = [a for a in lookup.missing if a not in pins]
    if still:
        return data, [unpinned_line(lookup, path, still)]
    data = dict(data)
    data["eks"] = dict(data["eks"])
    data["eks"]["existing"] = {**{a: pins[a] for a in lookup.missing}, **data["eks"]["existing"]}
    return data, []


def unpinned_line(lookup: ClusterLookup, path: str, missing: list[str]) -> str:
    names = ", ".join(missing)
    return (
        f"{path}: eks.existing: {names} of cluster {lookup.cluster_name} are neither in the file nor pinned in "
        f"{CONTEXT_FILE} for {lookup.account}/{lookup.region}; run `neuronkit pin --file {path}` with read-only "
        f"credentials of that account (then commit {CONTEXT_FILE}), or give {names} in the file (aws eks "
        f"describe-cluster --name {lookup.cluster_name})"
    )


def disagreements(env: Any, context: dict[str, Any]) -> list[tuple[str, str]]:
    """(key, message) per eks.existing attribute whose value (the file's, which wins) differs from its pin."""
    ex = env.eks.existing if env.eks is not None else None
    if ex is None:
        return []
    lookup = ClusterLookup(env.name, env.account, env.region, ex.cluster_name, tuple(ATTRIBUTES))
    out = []
    for key, value in pinned(context, lookup).items():
        mine = str(getattr(ex, key))
        if _norm(key, mine) != _norm(key, value):
            out.append(
                (
                    f"eks.existing.{key}",
                    f"the file says '{_short(mine)}', {CONTEXT_FILE} pins '{_short(value)}' for cluster {ex.cluster_name}; "
                    "the file's value is used: remove the key from the file to use the pinned one, or run "
                    "`neuronkit pin --refresh` and correct the file",
                )
            )
    return out


def _norm(key: str, value: str) -> str:
    value = "".join(value.split()) if key == "certificate_authority" else value.strip()
    return value.rstrip("/") if key == "endpoint" else value


def _short(value: str) -> str:
    return value if len(value) <= 40 else value[:37] + "..."


__all__ = [
    "ATTRIBUTES", "ClusterLookup", "cluster_lookup", "complete", "context_key", "disagreements", "from_describe",
    "pinned", "unpinned_line",
]  # fmt: skip
