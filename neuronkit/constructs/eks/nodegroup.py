"""A managed node group that is one of the kit's pools: the kit's launch template pieces, the EKS image."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

from aws_cdk import Annotations, Fn, Stack
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_eks_v2 as eks
from aws_cdk import aws_iam as iam
from aws_cdk import custom_resources as cr
from constructs import Construct

from neuronkit import catalog, clock, userdata
from neuronkit.constructs.compliance import acknowledge
from neuronkit.constructs.eks.cluster import EksClusterLike
from neuronkit.constructs.eks.nodegroup_name import ReplaceableName
from neuronkit.constructs.launch_template import (
    TOKEN_MARGIN_BYTES,
    USER_DATA_LIMIT_BYTES,
    capacity_target,
    efa_network_interfaces,
    metadata_options,
    root_volume,
    tag_specifications,
)
from neuronkit.constructs.node_role import eks_node_role
from neuronkit.constructs.observability import NodeObservability, ObservabilitySpec
from neuronkit.constructs.python_function import drop_implied_role_dependency
from neuronkit.constructs.security import EfaSecurityGroup
from neuronkit.constructs.storage import StorageAccess
from neuronkit.constructs.training_cluster import CapacitySpec, block_over_message, capacity_metadata
from neuronkit.kubernetes import autoscaler, scheduling
from neuronkit.kubernetes.neuron_chart import Taint
from neuronkit.reports.pools import pool_metadata

# aws-cdk-lib's id of the AwsCustomResource Lambda function, one per stack.
_AWS_CUSTOM_RESOURCE_SINGLETON = "AWS679f53fac002430cb0da5b7982bd2287"
# The EKS-optimized Amazon Linux 2023 images boot from /dev/xvda.
ROOT_DEVICE = "/dev/xvda"
MIME_BOUNDARY = "==NEURONKIT-EKS=="
# AWS-managed policies EKS documents for a node role (Amazon EKS User Guide, "Amazon EKS node IAM role").


_EFFECTS = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}


@dataclass(frozen=True)
class NodeGroupSpec:
    """The nodes of one node group.

    ``instance_types`` in priority order (all Neuron or all GPU); ``min_size`` (default 0) <= ``desired_size``
    (default ``min_size``) <= ``max_size``; ``root_volume_gib`` defaults to the catalog's minimum for the
    accelerator. ``efa`` (default True) gives a single-type group every EFA interface the catalog lists and a
    cluster placement group; a multi-type group gets the primary interface only. ``capacity`` defaults to
    on-demand; a Capacity Block group stays empty until the block starts. The image is the catalog's
    ``amiType`` + ``release_version`` for the accelerator (``neuronkit/catalog/eks.yaml``). ``lnc``: the logical
    NeuronCore setting (Trn2/Trn3), recorded in the pool Metadata as on the Auto Scaling path.
    """

    name: str
    instance_types: Sequence[str]
    max_size: int
    min_size: int = 0
    desired_size: int | None = None
    root_volume_gib: int | None = None
    efa: bool = True
    capacity: CapacitySpec = field(default_factory=CapacitySpec)
    max_pods: int = field(default_factory=lambda: int(catalog.eks_facts()["pods"]["max_pods_per_node"]))
    labels: Mapping[str, str] = field(default_factory=dict)
    taints: Sequence[Taint] = ()
    # The accelerator's taint (aws.amazon.com/neuron or nvidia.com/gpu, NoSchedule) on every node, so that only pods
    # that tolerate it (device plugins, serving and training pods) land on an accelerator (docs/eks.md).
    accelerator_taint: bool = True
    lnc: int | None = None  # the logical NeuronCore setting the boot script applies, said in the pool Metadata
    release_version: str | None = None  # the EKS AMI release; defaults to the catalog's pin (catalog/eks.yaml)
    # The inference fleet whose GPU fallback this group is (its Neuron group's name), said in the pool Metadata as
    # ``fallback_for`` so that `neuronkit cost` compares the fleet with it; defaults to None (no such link).
    fallback_for: str | None = None

    def __post_init__(self) -> None:
        facts = [catalog.get(t) for t in self.instance_types]
        if not facts:
            raise ValueError("instance_types: give at least one")
        if len({f.is_neuron for f in facts}) > 1:
            raise ValueError("instance_types: a node group is all Neuron or all GPU types (one image each)")
        if not 0 <= self.min_size <= self.max_size:
            raise ValueError(f"min_size {self.min_size} must lie between 0 and max_size {self.max_size}")
        if self.desired_size is not None and not self.min_size <= self.desired_size <= self.max_size:
            raise ValueError(f"desired_size {self.desired_size} must lie between min_size and max_size")
        if self.capacity.kind != "on-demand" and len(facts) > 1:
            raise ValueError("capacity: a reservation or Capacity Block holds one instance type; give one")

    @property
    def image(self) -> Literal["neuron", "gpu"]:
        return "neuron" if catalog.get(self.instance_types[0]).is_neuron else "gpu"

    @property
    def root_gib(self) -> int:
        minimum = max(catalog.min_root_volume_gib(catalog.get(t)) for t in self.instance_types)
        return max(self.root_volume_gib or 0, minimum)

    @property
    def all_taints(self) -> list[Taint]:
        """``taints``, then the accelerator's taint (unless ``accelerator_taint`` is off), each once."""
        out = list(self.taints)
        if self.accelerator_taint and scheduling.taint_of(self.image) not in out:
            out.append(scheduling.taint_of(self.image))
        return out

    @property
    def uses_efa(self) -> bool:
        return self.efa and len(self.instance_types) == 1 and catalog.get(self.instance_types[0]).efa_supported


