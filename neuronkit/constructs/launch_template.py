"""Launch template for accelerator nodes: EFA interfaces per EC2's multi-card layout, IMDSv2, gp3 root."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from aws_cdk import CfnTag, Fn, Stack, Token
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from constructs import Construct

from neuronkit import catalog
from neuronkit.catalog import releases
from neuronkit.config.addressing import addresses_per_node  # noqa: F401 - re-exported for existing imports
from neuronkit.constructs.node_role import node_role

# The resource metadata key naming how a launch template's (or compute environment's) image was chosen: one
# definition, read by the reports (neuronkit/reports/pools.py) and written here.
from neuronkit.reports.pools import IMAGE_METADATA  # noqa: F401 - re-exported for batch.py


@dataclass(frozen=True)
class ImageLookup:
    """An AMI found by DescribeImages at the first synth and then pinned in ``cdk.context.json``."""

    name: str
    owner: str = "amazon"
    description: str | None = None

    def filters(self) -> dict[str, list[str]]:
        return {"description": [self.description]} if self.description else {}


@dataclass(frozen=True)
class AmiSpec:
    """The AMI a pool boots, in one of three ways:

    - ``ami_id``: an explicit id;
    - ``lookup``: found by name (and description) with CDK's context lookup at the first ``cdk synth``
      that has credentials and then **pinned** in ``cdk.context.json`` (commit it): a deploy never
      changes it; ``cdk context --reset KEY`` and a new synth move it on (docs/neuron-releases.md);
    - ``ssm_parameter``: AWS's public ``latest`` parameter, resolved at **every** deploy (floating;
      only when asked for with :meth:`latest`).
    """

    root_device_name: str
    ssm_parameter: str | None = None
    ami_id: str | None = None
    lookup: ImageLookup | None = None
    release: str | None = None  # the Neuron SDK release the image carries, when known
    workload: str | None = None  # what the pool runs on it (pytorch-training, vllm-serving ...), for the PR summary

    @classmethod
    def family(cls, name: str, release: str | None = None) -> AmiSpec:
        """The catalog family's image, pinned: a Neuron DLAMI family's image for ``release`` (defaults to
        the newest release in the matrix), or a GPU/ECS family's newest image at the first synth."""
        fam = catalog.ami_families()[name]
        if fam.lookup_name is None:  # a Neuron DLAMI family: its image is the release's
            rel = releases.release(release) if release else releases.releases()[-1]
            found = rel.dlami_lookup(name)
            if found is None:
                raise ValueError(f"{name}: the release matrix has no DLAMI lookup for this family; pin an ami_id")
            return cls(fam.root_device_name, lookup=ImageLookup(found.name, found.owner, found.description), release=rel.version)
        return cls(fam.root_device_name, lookup=ImageLookup(fam.lookup_name, fam.lookup_owner))

    @classmethod
    def default_for(cls, instance_type: str, workload: str = "pytorch-training") -> AmiSpec:
        """The catalog's default family for the type's accelerator; on Neuron types the image of the newest
        release that fully supports ``workload`` on the type's family (the newest release when none does)."""
        facts = catalog.get(instance_type)
        if not facts.is_neuron:
            return cls.family(catalog.default_ami_family("gpu"))
        rel = releases.default_release(releases.family_of(instance_type), workload)
        return cls.family(catalog.default_ami_family("neuron"), rel.version if rel else None)

    @classmethod
    def latest(cls, name: str) -> AmiSpec:
        """The family's public SSM parameter, re-resolved at every deploy (nodes of one pool can drift)."""
        fam = catalog.ami_families()[name]
        return cls(root_device_name=fam.root_device_name, ssm_parameter=fam.ssm_parameter)

    def metadata(self) -> dict[str, str | None]:
        """What the PR summary shows of the image: how it is chosen and for which Neuron release."""
        if self.ami_id:
            pinned_by, lookup = "ami_id", None
        elif self.lookup is not None:
            pinned_by, lookup = "cdk.context.json", self.lookup.name
        else:
            pinned_by, lookup = "floating", self.ssm_parameter
        return {"pinned_by": pinned_by, "release": self.release, "workload": self.workload, "lookup": lookup}

    @property
    def floating(self) -> bool:
        return self.ssm_parameter is not None and self.ami_id is None and self.lookup is None

    def image_id(self, scope: Construct) -> str:
        if self.ami_id:
            return self.ami_id
        if self.lookup is not None:
            stack = Stack.of(scope)
            # One lookup per stack and image: every further template of the stack reads the same context value.
            found: dict[tuple[str, str, str], str] = stack.__dict__.setdefault("_neuronkit_images", {})
            key = (self.lookup.name, self.lookup.owner, repr(sorted(self.lookup.filters().items())))
            if key in found:
                return found[key]
            if not found and (Token.is_unresolved(stack.account) or Token.is_unresolved(stack.region)):
                # Checked on the stack's first lookup only (four round trips to the jsii kernel): the stack's
                # environment does not change between its launch templates.
                raise ValueError(
                    f"{scope.node.path}: the AMI '{self.lookup.name}' is found by a lookup, which needs the stack's account "
                    "and region (Stack(..., env=Environment(account=..., region=...))); or pin one with AmiSpec(ami_id=...)"
                )
            image = ec2.MachineImage.lookup(name=self.lookup.name, owners=[self.lookup.owner], filters=self.lookup.filters())
            found[key] = image.get_image(scope).image_id
            return found[key]
        assert self.ssm_parameter
        # A CloudFormation parameter of type AWS::SSM::Parameter::Value<AWS::EC2::Image::Id>: resolved at
        # every deploy (asked for explicitly with track: latest).
        return ec2.MachineImage.from_ssm_parameter(self.ssm_parameter).get_image(scope).image_id


