"""Shared fixtures: the whole app is synthesized once per test session (with cdk-nag, as app.py does)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
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

# Every App the suite builds synthesizes into a directory of its own: an App without `outdir` writes to $CDK_OUTDIR
# when it is set, and two test workers writing and reading one cdk.out read each other's templates (issue 45). With
# the variable gone an App without `outdir` gets a fresh temporary directory; subprocess tests that want one pass it.
# `_guard_app_outdirs` below fails a test whose App reuses another App's directory or writes into the repository.
os.environ.pop("CDK_OUTDIR", None)

# The time the tests synthesize and validate at (neuronkit.clock): before the example Capacity Blocks (2027), so the
# examples' schedules stay the same whatever day the suite runs; tests about the clock set their own. NEURONKIT_NOW
# carries it into every program the tests start (the rehearsal's `cdk synth`, app.py, the CLI, the example apps);
# tests/unit/test_clock_pinned.py checks that no code path reads the wall clock past it.
FROZEN_NOW = "2026-11-01T00:00:00Z"
os.environ["NEURONKIT_NOW"] = FROZEN_NOW


# jsii unpacks each package (aws-cdk-lib: ~28 s cold) into its cache under $HOME unless told where the cache is; the
# example programs run with a HOME of their own (a clean environment) and share the test process's warm cache.
JSII_PACKAGE_CACHE = os.environ.get("JSII_RUNTIME_PACKAGE_CACHE_ROOT") or str(
    Path.home() / ".cache" / "aws" / "jsii" / "package-cache"
)


def clean_environment(home: Path) -> dict[str, str]:
    """The whole environment of a program run as a user would run it (an example app, the docs' blocks): the venv's
    Python first on PATH, its own HOME, the checkout on PYTHONPATH, no CDK context, the suite's frozen time and the
    shared jsii package cache."""
    import sys

    return {
        "PATH": f"{Path(sys.executable).parent}{os.pathsep}/usr/bin:/bin",
        "HOME": str(home),
        "PYTHONPATH": str(ROOT),  # the checkout under test, as an installed neuronkit would be
        "JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION": "1",
        "JSII_RUNTIME_PACKAGE_CACHE_ROOT": JSII_PACKAGE_CACHE,
        "NEURONKIT_NOW": FROZEN_NOW,
    }


def cdk_context() -> dict[str, Any]:
    """The feature flags of cdk.json and the pinned lookups of cdk.context.json (the example environments'
    AMIs), so in-process apps synthesize exactly as the CLI does; the clock frozen at ``FROZEN_NOW``."""
    context: dict[str, Any] = json.loads((ROOT / "cdk.context.json").read_text())
    context.update(json.loads((ROOT / "cdk.json").read_text())["context"])
    context["neuronkit:now"] = FROZEN_NOW
    return context


_APP_OUTDIRS: dict[str, str] = {}


def _app_outdir_guard() -> None:
    """Wrap ``aws_cdk.App.__init__`` so that every App records its output directory: a second App in the same directory
    (another test's, or this test's) or a directory inside the repository (shared by every worker) fails at once,
    naming both tests. Installed once per worker."""
    import aws_cdk

    original = aws_cdk.App.__init__
    if getattr(original, "__neuronkit_guard__", False):
        return

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        outdir = os.path.realpath(self.outdir)
        test = os.environ.get("PYTEST_CURRENT_TEST", "(no test)").rsplit(" ", 1)[0]
        if outdir == str(ROOT) or outdir.startswith(str(ROOT) + os.sep):
            raise AssertionError(f"{test}: an App synthesizes into {outdir}, inside the repository; give it a tmp_path")
        if outdir in _APP_OUTDIRS:
            raise AssertionError(f"{test}: an App synthesizes into {outdir}, which an App of {_APP_OUTDIRS[outdir]} used already")
        _APP_OUTDIRS[outdir] = test

    init.__neuronkit_guard__ = True  # type: ignore[attr-defined]
    aws_cdk.App.__init__ = init  # type: ignore[method-assign]


@pytest.fixture(autouse=True, scope="session")
def _guard_app_outdirs() -> None:
    _app_outdir_guard()


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
    missing: list[str] = field(default_factory=list)  # lookup keys cdk.context.json did not pin (filled by stand-ins)
    context: dict[str, Any] = field(default_factory=dict)  # the context synthesized with: pins and stand-ins

    def template(self, stack: str) -> dict[str, Any]:
        return self.templates[stack]

    def resources(self, stack: str, type_: str) -> dict[str, dict[str, Any]]:
        return {k: v for k, v in self.templates[stack]["Resources"].items() if v["Type"] == type_}


@pytest.fixture(scope="session")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A temporary project holding every file under environments/ beside the user-like files of
    tests/fixtures/user_environments/, pinned and unpinned (tests/project.py); the environment-wide tests run here."""
    from tests import project as files

    return files.write(tmp_path_factory.mktemp("project"))


@pytest.fixture(scope="session")
def synth(project: Path, tmp_path_factory: pytest.TempPathFactory) -> Synth:
    """Every environment of the project (tests/project.py), synthesized once with the cdk-nag plugin (a finding
    fails it). Lookups cdk.context.json does not pin (the unpinned variants, a user's new file) get stand-ins."""
    from neuronkit.config import load_all
    from neuronkit.config.lookups import unpinned_lookups
    from neuronkit.constructs import compliance
    from neuronkit.stacks import build_environment

    environments = load_all(project / "environments")

    def build(outdir: Path, extra: dict[str, Any] | None = None) -> Any:
        app = new_app(outdir, extra_context=extra)
        for env in environments:
            build_environment(app, env)
        compliance.apply(app)
        return app

    # Lookups cdk.context.json does not pin yet (the unpinned variants, a user's new file) get stand-ins, as
    # `cdk synth` with credentials would fill them: their keys come from the files (neuronkit.config.lookups), so
    # the app synthesizes once; CDK reporting a lookup still missing means those keys are wrong.
    context = cdk_context()
    missing = sorted({lookup.context_key for env in environments for lookup in unpinned_lookups(env, context)})
    stand_ins = {key: stand_in_ami(key) for key in missing}
    app = build(tmp_path_factory.mktemp("cdk.out"), stand_ins)
    assembly = app.synth()
    assert missing_lookups(assembly.directory) == [], "neuronkit.config.lookups computed other keys than CDK's"
    outdir = Path(assembly.directory)
    templates = {s.stack_name: s.template for s in assembly.stacks}
    return Synth(outdir=outdir, templates=templates, app=app, missing=missing, context={**context, **stand_ins})


@pytest.fixture(scope="module")
def monkeypatch_module() -> Iterator[pytest.MonkeyPatch]:
    """A monkeypatch that lasts for a module (moto deployments set MOTO_ACCOUNT_ID once per module)."""
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


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


# The boot-script sandbox tests either all run or all fail with the reason (tests/sandbox.py `require`); a skip in any
# module that uses the sandbox fails the run, so CI never passes with the boot scripts unchecked (issue 45, item 4).
_SANDBOX_SKIPS: list[str] = []


def _uses_sandbox(nodeid: str) -> bool:
    path = ROOT / nodeid.split("::", 1)[0]
    return path.is_file() and "tests.sandbox" in path.read_text()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.skipped and _uses_sandbox(report.nodeid):
        _SANDBOX_SKIPS.append(report.nodeid)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _SANDBOX_SKIPS and exitstatus == 0:
        session.exitstatus = 1


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if _SANDBOX_SKIPS:
        terminalreporter.write_line(
            f"FAILED: {len(_SANDBOX_SKIPS)} boot-sandbox test(s) skipped, e.g. {_SANDBOX_SKIPS[0]}: the sandbox tests must run "
            "or fail with their reason (tests/sandbox.py)",
            red=True,
        )


EKS_EXAMPLE = ROOT / "examples" / "environments" / "eks.yaml"


@pytest.fixture(scope="session")
def eks_example(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Any]]]:
    """examples/environments/eks.yaml synthesized once per test run, with the cdk-nag plugin as app.py applies it (a
    finding fails it): the cloud assembly's folder and stack name -> template. The first pytest-xdist worker to ask
    synthesizes under a lock into a folder every worker of this run sees; the others read the templates it wrote."""
    import fcntl

    run = os.environ.get("PYTEST_XDIST_TESTRUNUID")
    shared = tmp_path_factory.getbasetemp().parent / f"eks-example-{run}" if run else tmp_path_factory.mktemp("eks-example")
    shared.mkdir(exist_ok=True)
    done = shared / "templates.json"
    with (shared / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not done.exists():
            from neuronkit.config import load_environment
            from neuronkit.constructs import compliance
            from neuronkit.stacks import build_environment

            env = load_environment(EKS_EXAMPLE)

            def build(app: Any) -> Any:
                stacks = build_environment(app, env)
                compliance.apply(app)
                return stacks

            app, _ = pinned_app(build, shared / "cdk.out")
            assembly = app.synth()
            done.write_text(json.dumps({s.stack_name: s.template for s in assembly.stacks}))
    return shared / "cdk.out", json.loads(done.read_text())


@pytest.fixture(scope="session")
def eks_example_stack(eks_example: tuple[Path, dict[str, dict[str, Any]]]) -> dict[str, Any]:
    """The EKS example's `-eks` stack template (a copy: tests may not change the shared one)."""
    import copy

    return copy.deepcopy(next(t for name, t in eks_example[1].items() if name.endswith("-eks")))
