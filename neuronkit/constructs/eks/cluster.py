"""An Amazon EKS cluster for accelerator node groups, through ``aws_cdk.aws_eks_v2`` (native AWS::EKS::Cluster)."""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from aws_cdk import Annotations, RemovalPolicy, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from neuronkit import catalog
from neuronkit.catalog import eks_images
from neuronkit.constructs.compliance import acknowledge, acknowledge_each
from neuronkit.constructs.eks.nodegroup_name import ReplaceableName
from neuronkit.constructs.node_role import eks_node_role
from neuronkit.constructs.python_function import drop_implied_role_dependency
from neuronkit.kubernetes import scheduling
from neuronkit.kubernetes.neuron_chart import merge, set_path


def _system_fact(key: str) -> int:
    return int(catalog.eks_facts()["system_nodes"][key])


@dataclass(frozen=True)
class SystemNodesSpec:
    """The system node group: where add-ons and controllers run, never an accelerator.

    Defaults from ``neuronkit/catalog/eks.yaml`` (``system_nodes``: m7i.large, 2 to 4 nodes, on-demand, 50 GiB gp3).
    At least two nodes, so that each of the cluster's AZs can hold one; the type must not be a Neuron or GPU type.
    """

    instance_type: str = field(default_factory=lambda: str(catalog.eks_facts()["system_nodes"]["instance_type"]))
    min_size: int = field(default_factory=lambda: _system_fact("min_size"))
    desired_size: int = field(default_factory=lambda: _system_fact("desired_size"))
    max_size: int = field(default_factory=lambda: _system_fact("max_size"))
    root_volume_gib: int = field(default_factory=lambda: _system_fact("root_volume_gib"))

    def __post_init__(self) -> None:
        if not 2 <= self.min_size <= self.desired_size <= self.max_size:
            raise ValueError(
                f"system nodes: need 2 <= min_size ({self.min_size}) <= desired_size ({self.desired_size}) <= max_size "
                f"({self.max_size}): one node per Availability Zone at least"
            )
        if scheduling.accelerated_type(self.instance_type):
            raise ValueError(
                f"system nodes: {self.instance_type} is an accelerated type; give a general-purpose type (e.g. m7i.large)"
            )


@dataclass(frozen=True)
class ClusterSpec:
    """What the cluster runs and who reaches it.

    ``version`` (e.g. "1.35"), ``addon_versions`` (add-on name -> version) and the kubectl layer default to
    the pins of ``neuronkit/catalog/eks.yaml``. ``admins`` get AmazonEKSClusterAdminPolicy and ``viewers``
    AmazonEKSViewPolicy, cluster-wide, through access entries; ``job_submitters`` AmazonEKSEditPolicy scoped to the
    training namespace and the Kubernetes group the kit's submitter Role is bound to; the principal that deploys the stack gets no
    access of its own. ``endpoint`` defaults to private (the API answers inside the VPC only);
    ``public-and-private`` needs ``public_access_cidrs``. ``max_pods_per_node`` bounds the VPC CNI's warm
    pool in step with the nodes' kubelet maxPods (defaults to the catalog's 110).
    """

    name: str
    version: str = field(default_factory=lambda: str(catalog.eks_facts()["kubernetes"]["version"]))
    admins: Sequence[str] = ()
    viewers: Sequence[str] = ()
    job_submitters: Sequence[str] = ()
    endpoint: Literal["private", "public-and-private"] = "private"
    public_access_cidrs: Sequence[str] = ()
    addon_versions: Mapping[str, str] = field(
        default_factory=lambda: {k: str(v["version"]) for k, v in catalog.eks_facts()["addons"].items() if k != "source"}
    )
    max_pods_per_node: int = field(default_factory=lambda: int(catalog.eks_facts()["pods"]["max_pods_per_node"]))
    system_nodes: SystemNodesSpec = field(default_factory=SystemNodesSpec)

    def __post_init__(self) -> None:
        if not self.admins:
            raise ValueError("admins: name at least one IAM principal ARN (the stack's creator gets no cluster access)")
        if self.endpoint == "public-and-private" and not self.public_access_cidrs:
            raise ValueError("public_access_cidrs: required with endpoint public-and-private (never 0.0.0.0/0)")


