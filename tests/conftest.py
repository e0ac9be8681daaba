"""Shared fixtures: the whole app is synthesized once per test session (with cdk-nag, as app.py does)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

ROOT = Path(__file__).resolve().parent.parent
T = TypeVar("T")

# jsii must run on the venv's Node 24 even when pytest is started without `make`.
_VENV_BIN = ROOT / ".venv" / "bin"
if _VENV_BIN.is_dir() and not os.environ.get("PATH", "").startswith(str(_VENV_BIN)):
    os.environ["PATH"] = f"{_VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")


def cdk_context() -> dict[str, Any]:
    """The feature flags of cdk.json and the pinned lookups of cdk.context.json (the example environments'
    AMIs), so in-process apps synthesize exactly as the CLI does."""
    context: dict[str, Any] = json.loads((ROOT / "cdk.context.json").read_text())
    context.update(json.loads((ROOT / "cdk.json").read_text())["context"])
    return context


def stand_in_ami(key: str) -> str:
    """A well-formed, deterministic image id for a lookup the tests fill themselves (as the CLI would)."""
    return "ami-0" + hashlib.sha1(key.encode()).hexdigest()[:16]


def missing_lookups(assembly_dir: str) -> list[str]:
    manifest = json.loads((Path(assembly_dir) / "manifest.json").read_text())
    return [m["key"] for m in manifest.get("missing", [])]


def pinned_app(build: Callable[[Any], T], outdir: Path | None = None) -> tuple[Any, T]:
    """Build an app the way the CDK CLI does for environments without pinned lookups: synthesize once,
    fill every missing lookup (the AMIs) with a stand-in id, then build again with them in the context."""
    first = new_app()
    build(first)
    extra = {key: stand_in_ami(key) for key in missing_lookups(first.synth().directory)}
    app = new_app(outdir, extra_context=extra)
    return app, build(app)


def new_app(outdir: Path | None = None, extra_context: dict[str, Any] | None = None) -> Any:
    from aws_cdk import App

    # As app.py: cfn-lint (tests/compliance) replaces CDK's built-in CloudFormation validation.
    context = {**cdk_context(), **(extra_context or {})}
    return App(context=context, outdir=str(outdir) if outdir else None, builtin_cloud_formation_validation=False)


@dataclass
class Synth:
    outdir: Path
    templates: dict[str, dict[str, Any]]
    app: Any

    def template(self, stack: str) -> dict[str, Any]:
        return self.templates[stack]

    def resources(self, stack: str, type_: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.templates[stack]["Resources"].items() if v["Type"] == type_}


@pytest.fixture(scope="session")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """Every example environment, synthesized once with the cdk-nag plugin (a finding fails it)."""
    from neuronkit.config import load_all
    from neuronkit.constructs import compliance
    from neuronkit.stacks import build_environment

    environments = load_all(ROOT / "environments")

    def build(outdir: Path, extra: dict[str, Any] | None = None) -> Any:
        app = new_app(outdir, extra_context=extra)
        for env in environments:
            build_environment(app, env)
        compliance.apply(app)
        return app

    outdir = tmp_path_factory.mktemp("cdk.out")
    app = build(outdir)
    assembly = app.synth()
    missing = missing_lookups(assembly.directory)
    if missing:
        # An environment whose lookups cdk.context.json does not pin yet (a user's new file): fill them with
        # stand-ins, as `cdk synth` with credentials would, and synthesize again.
        app = build(tmp_path_factory.mktemp("cdk.out"), {key: stand_in_ami(key) for key in missing})
        assembly = app.synth()
        outdir = Path(assembly.directory)
    templates = {s.stack_name: s.template for s in assembly.stacks}
    return Synth(outdir=outdir, templates=templates, app=app)


@pytest.fixture(scope="session")
def aws_credentials() -> Iterator[None]:
    """Dummy credentials for moto; no test may reach a real account."""
    saved = {
        k: os.environ.get(k)
        for k in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_REGION")
    }
    os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")
    os.environ.pop("AWS_PROFILE", None)
    os.environ.pop("AWS_SESSION_TOKEN", None)
    yield
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


def reserved_prod() -> dict[str, Any]:
    """prod as it was before the Capacity Block: the same cluster on an On-Demand Capacity Reservation the stack
    creates (it bills from creation, used or not), full-size by day and by night. The ODCR rules are tested on it."""
    import copy

    import yaml

    data = copy.deepcopy(yaml.safe_load((ROOT / "environments" / "prod.yaml").read_text()))
    cluster = data["training"][0]
    cluster["capacity"] = {"type": "odcr", "create": True, "instance_count": 16}
    cluster["desired_size"] = 16
    data["monitoring"]["day_night"]["training_night_desired"] = 16
    data["monitoring"]["day_night"]["training_day_desired"] = 16
    return data
