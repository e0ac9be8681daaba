"""A multi-node training cluster: one instance type, one subnet, a cluster placement group."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from aws_cdk import CfnAutoScalingScheduledAction, CfnTag, CfnUpdatePolicy, Stack
from aws_cdk import aws_autoscaling as autoscaling
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_resourcegroups as resourcegroups
from aws_cdk import aws_sns as sns
from constructs import Construct

from neuronkit import catalog, clock, userdata
from neuronkit.config.base import AZ_ID_RE
from neuronkit.constructs import arns, placement, pseudo
from neuronkit.constructs.compliance import acknowledge
from neuronkit.constructs.groups import (
    READY_TAG,
    drain_hook,
    grant_node_lifecycle,
    group_tags,
    launch_hook,
    lifecycle_values,
    notifications,
)
from neuronkit.constructs.launch_template import AcceleratorLaunchTemplate, AmiSpec
from neuronkit.constructs.node_pool import NodePoolSpec
from neuronkit.constructs.node_role import node_role
from neuronkit.constructs.observability import NodeObservability, ObservabilitySpec
from neuronkit.constructs.security import EfaSecurityGroup
from neuronkit.constructs.storage import StorageAccess
from neuronkit.reports.pools import pool_metadata
from neuronkit.userdata.neuron_monitor_publisher import BUSY_MARKER


@dataclass(frozen=True)
class CapacitySpec:
    """Where the cluster's capacity comes from.

    ``on-demand``; ``odcr`` with ``create_count`` (the construct creates the reservation inside the
    placement group; it bills from creation, used or not) or ``reservation_id`` (an existing one);
    ``capacity-block`` with ``reservation_id``, ``start`` and ``end`` (bought outside CloudFormation).
    """

    kind: Literal["on-demand", "odcr", "capacity-block"] = "on-demand"
    reservation_id: str | None = None
    # UltraServer Capacity Blocks: one reservation per UltraServer; with more than one the construct creates a
    # Capacity Reservation resource group of them and the nodes launch through it.
    reservation_ids: tuple[str, ...] = ()
    create_count: int | None = None
    end: dt.datetime | None = None
    start: dt.datetime | None = None
    # Capacity Blocks: scale to zero this long before EC2 reclaims the nodes (30 minutes before the end),
    # each node draining its job through a termination hook meanwhile.
    drain_minutes: int = 15
    # What a Capacity Block cost (its UpfrontFee): recorded in the group's metadata for `neuronkit cost`.
    upfront_fee_usd: float | None = None

    @property
    def scale_down_at(self) -> dt.datetime | None:
        """When a Capacity Block cluster scales to zero: EC2's reclaim time minus the drain time."""
        if self.kind != "capacity-block" or self.end is None:
            return None
        reclaim = catalog.capacity_facts()["capacity_blocks"]["reclaim_minutes_before_end"]
        return self.end - dt.timedelta(minutes=reclaim + self.drain_minutes)

    def block_phase(self, now: dt.datetime) -> Literal["upcoming", "running", "over"]:
        """Where a Capacity Block stands at ``now``: ``upcoming`` (both scheduled actions lie ahead), ``running``
        (started, scale-down ahead: no start action, the group starts at its block size) or ``over`` (the scale-down
        time has passed). Auto Scaling refuses a scheduled action in the past (PutScheduledUpdateGroupAction)."""
        if self.kind != "capacity-block" or self.start is None or self.scale_down_at is None:
            raise ValueError("block_phase: only a Capacity Block with start and end has a phase")
        at = _utc(now)
        if _utc(self.scale_down_at) <= at:
            return "over"
        return "running" if _utc(self.start) <= at else "upcoming"


def block_over_message(capacity: CapacitySpec) -> str:
    """What a construct says when a block's scale-down time has passed (validate names the file and key first)."""
    assert capacity.end is not None and capacity.scale_down_at is not None
    return (
        f"capacity: the Capacity Block {capacity.reservation_id or ', '.join(capacity.reservation_ids)} is over (it "
        f"ends {_iso(capacity.end)}, scale-down at {_iso(capacity.scale_down_at)} has passed; Auto Scaling refuses a "
        "scheduled action in the past): remove the block or replace it with the new one you bought"
    )


_AZ_ID = re.compile(AZ_ID_RE)


