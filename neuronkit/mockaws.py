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
    validation and resolves such attributes to ``unmodelled-<LogicalId>-<Attribute>``, so a reader
    sees it was never created; everything else is still validated. Idempotent.
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

    # moto's AWS::KMS::Key hands CloudFormation's {Key, Value} tags to an API expecting {TagKey, TagValue}.
    from moto.kms import models as kms_models

    original_create_key = kms_models.KmsBackend.create_key

    def create_key(self: Any, *args: Any, **kwargs: Any) -> Any:
        tags = kwargs.get("tags") or []
        kwargs["tags"] = [{"TagKey": t["Key"], "TagValue": t["Value"]} if "Key" in t else t for t in tags]
        return original_create_key(self, *args, **kwargs)

    kms_models.KmsBackend.create_key = create_key  # type: ignore[method-assign]
    _PATCHED = True