def node_user_data(script: str, max_pods: int) -> str:
    """The kit's part of the user data, a MIME multi-part archive EKS merges with its own nodeadm part: a NodeConfig
    that sets kubelet maxPods (so a node's subnet addresses are bounded), then the kit's boot script, which
    cloud-init runs before nodeadm-run starts the kubelet."""
    if MIME_BOUNDARY in script:
        raise ValueError(f"user data: the script contains the MIME boundary {MIME_BOUNDARY}")
    node_config = (
        f"apiVersion: node.eks.aws/v1alpha1\nkind: NodeConfig\nspec:\n  kubelet:\n    config:\n      maxPods: {max_pods}\n"
    )
    out = (
        "MIME-Version: 1.0\n"
        f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"\n\n'
        f"--{MIME_BOUNDARY}\nContent-Type: application/node.eks.aws\n\n{node_config}\n"
        f'--{MIME_BOUNDARY}\nContent-Type: text/x-shellscript; charset="us-ascii"\n\n{script.rstrip()}\n\n'
        f"--{MIME_BOUNDARY}--\n"
    )
    size, room = len(out.encode()), user_data_room()
    if size > room:
        raise ValueError(
            f"user data: the kit's part is {size} bytes, over the {room} bytes EKS leaves it under EC2's "
            f"{USER_DATA_LIMIT_BYTES}-byte limit (catalog/eks.yaml user_data.merged_part_reserve_bytes for EKS's "
            f"NodeConfig part, {TOKEN_MARGIN_BYTES} for tokens that resolve at deploy); shorten the boot scripts or "
            "ship large files through the artifacts bucket and fetch them at boot"
        )
    return out


def user_data_room() -> int:
    """The most bytes the kit's part of a node group's user data may take: EC2's 16 KB, less EKS's merged NodeConfig
    part (catalog/eks.yaml ``user_data.merged_part_reserve_bytes``) and the margin for tokens resolved at deploy."""
    reserve = int(catalog.eks_facts()["user_data"]["merged_part_reserve_bytes"])
    return USER_DATA_LIMIT_BYTES - reserve - TOKEN_MARGIN_BYTES