def efa_network_interfaces(
    instance_type: catalog.InstanceType, security_group_ids: Sequence[str]
) -> list[ec2.CfnLaunchTemplate.NetworkInterfaceProperty]:
    """Network interfaces following EC2's layout for instance types with several network cards.

    The primary ENA interface sits on card 0, device 0 (never ``efa-only``); an ``efa-only`` interface
    on card 0 device 1 when card 0 carries EFA; then an ``efa-only`` interface on device 0 of each
    other card, until the catalog's EFA maximum is reached. ``efa-only`` interfaces take no IP address.
    Security groups go on every interface (none at the top level of the template).
    """
    groups = list(security_group_ids)
    interfaces = [
        ec2.CfnLaunchTemplate.NetworkInterfaceProperty(
            device_index=0,
            network_card_index=0,
            interface_type="interface",
            groups=groups,
            associate_public_ip_address=False,
            delete_on_termination=True,
            description="primary ENA",
        )
    ]
    remaining = instance_type.efa_max_interfaces
    if remaining and instance_type.efa_on_card0:
        interfaces.append(_efa_only(0, 1, groups))
        remaining -= 1
    card = 1
    while remaining > 0 and card < instance_type.network_cards:
        interfaces.append(_efa_only(card, 0, groups))
        remaining -= 1
        card += 1
    return interfaces


def _efa_only(card: int, device: int, groups: list[str]) -> ec2.CfnLaunchTemplate.NetworkInterfaceProperty:
    return ec2.CfnLaunchTemplate.NetworkInterfaceProperty(
        device_index=device,
        network_card_index=card,
        interface_type="efa-only",
        groups=groups,
        delete_on_termination=True,
        description=f"EFA card {card}",
    )


USER_DATA_LIMIT_BYTES = 16 * 1024  # EC2 API limit on user data before base64 encoding
_TOKEN_MARGIN_BYTES = 1024
# Tokens (bucket names, DNS names) are counted at their placeholder length: the margin for what they resolve to.
TOKEN_MARGIN_BYTES = _TOKEN_MARGIN_BYTES


