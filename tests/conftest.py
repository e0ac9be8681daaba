"""Shared fixtures: the whole app is synthesized once per test session (with cdk-nag, as app.py does)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent

# jsii must run on the venv's Node 24 even when pytest is started without `make`.
_VENV_BIN = ROOT / ".venv" / "bin"
if _VENV_BIN.is_dir() and not os.environ.get("PATH", "").startswith(str(_VENV_BIN)):
    os.environ["PATH"] = f"{_VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")


def cdk_context() -> dict[str, Any]:
    """The feature flags of cdk.json, so in-process apps synthesize exactly as the CLI does."""
    context: dict[str, Any] = json.loads((ROOT / "cdk.json").read_text())["context"]
    return context


def new_app(outdir: Path | None = None) -> Any:
    from aws_cdk import App

    # As app.py: cfn-lint (tests/compliance) replaces CDK's built-in CloudFormation validation.
    return App(context=cdk_context(), outdir=str(outdir) if outdir else None, builtin_cloud_formation_validation=False)


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
    from neuronkit import compliance
    from neuronkit.config import load_all
    from neuronkit.stacks import build_environment

    outdir = tmp_path_factory.mktemp("cdk.out")
    app = new_app(outdir)
    for env in load_all(ROOT / "environments"):
        build_environment(app, env)
    compliance.apply(app)
    assembly = app.synth()
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
