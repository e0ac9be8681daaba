"""Every workaround neuronkit applies to moto, in one place, applied through one idempotent call.

Written for moto 5.2.5 (:data:`MOTO_VERSION`, pinned in requirements-dev.txt). :func:`apply` installs
them all; the rehearsal (:mod:`neuronkit.rehearsal.runner`) and the in-process moto tests
(``tests/moto/``) call it before deploying templates. Each workaround below names the moto behaviour it
works around (what AWS does instead) and the test that fails without it. When moto is upgraded, re-check
each one against the new release: delete the ones moto fixed, and bump :data:`MOTO_VERSION` together
with the pin.

Idempotence holds without module state: every function installed into moto carries a mark
(:data:`MARK`, the workaround's name), and a workaround whose mark is already in place is skipped, so
applying twice, from two tests or two rehearsals in one process, leaves moto exactly as applying once.

The seeding helpers at the end (:func:`seed_public_parameter`, :func:`seed_pinned_images`) patch nothing:
they put into moto's backends what a real account has and moto's API refuses to create.

moto is a test/dev dependency: it is imported only inside the functions here.
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import inspect
import threading
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from neuronkit import clock

MOTO_VERSION = "5.2.5"
# Attribute set on every function installed into moto: the name of the workaround that installed it.
MARK = "__neuronkit_workaround__"
# Two threads applying at once (a rehearsal's server thread never does, but tests might) install once.
_LOCK = threading.Lock()


class MotoVersionWarning(UserWarning):
    """The installed moto is not the version the workarounds were written for."""


@dataclass(frozen=True)
class Workaround:
    """One moto gap: what moto does, which test fails without the workaround, and how it is installed.

    ``install`` puts the workaround into moto and returns True, or returns False when its mark shows it is
    already in place (or, for a missing method, when moto has one of its own).
    """

    name: str
    moto_bug: str
    covered_by: tuple[str, ...]
    install: Callable[[], bool]


@dataclass(frozen=True)
class Applied:
    """What :func:`apply` found and did."""

    moto_version: str  # installed
    expected_version: str
    newly_applied: tuple[str, ...]
    already_applied: tuple[str, ...]

    @property
    def version_matches(self) -> bool:
        return self.moto_version == self.expected_version


def installed_moto_version() -> str:
    try:
        return importlib.metadata.version("moto")
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def apply(moto_version_expected: str = MOTO_VERSION) -> Applied:
    """Install every workaround into moto (the ones written for moto 5.2.5); idempotent and thread-safe.

    When the installed moto is not ``moto_version_expected`` this warns (:class:`MotoVersionWarning`,
    naming both versions) and still applies: each workaround replaces a moto function only by wrapping
    it, so a moto that fixed a gap keeps working, but the tests named in :data:`WORKAROUNDS` are what
    tells whether each workaround is still needed and still right. Returns what was applied now and what
    was already in place.
    """
    installed = installed_moto_version()
    if installed != moto_version_expected:
        warnings.warn(
            MotoVersionWarning(
                f"moto {installed} is installed, but neuronkit's moto workarounds were written for moto "
                f"{moto_version_expected} (neuronkit/rehearsal/moto_workarounds.py): install moto=={moto_version_expected} "
                "(requirements-dev.txt), or re-check each workaround against this moto and update MOTO_VERSION"
            ),
            stacklevel=2,
        )
    new: list[str] = []
    old: list[str] = []
    with _LOCK:
        for workaround in WORKAROUNDS:
            (new if workaround.install() else old).append(workaround.name)
    return Applied(installed, moto_version_expected, tuple(new), tuple(old))


# --------------------------------------------------------------------------------------------
# installing with a mark
# --------------------------------------------------------------------------------------------
def _function(value: Any) -> Any:
    """The function object behind a property, classmethod or staticmethod (where the mark lives)."""
    if isinstance(value, property):
        return value.fget
    if isinstance(value, classmethod | staticmethod):
        return value.__func__
    return value


def _current(owner: Any, attr: str) -> Any:
    # Without running descriptors, through the class's bases: a property or classmethod, not its result.
    return inspect.getattr_static(owner, attr, None)


def is_installed(owner: Any, attr: str, name: str) -> bool:
    """True if ``owner.attr`` is the function the workaround ``name`` installed."""
    return getattr(_function(_current(owner, attr)), MARK, None) == name


def _install(owner: Any, attr: str, value: Any, name: str) -> None:
    setattr(_function(value), MARK, name)
    setattr(owner, attr, value)


# --------------------------------------------------------------------------------------------
# CloudFormation: resource types moto does not model
# --------------------------------------------------------------------------------------------
def _unmodelled_getatt_outputs() -> bool:
    from moto.cloudformation import parsing

    name = "unmodelled-getatt-outputs"
    if is_installed(parsing.ResourceMap, "validate_outputs", name):
        return False
    original = parsing.ResourceMap.validate_outputs

    def validate_outputs(self: Any) -> None:
        # Validate every output except those reading an attribute of a skipped (unmodelled) resource.
        saved = self._template.get("Outputs")
        kept = {}
        for key, value in (saved or {}).items():
            target = value.get("Value")
            getatt = target.get("Fn::GetAtt") if isinstance(target, dict) else None
            if getatt:
                resource = self._resource_json_map.get(getatt[0]) or {}
                if parsing.resource_class_from_type(resource.get("Type", "")) is None:
                    continue
            kept[key] = value
        self._template["Outputs"] = kept
        try:
            original(self)
        finally:
            if saved is not None:
                self._template["Outputs"] = saved

    _install(parsing.ResourceMap, "validate_outputs", validate_outputs, name)
    return True


def _custom_resources_unmodelled() -> bool:
    from moto.cloudformation import parsing

    name = "custom-resources-unmodelled"
    if is_installed(parsing, "resource_class_from_type", name):
        return False
    original = parsing.resource_class_from_type

    def resource_class_from_type(resource_type: str) -> Any:
        # A custom resource is a call into a Lambda function: moto would run it in Docker and wait for its
        # answer forever without one. Skip it like any type moto does not model (reported, not created).
        if resource_type.startswith("Custom::") or resource_type == "AWS::CloudFormation::CustomResource":
            return None
        return original(resource_type)

    _install(parsing, "resource_class_from_type", resource_class_from_type, name)
    return True


def _unmodelled_getatt_values() -> bool:
    from moto.cloudformation import parsing

    name = "unmodelled-getatt-values"
    if is_installed(parsing, "clean_json", name):
        return False
    original = parsing.clean_json

    def clean_json(resource_json: Any, resources_map: Any) -> Any:
        # A GetAtt of a skipped resource resolves to a visible placeholder instead of failing the stack.
        if isinstance(resource_json, dict) and "Fn::GetAtt" in resource_json:
            logical_id, attr = resource_json["Fn::GetAtt"][0], resource_json["Fn::GetAtt"][1]
            if resources_map.get(logical_id) is None:
                declared = resources_map._resource_json_map.get(logical_id) or {}
                if declared.get("Type") == NODEGROUP_SIZE_TYPE and attr == "DesiredSize":
                    # A node group's deploy-time desired size: what the kit's function answers for a new group.
                    return _new_group_size(clean_json(declared.get("Properties", {}), resources_map))
                if declared and parsing.resource_class_from_type(declared.get("Type", "")) is None:
                    return f"unmodelled-{logical_id}-{attr}"
        return original(resource_json, resources_map)

    _install(parsing, "clean_json", clean_json, name)
    return True


NODEGROUP_SIZE_TYPE = "Custom::NeuronkitNodegroupDesiredSize"


def _new_group_size(props: dict[str, Any]) -> int:
    """The answer of neuronkit/lambdas/node_group_size for a group that does not exist yet."""
    from neuronkit.lambdas.node_group_size.handler import desired_size

    return desired_size(None, minimum=int(props["MinSize"]), maximum=int(props["MaxSize"]), initial=int(props["Initial"]))


def _unmodelled_ref_exports() -> bool:
    from moto.cloudformation import parsing

    name = "unmodelled-ref-exports"
    if is_installed(parsing.OutputMap, "exports", name):
        return False
    original: Any = inspect.getattr_static(parsing.OutputMap, "exports")  # the property object

    def exports(self: Any) -> list[Any]:
        found = original.fget(self)
        declared = [v for v in (self._output_json_map or {}).values() if v.get("Export")]
        for export, output in zip(found, declared, strict=True):
            value = output.get("Value")
            ref = value.get("Ref") if isinstance(value, dict) else None
            resource = self._resource_map._resource_json_map.get(ref) or {} if isinstance(ref, str) else {}
            if export._value is None and resource and parsing.resource_class_from_type(resource.get("Type", "")) is None:
                export._value = f"unmodelled-{ref}"
        return found

    _install(parsing.OutputMap, "exports", property(exports), name)
    return True


# --------------------------------------------------------------------------------------------
# CloudFormation: KMS
# --------------------------------------------------------------------------------------------
def _kms_key_tags() -> bool:
    from moto.kms import models as kms_models

    name = "kms-key-tags-from-cloudformation"
    if is_installed(kms_models.KmsBackend, "create_key", name):
        return False
    original = kms_models.KmsBackend.create_key

    def create_key(self: Any, *args: Any, **kwargs: Any) -> Any:
        tags = kwargs.get("tags") or []
        kwargs["tags"] = [{"TagKey": t["Key"], "TagValue": t["Value"]} if "Key" in t else t for t in tags]
        return original(self, *args, **kwargs)

    _install(kms_models.KmsBackend, "create_key", create_key, name)
    return True


# --------------------------------------------------------------------------------------------
# AWS Batch from CloudFormation (creation only: moto runs jobs in Docker, which no test does)
# --------------------------------------------------------------------------------------------
def _batch_compute_environment_security_groups() -> bool:
    from moto.batch import models as batch_models

    name = "batch-compute-environment-security-groups"
    backend_cls = batch_models.BatchBackend
    if is_installed(backend_cls, "_validate_compute_resources", name):
        return False
    original = backend_cls._validate_compute_resources

    def validate_compute_resources(self: Any, cr: dict[str, Any]) -> None:
        template = cr.get("launchTemplate") or {}
        if "securityGroupIds" not in cr and template.get("launchTemplateId"):
            data = self.ec2_backend.get_launch_template(template["launchTemplateId"]).latest_version().data
            groups = [g for nic in data.get("NetworkInterfaces") or [] for g in nic.get("Groups") or []]
            cr["securityGroupIds"] = list(dict.fromkeys(groups))
        original(self, cr)

    _install(backend_cls, "_validate_compute_resources", validate_compute_resources, name)
    return True


def _batch_service_linked_role() -> bool:
    from moto.batch import models as batch_models

    name = "batch-service-linked-role"
    ce = batch_models.ComputeEnvironment
    if is_installed(ce, "create_from_cloudformation_json", name):
        return False
    original = _function(_current(ce, "create_from_cloudformation_json"))

    def create_compute_environment(
        cls: Any, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str, **kwargs: Any
    ) -> Any:
        from moto.iam.models import iam_backends

        properties = cloudformation_json["Properties"]
        iam = iam_backends[account_id]["aws"]
        slr = next((r for r in iam.roles.values() if r.name.lower() == "awsserviceroleforbatch"), None)
        if slr is None:  # AWS creates it on first use; moto does not
            slr = iam.create_service_linked_role("batch.amazonaws.com", "AWS Batch service-linked role", "")
        properties.setdefault("ServiceRole", slr.arn)
        return original(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs)

    _install(ce, "create_from_cloudformation_json", classmethod(create_compute_environment), name)
    return True


def _target_group_attributes() -> bool:
    from moto.elbv2.models import FakeTargetGroup

    name = "target-group-attributes"
    if is_installed(FakeTargetGroup, "get_cfn_attribute", name):
        return False

    def get_cfn_attribute(self: Any, attribute_name: str) -> Any:
        if attribute_name == "TargetGroupFullName":
            return self.arn.split(":", 5)[5]  # targetgroup/NAME/ID, as AWS derives it from the ARN
        if attribute_name == "TargetGroupName":
            return self.name
        if attribute_name == "LoadBalancerArns":
            return list(self.load_balancer_arns)
        from moto.cloudformation.exceptions import UnformattedGetAttTemplateException

        raise UnformattedGetAttTemplateException()

    _install(FakeTargetGroup, "get_cfn_attribute", get_cfn_attribute, name)
    return True


# Create-only properties of AWS::ElasticLoadBalancingV2::TargetGroup (the provider schema cfn-lint ships) -> the
# attribute moto's target group keeps each in.
_TARGET_GROUP_CREATE_ONLY = {
    "Port": "port", "Protocol": "protocol", "ProtocolVersion": "protocol_version", "VpcId": "vpc_id",
    "TargetType": "target_type", "Name": "name", "IpAddressType": "ip_address_type",
}  # fmt: skip


def _target_group_updates() -> bool:
    from moto.elbv2.models import FakeTargetGroup, elbv2_backends

    name = "target-group-updates"
    if is_installed(FakeTargetGroup, "update_from_cloudformation_json", name):
        return False
    create = FakeTargetGroup.create_from_cloudformation_json

    def update_from_cloudformation_json(
        cls: Any,
        original_resource: Any,
        new_resource_name: str,
        cloudformation_json: Any,
        account_id: str,
        region_name: str,
    ) -> Any:
        p = cloudformation_json["Properties"]
        moved = [k for k, attr in _TARGET_GROUP_CREATE_ONLY.items()
                 if k in p and str(p[k]).lower() != str(getattr(original_resource, attr, None)).lower()]  # fmt: skip
        if moved:  # replaced: a new group (the listener moves to it on its own update); the old one goes if free
            new = create(new_resource_name, cloudformation_json, account_id, region_name)
            with contextlib.suppress(Exception):
                elbv2_backends[account_id][region_name].delete_target_group(original_resource.arn)
            return new
        elbv2_backends[account_id][region_name].modify_target_group(
            original_resource.arn,
            health_check_proto=p.get("HealthCheckProtocol"),
            health_check_port=p.get("HealthCheckPort"),
            health_check_path=p.get("HealthCheckPath"),
            health_check_interval=p.get("HealthCheckIntervalSeconds"),
            health_check_timeout=p.get("HealthCheckTimeoutSeconds"),
            healthy_threshold_count=p.get("HealthyThresholdCount"),
            unhealthy_threshold_count=p.get("UnhealthyThresholdCount"),
            http_codes=(p.get("Matcher") or {}).get("HttpCode"),
        )
        return original_resource

    _install(FakeTargetGroup, "update_from_cloudformation_json", classmethod(update_from_cloudformation_json), name)
    return True


def _listener_certificates_of_the_account() -> bool:
    import moto.elbv2.models as elbv2_models

    name = "listener-certificates-of-the-account"
    if is_installed(elbv2_models, "register_certificate", name):
        return False
    original = elbv2_models.register_certificate

    def register_certificate(account_id: str, region: str, arn_certificate: str, arn_user: str) -> None:
        from moto.acm.models import acm_backends

        if arn_certificate in acm_backends[account_id][region]._certificates:
            original(account_id, region, arn_certificate, arn_user)
        # else: the file's ACM certificate lives in the user's account, which moto's ACM has never seen.

    _install(elbv2_models, "register_certificate", register_certificate, name)
    return True


def _batch_job_definition_from_cloudformation() -> bool:
    from moto.batch import models as batch_models
    from moto.batch.utils import lowercase_first_key

    name = "batch-job-definition-from-cloudformation"
    if is_installed(batch_models.JobDefinition, "create_from_cloudformation_json", name):
        return False

    def create_job_definition(
        cls: Any, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str, **kwargs: Any
    ) -> Any:
        backend = batch_models.batch_backends[account_id][region_name]
        properties = cloudformation_json["Properties"]

        def lowered(key: str) -> Any:
            return lowercase_first_key(properties[key]) if key in properties else None

        return backend.register_job_definition(
            def_name=resource_name,
            parameters=lowercase_first_key(properties.get("Parameters", {})),
            _type=properties.get("Type", "container"),
            tags=properties.get("Tags", {}),
            retry_strategy=lowercase_first_key(properties.get("RetryStrategy", {})),
            container_properties=lowered("ContainerProperties"),
            node_properties=lowered("NodeProperties"),
            eks_properties=lowered("EksProperties"),
            timeout=lowercase_first_key(properties.get("Timeout", {})),
            platform_capabilities=properties.get("PlatformCapabilities"),
            propagate_tags=properties.get("PropagateTags"),
        )

    _install(batch_models.JobDefinition, "create_from_cloudformation_json", classmethod(create_job_definition), name)
    return True


def _batch_describe_node_properties() -> bool:
    from moto.batch import models as batch_models

    name = "batch-describe-node-properties"
    if is_installed(batch_models.JobDefinition, "describe", name):
        return False
    original = batch_models.JobDefinition.describe

    def describe(self: Any) -> dict[str, Any]:
        result: dict[str, Any] = original(self)
        if self.node_properties is not None:
            result["nodeProperties"] = self.node_properties
        return result

    _install(batch_models.JobDefinition, "describe", describe, name)
    return True


# --------------------------------------------------------------------------------------------
# cdk destroy: deleting a network stack
# --------------------------------------------------------------------------------------------
def _network_teardown() -> bool:
    from moto.ec2.models import ec2_backends
    from moto.ec2.models.elastic_ip_addresses import ElasticAddress
    from moto.ec2.models.flow_logs import FlowLogs
    from moto.ec2.models.internet_gateways import InternetGateway
    from moto.ec2.models.nat_gateways import NatGateway
    from moto.ec2.models.route_tables import Route, RouteTable
    from moto.ec2.models.subnets import SubnetRouteTableAssociation
    from moto.ec2.models.vpcs import VPCEndPoint
    from moto.ec2.models.vpn_gateway import VPCGatewayAttachment

    name = "network-teardown"

    def backend(account_id: str, region_name: str) -> Any:
        return ec2_backends[account_id][region_name]

    def delete_association(self: Any, account_id: str, region_name: str) -> None:
        table = backend(account_id, region_name).route_tables.get(self.route_table_id)
        if table is not None:
            for association_id, subnet_id in list(table._associations.items()):
                if subnet_id == self.subnet_id:
                    table._associations.pop(association_id)

    def delete_route_table(self: Any, account_id: str, region_name: str) -> None:
        if self.id in backend(account_id, region_name).route_tables:
            backend(account_id, region_name).delete_route_table(self.id)

    def delete_route(self: Any, account_id: str, region_name: str) -> None:
        table = backend(account_id, region_name).route_tables.get(self.route_table.id)
        if table is not None:
            table._routes.pop(self.id, None)

    def delete_attachment(self: Any, account_id: str, region_name: str) -> None:
        ec2 = backend(account_id, region_name)
        gateway = self.gateway_id or ""
        if gateway.startswith("igw-") and gateway in ec2.internet_gateways and ec2.internet_gateways[gateway].vpc is not None:
            ec2.detach_internet_gateway(gateway, self.vpc_id)
        elif gateway.startswith("vgw-"):
            ec2.detach_vpn_gateway(gateway, self.vpc_id)

    def delete_internet_gateway(self: Any, account_id: str, region_name: str) -> None:
        if self.id in backend(account_id, region_name).internet_gateways:
            backend(account_id, region_name).delete_internet_gateway(self.id)

    def delete_endpoint(self: Any, account_id: str, region_name: str) -> None:
        # As delete_vpc_endpoints, but tolerating route tables that are already gone.
        ec2 = backend(account_id, region_name)
        if (self.vpc_endpoint_type or "").lower() == "interface":
            for eni_id in self.network_interface_ids:
                ec2.enis.pop(eni_id, None)
        else:
            for table_id in self.route_table_ids or []:
                table = ec2.route_tables.get(table_id)
                if table is not None:
                    for route_id, route in list(table._routes.items()):
                        if route.destination_prefix_list == self.destination_prefix_list_id:
                            table._routes.pop(route_id)
        ec2.vpc_end_points.pop(self.id, None)

    def delete_nat_gateway(self: Any, account_id: str, region_name: str) -> None:
        ec2 = backend(account_id, region_name)
        if self.id in ec2.nat_gateways:
            ec2.delete_nat_gateway(self.id)
            ec2.nat_gateways.pop(self.id, None)
            eni = getattr(self, "_eni", None)
            if eni is not None:
                ec2.enis.pop(eni.id, None)

    def delete_flow_log(self: Any, account_id: str, region_name: str) -> None:
        ec2 = backend(account_id, region_name)
        if self.id in ec2.flow_logs:
            ec2.delete_flow_logs([self.id])

    def delete_address(self: Any, account_id: str, region_name: str) -> None:
        if self.allocation_id:
            backend(account_id, region_name).release_address(allocation_id=self.allocation_id)

    methods: list[tuple[type, Callable[..., None]]] = [
        (SubnetRouteTableAssociation, delete_association),
        (RouteTable, delete_route_table),
        (Route, delete_route),
        (VPCGatewayAttachment, delete_attachment),
        (InternetGateway, delete_internet_gateway),
        (VPCEndPoint, delete_endpoint),
        (NatGateway, delete_nat_gateway),
        (FlowLogs, delete_flow_log),
        (ElasticAddress, delete_address),
    ]
    changed = False
    for cls, method in methods:
        # A delete moto has (its own, or this workaround's from an earlier apply) is left alone.
        if not hasattr(cls, "delete"):
            _install(cls, "delete", method, name)
            changed = True
    return changed


def _deleted_stack_outputs() -> bool:
    from moto.cloudformation.models import Stack

    name = "deleted-stack-outputs"
    outputs: Any = inspect.getattr_static(Stack, "outputs")  # the property objects
    exports: Any = inspect.getattr_static(Stack, "exports")

    def deleted(stack: Any) -> bool:
        return str(getattr(stack, "status", "")) == "DELETE_COMPLETE"

    def stack_outputs(self: Any) -> Any:
        return None if deleted(self) else outputs.fget(self)

    def stack_exports(self: Any) -> Any:
        return [] if deleted(self) else exports.fget(self)

    changed = False
    if not is_installed(Stack, "outputs", name):
        _install(Stack, "outputs", property(stack_outputs), name)
        changed = True
    if not is_installed(Stack, "exports", name):
        _install(Stack, "exports", property(stack_exports), name)
        changed = True
    return changed


# --------------------------------------------------------------------------------------------
# CloudFormation: SSM and EKS (platform: eks)
# --------------------------------------------------------------------------------------------
def _ssm_parameter_generated_name() -> bool:
    from moto.ssm import models as ssm_models

    name = "ssm-parameter-generated-name"
    if is_installed(ssm_models.Parameter, "create_from_cloudformation_json", name):
        return False
    original = _function(inspect.getattr_static(ssm_models.Parameter, "create_from_cloudformation_json"))

    def create_from_cloudformation_json(
        cls: Any, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **kwargs: Any
    ) -> Any:
        properties = cloudformation_json.setdefault("Properties", {})
        properties.setdefault("Name", resource_name)  # CloudFormation generates the name of an unnamed parameter
        # AWS::SSM::Parameter Tags is a JSON map ({"key": "value"}, CloudFormation resource reference); moto's
        # put_parameter reads a list of Key/Value pairs and fails on the map with a TypeError.
        tags = properties.get("Tags")
        if isinstance(tags, dict):
            properties["Tags"] = [{"Key": str(k), "Value": str(v)} for k, v in tags.items()]
        return original(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs)

    _install(ssm_models.Parameter, "create_from_cloudformation_json", classmethod(create_from_cloudformation_json), name)
    return True


def _eks_from_cloudformation() -> bool:
    from moto.cloudformation import parsing
    from moto.core.common_models import CloudFormationModel

    name = "eks-from-cloudformation"
    if any(getattr(m, MARK, None) == name for m in CloudFormationModel.__subclasses__()):
        return False
    for model in (_eks_cluster_model(), _eks_nodegroup_model()):
        setattr(model, MARK, name)
    parsing.get_model_map.cache_clear()
    parsing.get_name_type_map.cache_clear()
    return True


def _eks_cluster_model() -> type:
    """A CloudFormation model of AWS::EKS::Cluster (registered by subclassing moto's CloudFormationModel)."""
    from moto.core.common_models import CloudFormationModel
    from moto.ec2.models import ec2_backends
    from moto.eks.models import eks_backends

    class EksCluster(CloudFormationModel):
        """AWS::EKS::Cluster through moto's EKS backend, with a cluster security group in the cluster's VPC."""

        def __init__(self, cluster: Any, security_group_id: str, properties: dict[str, Any] | None = None) -> None:
            self.cluster, self.security_group_id = cluster, security_group_id
            self.properties = properties or {}

        @staticmethod
        def cloudformation_type() -> str:
            return "AWS::EKS::Cluster"

        @staticmethod
        def cloudformation_name_type() -> str:
            return "Name"

        @property
        def physical_resource_id(self) -> str:
            return str(self.cluster.name)

        @classmethod
        def create_from_cloudformation_json(  # type: ignore[override]
            cls, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **kwargs: Any
        ) -> EksCluster:
            p = cloudformation_json["Properties"]
            vpc = p.get("ResourcesVpcConfig", {})
            subnets = list(vpc.get("SubnetIds", []))
            ec2 = ec2_backends[account_id][region_name]
            cluster_name = p.get("Name") or resource_name
            vpc_id = ec2.get_subnet(subnets[0]).vpc_id if subnets else None
            group = ec2.create_security_group(f"eks-cluster-sg-{cluster_name}", "EKS cluster security group", vpc_id=vpc_id)
            cluster = eks_backends[account_id][region_name].create_cluster(
                name=cluster_name,
                role_arn=p["RoleArn"],
                resources_vpc_config={
                    "subnetIds": subnets,
                    "securityGroupIds": list(vpc.get("SecurityGroupIds", [])),
                    "endpointPublicAccess": vpc.get("EndpointPublicAccess", True),
                    "endpointPrivateAccess": vpc.get("EndpointPrivateAccess", False),
                    "clusterSecurityGroupId": group.id,
                },
                version=p.get("Version"),
                logging={
                    "clusterLogging": [
                        {
                            "types": [t["Type"] for t in p.get("Logging", {}).get("ClusterLogging", {}).get("EnabledTypes", [])],
                            "enabled": True,
                        }
                    ]
                },  # fmt: skip
                encryption_config=[
                    {"resources": e.get("Resources", []), "provider": {"keyArn": e.get("Provider", {}).get("KeyArn")}}
                    for e in p.get("EncryptionConfig", [])
                ],
                tags={t["Key"]: t["Value"] for t in p.get("Tags", [])},
            )
            return cls(cluster, group.id, p)

        @classmethod
        def update_from_cloudformation_json(  # type: ignore[override]
            cls,
            original_resource: Any,
            new_resource_name: str,
            cloudformation_json: Any,
            account_id: str,
            region_name: str,
        ) -> EksCluster:
            """A stack update: what EKS updates in place (the version) in place; a replacement of the named cluster is
            refused as CloudFormation refuses it (the cluster keeps its name)."""
            p = cloudformation_json["Properties"]
            _refuse_named_replacement("AWS::EKS::Cluster", "Name", original_resource.properties, p)
            cluster = original_resource.cluster
            if p.get("Version"):
                cluster.version = p["Version"]
            original_resource.properties = p
            return original_resource  # type: ignore[no-any-return]

        def delete(self, account_id: str, region_name: str) -> None:
            """`cdk destroy`: the cluster and the security group made for it go (its node groups went first)."""
            eks_backends[account_id][region_name].delete_cluster(self.cluster.name)
            ec2_backends[account_id][region_name].delete_security_group(group_id=self.security_group_id)

        @classmethod
        def has_cfn_attr(cls, attr: str) -> bool:
            return attr in (
                "Arn",
                "Endpoint",
                "CertificateAuthorityData",
                "ClusterSecurityGroupId",
                "OpenIdConnectIssuerUrl",
                "Id",
            )

        def get_cfn_attribute(self, attribute_name: str) -> Any:
            c = self.cluster
            return {
                "Arn": c.arn,
                "Endpoint": c.endpoint,
                "CertificateAuthorityData": c.certificate_authority["data"],
                "ClusterSecurityGroupId": self.security_group_id,
                "OpenIdConnectIssuerUrl": c.identity["oidc"]["issuer"],
                "Id": c.name,
            }[attribute_name]

    return EksCluster


def _eks_nodegroup_model() -> type:
    """A CloudFormation model of AWS::EKS::Nodegroup (registered by subclassing moto's CloudFormationModel)."""
    from moto.core.common_models import CloudFormationModel
    from moto.eks.models import eks_backends

    class EksNodegroup(CloudFormationModel):
        """AWS::EKS::Nodegroup through moto's EKS backend (instances are not launched)."""

        def __init__(self, nodegroup: Any, properties: dict[str, Any] | None = None) -> None:
            self.nodegroup = nodegroup
            self.properties = properties or {}

        @staticmethod
        def cloudformation_type() -> str:
            return "AWS::EKS::Nodegroup"

        @staticmethod
        def cloudformation_name_type() -> str:
            return "NodegroupName"

        @property
        def physical_resource_id(self) -> str:
            return f"{self.nodegroup.cluster_name}/{self.nodegroup.nodegroup_name}"

        @classmethod
        def create_from_cloudformation_json(  # type: ignore[override]
            cls, resource_name: str, cloudformation_json: Any, account_id: str, region_name: str, **kwargs: Any
        ) -> EksNodegroup:
            p = cloudformation_json["Properties"]
            scaling = p.get("ScalingConfig", {})
            template = p.get("LaunchTemplate")
            nodegroup = eks_backends[account_id][region_name].create_nodegroup(
                cluster_name=p["ClusterName"],
                node_role=p["NodeRole"],
                nodegroup_name=p.get("NodegroupName") or resource_name,
                subnets=list(p.get("Subnets", [])),
                scaling_config={
                    "minSize": scaling.get("MinSize"),
                    "maxSize": scaling.get("MaxSize"),
                    "desiredSize": scaling.get("DesiredSize"),
                },  # fmt: skip
                instance_types=p.get("InstanceTypes"),
                ami_type=p.get("AmiType"),
                labels=p.get("Labels"),
                tags=p.get("Tags"),
                launch_template={"id": template.get("Id"), "version": str(template.get("Version"))} if template else None,
                capacity_type=p.get("CapacityType"),
                version=p.get("Version"),
                release_version=p.get("ReleaseVersion"),
            )
            return cls(nodegroup, p)

        @classmethod
        def update_from_cloudformation_json(  # type: ignore[override]
            cls,
            original_resource: Any,
            new_resource_name: str,
            cloudformation_json: Any,
            account_id: str,
            region_name: str,
        ) -> EksNodegroup:
            """A stack update: a create-only property changed replaces the group (refused while it keeps its name, as
            CloudFormation refuses it); otherwise sizes, labels, release and launch template version change in place
            (no instance is launched or replaced: moto runs none)."""
            p = cloudformation_json["Properties"]
            if _refuse_named_replacement("AWS::EKS::Nodegroup", "NodegroupName", original_resource.properties, p):
                original_resource.delete(account_id, region_name)
                return cls.create_from_cloudformation_json(new_resource_name, cloudformation_json, account_id, region_name)
            n = original_resource.nodegroup
            scaling = p.get("ScalingConfig", {})
            n.scaling_config = {"minSize": scaling.get("MinSize"), "maxSize": scaling.get("MaxSize"),
                                "desiredSize": scaling.get("DesiredSize")}  # fmt: skip
            n.labels = p.get("Labels") or n.labels
            n.release_version = p.get("ReleaseVersion") or n.release_version
            n.version = p.get("Version") or n.version
            template = p.get("LaunchTemplate")
            if template:
                n.launch_template = {"id": template.get("Id"), "version": str(template.get("Version"))}
            original_resource.properties = p
            return original_resource  # type: ignore[no-any-return]

        def delete(self, account_id: str, region_name: str) -> None:
            """`cdk destroy`: moto's EKS forgets the node group (before its cluster, which refuses while it has any)."""
            n = self.nodegroup
            eks_backends[account_id][region_name].delete_nodegroup(cluster_name=n.cluster_name, nodegroup_name=n.nodegroup_name)

        @classmethod
        def has_cfn_attr(cls, attr: str) -> bool:
            return attr in ("Arn", "NodegroupName", "ClusterName", "Id")

        def get_cfn_attribute(self, attribute_name: str) -> Any:
            n = self.nodegroup
            return {"Arn": n.arn, "NodegroupName": n.nodegroup_name, "ClusterName": n.cluster_name,
                    "Id": self.physical_resource_id}[attribute_name]  # fmt: skip

    return EksNodegroup


def _create_only_changed(resource_type: str, before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    """The create-only properties (the provider schema cfn-lint ships, as ``neuronkit review`` reads it) whose value
    differs between two resolved property sets."""
    from neuronkit.reports.review import create_only

    def at(value: Any, pointer: str) -> Any:
        for part in pointer.split("/")[2:]:
            value = value.get(part) if isinstance(value, dict) else None
        return value

    return sorted({p.split("/")[2] for p in create_only(resource_type) if at(before, p) != at(after, p)})


def _refuse_named_replacement(resource_type: str, name_key: str, before: dict[str, Any], after: dict[str, Any]) -> bool:
    """True when the update replaces the resource; raises CloudFormation's error when it keeps its custom name
    (CloudFormation User Guide, "Name type": "You can't perform an update that causes a custom-named resource to be
    replaced")."""
    from moto.cloudformation.exceptions import ValidationError

    changed = _create_only_changed(resource_type, before, after)
    if not changed:
        return False
    name = after.get(name_key)
    if name and name == before.get(name_key):
        raise ValidationError(
            message=f"CloudFormation cannot update a stack when a custom-named resource requires replacing. Rename {name} "
            f"and update the stack again ({resource_type}: {', '.join(changed)} changed)"
        )
    return True


def _previous_default_parameters() -> bool:
    from moto.cloudformation.models import CloudFormationBackend

    name = "previous-default-parameters"
    if is_installed(CloudFormationBackend, "_resolve_update_parameters", name):
        return False
    original = CloudFormationBackend._resolve_update_parameters

    def _resolve_update_parameters(self: Any, instance: Any, incoming_params: list[dict[str, str]]) -> dict[str, str]:
        given = getattr(instance, "parameters", None) or {}
        kept = [p for p in incoming_params if not (p.get("UsePreviousValue") and p.get("ParameterKey") not in given)]
        return original(self, instance, kept)  # type: ignore[no-any-return]

    _install(CloudFormationBackend, "_resolve_update_parameters", _resolve_update_parameters, name)
    return True


def _updates_keep_unupdatable_resources() -> bool:
    from moto.cloudformation import parsing

    name = "updates-keep-unupdatable-resources"
    if is_installed(parsing, "parse_and_update_resource", name):
        return False
    original = parsing.parse_and_update_resource

    def parse_and_update_resource(
        logical_id: str, resource_json: dict[str, Any], resources_map: Any, account_id: str, region_name: str
    ) -> Any:
        updated = original(logical_id, resource_json, resources_map, account_id, region_name)
        if updated is None:  # no update in moto's model (or an unmodelled type): the resource stays as it was
            return resources_map._parsed_resources.get(logical_id)
        return updated

    _install(parsing, "parse_and_update_resource", parse_and_update_resource, name)
    return True


def mock_updates(resource_type: str) -> bool:
    """Whether the mock changes a resource of this type on a stack update (its moto model implements an update, or a
    workaround here does); otherwise it keeps the resource as it was created."""
    from moto.cloudformation import parsing

    model = parsing.get_model_map().get(resource_type)
    if model is None:
        return False
    return not hasattr(model.update_from_cloudformation_json, "__isabstractmethod__")


WORKAROUNDS: tuple[Workaround, ...] = (
    Workaround(
        "custom-resources-unmodelled",
        "moto runs a custom resource's Lambda function in Docker and, without Docker, waits for its answer forever "
        "(the network stack's default-security-group resources). Installed: parsing.resource_class_from_type treats "
        "Custom:: and AWS::CloudFormation::CustomResource types as unmodelled, so they are skipped and reported.",
        (
            "tests/moto/test_deploy.py::test_every_stack_reaches_create_complete",
            "tests/moto/test_rehearse.py::test_every_stack_reaches_create_complete_in_its_own_account",
        ),
        _custom_resources_unmodelled,
    ),
    Workaround(
        "unmodelled-getatt-outputs",
        "moto skips resource types it does not model (e.g. AWS::FSx::FileSystem) with a warning, then its output "
        "validation crashes on an Fn::GetAtt of such a resource ('NoneType' object has no attribute 'has_cfn_attr'). "
        "Installed: ResourceMap.validate_outputs skips exactly those outputs and validates every other.",
        (
            "tests/moto/test_deploy.py::test_every_stack_reaches_create_complete",
            "tests/moto/test_rehearse.py::test_every_stack_reaches_create_complete_in_its_own_account",
        ),
        _unmodelled_getatt_outputs,
    ),
    Workaround(
        "unmodelled-getatt-values",
        "resolving an Fn::GetAtt of a skipped resource fails the stack. Installed: parsing.clean_json resolves it to "
        "'unmodelled-<LogicalId>-<Attribute>', so a reader sees it was never created (the storage stack exports the "
        "Lustre DNS and mount names the training stack imports).",
        (
            "tests/moto/test_deploy.py::test_every_stack_reaches_create_complete",
            "tests/moto/test_rehearse.py::test_every_stack_reaches_create_complete_in_its_own_account",
        ),
        _unmodelled_getatt_values,
    ),
    Workaround(
        "unmodelled-ref-exports",
        "an exported Ref of a skipped resource (a file system's id) resolves to None, and moto reports 'No export "
        "named ...' to every stack importing it. Installed: OutputMap.exports exports 'unmodelled-<LogicalId>'.",
        (
            "tests/moto/test_deploy.py::test_every_stack_reaches_create_complete",
            "tests/moto/test_rehearse.py::test_every_stack_reaches_create_complete_in_its_own_account",
        ),
        _unmodelled_ref_exports,
    ),
    Workaround(
        "kms-key-tags-from-cloudformation",
        "moto's AWS::KMS::Key hands CloudFormation's {Key, Value} tags to a backend expecting {TagKey, TagValue} "
        "and fails the stack. Installed: KmsBackend.create_key converts them.",
        (
            "tests/moto/test_deploy.py::test_every_stack_reaches_create_complete",
            "tests/moto/test_rehearse.py::test_every_stack_reaches_create_complete_in_its_own_account",
        ),
        _kms_key_tags,
    ),
    Workaround(
        "batch-compute-environment-security-groups",
        "moto requires securityGroupIds on a compute environment, but AWS Batch refuses them when the launch "
        "template defines network interfaces (EFA) and uses the interfaces' groups ('Either compute environment "
        "Security Groups or Network Interfaces in Launch template are exclusively allowed'). Installed: "
        "BatchBackend._validate_compute_resources takes them from the launch template's interfaces, as Batch does.",
        (
            "tests/moto/test_deploy.py::test_every_stack_reaches_create_complete",
            "tests/moto/test_batch_deploy.py::test_compute_environments_are_managed_on_demand_with_their_sizes",
            "tests/moto/test_batch_deploy.py::test_min_size_keeps_a_node_running_in_the_clusters_subnet",
        ),
        _batch_compute_environment_security_groups,
    ),
    Workaround(
        "batch-job-definition-from-cloudformation",
        "moto's CloudFormation registers every job definition as 'container' (a 'multinode' one fails for lack of "
        "containerProperties) and drops its platform capabilities and tag propagation. Installed: "
        "JobDefinition.create_from_cloudformation_json passes them through.",
        (
            "tests/moto/test_deploy.py::test_every_stack_reaches_create_complete",
            "tests/moto/test_batch_deploy.py::test_job_definitions_are_multi_node_templates",
            "tests/moto/test_rehearse.py::test_dev_batch_queue_and_job_definition_are_deployed",
        ),
        _batch_job_definition_from_cloudformation,
    ),
    Workaround(
        "batch-describe-node-properties",
        "moto's DescribeJobDefinitions omits nodeProperties, which AWS returns. Installed: JobDefinition.describe adds them.",
        (
            "tests/moto/test_batch_deploy.py::test_job_definitions_are_multi_node_templates",
            "tests/moto/test_rehearse.py::test_dev_batch_queue_and_job_definition_are_deployed",
        ),
        _batch_describe_node_properties,
    ),
    Workaround(
        "batch-service-linked-role",
        "a compute environment without ServiceRole uses AWS Batch's service-linked role (AWSServiceRoleForBatch, "
        "which AWS creates on first use); moto 5.2.5 requires a ServiceRole and knows no such role. Installed: "
        "ComputeEnvironment.create_from_cloudformation_json creates the role in the mock and names it.",
        (
            "tests/moto/test_batch_deploy.py::test_compute_environments_are_managed_on_demand_with_their_sizes",
            "tests/moto/test_rehearse.py::test_dev_batch_queue_and_job_definition_are_deployed",
        ),
        _batch_service_linked_role,
    ),
    Workaround(
        "target-group-attributes",
        "moto's target groups answer no Fn::GetAtt; the fleets' outage alarm reads TargetGroupFullName. Installed: "
        "FakeTargetGroup.get_cfn_attribute answers TargetGroupFullName, TargetGroupName and LoadBalancerArns.",
        (
            "tests/moto/test_inference_deploy.py::test_stacks_reach_create_complete",
            "tests/moto/test_rehearse.py::test_every_stack_reaches_create_complete_in_its_own_account",
        ),
        _target_group_attributes,
    ),
    Workaround(
        "target-group-updates",
        "moto's target groups have no CloudFormation update: a health check change left the group as created (and, "
        "without the workaround updates-keep-unupdatable-resources, dropped it from the stack). CloudFormation changes "
        "the health check in place and replaces the group when a create-only property (Port, Protocol, VpcId, "
        "TargetType, Name, ...) changes. Installed: FakeTargetGroup.update_from_cloudformation_json does both.",
        ("tests/moto/test_rehearse_update.py::test_a_health_path_change_updates_eks_in_place_over_head",),
        _target_group_updates,
    ),
    Workaround(
        "listener-certificates-of-the-account",
        "an HTTPS/TLS listener is refused (CertificateNotFound) unless moto's ACM holds the certificate, and moto's "
        "ACM cannot import one under a given ARN; the file names the user's own ACM certificate. Installed: the "
        "listener keeps certificates moto's ACM does not know (known ones are registered as before).",
        ("tests/moto/test_rehearse.py::test_every_stack_reaches_create_complete_in_its_own_account",),
        _listener_certificates_of_the_account,
    ),
    Workaround(
        "network-teardown",
        "moto creates route tables, subnet associations, gateway attachments, internet gateways, VPC endpoints, NAT "
        "gateways, routes, flow logs and Elastic IPs from CloudFormation but leaves them when the stack is deleted, "
        "so the VPC refuses deletion ('has dependencies'). Installed: a delete() on each of those models making the "
        "backend call 'aws ec2 delete-*' makes (a model that has one is left alone); dependency errors propagate, so "
        "moto's delete loop retries in a later pass, as CloudFormation orders deletes.",
        ("tests/moto/test_rehearse.py::test_destroy_removes_compute_and_the_network",),
        _network_teardown,
    ),
    Workaround(
        "deleted-stack-outputs",
        "describing a deleted stack resolves its Outputs again, and resolving a Ref re-creates the deleted resource "
        "(the network stack's VPC and a subnet). CloudFormation shows no outputs once a stack is deleted. Installed: "
        "Stack.outputs and Stack.exports are empty for a DELETE_COMPLETE stack.",
        ("tests/moto/test_rehearse.py::test_destroy_removes_compute_and_the_network",),
        _deleted_stack_outputs,
    ),
    Workaround(
        "ssm-parameter-generated-name",
        "CloudFormation names an AWS::SSM::Parameter without Name itself; moto fails the stack ('NoneType' object has "
        "no attribute 'lower'); aws_eks_v2's kubectl-ready barrier is such a parameter. Its Tags are a key-value map "
        "(AWS::SSM::Parameter), which moto reads as a list ('string indices must be integers'; the spill controller's "
        "tagged parameter). Installed: Parameter.create_from_cloudformation_json names it after its logical resource "
        "and passes a Tags map as a Key/Value list.",
        ("tests/moto/test_eks_rehearse.py::test_the_eks_example_rehearses_cluster_and_node_groups",),
        _ssm_parameter_generated_name,
    ),
    Workaround(
        "previous-default-parameters",
        "`cdk deploy` over an existing stack passes its BootstrapVersion parameter with UsePreviousValue; moto looks the "
        "previous value up among the parameters given at creation only and fails with a KeyError (an HTML 500 the CLI "
        "cannot parse) when the stack took the template's default, as every CDK stack does. CloudFormation uses the "
        "stack's current value. Installed: CloudFormationBackend._resolve_update_parameters leaves such a parameter to "
        "the template's default (for BootstrapVersion: the SSM parameter, resolved again).",
        ("tests/moto/test_rehearse_update.py::test_a_health_path_change_updates_eks_in_place_over_head",),
        _previous_default_parameters,
    ),
    Workaround(
        "updates-keep-unupdatable-resources",
        "on a stack update moto replaces a changed resource whose model has no update (a target group, a KMS key, "
        "every unmodelled type) with None: it vanishes from the stack, and a later Ref or GetAtt of it fails. "
        "CloudFormation updates it. Installed: parsing.parse_and_update_resource keeps the resource as it was; the "
        "update rehearsal names each such resource as not updated by the mock (neuronkit.rehearsal.update).",
        ("tests/moto/test_rehearse_update.py::test_a_health_path_change_updates_eks_in_place_over_head",),
        _updates_keep_unupdatable_resources,
    ),
    Workaround(
        "eks-from-cloudformation",
        "moto models EKS clusters and node groups in its EKS API but not in CloudFormation, so AWS::EKS::Cluster and "
        "AWS::EKS::Nodegroup would be skipped. Installed: CloudFormation models of both that call moto's EKS backend "
        "(the cluster gets a cluster security group in its VPC, as EKS creates one); access entries, add-ons and "
        "everything inside Kubernetes stay unmodelled and are reported. On a stack update both change in place what EKS "
        "changes in place, and refuse a replacement under the same name as CloudFormation does.",
        (
            "tests/moto/test_eks_rehearse.py::test_the_eks_example_rehearses_cluster_and_node_groups",
            "tests/moto/test_rehearse_update.py::test_a_health_path_change_updates_eks_in_place_over_head",
        ),
        _eks_from_cloudformation,
    ),
)


# --------------------------------------------------------------------------------------------
# state a real account has and moto's API refuses to create (no patching)
# --------------------------------------------------------------------------------------------
def seed_public_parameter(account: str, region: str, name: str, value: str) -> None:
    """Put an AWS-owned public parameter (e.g. a Neuron DLAMI id) into moto's SSM.

    moto refuses put_parameter under /aws/ (reserved names), so the parameter goes into its backend.
    """
    from moto.ssm.models import Parameter, ssm_backends

    backend = ssm_backends[account][region]
    backend._parameters[name].append(
        Parameter(  # type: ignore[abstract]
            account_id=account,
            name=name,
            value=value,
            parameter_type="String",
            description="seeded public parameter",
            allowed_pattern=None,
            keyid=None,
            last_modified_date=clock.utc_now(),
            version=1,
            data_type="aws:ec2:image",
        )
    )


def seed_pinned_images(account: str, region: str, image_ids: set[str], root_device_name: str = "/dev/sda1") -> list[str]:
    """Register AMIs with exactly these ids in moto's EC2 (owner amazon), so pinned images can launch.

    The ids come from cdk.context.json (the example environments' lookups); moto's register_image would
    choose its own ids, so the images go into the backend directly. Returns the ids it added.
    """
    from moto.ec2.models import ec2_backends
    from moto.ec2.models.amis import Ami

    ec2 = ec2_backends[account][region]
    added = []
    for image_id in sorted(image_ids):
        if image_id in ec2.amis:
            continue
        ec2.amis[image_id] = Ami(
            ec2,
            image_id,
            name=f"neuronkit-pinned/{image_id}",
            description="stand-in for an image pinned in cdk.context.json",
            owner_alias="amazon",
            public=True,
            virtualization_type="hvm",
            architecture="x86_64",
            root_device_name=root_device_name,
            region_name=region,
        )
        added.append(image_id)
    return added


def seed_users_cluster(client: Callable[[str], Any], account: str, region: str, env: Any) -> str | None:
    """An EKS cluster created outside the kit, as a user's would be (``eks.existing``): its VPC, one subnet per AZ ID and
    the cluster security group under the ids the file names (moto draws EC2 ids at random: they are pinned here), a
    cluster role, then the cluster at the file's version, with the file's authentication mode and cluster security
    group (moto 5 keeps neither ``accessConfig`` nor ``clusterSecurityGroupId``: they go into its backend). ``client``
    makes boto3 clients acting in ``account``/``region`` (the rehearsal's server or ``mock_aws``). Returns the cluster's
    name, or None when the file names no existing cluster or the cluster is there already."""
    import ipaddress
    from unittest import mock

    from moto.ec2.models import security_groups, subnets, vpcs
    from moto.eks.models import eks_backends

    if env.eks is None or env.eks.existing is None or env.network.existing is None:
        return None
    ex, net = env.eks.existing, env.network.existing
    eks = client("eks")
    if ex.cluster_name in eks.list_clusters().get("clusters", []):
        return None
    ec2 = client("ec2")
    if not ec2.describe_vpcs(Filters=[{"Name": "vpc-id", "Values": [net.vpc_id]}])["Vpcs"]:
        with mock.patch.object(vpcs, "random_vpc_id", return_value=net.vpc_id):
            ec2.create_vpc(CidrBlock=env.network.cidr)
    block = ipaddress.ip_network(env.network.cidr)
    made = []
    for (az_id, subnet_id), cidr in zip(net.subnet_ids.items(), block.subnets(new_prefix=20), strict=False):
        with mock.patch.object(subnets, "random_subnet_id", return_value=subnet_id):
            made.append(ec2.create_subnet(VpcId=net.vpc_id, CidrBlock=str(cidr), AvailabilityZoneId=az_id)["Subnet"]["SubnetId"])
    with mock.patch.object(security_groups, "random_security_group_id", return_value=ex.cluster_security_group_id):
        ec2.create_security_group(GroupName=f"eks-cluster-sg-{ex.cluster_name}", Description="EKS cluster", VpcId=net.vpc_id)
    role = client("iam").create_role(RoleName=f"{ex.cluster_name}-cluster", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    eks.create_cluster(
        name=ex.cluster_name, version=ex.kubernetes_version, roleArn=role,
        resourcesVpcConfig={"subnetIds": made, "endpointPrivateAccess": True, "endpointPublicAccess": False},
        kubernetesNetworkConfig={("serviceIpv6Cidr" if ":" in ex.service_cidr else "serviceIpv4Cidr"): ex.service_cidr},
    )  # fmt: skip
    cluster = eks_backends[account][region].clusters[ex.cluster_name]
    cluster.access_config = {"authenticationMode": ex.authentication_mode}  # type: ignore[attr-defined]
    cluster.resources_vpc_config["clusterSecurityGroupId"] = ex.cluster_security_group_id
    return str(ex.cluster_name)