def eks_boot_script(
    *,
    environment: str,
    pool: str,
    instance_types: Sequence[str],
    efa: bool,
    storage: StorageAccess | None = None,
    neuron_driver: str | None = None,
    neuron_driver_shipped: str | None = None,
    neuron_release: str | None = None,
    lnc: int | None = None,
    observability: Mapping[str, str | int] | None = None,
) -> str:
    """The kit's boot check for a node group's nodes (``neuronkit/userdata/eks-node.sh``), rendered: every device of
    the node's own type (a group of several types lists each), EFA when the group carries it, the pool's Neuron
    driver rule (``neuron_driver``: the release's ``driver_min``, below it the node fails; ``neuron_driver_shipped``:
    below it the node joins with a warning and a metric; ``neuron_release``: the release whose driver window the node
    must lie in, catalog ``releases.driver_window``), Lustre of ``storage``, the LNC setting, all under the
    catalog's boot deadline; a failing node publishes ``NodeBootFailures`` before it powers off. With ``observability`` (the values
    of :meth:`NodeObservability.userdata_values`) ``observability.sh`` runs first, as on Auto Scaling pools: the
    CloudWatch agent and the neuron-monitor publisher (same metric names, Environment and Pool dimensions); it is
    best effort, so its failure never keeps a node out of the cluster."""
    facts = [catalog.get(t) for t in instance_types]
    neuron = facts[0].is_neuron
    return userdata.render(
        ["observability.sh", "eks-node.sh"] if observability is not None else "eks-node.sh",
        {
            **(observability or {}),
            "ENVIRONMENT": environment,
            "POOL": pool,
            "ACCELERATOR": "neuron" if neuron else "gpu",
            "EXPECTED_ACCELERATORS": facts[0].neuron_devices if neuron else facts[0].gpus,
            "ACCELERATORS_BY_TYPE": " ".join(f"{f.name}={f.neuron_devices if neuron else f.gpus}" for f in facts),
            "EXPECTED_EFA": facts[0].efa_max_interfaces if efa else 0,
            "LUSTRE_DNS": (storage.lustre_dns_name or "") if storage else "",
            "LUSTRE_MOUNT": (storage.lustre_mount_name or "") if storage else "",
            **userdata.boot_values(
                driver_min=neuron_driver if neuron else None,
                driver_shipped=neuron_driver_shipped if neuron else None,
                release=neuron_release if neuron else None,
            ),
            "LNC": lnc or "",
        },
    )


