"""Helpers for running synthesized templates against moto (tests and `neuronkit rehearse`).

moto is a test dependency: import this module only where moto is installed.
"""

from __future__ import annotations

import datetime as dt
from typing import Any


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
            last_modified_date=dt.datetime.now(dt.UTC),
            version=1,
            data_type="aws:ec2:image",
        )
    )


_PATCHED = False


def tolerate_unmodelled_outputs() -> None:
    """Let moto deploy stacks that read attributes of resource types it does not model.

    moto 5.2.5 skips unmodelled types (e.g. AWS::FSx::FileSystem) with a warning, but its output
    validation then crashes on ``Fn::GetAtt`` of such a resource (``'NoneType' object has no attribute
    'has_cfn_attr'``) and resolving one fails the stack. This skips exactly those outputs in the
    validation and resolves such attributes to ``unmodelled-<LogicalId>-<Attribute>`` (and an exported
    ``Ref`` of one to ``unmodelled-<LogicalId>``, which moto would drop), so a reader sees it was never
    created; everything else is still validated. Idempotent.
    """
    global _PATCHED
    if _PATCHED:
        return
    from moto.cloudformation import parsing

    original = parsing.ResourceMap.validate_outputs

    def validate_outputs(self: Any) -> None:
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

    original_clean = parsing.clean_json

    def clean_json(resource_json: Any, resources_map: Any) -> Any:
        # A GetAtt of a skipped resource resolves to a visible placeholder instead of failing the stack.
        if isinstance(resource_json, dict) and "Fn::GetAtt" in resource_json:
            name, attr = resource_json["Fn::GetAtt"][0], resource_json["Fn::GetAtt"][1]
            if resources_map.get(name) is None:
                declared = resources_map._resource_json_map.get(name) or {}
                if declared and parsing.resource_class_from_type(declared.get("Type", "")) is None:
                    return f"unmodelled-{name}-{attr}"
        return original_clean(resource_json, resources_map)

    parsing.ResourceMap.validate_outputs = validate_outputs  # type: ignore[method-assign]
    parsing.clean_json = clean_json

    # An exported Ref of a skipped resource (e.g. a file system's id) resolves to None, and moto then
    # reports "No export named ..." to every stack importing it: export the placeholder instead.
    original_exports = parsing.OutputMap.exports

    def exports(self: Any) -> list[Any]:
        found = original_exports.fget(self)  # type: ignore[attr-defined]
        declared = [v for v in (self._output_json_map or {}).values() if v.get("Export")]
        for export, output in zip(found, declared, strict=True):
            value = output.get("Value")
            ref = value.get("Ref") if isinstance(value, dict) else None
            resource = self._resource_map._resource_json_map.get(ref) or {} if isinstance(ref, str) else {}
            if export._value is None and resource and parsing.resource_class_from_type(resource.get("Type", "")) is None:
                export._value = f"unmodelled-{ref}"
        return found

    parsing.OutputMap.exports = property(exports)  # type: ignore[method-assign,assignment]

    # moto's AWS::KMS::Key hands CloudFormation's {Key, Value} tags to an API expecting {TagKey, TagValue}.
    from moto.kms import models as kms_models

    original_create_key = kms_models.KmsBackend.create_key

    def create_key(self: Any, *args: Any, **kwargs: Any) -> Any:
        tags = kwargs.get("tags") or []
        kwargs["tags"] = [{"TagKey": t["Key"], "TagValue": t["Value"]} if "Key" in t else t for t in tags]
        return original_create_key(self, *args, **kwargs)

    kms_models.KmsBackend.create_key = create_key  # type: ignore[method-assign]
    tolerate_batch_from_cloudformation()
    tolerate_target_group_attributes()
    _PATCHED = True


def tolerate_target_group_attributes() -> None:
    """moto 5.2.5's target groups answer no ``Fn::GetAtt`` (the outage alarm reads ``TargetGroupFullName``);
    this gives them the attributes AWS documents, derived from the ARN as AWS derives them. Idempotent."""
    from moto.elbv2.models import FakeTargetGroup

    if hasattr(FakeTargetGroup, "get_cfn_attribute"):
        return

    def get_cfn_attribute(self: Any, attribute_name: str) -> Any:
        if attribute_name == "TargetGroupFullName":
            return self.arn.split(":", 5)[5]  # targetgroup/NAME/ID
        if attribute_name == "TargetGroupName":
            return self.name
        if attribute_name == "LoadBalancerArns":
            return list(self.load_balancer_arns)
        from moto.cloudformation.exceptions import UnformattedGetAttTemplateException

        raise UnformattedGetAttTemplateException()

    FakeTargetGroup.get_cfn_attribute = get_cfn_attribute  # type: ignore[attr-defined]