class AcceleratorLaunchTemplate(Construct):
    """A launch template for one accelerator instance type.

    Network interfaces come from the catalog (every EFA device the type has, one per network card);
    with ``efa=False`` (defaults to True) only the primary ENA interface, for nodes that never run
    collectives (inference); IMDSv2 is required with a hop limit of 2 (containers); the root volume is encrypted gp3 on the
    AMI's root device name, sized to the catalog's minimum for the accelerator (512 GiB on Trainium)
    unless ``root_volume_gib`` is larger; no key pair (access through SSM Session Manager). Capacity:
    ``capacity_reservation_id`` targets an ODCR or a Capacity Block, ``capacity_reservation_group_arn`` a
    Capacity Reservation resource group (UltraServer blocks); with ``capacity_block=True`` the market type is
    ``capacity-block`` as EC2 Capacity Blocks require.

    ``role`` defaults to a new role with Session Manager and CloudWatch agent permissions only; grant
    more with ``grant_*`` methods of other constructs. Public attributes: ``launch_template``
    (``ec2.CfnLaunchTemplate``), ``role``, ``instance_type`` (catalog facts), ``image_id``.
    """

    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        instance_type: str,
        ami: AmiSpec,
        security_group_ids: Sequence[str],
        user_data: str,
        role: iam.IRole | None = None,
        root_volume_gib: int | None = None,
        capacity_reservation_id: str | None = None,
        capacity_reservation_group_arn: str | None = None,
        capacity_block: bool = False,
        tags: Mapping[str, str] | None = None,
        efa: bool = True,
    ) -> None:
        super().__init__(scope, id)
        facts = catalog.get(instance_type)
        size = self._checked(facts, root_volume_gib, capacity_reservation_id, capacity_reservation_group_arn,
                             capacity_block, security_group_ids, user_data)  # fmt: skip
        self.instance_type = facts
        self.role = role or node_role(
            self,
            "Role",
            also_managed={"CloudWatchAgentServerPolicy": "AWS-maintained policy of the CloudWatch agent (node metrics and logs)"},
        )
        profile = iam.CfnInstanceProfile(self, "Profile", roles=[self.role.role_name])
        self.image_id = ami.image_id(self)
        data = self._data(facts, ami, profile, security_group_ids, efa, size, user_data,
                          capacity_reservation_id, capacity_reservation_group_arn, capacity_block, tags)  # fmt: skip
        self.launch_template = ec2.CfnLaunchTemplate(self, "Resource", launch_template_data=data)
        self.launch_template.add_metadata(IMAGE_METADATA, ami.metadata())
        self._version: tuple[str, str] | None = None

    @property
    def id_and_latest_version(self) -> tuple[str, str]:
        """The template's id and latest version number (tokens), read from the jsii kernel once: a fleet's main
        group, its compile groups and its stacks' twins all name the same template."""
        if self._version is None:
            self._version = (self.launch_template.ref, self.launch_template.attr_latest_version_number)
        return self._version

    @staticmethod
    def _checked(
        facts: catalog.InstanceType,
        root_volume_gib: int | None,
        capacity_reservation_id: str | None,
        capacity_reservation_group_arn: str | None,
        capacity_block: bool,
        security_group_ids: Sequence[str],
        user_data: str,
    ) -> int:
        """Refuse what EC2 would refuse at launch; the root volume size."""
        minimum = catalog.min_root_volume_gib(facts)
        size = root_volume_gib if root_volume_gib is not None else minimum
        if size < minimum:
            raise ValueError(f"root_volume_gib: {size} GiB is below the {minimum} GiB a {facts.accelerator} node needs")
        if capacity_reservation_id and capacity_reservation_group_arn:
            raise ValueError("capacity_reservation_id or capacity_reservation_group_arn: a launch targets one of them")
        if capacity_block and not (capacity_reservation_id or capacity_reservation_group_arn):
            raise ValueError(
                "capacity_block: a Capacity Block launch template needs capacity_reservation_id (or, for UltraServer "
                "blocks, capacity_reservation_group_arn)"
            )
        if not security_group_ids:
            raise ValueError("security_group_ids: at least one security group is required")
        # EC2 refuses user data over 16 KB (before base64). Tokens (bucket names, DNS names) are counted
        # at their placeholder length, so keep a margin for what they resolve to.
        if len(user_data.encode()) > USER_DATA_LIMIT_BYTES - _TOKEN_MARGIN_BYTES:
            raise ValueError(
                f"user_data: {len(user_data.encode())} bytes is too close to EC2's {USER_DATA_LIMIT_BYTES}-byte limit; "
                "ship large files (scripts, agents) through the artifacts bucket and fetch them at boot"
            )
        return size

    def _data(
        self,
        facts: catalog.InstanceType,
        ami: AmiSpec,
        profile: iam.CfnInstanceProfile,
        security_group_ids: Sequence[str],
        efa: bool,
        size: int,
        user_data: str,
        capacity_reservation_id: str | None,
        capacity_reservation_group_arn: str | None,
        capacity_block: bool,
        tags: Mapping[str, str] | None,
    ) -> ec2.CfnLaunchTemplate.LaunchTemplateDataProperty:
        """Image, type, profile, EFA interfaces, IMDSv2, encrypted gp3 root, user data, capacity, tags."""
        return ec2.CfnLaunchTemplate.LaunchTemplateDataProperty(
            image_id=self.image_id,
            instance_type=facts.name,
            iam_instance_profile=ec2.CfnLaunchTemplate.IamInstanceProfileProperty(arn=profile.attr_arn),
            network_interfaces=efa_network_interfaces(facts, security_group_ids)[: None if efa else 1],
            metadata_options=metadata_options(hop_limit=2),
            block_device_mappings=[root_volume(ami.root_device_name, size)],
            ebs_optimized=True,
            monitoring=ec2.CfnLaunchTemplate.MonitoringProperty(enabled=True),
            user_data=Fn.base64(user_data),
            capacity_reservation_specification=capacity_target(capacity_reservation_id, capacity_reservation_group_arn),
            instance_market_options=(
                ec2.CfnLaunchTemplate.InstanceMarketOptionsProperty(market_type="capacity-block") if capacity_block else None
            ),
            tag_specifications=tag_specifications(tags),
        )


