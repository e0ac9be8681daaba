"""A cluster the kit did not create, passed where ``NeuronEksCluster`` goes: the kit's node groups, charts, serving
fleets and training queues are added to it, and nothing of the cluster's own settings changes.

A user's app imports the cluster with ``aws_eks_v2.Cluster.from_cluster_attributes`` (name, endpoint, certificate
authority, cluster security group, VPC and kubectl provider options) and hands it to :class:`ExistingEksCluster`, which
gives it a kubectl/Helm handler (aws-cdk-lib 2.275's imported cluster does not build one from
``kubectl_provider_options``: :func:`with_kubectl_provider`) and an access entry for that handler's role, and makes every
Kubernetes object of the stack wait for that entry.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import jsii
from aws_cdk import Annotations, Aspects, IAspect, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from constructs import Construct, IConstruct

from neuronkit import catalog
from neuronkit.constructs.eks.cluster import SystemNodesSpec, acknowledge_kubectl_provider, system_node_group
from neuronkit.kubernetes import scheduling


@dataclass(frozen=True)
class ExistingClusterSpec:
    """What the kit needs to know of a cluster it did not create.

    ``name`` and ``version`` (the control plane's minor, e.g. "1.35": node images, the autoscaler pin and the kubectl
    layer follow it); ``authentication_mode`` API or API_AND_CONFIG_MAP (the kit adds access entries and never edits
    aws-auth, so CONFIG_MAP is refused); ``service_cidr`` for the reports (EKS writes the nodes' NodeConfig itself, the
    kit's node groups name an amiType); ``system_nodes`` defaults to the catalog's system node group (the controllers the
    kit installs run there; ``None`` puts none and the controllers go wherever the cluster schedules them); ``prefix``
    names the kit's node groups (PREFIX-system; the environment's name in the stack, defaults to ``name``).
    """

    name: str
    version: str
    authentication_mode: Literal["API", "API_AND_CONFIG_MAP"] = "API_AND_CONFIG_MAP"
    service_cidr: str | None = None
    system_nodes: SystemNodesSpec | None = field(default_factory=SystemNodesSpec)
    prefix: str | None = None

    @property
    def node_group_prefix(self) -> str:
        """The kit's own node groups are PREFIX-POOL (``prefix``, the environment's name; defaults to ``name``)."""
        return self.prefix or self.name

    def __post_init__(self) -> None:
        if self.authentication_mode not in ("API", "API_AND_CONFIG_MAP"):
            raise ValueError(
                f"authentication_mode {self.authentication_mode}: the kit reaches the cluster through access entries "
                "(API or API_AND_CONFIG_MAP); it never edits aws-auth"
            )


def with_kubectl_provider(
    scope: Construct, cluster: eks.ICluster, options: eks.KubectlProviderOptions | None
) -> tuple[eks.ICluster, eks.KubectlProvider | None]:
    """aws-cdk-lib 2.275 workaround: ``Cluster.from_cluster_attributes(..., kubectl_provider_options=...)`` stores the
    options but its ImportedCluster only reads ``kubectl_provider`` (aws-eks-v2/lib/cluster.js, ``ImportedCluster``), so
    ``KubernetesManifest`` and ``HelmChart`` fail with "Kubectl Provider is not defined in this cluster". Build the
    provider from the options and import the cluster again with it (idempotent: a cluster with a provider is returned
    as it is)."""
    if cluster.kubectl_provider is not None:
        return cluster, None
    if options is None:
        raise ValueError(
            "kubectl_provider_options: required when the imported cluster has no kubectl_provider (give the options "
            "you passed to Cluster.from_cluster_attributes; kubectl_layer matching the cluster's minor version)"
        )
    provider = eks.KubectlProvider(
        scope,
        "KubectlProvider",
        cluster=cluster,
        kubectl_layer=options.kubectl_layer,
        private_subnets=options.private_subnets,
        security_groups=options.security_groups,
        security_group=options.security_group,
        role=options.role,
        removal_policy=options.removal_policy,
        memory=options.memory,
        environment=options.environment,
        awscli_layer=options.awscli_layer,
    )
    attributes: dict[str, Any] = {"cluster_name": cluster.cluster_name}
    for key in ("cluster_endpoint", "cluster_certificate_authority_data", "cluster_security_group_id", "vpc"):
        try:
            attributes[key] = getattr(cluster, key)
        except (jsii.errors.JSIIError, RuntimeError):  # not given at import: the attribute's getter throws
            continue
    imported = eks.Cluster.from_cluster_attributes(
        scope, "Cluster", **attributes, kubectl_provider=provider, prune=cluster.prune, ip_family=cluster.ip_family
    )
    return imported, provider


@jsii.implements(IAspect)
class _AfterAccess:
    """Every Kubernetes object of the stack waits for the kubectl handler's access entry (aws_eks_v2 does this for the
    clusters it creates, ``_dependOnKubectlBarrier``, not for imported ones)."""

    KINDS = (eks.KubernetesManifest, eks.HelmChart, eks.KubernetesPatch, eks.KubernetesObjectValue)

    def __init__(self, entry: eks.AccessEntry) -> None:
        self._entry = entry

    def visit(self, node: IConstruct) -> None:
        if isinstance(node, self.KINDS) and Stack.of(node) is Stack.of(self._entry):
            node.node.add_dependency(self._entry)


class ExistingEksCluster(Construct):
    """The kit's view of a cluster it did not create: ``cluster`` (the imported ``aws_eks_v2.ICluster`` with a kubectl
    provider), ``kubectl_access`` (the access entry of the handler's role: AmazonEKSClusterAdminPolicy, cluster-wide,
    the one entry the kit adds; EKS itself adds the entries of managed node groups' roles), ``system_nodegroup`` (the
    kit's system node group, or None), ``addons`` (empty: the cluster's own add-ons stay its owner's),
    ``cluster_security_group_id``, ``spec``.

    ``cluster`` needs ``vpc`` and ``cluster_security_group_id`` among its attributes; ``kubectl_provider_options``
    (a layer matching the cluster's minor, private subnets for a private endpoint) when it has no provider.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        cluster: eks.ICluster,
        spec: ExistingClusterSpec,
        kubectl_provider_options: eks.KubectlProviderOptions | None = None,
        subnets: Sequence[ec2.ISubnet] | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        """``subnets``: the system node group's (two AZs or more; defaults to the provider options' private subnets);
        ``tags``: cost-allocation tags on its instances."""
        super().__init__(scope, id)
        self.spec = spec
        self.cluster, self.kubectl_provider = with_kubectl_provider(self, cluster, kubectl_provider_options)
        try:
            self.cluster_security_group_id = self.cluster.cluster_security_group_id
            self.cluster.vpc  # noqa: B018 - the node groups and load balancers need it
        except (jsii.errors.JSIIError, RuntimeError) as err:
            raise ValueError(
                "cluster: import it with vpc and cluster_security_group_id (the kit's nodes carry the cluster security "
                "group; its load balancers and node groups live in the VPC)"
            ) from err
        self.addons: dict[str, eks.Addon] = {}
        self.access_entries: dict[str, eks.AccessEntry] = {}
        self._access()
        self.system_nodegroup: eks.Nodegroup | None = None
        self.system_role: iam.Role | None = None
        if spec.system_nodes is not None:
            chosen = list(subnets or (kubectl_provider_options.private_subnets if kubectl_provider_options else None) or [])
            if len(chosen) < 2:
                raise ValueError("subnets: the system node group needs subnets in at least two Availability Zones")
            tags_ = {**(tags or {}), "neuronkit:pool": scheduling.SYSTEM_POOL}
            self.system_role, self.system_nodegroup = system_node_group(
                self,
                cluster=self.cluster,
                name=spec.node_group_prefix,
                version=spec.version,
                nodes=spec.system_nodes,
                subnets=chosen,
                tags=tags_,
            )
        if self.kubectl_provider is not None:
            acknowledge_kubectl_provider(self, self.kubectl_provider)
        Annotations.of(self).acknowledge_warning(
            "@aws-cdk/aws-eks:clusterMustManuallyTagSubnet", "the cluster's subnets are its owner's; nothing here tags them"
        )

    def _access(self) -> None:
        provider = self.cluster.kubectl_provider
        role = provider.role if provider is not None else None
        if role is None:
            raise ValueError("cluster: its kubectl provider has no role; the kit needs one to give it an access entry")
        name = str(catalog.eks_facts()["access_policies"]["admin"]).rsplit("/", 1)[1]
        self.kubectl_access = eks.AccessEntry(
            self,
            "KubectlAccess",
            cluster=self.cluster,
            principal=role.role_arn,
            access_policies=[eks.AccessPolicy.from_access_policy_name(name, access_scope_type=eks.AccessScopeType.CLUSTER)],
        )
        self.access_entries[role.role_arn] = self.kubectl_access
        Aspects.of(Stack.of(self)).add(_AfterAccess(self.kubectl_access))


__all__ = ["ExistingClusterSpec", "ExistingEksCluster", "with_kubectl_provider"]