class TrainingCluster(Construct):
    """An Auto Scaling group of one accelerator type in one subnet and a cluster placement group.

    Safe for long jobs: new nodes are protected from scale-in (``scale_in_protection``, default on;
    a node runs ``neuronkit-release`` at the end of a job), AZ rebalancing is suspended by the first
    node, and a launch template change never replaces running nodes (no rolling update policy; the
    group points at the template version current at deploy time). Scale to zero with ``nodes.min_size=0``.
    Capacity Blocks get scheduled actions that scale up at the block's start (none when synthesized while the block
    runs, per ``neuronkit.clock``: the group then starts at ``max_size``; a block past its scale-down is refused) and
    to zero ``capacity.drain_minutes`` before EC2 reclaims the nodes, and a termination hook that gives each node
    that long to checkpoint its job (``kit/neuronkit-drain``). ``lnc`` sets the runtime's logical
    NeuronCore setting (Trn2/Trn3); ``ultraserver_size`` (servers per UltraServer, 0: none) ranks each
    UltraServer's nodes together in the hostfile. ``nodes`` (a :class:`NodePoolSpec`) names the type, the
    size bounds, the AMI (default: the Neuron DLAMI of the newest release that supports training on the
    type, or the GPU DLAMI) and the root volume.

    User data runs ``neuronkit/userdata/observability.sh`` (CloudWatch agent, boot and journal logs to the
    pool's log groups, neuron-monitor metrics; ``observability`` sets the namespace and log retention,
    defaults: ``Neuronkit``, 30 days) and then ``neuronkit/userdata/training-node.sh``, which checks every accelerator and EFA device is
    present, mounts Lustre, sets the EFA environment, points the Neuron compile cache at local NVMe or
    S3 and keeps a hostfile of the group's nodes. The template's size does not depend on node count.
    ``expected_neuron_driver`` (the pool's release ``driver_min``) fails a node with an older driver;
    ``shipped_neuron_driver`` (the release's ``driver_shipped``, defaults to the minimum) makes a node between the two
    join with a warning and a ``NeuronDriverBelowShipped`` datapoint. Every step before the node completes its launch
    hook runs under the catalog's boot deadline; a failing node publishes ``NodeBootFailures`` before its ABANDON.

    Public attributes: ``auto_scaling_group`` (``CfnAutoScalingGroup``), ``launch_template``,
    ``security_group``, ``placement_group`` (or None), ``role``, ``capacity_reservation`` (or None),
    ``group_name``, ``instance_type`` (catalog facts), ``observability`` (``NodeObservability``).
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        environment: str,
        name: str,
        nodes: NodePoolSpec,
        vpc: ec2.IVpc,
        subnet_id: str | None = None,
        az_id: str | None = None,
        vpc_subnets: ec2.SubnetSelection | None = None,
        capacity: CapacitySpec | None = None,
        storage: StorageAccess | None = None,
        notifications_topic_arn: str | None = None,
        notifications_topic: sns.ITopic | None = None,
        extra_security_group_ids: Sequence[str] = (),
        compile_cache: Literal["local", "s3"] = "local",
        scale_in_protection: bool = True,
        role: Literal["training", "training-gpu"] = "training",
        tags: Mapping[str, str] | None = None,
        observability: ObservabilitySpec | None = None,
        expected_neuron_driver: str | None = None,
        shipped_neuron_driver: str | None = None,
        neuron_release: str | None = None,
        boot_timeout_seconds: int = 1800,
        lnc: int | None = None,
        ultraserver_size: int = 0,
    ) -> None:
        super().__init__(scope, id)
        subnet_id, az_id = self._where(vpc, name, subnet_id, az_id, vpc_subnets)
        notifications_topic_arn = placement.topic_arn(notifications_topic, notifications_topic_arn, owner=name)
        facts, instance_type = nodes.facts, nodes.instance_type
        min_size, max_size, desired_size = nodes.min_size, nodes.max_size, nodes.desired_size
        capacity = capacity or CapacitySpec()
        self.instance_type = facts
        self.group_name = f"{environment}-{name}"
        self.pool = name
        self._tags = {**(tags or {}), "neuronkit:pool": name}
        accelerator: Literal["neuron", "gpu"] = "neuron" if facts.is_neuron else "gpu"

        self.security_group = EfaSecurityGroup(
            self, "EfaSecurityGroup", vpc=vpc, description=f"{self.group_name}: EFA and collectives within the cluster"
        ).security_group
        self._placement(capacity)
        reservation_id = self._reservation(capacity, instance_type, az_id)
        self._node_role(environment, name, storage, compile_cache, observability)
        is_block = capacity.kind == "capacity-block"
        script = self._user_data(
            environment,
            name,
            accelerator,
            storage,
            compile_cache,
            (expected_neuron_driver, shipped_neuron_driver, neuron_release),
            {
                "LNC": lnc or "",
                "ULTRASERVER_SIZE": ultraserver_size,
                "DRAIN_HOOK": catalog.software_facts()["lifecycle"]["drain_hook_name"] if is_block else "",
                "DRAIN_SECONDS": capacity.drain_minutes * 60,
            },
        )
        self._launch_template(
            instance_type, nodes.ami, storage, extra_security_group_ids, script, nodes.root_volume_gib, capacity, reservation_id
        )
        if is_block:
            # Capacity Blocks refuse launches before their start: the group stays empty until then. A block already
            # running gets no start action (Auto Scaling refuses one in the past): the group starts at its size.
            phase = capacity.block_phase(clock.now(self))
            if phase == "over":
                raise ValueError(block_over_message(capacity))
            min_size, desired_size = 0, (max_size if phase == "running" else 0)
            scale_in_protection = False  # the scheduled scale-down before the block's end must not wait
        hooks = [launch_hook(boot_timeout_seconds)] + ([drain_hook(capacity.drain_minutes * 60)] if is_block else [])
        group = self._group(min_size, max_size, desired_size, subnet_id, scale_in_protection, hooks, notifications_topic_arn)
        group.cfn_options.metadata = {
            "neuronkit": self._pool_metadata(
                environment, name, role, facts, min_size, max_size, desired_size, capacity, az_id, lnc, ultraserver_size
            )
        }
        if is_block:
            self._block_schedule(capacity, max_size, started=phase == "running")

    def _launch_template(
        self,
        instance_type: str,
        ami: AmiSpec | None,
        storage: StorageAccess | None,
        extra_security_group_ids: Sequence[str],
        script: str,
        root_volume_gib: int | None,
        capacity: CapacitySpec,
        reservation_id: str | None,
    ) -> None:
        """The nodes' launch template: EFA interfaces, the role, the boot script, the reservation or block."""
        self.launch_template = AcceleratorLaunchTemplate(
            self,
            "LaunchTemplate",
            instance_type=instance_type,
            ami=ami or AmiSpec.default_for(instance_type, "pytorch-training"),
            security_group_ids=self._security_group_ids(storage, extra_security_group_ids),
            user_data=script,
            role=self.role,
            root_volume_gib=root_volume_gib,
            capacity_reservation_id=reservation_id if capacity.kind != "on-demand" and not self.reservation_group else None,
            capacity_reservation_group_arn=self.reservation_group.attr_arn if self.reservation_group else None,
            capacity_block=capacity.kind == "capacity-block",
            tags=self._tags,
        )

    def _pool_metadata(
        self,
        environment: str,
        name: str,
        role: str,
        facts: catalog.InstanceType,
        min_size: int,
        max_size: int,
        desired_size: int | None,
        capacity: CapacitySpec,
        az_id: str,
        lnc: int | None,
        ultraserver_size: int,
    ) -> dict[str, Any]:
        """The pool contract of neuronkit.reports.pools on the group, with LNC, UltraServer and block dates."""
        instance_type = facts.name
        return pool_metadata(
            environment=environment,
            region=Stack.of(self).region,
            pool=name,
            role=role,
            neuron_types=[instance_type] if facts.is_neuron else [],
            fallback_types=[] if facts.is_neuron else [instance_type],
            min_size=min_size,
            max_size=max_size,
            desired_size=desired_size,
            capacity=capacity.kind,
            az_id=az_id,
            **({"lnc": lnc} if lnc else {}),
            **({"ultraserver_size": ultraserver_size} if ultraserver_size else {}),
            **capacity_metadata(capacity),
        )

    # --- placement and capacity ------------------------------------------------------------------------
    def _placement(self, capacity: CapacitySpec) -> None:
        self.placement_group: ec2.CfnPlacementGroup | None = None
        # A Capacity Block is already placed close together on the network; a placement group of our own would
        # ask EC2 for a placement the block's capacity may not have. EC2 user guide, "Work with Capacity Blocks".
        if capacity.kind != "capacity-block" and "cluster" in self.instance_type.placement_strategies:
            self.placement_group = ec2.CfnPlacementGroup(self, "PlacementGroup", strategy="cluster")

    @staticmethod
    def _where(
        vpc: ec2.IVpc, name: str, subnet_id: str | None, az_id: str | None, vpc_subnets: ec2.SubnetSelection | None
    ) -> tuple[str, str]:
        """The cluster's one subnet (a cluster placement group lives in one Availability Zone) and its AZ ID when
        known: ``subnet_id`` with ``az_id`` (the kit's stacks), or ``vpc_subnets`` selecting exactly one subnet."""
        if vpc_subnets is None:
            if subnet_id is None or az_id is None:
                raise ValueError(f"{name}: give vpc_subnets (one subnet of the VPC), or subnet_id with its az_id")
            return subnet_id, az_id
        if subnet_id is not None:
            raise ValueError(f"{name}: give vpc_subnets or subnet_id, not both")
        chosen = placement.subnets_by_label(vpc, owner=name, subnet_ids=None, vpc_subnets=vpc_subnets)
        if len(chosen) != 1:
            raise ValueError(
                f"{name}: vpc_subnets selects {len(chosen)} subnets; a cluster (one placement group) needs exactly one: "
                "narrow it, e.g. SubnetSelection(subnet_type=..., availability_zones=['us-east-1a'])"
            )
        ((label, only),) = chosen.items()
        return only, az_id or label

    def _reservation(self, capacity: CapacitySpec, instance_type: str, az_id: str) -> str | None:
        """The reservation the nodes launch into: one this construct creates (an ODCR in the placement group),
        or the file's (an existing ODCR, a Capacity Block)."""
        self.capacity_reservation: ec2.CfnCapacityReservation | None = None
        self.reservation_group: resourcegroups.CfnGroup | None = None
        ids = capacity.reservation_ids or ((capacity.reservation_id,) if capacity.reservation_id else ())
        if capacity.kind == "capacity-block" and len(ids) > 1:
            self.reservation_group = self._ultraserver_group(ids, instance_type)
            return None
        if not (capacity.kind == "odcr" and capacity.create_count):
            return capacity.reservation_id
        stack = Stack.of(self)
        self.capacity_reservation = ec2.CfnCapacityReservation(
            self,
            "CapacityReservation",
            instance_type=instance_type,
            instance_platform="Linux/UNIX",
            instance_count=capacity.create_count,
            # An AZ ID from the kit's files; an Availability Zone name when the app placed the cluster by selection.
            **({"availability_zone_id": az_id} if _AZ_ID.match(az_id) else {"availability_zone": az_id}),
            # Only launches that name this reservation use it (ours); it bills from creation.
            instance_match_criteria="targeted",
            ebs_optimized=True,
            end_date_type="limited" if capacity.end else "unlimited",
            end_date=capacity.end.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if capacity.end else None,
            placement_group_arn=(
                arns.format_arn(stack, service="ec2", resource="placement-group", resource_name=self.placement_group.ref)
                if self.placement_group
                else None
            ),
            # The reservation bills whether used or not: it carries the pool's tags (cost allocation and
            # the environment's budget filter on them). Stack tags do not reach this resource type.
            tag_specifications=[
                ec2.CfnCapacityReservation.TagSpecificationProperty(
                    resource_type="capacity-reservation",
                    tags=[CfnTag(key=k, value=v) for k, v in sorted(self._tags.items())],
                )
            ],
        )
        return self.capacity_reservation.ref

    def _ultraserver_group(self, ids: Sequence[str], instance_type: str) -> resourcegroups.CfnGroup:
        """A Capacity Reservation resource group of UltraServer blocks (each UltraServer is its own block): launches
        that target it land in any of them. EC2 user guide, "Create a resource group for UltraServer Capacity Blocks"."""
        stack = Stack.of(self)
        return resourcegroups.CfnGroup(
            self,
            "UltraServerBlocks",
            name=f"{self.group_name}-ultraserver-blocks",
            description=f"{self.group_name}: the UltraServer Capacity Blocks its nodes launch into",
            configuration=[
                resourcegroups.CfnGroup.ConfigurationItemProperty(
                    type="AWS::EC2::CapacityReservationPool",
                    parameters=[
                        resourcegroups.CfnGroup.ConfigurationParameterProperty(name="instance-type", values=[instance_type]),
                        resourcegroups.CfnGroup.ConfigurationParameterProperty(
                            name="reservation-type", values=["capacity-block"]
                        ),
                    ],
                ),
                resourcegroups.CfnGroup.ConfigurationItemProperty(
                    type="AWS::ResourceGroups::Generic",
                    parameters=[
                        resourcegroups.CfnGroup.ConfigurationParameterProperty(
                            name="allowed-resource-types", values=["AWS::EC2::CapacityReservation"]
                        )
                    ],
                ),
            ],
            resources=[arns.format_arn(stack, service="ec2", resource="capacity-reservation", resource_name=i) for i in ids],
            tags=[CfnTag(key=k, value=v) for k, v in sorted(self._tags.items())],
        )

    # --- node role, security groups and boot script ----------------------------------------------------
    def _node_role(
        self,
        environment: str,
        name: str,
        storage: StorageAccess | None,
        compile_cache: str,
        observability: ObservabilitySpec | None,
    ) -> None:
        # Metrics and logs come from NodeObservability's statements, scoped to the namespace and the
        # pool's log groups (not the broad CloudWatchAgentServerPolicy).
        self.role = node_role(self, "NodeRole", description=f"{self.group_name} nodes")
        grant_node_lifecycle(self.role, self, self.group_name, removable_tags=[READY_TAG])
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="DiscoverPeers",
                actions=["ec2:DescribeInstances"],  # has no resource-level permissions
                resources=["*"],
            )
        )
        # The pool's SSH key for the collective's MPI launch (kit/neuronkit-ssh-trust): read it, or create it when
        # first; never overwrite it, so a node cannot replace the key its peers trust. Allowing PutParameter alone
        # allows an overwrite: AWS Systems Manager User Guide, "Preventing access to Parameter Store API operations",
        # denies PutParameter with the condition key ssm:Overwrite "true" to stop it (review of issue 48).
        key_arn = arns.format_arn(
            self, service="ssm", resource="parameter", resource_name=f"neuronkit/{environment}/{name}/ssh-key"
        )
        self.role.add_to_policy(
            iam.PolicyStatement(sid="PoolSshKey", actions=["ssm:GetParameter", "ssm:PutParameter"], resources=[key_arn])
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="PoolSshKeyNoOverwrite",
                effect=iam.Effect.DENY,
                actions=["ssm:PutParameter"],
                resources=[key_arn],
                conditions={"StringEquals": {"ssm:Overwrite": "true"}},
            )
        )
        cache_prefix = f"neuron-compile-cache/{name}/" if compile_cache == "s3" else None
        if storage is not None:
            storage.grant_node_access(self.role, compile_cache_prefix=cache_prefix, pool=name)
        self.observability = NodeObservability(
            self, "Observability", environment=environment, pool=name, role=self.role, spec=observability
        )
        # After NodeObservability: one reason covering both wildcard statements of this role.
        acknowledge(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "ec2:DescribeInstances (peer discovery) and cloudwatch:PutMetricData have no resource-level permissions; "
            "PutMetricData is limited to the environment's namespace by a condition",
        )

    def _security_group_ids(self, storage: StorageAccess | None, extra: Sequence[str]) -> list[str]:
        security_groups = [self.security_group.security_group_id, *extra]
        if storage is not None and storage.client_security_group_id is not None:
            security_groups.append(storage.client_security_group_id)
        return security_groups

    def _user_data(
        self,
        environment: str,
        name: str,
        accelerator: Literal["neuron", "gpu"],
        storage: StorageAccess | None,
        compile_cache: str,
        drivers: tuple[str | None, str | None, str | None],
        extra: dict[str, str | int],
    ) -> str:
        facts = self.instance_type
        return userdata.render(
            ["observability.sh", "training-node.sh"],
            {
                **self.observability.userdata_values(accelerator=accelerator),
                "ENVIRONMENT": environment,
                "POOL": name,
                "REGION": pseudo.REGION,
                "ASG_NAME": self.group_name,
                "ACCELERATOR": accelerator,
                "EXPECTED_ACCELERATORS": facts.neuron_devices if facts.is_neuron else facts.gpus,
                "EXPECTED_EFA": facts.efa_max_interfaces,
                "LUSTRE_DNS": (storage.lustre_dns_name or "") if storage else "",
                "LUSTRE_MOUNT": (storage.lustre_mount_name or "") if storage else "",
                "COMPILE_CACHE": compile_cache,
                "ARTIFACTS_BUCKET": storage.artifacts_bucket if storage else "",
                "CHECKPOINTS_BUCKET": storage.checkpoints_bucket if storage else "",
                "DATASETS_BUCKET": storage.datasets_bucket if storage else "",
                **userdata.boot_values(driver_min=drivers[0], driver_shipped=drivers[1], release=drivers[2]),
                "BUSY_MARKER": BUSY_MARKER,
                **lifecycle_values(),
                **extra,
            },
        )

    # --- the group --------------------------------------------------------------------------------------
    def _group(
        self,
        min_size: int,
        max_size: int,
        desired_size: int | None,
        subnet_id: str,
        scale_in_protection: bool,
        hooks: list[autoscaling.CfnAutoScalingGroup.LifecycleHookSpecificationProperty],
        topic_arn: str | None,
    ) -> autoscaling.CfnAutoScalingGroup:
        lt = self.launch_template.launch_template
        group = autoscaling.CfnAutoScalingGroup(
            self,
            "Group",
            auto_scaling_group_name=self.group_name,
            min_size=str(min_size),
            max_size=str(max_size),
            desired_capacity=str(desired_size) if desired_size is not None else None,
            launch_template=autoscaling.CfnAutoScalingGroup.LaunchTemplateSpecificationProperty(
                launch_template_id=lt.ref,
                # Pinned to the version current at deploy time: a template change reaches new nodes
                # only, running nodes are never replaced.
                version=lt.attr_latest_version_number,
            ),
            vpc_zone_identifier=[subnet_id],
            placement_group=self.placement_group.ref if self.placement_group else None,
            new_instances_protected_from_scale_in=scale_in_protection,
            health_check_type="EC2",
            health_check_grace_period=900,
            lifecycle_hook_specification_list=hooks,
            termination_policies=["NewestInstance"],
            notification_configurations=notifications(topic_arn),
            metrics_collection=[autoscaling.CfnAutoScalingGroup.MetricsCollectionProperty(granularity="1Minute")],
            tags=group_tags(self._tags),
        )
        if self.capacity_reservation is not None:
            group.node.add_dependency(self.capacity_reservation)
        self.auto_scaling_group = group
        # Deploys must not reset the sizes that scheduled actions (a Capacity Block's, the day/night shift,
        # anyone's) set: without this, every deploy puts the group back to the template's sizes.
        group.cfn_options.update_policy = CfnUpdatePolicy(
            auto_scaling_scheduled_action=CfnAutoScalingScheduledAction(ignore_unmodified_group_size_properties=True)
        )
        return group

    # --- a Capacity Block's schedule --------------------------------------------------------------------
    def _block_schedule(self, capacity: CapacitySpec, max_size: int, *, started: bool) -> None:
        """Scale-up at the block's start (none when the block has ``started``: the group already runs at its size)
        and to zero before EC2 reclaims the nodes."""
        assert capacity.start and capacity.end
        group = self.auto_scaling_group
        stop = capacity.scale_down_at
        assert stop is not None
        if not started:
            autoscaling.CfnScheduledAction(
                self,
                "BlockStart",
                auto_scaling_group_name=group.ref,
                start_time=_iso(capacity.start),
                min_size=0,
                max_size=max_size,
                desired_capacity=max_size,
            )
        autoscaling.CfnScheduledAction(
            self,
            "BlockEnd",
            auto_scaling_group_name=group.ref,
            start_time=_iso(stop),
            min_size=0,
            max_size=max_size,
            desired_capacity=0,
        )


def capacity_metadata(capacity: CapacitySpec) -> dict[str, Any]:
    """The capacity part of a pool's metadata (neuronkit.reports.pools): the reservation it creates, or a Capacity
    Block's dates and fee. Auto Scaling and EKS pools write the same keys, so reports price both alike."""
    out: dict[str, Any] = {"reserved": capacity.create_count} if capacity.create_count else {}
    if capacity.kind == "capacity-block" and capacity.start and capacity.end and capacity.scale_down_at:
        out |= {
            "block_start": _iso(capacity.start),
            "block_end": _iso(capacity.end),
            "scale_down_at": _iso(capacity.scale_down_at),
        }
        if capacity.upfront_fee_usd:
            out["block_fee"] = capacity.upfront_fee_usd
    return out


def _iso(when: dt.datetime) -> str:
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _utc(when: dt.datetime) -> dt.datetime:
    return (when if when.tzinfo else when.replace(tzinfo=dt.UTC)).astimezone(dt.UTC)