# Either cluster the kit's constructs add to: the one it creates or one it imports (existing_cluster.py). Both expose
# ``cluster`` (aws_eks_v2.ICluster with a kubectl provider), ``spec.name``, ``spec.version``, ``cluster_security_group_id``,
# ``system_nodegroup`` (or None), ``addons`` and ``access_entries``.
class _SpecLike(Protocol):
    @property
    def name(self) -> str: ...
    @property
    def version(self) -> str: ...


class EksClusterLike(Protocol):
    @property
    def cluster(self) -> eks.ICluster: ...
    @property
    def spec(self) -> _SpecLike: ...
    @property
    def cluster_security_group_id(self) -> str: ...
    @property
    def system_nodegroup(self) -> eks.Nodegroup | None: ...
    @property
    def addons(self) -> Mapping[str, eks.Addon]: ...


def kubectl_layer(scope: Construct, id: str) -> Any:
    """The pinned kubectl/Helm Lambda layer of catalog/eks.yaml (a PyPI package pinned in requirements.txt)."""
    pin = catalog.eks_facts()["kubectl_layer"]
    module = importlib.import_module(pin["module"])
    return getattr(module, pin["class"])(scope, id)


class NeuronEksCluster(Construct):
    """An EKS cluster whose capacity is the kit's managed node groups (no Auto Mode, no default capacity).

    Access entries only (``bootstrap_cluster_creator_admin_permissions`` off; admins and viewers from ``spec``);
    Kubernetes secrets envelope-encrypted with a customer-managed KMS key (rotated) that is **retained** when the
    stack goes; every control-plane log type of the catalog to CloudWatch Logs; the add-ons VPC CNI, CoreDNS,
    kube-proxy and the pod identity agent at the catalog's versions (the VPC CNI's warm pool bounded so that a
    node takes at most 1 + maxPods + warm_ip_target addresses of its subnet); the kubectl/Helm handler with the
    catalog's layer in ``subnets`` (the VPC's private subnets), so it reaches a private endpoint.

    Public attributes: ``cluster`` (``aws_eks_v2.Cluster``), ``secrets_key``, ``addons`` (by name),
    ``access_entries`` (by principal), ``cluster_security_group_id``, ``spec``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        spec: ClusterSpec,
        vpc: ec2.IVpc,
        subnets: Sequence[ec2.ISubnet],
        tags: Mapping[str, str] | None = None,
    ) -> None:
        """``tags``: cost-allocation tags for the system nodes' instances, volumes and interfaces (node group tags do
        not reach the instances); ``neuronkit:pool: system`` is added."""
        super().__init__(scope, id)
        self._tags = {**(tags or {}), "neuronkit:pool": scheduling.SYSTEM_POOL}
        if len(subnets) < 2:
            raise ValueError("subnets: an EKS cluster needs subnets in at least two Availability Zones")
        self.spec = spec
        self._key()
        self._cluster(vpc, subnets)
        self._access()
        self._system_nodes(subnets)
        self._addons()
        self._acknowledge()
        self.cluster_security_group_id = self.cluster.cluster_security_group_id

    def _key(self) -> None:
        self.secrets_key = kms.Key(
            self,
            "SecretsKey",
            description=f"{self.spec.name}: envelope encryption of Kubernetes secrets",
            enable_key_rotation=True,
            # Secrets written under this key are unreadable without it: it outlives the stack.
            removal_policy=RemovalPolicy.RETAIN,
        )

    def _cluster(self, vpc: ec2.IVpc, subnets: Sequence[ec2.ISubnet]) -> None:
        spec = self.spec
        endpoint = (
            eks.EndpointAccess.PRIVATE
            if spec.endpoint == "private"
            else eks.EndpointAccess.PUBLIC_AND_PRIVATE.only_from(*spec.public_access_cidrs)
        )
        logs = [eks.ClusterLoggingTypes(t.upper() if t != "controllerManager" else "CONTROLLER_MANAGER")
                for t in catalog.eks_facts()["logging"]["types"]]  # fmt: skip
        selection = ec2.SubnetSelection(subnets=list(subnets))
        self.cluster = eks.Cluster(
            self,
            "Cluster",
            cluster_name=spec.name,
            version=eks.KubernetesVersion.of(spec.version),
            vpc=vpc,
            vpc_subnets=[selection],
            endpoint_access=endpoint,
            bootstrap_cluster_creator_admin_permissions=False,
            secrets_encryption_key=self.secrets_key,
            cluster_logging=logs,
            # Capacity is the kit's node groups only: no Auto Mode (no placement groups, no user data) and no
            # default node group.
            default_capacity_type=eks.DefaultCapacityType.NODEGROUP,
            default_capacity=0,
            kubectl_provider_options=eks.KubectlProviderOptions(
                kubectl_layer=kubectl_layer(self, "KubectlLayer"), private_subnets=list(subnets)
            ),
        )

    def _access(self) -> None:
        policies = catalog.eks_facts()["access_policies"]
        self.access_entries: dict[str, eks.AccessEntry] = {}
        for kind, principals in (("admin", self.spec.admins), ("viewer", self.spec.viewers)):
            name = str(policies[kind]).rsplit("/", 1)[1]
            for i, principal in enumerate(principals):
                self.access_entries[principal] = eks.AccessEntry(
                    self,
                    f"{kind.capitalize()}{i}",
                    cluster=self.cluster,
                    principal=principal,
                    access_policies=[
                        eks.AccessPolicy.from_access_policy_name(name, access_scope_type=eks.AccessScopeType.CLUSTER)
                    ],
                )
        self._job_submitters(str(policies["job_submitter"]).rsplit("/", 1)[1])

    def _job_submitters(self, policy: str) -> None:
        """Edit access in the training namespace only, and the Kubernetes group of the kit's submitter Role (JobSets,
        Kueue workloads). A principal that is also a viewer keeps one access entry with both policies."""
        from neuronkit.kubernetes import scheduling, training_job  # kubernetes modules import the catalog only

        scoped = eks.AccessPolicy.from_access_policy_name(
            policy, access_scope_type=eks.AccessScopeType.NAMESPACE, namespaces=[scheduling.TRAINING_NAMESPACE]
        )
        for i, principal in enumerate(self.spec.job_submitters):
            entry = self.access_entries.get(principal)
            if entry is None:
                entry = eks.AccessEntry(self, f"JobSubmitter{i}", cluster=self.cluster, principal=principal, access_policies=[])
                self.access_entries[principal] = entry
            entry.add_access_policies([scoped])
            # the L2 AccessEntry has no Kubernetes groups (aws-cdk-lib 2.275 aws_eks_v2.AccessEntryProps)
            cfn = entry.node.default_child
            assert isinstance(cfn, eks.CfnAccessEntry)
            cfn.add_property_override("KubernetesGroups", [training_job.SUBMITTERS_GROUP])

    def _system_nodes(self, subnets: Sequence[ec2.ISubnet]) -> None:
        self.system_role, self.system_nodegroup = system_node_group(
            self,
            cluster=self.cluster,
            name=self.spec.name,
            version=self.spec.version,
            nodes=self.spec.system_nodes,
            subnets=subnets,
            tags=self._tags,
        )

    def _addons(self) -> None:
        pods = catalog.eks_facts()["pods"]
        config: dict[str, dict[str, Any]] = {
            # Bounded warm pool: a node holds its pods' addresses plus WARM_IP_TARGET, not a whole spare interface.
            "vpc-cni": {"env": {"WARM_IP_TARGET": str(pods["warm_ip_target"]), "WARM_ENI_TARGET": "0"}},
        }
        for name, extra in addon_placement().items():
            config[name] = merge(config.get(name, {}), extra)
        self.addons: dict[str, eks.Addon] = {}
        bootstrapped = catalog.eks_facts()["bootstrapped_addons"]
        for name, version in sorted(self.spec.addon_versions.items()):
            self.addons[name] = eks.Addon(
                self,
                "Addon-" + name,
                cluster=self.cluster,
                addon_name=name,
                addon_version=version,
                configuration_values=config.get(name),
                preserve_on_delete=False,
            )
            if name in bootstrapped["names"] or name in config:
                # Created over EKS's self-managed copy (or configured by the kit): without OVERWRITE the creation
                # "might fail" on a conflict (catalog bootstrapped_addons). The L2 has no resolveConflicts: set the L1.
                cfn = self.addons[name].node.default_child
                assert isinstance(cfn, eks.CfnAddon)
                cfn.resolve_conflicts = str(bootstrapped["resolve_conflicts"])
            # An add-on's pods need somewhere to run: after the system node group (CoreDNS waits for its nodes).
            self.addons[name].node.add_dependency(self.system_nodegroup)

    def _acknowledge(self) -> None:
        """cdk-nag findings on what aws_eks_v2 creates itself (the cluster role, the kubectl handler), with reasons."""
        acknowledge_kubectl_provider(self, self.cluster.node.try_find_child("KubectlProvider"))
        Annotations.of(self.cluster).acknowledge_warning(
            "@aws-cdk/aws-eks:clusterMustManuallyTagSubnet",
            "no load balancers on these subnets yet: the serving part tags them for the load balancer controller",
        )


def system_node_group(
    scope: Construct,
    *,
    cluster: eks.ICluster,
    name: str,
    version: str,
    nodes: SystemNodesSpec,
    subnets: Sequence[ec2.ISubnet],
    tags: Mapping[str, str],
) -> tuple[iam.Role, eks.Nodegroup]:
    """The system node group ``NAME-system``: on-demand, the catalog's AL2023 standard image of the cluster's Kubernetes
    minor ``version``, IMDSv2 with hop limit 1 (pods cannot take the node role), an encrypted gp3 root volume, every
    subnet given (two AZs or more)."""
    from neuronkit.constructs.launch_template import metadata_options, root_volume, tag_specifications

    facts = catalog.eks_facts()["system_nodes"]
    role = eks_node_role(scope, "SystemNodeRole", description=f"{name} EKS system nodes (add-ons and controllers)")
    template = ec2.CfnLaunchTemplate(
        scope,
        "SystemLaunchTemplate",
        launch_template_data=ec2.CfnLaunchTemplate.LaunchTemplateDataProperty(
            # IMDSv2, hop limit 1 (pods cannot take the node role); no instance tags in IMDS.
            metadata_options=metadata_options(hop_limit=1),
            block_device_mappings=[root_volume("/dev/xvda", nodes.root_volume_gib)],
            ebs_optimized=True,
            tag_specifications=tag_specifications(tags),
        ),
    )
    # NAME-system-<digest of the create-only properties>: a change of its instance type can replace it (docs/eks.md).
    group_name = ReplaceableName(f"{name}-{scheduling.SYSTEM_POOL}")
    nodegroup = eks.Nodegroup(
        scope,
        "SystemNodes",
        cluster=cluster,
        nodegroup_name=group_name.name,
        ami_type=eks.NodegroupAmiType[str(facts["ami_type"]).upper()],
        # One release version for every AL2023 variant of a Kubernetes version: the pools' pin when it is of the
        # cluster's minor, else that minor's newest row (catalog node_images, eks_images.pinned). A literal pin here
        # booted 1.35 system nodes on a 1.34 control plane (found by the day-two table).
        release_version=eks_images.pinned("neuron", version).release_version,
        instance_types=[ec2.InstanceType(nodes.instance_type)],
        launch_template_spec=eks.LaunchTemplateSpec(id=template.ref, version=template.attr_latest_version_number),
        subnets=ec2.SubnetSelection(subnets=list(subnets)),
        min_size=nodes.min_size,
        desired_size=nodes.desired_size,
        max_size=nodes.max_size,
        capacity_type=eks.CapacityType.ON_DEMAND,
        enable_node_auto_repair=True,
        node_role=role,
        labels=scheduling.system_node_selector(),
    )
    group_name.attach(nodegroup)
    return role, nodegroup


def acknowledge_kubectl_provider(scope: Construct, provider: Construct | None) -> None:
    """cdk-nag findings on aws_eks_v2's kubectl provider (``provider``: its KubectlProvider construct) and the cluster
    role, with reasons; each finding that names the handler is computed from the construct, never written as a literal."""
    managed = "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/"
    reasons = {
        managed + "AmazonEKSClusterPolicy]": "the AWS-managed policy EKS documents for the cluster role",
        managed + "service-role/AWSLambdaBasicExecutionRole]": "aws_eks_v2's kubectl handler and its provider log "
        "through the AWS-managed Lambda execution policy",
        managed + "service-role/AWSLambdaVPCAccessExecutionRole]": "the kubectl handler runs in the private subnets "
        "(private endpoint) and needs the AWS-managed VPC access policy for its interfaces",
        managed + "AmazonEC2ContainerRegistryReadOnly]": "aws_eks_v2's kubectl handler pulls Helm charts from ECR",
        "AwsSolutions-L1": "the kubectl handler's runtime is chosen by aws-cdk-lib (pinned in requirements.txt)",
    }
    handler: Any = None
    for path in (("Handler",), ("Provider", "framework-onEvent")):
        node: Any = provider
        for part in path:
            node = node.node.try_find_child(part) if node is not None else None
        drop_implied_role_dependency(node)
        handler = handler or node
    if handler is not None:
        # cdk-nag prints <LogicalId.Arn>, which depends on where the user put the cluster.
        reasons[f"AwsSolutions-IAM5[Resource::{handler.function_arn}:*]"] = (
            "aws_eks_v2's provider framework invokes any version of the kubectl handler"
        )
    acknowledge_each(scope, reasons)
    # The ECR Public pull policy of the handler is named through a condition (Fn::If) in the finding's id.
    for finding in _ecr_public_findings(scope):
        acknowledge(scope, finding, "aws_eks_v2's kubectl handler may pull Helm charts from ECR Public")


def addon_placement() -> dict[str, dict[str, Any]]:
    """The configuration values that put each add-on's Deployment on the system node group (catalog
    ``addon_placement``: add-on -> the configuration key of its Deployment's nodeSelector)."""
    out: dict[str, dict[str, Any]] = {}
    for name, keys in catalog.eks_facts()["addon_placement"].items():
        if not isinstance(keys, dict) or name in ("unverified",):
            continue
        doc: dict[str, Any] = {}
        set_path(doc, str(keys["nodeSelector"]), scheduling.system_node_selector())
        out[name] = doc
    return out


def _ecr_public_findings(scope: Construct) -> list[str]:
    """The cdk-nag rule id of the kubectl handler's ECR Public policy, whose ARN is a condition (Fn::If)."""
    import json

    stack = Stack.of(scope)
    condition = next(
        (c for c in stack.node.find_all() if type(c).__name__ == "CfnCondition" and "HasEcrPublic" in c.node.id), None
    )
    if condition is None:
        return []
    logical = stack.resolve(condition.logical_id)
    arn = {
        "Fn::If": [
            logical,
            {
                "Fn::Join": [
                    "",
                    ["arn:", {"Ref": "AWS::Partition"}, ":iam::aws:policy/AmazonElasticContainerRegistryPublicReadOnly"],
                ]
            },
            {"Ref": "AWS::NoValue"},
        ]
    }
    return [f"AwsSolutions-IAM4[Policy::{json.dumps(arn, separators=(',', ':'))}]"]