# The pieces of a node launch template every platform shares (Auto Scaling groups, EKS managed node groups).
def metadata_options(*, hop_limit: int) -> ec2.CfnLaunchTemplate.MetadataOptionsProperty:
    """IMDSv2 only; ``hop_limit`` 2 lets containers on the host reach it, 1 keeps Kubernetes pods from the node role.

    Instance tags are never exposed in IMDS: nothing of the kit reads them there, and EKS (and the Auto Scaling
    group's own tags) put keys with ``/`` on node instances, which EC2 refuses in IMDS, failing the launch
    (Amazon EKS User Guide, "Maintain nodes yourself with self-managed nodes"; docs/aws-contracts.md)."""
    return ec2.CfnLaunchTemplate.MetadataOptionsProperty(
        http_tokens="required", http_put_response_hop_limit=hop_limit, http_endpoint="enabled", instance_metadata_tags="disabled"
    )


def root_volume(device_name: str, size_gib: int) -> ec2.CfnLaunchTemplate.BlockDeviceMappingProperty:
    """An encrypted gp3 root volume (6,000 IOPS, 500 MiB/s) deleted with the node."""
    return ec2.CfnLaunchTemplate.BlockDeviceMappingProperty(
        device_name=device_name,
        ebs=ec2.CfnLaunchTemplate.EbsProperty(
            volume_size=size_gib, volume_type="gp3", encrypted=True, delete_on_termination=True, iops=6000, throughput=500
        ),
    )


def capacity_target(
    reservation_id: str | None, group_arn: str | None
) -> ec2.CfnLaunchTemplate.CapacityReservationSpecificationProperty | None:
    """Launch into one reservation (an ODCR, a Capacity Block) or a Capacity Reservation resource group."""
    if not (reservation_id or group_arn):
        return None
    return ec2.CfnLaunchTemplate.CapacityReservationSpecificationProperty(
        capacity_reservation_target=ec2.CfnLaunchTemplate.CapacityReservationTargetProperty(
            capacity_reservation_id=reservation_id, capacity_reservation_resource_group_arn=group_arn
        )
    )


def tag_specifications(tags: Mapping[str, str] | None) -> list[ec2.CfnLaunchTemplate.TagSpecificationProperty] | None:
    """The pool's tags on its instances, volumes and interfaces (cost allocation), or None without tags."""
    tag_list = [CfnTag(key=k, value=v) for k, v in sorted((tags or {}).items())]
    if not tag_list:
        return None
    return [
        ec2.CfnLaunchTemplate.TagSpecificationProperty(resource_type=rt, tags=tag_list)
        for rt in ("instance", "volume", "network-interface")
    ]
