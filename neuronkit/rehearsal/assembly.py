"""The cloud assembly: the stacks of a synthesized cdk.out folder and what their templates ask of an account.

:func:`read_assembly` reads ``manifest.json`` and the templates; :func:`ssm_parameter_defaults` and
:func:`pinned_image_ids` say what the runner must seed in the mock (public SSM parameters, pinned AMIs);
:func:`unmodelled_types` says which resource types moto's CloudFormation skips. Nothing here starts
anything; moto is imported only by :func:`unmodelled_types`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from neuronkit.rehearsal.errors import RehearsalError

SSM_VALUE_TYPE = "AWS::SSM::Parameter::Value<"
# Accounts/regions for stacks synthesized without an explicit environment (moto's defaults).
DEFAULT_ACCOUNT = "123456789012"
DEFAULT_REGION = "us-east-1"
# Types that create nothing in an account (CDK's version-reporting resource): not listed as unmodelled.
NOT_A_RESOURCE = frozenset({"AWS::CDK::Metadata"})


@dataclass(frozen=True)
class StackInfo:
    """One stack of a cloud assembly: its CLI id, CloudFormation name, environment and template."""

    artifact_id: str
    name: str
    environment: str
    account: str
    region: str
    template: dict[str, Any]
    template_file: str = ""

    def resources(self, *types: str) -> list[tuple[str, dict[str, Any]]]:
        items = sorted((self.template.get("Resources") or {}).items())
        return [(k, v) for k, v in items if isinstance(v, dict) and (not types or v.get("Type") in types)]


@dataclass(frozen=True)
class Assembly:
    path: Path
    stacks: tuple[StackInfo, ...]

    def environments(self) -> dict[str, list[StackInfo]]:
        """Stacks by environment name, in manifest (dependency) order."""
        out: dict[str, list[StackInfo]] = {}
        for s in self.stacks:
            out.setdefault(s.environment, []).append(s)
        return out


def read_assembly(path: str | Path) -> Assembly:
    """Read the stacks of a cdk.out folder (its manifest.json and templates).

    A stack's environment is its ``neuronkit:environment`` tag (every neuronkit stack carries it), else its
    ``aws://account/region``. Stacks synthesized without an account or region get moto's defaults.
    """
    root = Path(path)
    manifest_file = root / "manifest.json"
    if not manifest_file.is_file():
        raise RehearsalError(
            f"{root}: no cloud assembly here (no manifest.json); run `make synth` (or `cdk synth`) first", code=2
        )
    try:
        manifest = json.loads(manifest_file.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise RehearsalError(f"{manifest_file}: not a readable cloud assembly manifest ({err})", code=2) from None
    stacks = []
    for artifact_id, artifact in (manifest.get("artifacts") or {}).items():
        if artifact.get("type") != "aws:cloudformation:stack":
            continue
        props = artifact.get("properties") or {}
        account, region = _parse_environment(artifact.get("environment", ""))
        template_file = root / props["templateFile"]
        tags = props.get("tags") or {}
        stacks.append(
            StackInfo(
                artifact_id=artifact_id,
                name=props.get("stackName") or artifact_id,
                environment=tags.get("neuronkit:environment") or f"{account}/{region}",
                account=account,
                region=region,
                template=json.loads(template_file.read_text()),
                template_file=template_file.name,
            )
        )
    if not stacks:
        raise RehearsalError(f"{root}: the cloud assembly holds no stacks", code=2)
    return Assembly(path=root, stacks=tuple(stacks))


def _parse_environment(text: str) -> tuple[str, str]:
    account, _, region = text.removeprefix("aws://").partition("/")
    if not account.isdigit():
        account = DEFAULT_ACCOUNT
    if not region or region.startswith("unknown"):
        region = DEFAULT_REGION
    return account, region


def ssm_parameter_defaults(stack: StackInfo) -> dict[str, str]:
    """SSM parameter name -> CloudFormation parameter type, for every ``AWS::SSM::Parameter::Value<...>`` slot."""
    out = {}
    for spec in (stack.template.get("Parameters") or {}).values():
        kind, default = spec.get("Type", ""), spec.get("Default")
        if kind.startswith(SSM_VALUE_TYPE) and isinstance(default, str):
            out[default] = kind
    return out


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


def unmodelled_types(types: Iterable[str]) -> set[str]:
    """The resource types among ``types`` that moto's CloudFormation does not model (it skips them): custom
    resources too, which the custom-resources-unmodelled workaround skips (moto_workarounds)."""
    from moto.cloudformation import parsing

    known = parsing.get_model_map()
    return {
        t
        for t in types
        if (t not in known or t.startswith("Custom::")) and t not in parsing.NULL_MODELS and t not in NOT_A_RESOURCE
    }