def tolerate_batch_from_cloudformation() -> None:
    """Let moto 5.2.5 create the AWS Batch resources of a ``scheduler: batch`` cluster as AWS does.

    - A compute environment whose launch template defines network interfaces (EFA) carries no security
      groups: AWS Batch refuses both ("Either compute environment Security Groups or Network Interfaces in
      Launch template are exclusively allowed") and uses the interfaces' groups. moto requires
      ``securityGroupIds``; this takes them from the launch template's interfaces, as Batch does.
    - moto's CloudFormation registers every job definition as ``container`` (so a ``multinode`` one fails
      for lack of containerProperties) and drops its platform capabilities and tag propagation; this passes
      them through. ``DescribeJobDefinitions`` also returns ``nodeProperties``, as AWS does.

    Only creation is covered: moto runs jobs in Docker, which the kit's tests never do. Idempotent.
    """
    from moto.batch import models as batch_models
    from moto.batch.utils import lowercase_first_key

    backend_cls = batch_models.BatchBackend
    if getattr(backend_cls, "_neuronkit_patched", False):
        return
    original_validate = backend_cls._validate_compute_resources

    def validate_compute_resources(self: Any, cr: dict[str, Any]) -> None:
        template = cr.get("launchTemplate") or {}
        if "securityGroupIds" not in cr and template.get("launchTemplateId"):
            data = self.ec2_backend.get_launch_template(template["launchTemplateId"]).latest_version().data
            groups = [g for nic in data.get("NetworkInterfaces") or [] for g in nic.get("Groups") or []]
            cr["securityGroupIds"] = list(dict.fromkeys(groups))
        original_validate(self, cr)

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

    original_describe = batch_models.JobDefinition.describe

    def describe(self: Any) -> dict[str, Any]:
        result: dict[str, Any] = original_describe(self)
        if self.node_properties is not None:
            result["nodeProperties"] = self.node_properties
        return result

    original_create_ce = batch_models.ComputeEnvironment.create_from_cloudformation_json.__func__  # type: ignore[attr-defined]

    def create_compute_environment(
        cls: Any, resource_name: str, cloudformation_json: dict[str, Any], account_id: str, region_name: str, **kwargs: Any
    ) -> Any:
        # A compute environment without ServiceRole uses Batch's service-linked role; moto 5.2.5 requires one.
        from moto.iam.models import iam_backends

        properties = cloudformation_json["Properties"]
        iam = iam_backends[account_id]["aws"]
        slr = next((r for r in iam.roles.values() if r.name.lower() == "awsserviceroleforbatch"), None)
        if slr is None:  # AWS creates it on first use; moto does not
            slr = iam.create_service_linked_role("batch.amazonaws.com", "AWS Batch service-linked role", "")
        properties.setdefault("ServiceRole", slr.arn)
        return original_create_ce(cls, resource_name, cloudformation_json, account_id, region_name, **kwargs)

    batch_models.ComputeEnvironment.create_from_cloudformation_json = classmethod(create_compute_environment)  # type: ignore[method-assign,assignment]
    backend_cls._validate_compute_resources = validate_compute_resources  # type: ignore[method-assign]
    batch_models.JobDefinition.create_from_cloudformation_json = classmethod(create_job_definition)  # type: ignore[method-assign,assignment]
    batch_models.JobDefinition.describe = describe  # type: ignore[method-assign]
    backend_cls._neuronkit_patched = True  # type: ignore[attr-defined]


def pinned_image_ids(template: dict[str, Any]) -> set[str]:
    """Literal AMI ids a template boots (launch templates, Batch compute environments): pinned lookups."""
    out: set[str] = set()

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("ImageId", "ImageIdOverride") and isinstance(value, str) and value.startswith("ami-"):
                    out.add(value)
                else:
                    walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(template.get("Resources", {}))
    return out


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