class NeuronNodeGroup(Construct):
    """An EKS managed node group on a launch template that shares the kit's pieces.

    The template names no image (EKS picks the catalog's ``amiType`` + ``releaseVersion`` and merges its nodeadm
    part into the user data) and no profile; no instance type either (the node group lists them), except on a
    Capacity Block group, whose template names the block's type and whose node group lists none (the EKS guide
    requires it); it carries the EFA
    multi-card layout of the catalog (each interface with the group's EFA security group, the cluster security
    group and ``extra_security_group_ids``), a cluster placement group, the reservation or Capacity Block target,
    IMDSv2 with a hop limit of 1 (pods cannot take the node role), an encrypted gp3 root volume and the pool's
    tags. ``script`` is the kit's rendered boot script (``neuronkit/userdata/eks-node.sh``): it runs before the
    node registers and keeps a node that fails its check out of the cluster. Node auto-repair is on. A Capacity
    Block group gets scheduled actions on the node group's Auto Scaling group (found with DescribeNodegroup) that
    scale it up at the block's start and to zero before EC2 reclaims the nodes; synthesized while the block runs
    (``neuronkit.clock``: the context key ``neuronkit:now``, else the system clock), it gets no start action and
    starts at ``max_size``, and a block past its scale-down is refused (ValueError). Updates use the MINIMAL strategy
    (terminate first); a serving group (``role="inference"``) does not force an update through PodDisruptionBudgets.

    The group's EKS name is ``ENV-POOL-<digest>`` (``nodegroup_name``), the digest over its create-only properties, so
    that a change CloudFormation makes by replacement renames it and can happen (``nodegroup_name.py``); the lookup
    of its Auto Scaling group name runs again on every update (a replaced group has a new one).

    Public attributes: ``nodegroup``, ``nodegroup_name`` (EKS's name, a token until synthesis), ``group_name`` (the
    stable ``ENV-POOL``), ``replaceable_name`` (``.pattern``: ``ENV-POOL-????????`` for IAM), ``auto_scaling_group_name``,
    ``launch_template``, ``security_group`` (or None), ``placement_group`` (or None), ``role``, ``spec``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        environment: str,
        cluster: EksClusterLike,
        spec: NodeGroupSpec,
        subnets: Sequence[ec2.ISubnet],
        script: str | Callable[[Mapping[str, str | int] | None], str],
        extra_security_group_ids: Sequence[str] = (),
        tags: Mapping[str, str] | None = None,
        role: Literal["training", "training-gpu", "inference"] = "training",
        az_id: str | None = None,
        observability: ObservabilitySpec | None = None,
    ) -> None:
        super().__init__(scope, id)
        self.spec = spec
        self.group_name = f"{environment}-{spec.name}"
        # EKS's name: ENV-POOL-<digest of the create-only properties>, so a change CloudFormation makes by replacement
        # can happen (docs/eks.md, "Day two"); ``group_name`` stays the pool's stable name for descriptions.
        self.replaceable_name = ReplaceableName(self.group_name)
        self.nodegroup_name: str = self.replaceable_name.name
        self._tags = {**(tags or {}), "neuronkit:pool": spec.name}
        self._serving = role == "inference"
        self._block_started = self._block_phase() == "running"
        self._groups(cluster, extra_security_group_ids)
        self._placement()
        self._role()
        self.observability: NodeObservability | None = None
        if observability is not None:
            # The same log groups, node kit and metric permissions as an Auto Scaling pool's nodes.
            self.observability = NodeObservability(
                self, "Observability", environment=environment, pool=spec.name, role=self.role, spec=observability
            )
        if callable(script):
            script = script(self.observability.userdata_values(accelerator=spec.image) if self.observability else None)
        self._launch_template(script)
        self._nodegroup(cluster, subnets)
        self.nodegroup.node.default_child.cfn_options.metadata = {  # type: ignore[union-attr]
            "neuronkit": self._metadata(environment, role, az_id)
        }
        self._auto_scaling_group(cluster)
        if spec.capacity.kind == "capacity-block":
            self._block_schedule(cluster)

    def _block_phase(self) -> str | None:
        """A Capacity Block's phase at synth time (``neuronkit.clock``); a block whose scale-down has passed is refused."""
        cap = self.spec.capacity
        if cap.kind != "capacity-block":
            return None
        phase = cap.block_phase(clock.now(self))
        if phase == "over":
            raise ValueError(block_over_message(cap))
        return phase

    def _groups(self, cluster: EksClusterLike, extra: Sequence[str]) -> None:
        self.security_group: ec2.ISecurityGroup | None = None
        groups = [cluster.cluster_security_group_id, *extra]
        if self.spec.uses_efa:
            self.security_group = EfaSecurityGroup(
                self, "EfaSecurityGroup", vpc=cluster.cluster.vpc, description=f"{self.group_name}: EFA within the node group"
            ).security_group
            groups.insert(0, self.security_group.security_group_id)
        self._security_group_ids = groups

    def _placement(self) -> None:
        self.placement_group: ec2.CfnPlacementGroup | None = None
        facts = catalog.get(self.spec.instance_types[0])
        # A Capacity Block is placed close together already (EC2 user guide, "Work with Capacity Blocks").
        if self.spec.uses_efa and self.spec.capacity.kind != "capacity-block" and "cluster" in facts.placement_strategies:
            self.placement_group = ec2.CfnPlacementGroup(self, "PlacementGroup", strategy="cluster")

    def _role(self) -> None:
        self.role = eks_node_role(self, "NodeRole", description=f"{self.group_name} EKS nodes")

    def _launch_template(self, script: str) -> None:
        spec = self.spec
        facts = catalog.get(spec.instance_types[0])
        interfaces = efa_network_interfaces(facts, self._security_group_ids)[: None if spec.uses_efa else 1]
        cap = spec.capacity
        is_block = cap.kind == "capacity-block"
        reservation = cap.reservation_id if cap.kind != "on-demand" else None
        self.launch_template = ec2.CfnLaunchTemplate(
            self,
            "LaunchTemplate",
            launch_template_data=ec2.CfnLaunchTemplate.LaunchTemplateDataProperty(
                network_interfaces=interfaces,
                # A Capacity Block group names its type here and none on the node group: EKS rejects the create
                # request otherwise (EKS User Guide, "Create a managed node group with Capacity Blocks for ML").
                instance_type=spec.instance_types[0] if is_block else None,
                placement=(
                    ec2.CfnLaunchTemplate.PlacementProperty(group_name=self.placement_group.ref) if self.placement_group else None
                ),
                metadata_options=metadata_options(hop_limit=1),
                block_device_mappings=[root_volume(ROOT_DEVICE, spec.root_gib)],
                ebs_optimized=True,
                monitoring=ec2.CfnLaunchTemplate.MonitoringProperty(enabled=True),
                user_data=Fn.base64(node_user_data(script, spec.max_pods)),
                capacity_reservation_specification=capacity_target(reservation, None),
                instance_market_options=(
                    ec2.CfnLaunchTemplate.InstanceMarketOptionsProperty(market_type="capacity-block") if is_block else None
                ),
                tag_specifications=tag_specifications(self._tags),
            ),
        )

    def _nodegroup(self, cluster: EksClusterLike, subnets: Sequence[ec2.ISubnet]) -> None:
        spec = self.spec
        image = catalog.eks_facts()["node_images"][spec.image]
        is_block = spec.capacity.kind == "capacity-block"
        # Capacity Blocks refuse launches before their start: the group stays empty until the scheduled scale-up. A
        # block already running gets no start action (Auto Scaling refuses one in the past): the group starts at its
        # size, which EKS accepts while the block is active.
        min_size, desired = (0, spec.max_size if self._block_started else 0) if is_block else (spec.min_size, spec.desired_size)
        self.nodegroup = eks.Nodegroup(
            self,
            "NodeGroup",
            cluster=cluster.cluster,
            nodegroup_name=self.nodegroup_name,
            release_version=spec.release_version or str(image["release_version"]),
            instance_types=None if is_block else [ec2.InstanceType(t) for t in spec.instance_types],
            launch_template_spec=eks.LaunchTemplateSpec(
                id=self.launch_template.ref, version=self.launch_template.attr_latest_version_number
            ),
            subnets=ec2.SubnetSelection(subnets=list(subnets)),
            min_size=min_size,
            max_size=spec.max_size,
            desired_size=desired if desired is not None else min_size,
            capacity_type=eks.CapacityType.CAPACITY_BLOCK if is_block else eks.CapacityType.ON_DEMAND,
            enable_node_auto_repair=True,
            # A serving group's update waits for its pods' PodDisruptionBudgets instead of evicting through them
            # (ForceUpdateEnabled: "Force the update if any Pod on the existing node group can't be drained due to a
            # Pod disruption budget issue"); a training group is updated between jobs and may force.
            force_update=not self._serving,
            max_unavailable=1,
            node_role=self.role,
            # A GPU group's nodes carry Cluster Autoscaler's GPU label, so that a node whose GPUs are not allocatable
            # yet (device plugin not registered) counts as unready, not as capacity (docs/eks.md, "Accelerator nodes
            # still initialising"); the autoscaler reads a group's labels from DescribeNodegroup at zero nodes too.
            labels={
                **scheduling.pool_node_selector(spec.name),
                **autoscaler.accelerator_labels(spec.instance_types[0]),
                **spec.labels,
            },
            taints=[eks.TaintSpec(key=t.key, value=t.value, effect=eks.TaintEffect[_EFFECTS[t.effect]]) for t in spec.all_taints]
            or None,
            tags=self._tags,
        )
        # The L2 checks amiType against its own table of instance families, which does not know every Trainium
        # and Inferentia type (aws-cdk-lib 2.275.0 refuses AL2023_X86_64_NEURON with trn2): set it on the L1.
        cfn = self.nodegroup.node.default_child
        assert isinstance(cfn, eks.CfnNodegroup)
        cfn.ami_type = str(image["ami_type"])  # an L1 attribute, so that the name's digest covers it
        self.replaceable_name.attach(self.nodegroup)
        # Accelerated capacity (a fully used Capacity Block, a quota-bound trn2/p5 pool) cannot take the DEFAULT
        # strategy's surge, which "launches the new instances first": MINIMAL terminates first (EKS API reference,
        # NodegroupUpdateConfig). The L2 has no update strategy: set it on the L1.
        cfn.add_property_override("UpdateConfig.UpdateStrategy", "MINIMAL")
        Annotations.of(self.nodegroup).acknowledge_warning(
            "@aws-cdk/aws-eks:gpuInstancesUseAL2",
            "the node group's amiType is the catalog's AL2023 Neuron or NVIDIA variant, set on the L1 above",
        )

    def _metadata(self, environment: str, role: str, az_id: str | None) -> dict[str, object]:
        spec = self.spec
        neuron = spec.image == "neuron"
        return pool_metadata(
            environment=environment,
            region=Stack.of(self).region,
            pool=spec.name,
            role=role,
            neuron_types=list(spec.instance_types) if neuron else [],
            fallback_types=[] if neuron else list(spec.instance_types),
            min_size=spec.min_size,
            max_size=spec.max_size,
            desired_size=spec.desired_size,
            capacity=spec.capacity.kind,
            **({"az_id": az_id} if az_id else {}),
            **({"lnc": spec.lnc} if spec.lnc else {}),
            **({"fallback_for": spec.fallback_for} if spec.fallback_for else {}),
            **capacity_metadata(spec.capacity),
        )

    def _auto_scaling_group(self, cluster: EksClusterLike) -> None:
        """The name of the Auto Scaling group EKS creates for the node group (DescribeNodegroup at deploy time): the
        Capacity Block schedule and the environment's dashboard and alarms name it."""
        cfn = self.nodegroup.node.default_child
        assert isinstance(cfn, eks.CfnNodegroup)
        # Called on create and again on every update: the node group's name (Fn::GetAtt) is a property, and a
        # replaced group (a new name) has a new Auto Scaling group, so CloudFormation updates this resource with it.
        call = cr.AwsSdkCall(
            service="EKS",
            action="describeNodegroup",
            # The L1's Fn::GetAtt NodegroupName whatever the app's feature flags (the L2's nodegroupName is a Ref, which
            # names cluster/group, unless @aws-cdk/aws-eks:nodegroupNameAttribute is on).
            parameters={"clusterName": cluster.cluster.cluster_name, "nodegroupName": cfn.attr_nodegroup_name},
            physical_resource_id=cr.PhysicalResourceId.of(f"{self.group_name}-asg"),
            output_paths=["nodegroup.resources.autoScalingGroups.0.name"],
        )
        stack = Stack.of(self)
        nodegroup_arn = (
            f"arn:{stack.partition}:eks:{stack.region}:{stack.account}:nodegroup/{cluster.cluster.cluster_name}/"
            f"{self.replaceable_name.pattern}/*"
        )
        lookup = cr.AwsCustomResource(
            self,
            "AutoScalingGroupName",
            on_create=call,
            on_update=call,
            # The group and its replacements (ENV-POOL-????????), not one group's ARN: a replacement then leaves this
            # policy's text alone, so the call right after it never races an IAM change (outside review of fix 5).
            policy=cr.AwsCustomResourcePolicy.from_sdk_calls(resources=[nodegroup_arn]),
            install_latest_aws_sdk=False,
        )
        acknowledge(
            lookup,
            f"AwsSolutions-IAM5[Resource::{nodegroup_arn}]",
            "the node group's ARN ends in an id EKS assigns at creation; ? after ENV-POOL- is the digest of the group "
            "and of its replacements",
        )
        singleton = Stack.of(self).node.try_find_child(_AWS_CUSTOM_RESOURCE_SINGLETON)
        if singleton is not None:
            drop_implied_role_dependency(singleton)
            acknowledge(
                singleton,
                "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
                "the AwsCustomResource that finds the node groups' Auto Scaling groups logs through the AWS-managed "
                "Lambda execution policy",
            )
        self.auto_scaling_group_name: str = lookup.get_response_field("nodegroup.resources.autoScalingGroups.0.name")
        self._group_metrics()

    def _group_metrics(self) -> None:
        """Group metrics (GroupInServiceInstances ...) on the node group's Auto Scaling group: EKS does not turn them
        on, and the environment's dashboard counts a pool's nodes in service from them, as on the ASG path."""
        stack = Stack.of(self)
        group_arn = (
            f"arn:{stack.partition}:autoscaling:{stack.region}:{stack.account}:autoScalingGroup:*:"
            f"autoScalingGroupName/{self.auto_scaling_group_name}"
        )
        call = cr.AwsSdkCall(
            service="AutoScaling",
            action="enableMetricsCollection",
            parameters={"AutoScalingGroupName": self.auto_scaling_group_name, "Granularity": "1Minute"},
            physical_resource_id=cr.PhysicalResourceId.of(f"{self.group_name}-group-metrics"),
        )
        metrics = cr.AwsCustomResource(
            self,
            "GroupMetrics",
            on_create=call,
            on_update=call,  # a replaced node group has a new Auto Scaling group
            policy=cr.AwsCustomResourcePolicy.from_statements(
                [iam.PolicyStatement(actions=["autoscaling:EnableMetricsCollection"], resources=[group_arn])]
            ),
            install_latest_aws_sdk=False,
        )
        acknowledge(
            metrics,
            f"AwsSolutions-IAM5[Resource::{group_arn}]",
            "the node group's own Auto Scaling group; the * is the group id EKS generates",
        )

    def _block_schedule(self, cluster: EksClusterLike) -> None:
        """Scale-up at the block's start and to zero before EC2 reclaims the nodes, on the node group's Auto
        Scaling group (Amazon EKS User Guide, "Create a managed node group with Capacity Blocks for ML"). A block
        already running gets no start action: Auto Scaling refuses a scheduled action in the past, and the node
        group starts at its size instead."""
        cap = self.spec.capacity
        assert cap.start and cap.scale_down_at
        group = self.auto_scaling_group_name
        steps = [("BlockStart", cap.start, self.spec.max_size)] if not self._block_started else []
        for step, at, desired in [*steps, ("BlockEnd", cap.scale_down_at, 0)]:
            autoscaling.CfnScheduledAction(
                self, step, auto_scaling_group_name=group, start_time=_iso(at), min_size=0,
                max_size=self.spec.max_size, desired_capacity=desired,
            )  # fmt: skip


def _iso(when: dt.datetime) -> str:
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
