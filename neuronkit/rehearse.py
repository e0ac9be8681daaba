"""Rehearse a deployment: the real, pinned CDK CLI deploys the synthesized app into an embedded moto server.

``neuronkit rehearse`` (``make deploy-local``) is a dress rehearsal of ``cdk deploy`` that needs no AWS
account and can never reach one:

1. :class:`Rehearsal` starts moto's ``ThreadedMotoServer`` on 127.0.0.1 (a free port) in this process and
   addresses it as ``http://localhost:PORT`` (moto's CloudFormation reads the template URL's host name to
   find the S3 bucket, so ``localhost``, not the IP).
2. It synthesizes the app with the pinned CLI (or reads a given cdk.out folder) and seeds what a real
   account has and moto lacks: every public SSM parameter the templates resolve
   (``AWS::SSM::Parameter::Value<...>`` defaults, e.g. the Neuron DLAMI id), each image-typed one pointing
   at an AMI registered in the mocked EC2.
3. Per environment it runs ``cdk bootstrap aws://ACCOUNT/REGION`` and ``cdk deploy --require-approval
   never`` with credentials that moto maps to that environment's own account (an IAM access key created in
   that account: moto resolves the account of every request from its access key id), so dev deploys
   into 111111111111 and prod into 222222222222, each bootstrapped on its own.
4. It reads the result back with boto3 (:meth:`Rehearsal.deploy` returns :class:`EnvironmentReport`): stack
   states, Auto Scaling groups against their ``neuronkit`` Metadata and launch templates, buckets, file
   systems, alarms, and the resources moto did not model (created nothing, tested nothing).
5. :meth:`Rehearsal.destroy` puts an object into every retained bucket, runs ``cdk destroy --force`` and
   checks that the buckets and objects survive while compute is gone (:class:`DestroyReport`).

Safety: the CLI subprocess gets only this endpoint (``AWS_ENDPOINT_URL``), dummy credentials and empty
AWS config/credentials files; every other ``AWS_*`` variable (profiles, session tokens,
``AWS_ENDPOINT_URL_*``) is removed, and :func:`assert_local_endpoint` refuses any endpoint that is not
loopback before anything starts.

Two deviations from a real deployment, both forced by moto 5.2 and stated in docs/rehearsal.md: stacks are
deployed with ``--method=direct`` (moto's change sets neither publish nor resolve cross-stack exports), and
resource types moto does not model are skipped (:mod:`neuronkit.mockaws` resolves their attributes to
visible ``unmodelled-...`` placeholders so the stacks that read them still deploy).

moto is a test/dev dependency (``make setup`` installs it); it is imported only when a rehearsal starts.
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from neuronkit import catalog

Progress = Callable[[str], None]

# Host name the CLI and boto3 use for the embedded server (see the module docstring for why not 127.0.0.1).
ENDPOINT_HOST = "localhost"
BIND_ADDRESS = "127.0.0.1"
BOOTSTRAP_QUALIFIER = "hnb659fds"
BOOTSTRAP_PARAMETER = f"/cdk-bootstrap/{BOOTSTRAP_QUALIFIER}/version"
SSM_VALUE_TYPE = "AWS::SSM::Parameter::Value<"
REHEARSAL_USER = "neuronkit-rehearsal"
PROBE_KEY = "neuronkit-rehearsal/probe.txt"
# Accounts/regions for stacks synthesized without an explicit environment (moto's defaults).
DEFAULT_ACCOUNT = "123456789012"
DEFAULT_REGION = "us-east-1"
# Types that create nothing in an account (CDK's version-reporting resource): not listed as unmodelled.
NOT_A_RESOURCE = frozenset({"AWS::CDK::Metadata"})
COMPLETE = frozenset({"CREATE_COMPLETE", "UPDATE_COMPLETE"})
CLI_TAIL_LINES = 30
ASG_TYPE = "AWS::AutoScaling::AutoScalingGroup"
LAUNCH_TEMPLATE_TYPE = "AWS::EC2::LaunchTemplate"
BUCKET_TYPE = "AWS::S3::Bucket"
ALARM_TYPES = ("AWS::CloudWatch::Alarm", "AWS::CloudWatch::CompositeAlarm")
FILE_SYSTEM_TYPES = ("AWS::FSx::FileSystem", "AWS::EFS::FileSystem")
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_STACK_DONE = re.compile(r"^\s*✅\s+(?:Environment\s+)?(\S+?)(?::\s*(destroyed))?\s*$")


# --------------------------------------------------------------------------------------------
# errors and the endpoint guard
# --------------------------------------------------------------------------------------------
class RehearsalError(Exception):
    """The rehearsal failed; ``tail`` holds the CDK CLI's last lines when the CLI failed.

    ``code`` is the exit code for ``neuronkit rehearse``: 1 when a deployment or a check failed, 2 when
    the rehearsal refused to start (unsafe endpoint, missing tool).
    """

    def __init__(self, message: str, *, code: int = 1, tail: Sequence[str] = ()):
        super().__init__(message)
        self.message = message
        self.code = code
        self.tail = list(tail)

    def __str__(self) -> str:
        if not self.tail:
            return self.message
        return self.message + "\n" + "\n".join(f"    {line}" for line in self.tail)


class UnsafeEndpointError(RehearsalError):
    """The endpoint is not on this machine's loopback interface: the rehearsal refuses to start."""

    def __init__(self, message: str):
        super().__init__(message, code=2)


def assert_local_endpoint(url: str) -> str:
    """Return ``url`` if it is an http(s) endpoint on loopback (localhost, 127.0.0.0/8, ::1); raise otherwise.

    The rehearsal only ever talks to its own embedded moto server; anything else could be a real AWS
    endpoint (``https://ec2.us-east-1.amazonaws.com``) or another machine (``http://10.0.0.5:5000``).
    """
    parts = urlsplit(url)
    host = parts.hostname
    if parts.scheme not in ("http", "https") or not host:
        raise UnsafeEndpointError(f"refusing to rehearse against {url!r}: not an http(s) URL of the embedded moto server")
    if host == "localhost":
        return url
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise UnsafeEndpointError(
            f"refusing to rehearse against {url}: {host} is not a loopback address (localhost, 127.0.0.0/8, ::1); "
            "a rehearsal only talks to its own embedded moto server and never to AWS or another machine"
        )
    return url


def cli_environment(
    endpoint: str,
    *,
    access_key_id: str,
    secret_access_key: str,
    region: str,
    blank_file: Path,
    cdk_home: Path,
    path_prefix: Sequence[str] = (),
    base: dict[str, str] | None = None,
) -> dict[str, str]:
    """The environment of a CDK CLI subprocess: this endpoint and these credentials, nothing else of AWS.

    Every ``AWS_*`` variable of ``base`` (default: this process's environment) is dropped, among them
    ``AWS_PROFILE``, ``AWS_SESSION_TOKEN``, ``AWS_ENDPOINT_URL_*`` and web-identity/container credential
    settings; the config and credentials files point at ``blank_file`` (empty); instance metadata is off.
    """
    assert_local_endpoint(endpoint)
    source = dict(os.environ if base is None else base)
    env = {
        k: v
        for k, v in source.items()
        if not k.upper().startswith("AWS_")
        and k not in ("CDK_DEFAULT_ACCOUNT", "CDK_DEFAULT_REGION", "CDK_OUTDIR", "MOTO_ACCOUNT_ID")
    }
    no_proxy = ",".join(x for x in (source.get("NO_PROXY") or source.get("no_proxy"), "localhost", "127.0.0.1") if x)
    env.update(
        AWS_ENDPOINT_URL=endpoint,
        AWS_ACCESS_KEY_ID=access_key_id,
        AWS_SECRET_ACCESS_KEY=secret_access_key,
        AWS_REGION=region,
        AWS_DEFAULT_REGION=region,
        AWS_CONFIG_FILE=str(blank_file),
        AWS_SHARED_CREDENTIALS_FILE=str(blank_file),
        AWS_EC2_METADATA_DISABLED="true",
        AWS_MAX_ATTEMPTS="2",
        CDK_HOME=str(cdk_home),
        CDK_DISABLE_VERSION_CHECK="1",
        CDK_DISABLE_CLI_TELEMETRY="true",
        JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION="1",
        FORCE_COLOR="0",
        NO_COLOR="1",
        NO_PROXY=no_proxy,
        no_proxy=no_proxy,
    )
    if path_prefix:
        env["PATH"] = os.pathsep.join([*path_prefix, env.get("PATH", "")])
    return env


# --------------------------------------------------------------------------------------------
# the cloud assembly
# --------------------------------------------------------------------------------------------
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


def unmodelled_types(types: Iterable[str]) -> set[str]:
    """The resource types among ``types`` that moto's CloudFormation does not model (it skips them)."""
    from moto.cloudformation import parsing

    known = parsing.get_model_map()
    return {
        t
        for t in types
        if t not in known and t not in parsing.NULL_MODELS and not t.startswith("Custom::") and t not in NOT_A_RESOURCE
    }


# --------------------------------------------------------------------------------------------
# reports
# --------------------------------------------------------------------------------------------
@dataclass
class StackReport:
    name: str
    status: str
    resources: int  # in the template
    created: int  # resources moto modelled and created
    unmodelled: list[tuple[str, str]]  # (logical id, type) that moto skipped


@dataclass
class PoolReport:
    stack: str
    logical_id: str
    group_name: str
    metadata: dict[str, Any]
    min_size: int | None = None
    desired_size: int | None = None
    max_size: int | None = None
    launch_template_id: str | None = None
    launch_template_version: str | None = None
    launch_template_instance_type: str | None = None
    image_id: str | None = None
    instances: int = 0

    @property
    def pool(self) -> str:
        return str(self.metadata.get("pool", self.logical_id))

    @property
    def primary_type(self) -> str:
        types = self.metadata.get("neuron_types") or self.metadata.get("instance_types") or ["?"]
        return str(types[0])


@dataclass
class BucketReport:
    stack: str
    logical_id: str
    name: str
    exists: bool
    retained: bool


@dataclass
class FileSystemReport:
    stack: str
    logical_id: str
    type: str
    description: str
    retained: bool
    modelled: bool


@dataclass
class AlarmReport:
    stack: str
    logical_id: str
    name: str
    modelled: bool


@dataclass
class EnvironmentReport:
    """What one environment's rehearsal deployed, read back with boto3, and what went wrong."""

    name: str
    account: str
    region: str
    stacks: list[StackReport] = field(default_factory=list)
    pools: list[PoolReport] = field(default_factory=list)
    buckets: list[BucketReport] = field(default_factory=list)
    file_systems: list[FileSystemReport] = field(default_factory=list)
    alarms: list[AlarmReport] = field(default_factory=list)
    seeded: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    @property
    def unmodelled(self) -> dict[str, list[str]]:
        """Resource type -> ``stack/LogicalId`` of every resource moto did not model."""
        out: dict[str, list[str]] = {}
        for s in self.stacks:
            for logical_id, kind in s.unmodelled:
                out.setdefault(kind, []).append(f"{s.name}/{logical_id}")
        return dict(sorted(out.items()))

    @property
    def wall_seconds(self) -> float:
        return sum(self.seconds.values())


@dataclass
class DestroyReport:
    """What ``cdk destroy`` removed and what it kept, per environment."""

    name: str
    stacks_deleted: list[str] = field(default_factory=list)
    buckets_kept: list[str] = field(default_factory=list)  # with the probe object still readable
    compute_removed: list[str] = field(default_factory=list)
    file_systems: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.problems


# --------------------------------------------------------------------------------------------
# the rehearsal
# --------------------------------------------------------------------------------------------
def project_root(start: str | Path = ".") -> Path:
    """The folder holding cdk.json (the app), searching upwards from ``start``."""
    here = Path(start).resolve()
    for folder in (here, *here.parents):
        if (folder / "cdk.json").is_file():
            return folder
    raise RehearsalError(f"no cdk.json in {here} or above: run neuronkit rehearse from the project folder", code=2)


def _quiet_print(_: str) -> None:
    return None


class Rehearsal:
    """An embedded moto server plus the pinned CDK CLI; use as a context manager.

    ``environments`` selects environments by name (default: every environment in the assembly);
    ``cdk_out`` deploys an already synthesized cloud assembly instead of synthesizing one (with
    ``environments`` set to one name, the synth passes ``-c env=NAME``). ``progress`` receives one line per
    step; ``verbose`` forwards every CLI line to it.
    """

    _active = False  # one rehearsal per process at a time

    def __init__(
        self,
        project_dir: str | Path = ".",
        *,
        environments: Sequence[str] | None = None,
        cdk_out: str | Path | None = None,
        progress: Progress | None = None,
        verbose: bool = False,
        work_dir: str | Path | None = None,
    ):
        assert_local_endpoint(f"http://{ENDPOINT_HOST}/")  # refuse before anything starts or is created
        self.project_dir = project_root(project_dir)
        self.wanted = list(environments) if environments else None
        self.given_cdk_out = Path(cdk_out).resolve() if cdk_out is not None else None
        self.progress: Progress = progress or _quiet_print
        self.verbose = verbose
        self._own_work_dir = work_dir is None
        # Created when the rehearsal starts; kept when it fails (the server log is there), else removed.
        self.work_dir = (
            Path(work_dir)
            if work_dir is not None
            else Path(tempfile.gettempdir()) / f"neuronkit-rehearsal-{secrets.token_hex(4)}"
        )
        self.endpoint = ""
        self.assembly: Assembly | None = None
        self.synth_seconds = 0.0
        self.reports: dict[str, EnvironmentReport] = {}
        self._server: Any = None
        self._exit = contextlib.ExitStack()
        self._keys: dict[str, tuple[str, str]] = {}
        self._bootstrapped: set[tuple[str, str]] = set()
        self._images: dict[tuple[str, str, str], str] = {}
        self._keep_work_dir = False

    # ---------------------------------------------------------------- lifecycle
    def __enter__(self) -> Rehearsal:
        try:
            self.start()
        except BaseException:
            self._keep_work_dir = bool(self.endpoint)  # keep the server log of a rehearsal that started
            self.close()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        if value is not None:
            self._keep_work_dir = True
        self.close()

    def start(self) -> None:
        """Start the server, then synthesize (or read ``cdk_out``) and seed every environment's account."""
        self.cdk = self.project_dir / "node_modules" / ".bin" / "cdk"
        if not self.cdk.exists():
            raise RehearsalError(f"the pinned CDK CLI is missing ({self.cdk}): run `make setup` (npm ci)", code=2)
        try:
            from moto.server import ThreadedMotoServer
        except ImportError:
            raise RehearsalError("neuronkit rehearse needs moto[server] (a dev dependency): run `make setup`", code=2) from None
        from neuronkit.mockaws import tolerate_unmodelled_outputs

        # moto's backends are process-wide: a second server here would share (and reset) the first one's state.
        if Rehearsal._active:
            raise RehearsalError(
                "another rehearsal is running in this process; moto's state is shared, run one at a time", code=2
            )
        Rehearsal._active = True
        self._exit.callback(self._release)
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self.blank_file = self.work_dir / "empty-aws-config"
        self.blank_file.write_text("")
        self.cdk_home = self.work_dir / "cdk-home"
        self.cdk_home.mkdir(exist_ok=True)
        self.log_file = self.work_dir / "moto-server.log"
        self._exit.enter_context(_server_log(self.log_file))
        # moto takes the account from MOTO_ACCOUNT_ID before the access key: it must not be set here.
        self._exit.enter_context(_without_env("MOTO_ACCOUNT_ID"))
        tolerate_unmodelled_outputs()
        teach_moto_network_teardown()
        server = ThreadedMotoServer(ip_address=BIND_ADDRESS, port=0, verbose=False)
        server.start()
        self._server = server
        self._exit.callback(server.stop)
        _, port = server.get_host_and_port()
        self.endpoint = assert_local_endpoint(f"http://{ENDPOINT_HOST}:{port}")
        self._reset_moto()
        self._exit.callback(self._reset_moto)
        self.progress(f"moto server on {self.endpoint} (bound to {BIND_ADDRESS}); work folder {self.work_dir}")
        self.assembly = self._assembly()
        missing = [e for e in self.wanted or [] if e not in self.assembly.environments()]
        if missing:
            known = ", ".join(self.assembly.environments()) or "none"
            raise RehearsalError(
                f"no stacks for environment(s) {', '.join(missing)} in {self.assembly.path}; known: {known}", code=2
            )
        for name in self.environment_names:
            for account, region in self._targets(name):
                self._seed(account, region)

    @staticmethod
    def _release() -> None:
        Rehearsal._active = False

    def close(self) -> None:
        self._exit.close()
        if self._own_work_dir and not self._keep_work_dir:
            shutil.rmtree(self.work_dir, ignore_errors=True)

    def _reset_moto(self) -> None:
        import urllib.request

        request = urllib.request.Request(f"{self.endpoint}/moto-api/reset", method="POST")
        with contextlib.suppress(OSError), urllib.request.urlopen(request, timeout=30):  # noqa: S310 - loopback only
            pass

    # ---------------------------------------------------------------- public API
    @property
    def environment_names(self) -> list[str]:
        assert self.assembly is not None, "start the rehearsal first"
        names = list(self.assembly.environments())
        return [n for n in names if self.wanted is None or n in self.wanted]

    def stacks(self, environment: str) -> list[StackInfo]:
        assert self.assembly is not None, "start the rehearsal first"
        return self.assembly.environments()[environment]

    def client(self, service: str, account: str, region: str) -> Any:
        """A boto3 client for the embedded server, acting in ``account`` (through that account's access key)."""
        import boto3
        from botocore.config import Config

        key, secret = self._credentials(account)
        return boto3.client(
            service,
            endpoint_url=assert_local_endpoint(self.endpoint),
            region_name=region,
            aws_access_key_id=key,
            aws_secret_access_key=secret,
            config=Config(retries={"max_attempts": 2}, s3={"addressing_style": "path"}),
        )

    def deploy(self, environments: Sequence[str] | None = None) -> list[EnvironmentReport]:
        """Bootstrap, deploy and verify each environment; raises :class:`RehearsalError` when the CLI fails."""
        reports = []
        for name in environments or self.environment_names:
            report = self._deploy_one(name)
            self.reports[name] = report
            reports.append(report)
        return reports

    def destroy(self, environments: Sequence[str] | None = None) -> list[DestroyReport]:
        """Put a probe object into every retained bucket, ``cdk destroy --force``, check what is kept/removed."""
        return [self._destroy_one(name) for name in environments or list(self.reports)]

    # ---------------------------------------------------------------- synth and seeding
    def _assembly(self) -> Assembly:
        if self.given_cdk_out is not None:
            self.progress(f"using the synthesized app in {self.given_cdk_out}")
            return read_assembly(self.given_cdk_out)
        out = self.work_dir / "cdk.out"
        args = ["synth", "--quiet", "--output", str(out)]
        if self.wanted and len(self.wanted) == 1:
            args += ["-c", f"env={self.wanted[0]}"]
        self.progress(f"synthesizing: cdk {' '.join(args)}")
        start = time.monotonic()
        self._cli(args, account=DEFAULT_ACCOUNT, region=DEFAULT_REGION, label="synth")
        self.synth_seconds = time.monotonic() - start
        return read_assembly(out)

    def _targets(self, environment: str) -> list[tuple[str, str]]:
        return sorted({(s.account, s.region) for s in self.stacks(environment)})

    def _credentials(self, account: str) -> tuple[str, str]:
        """An access key of an IAM user in ``account``: moto maps every request signed with it to that account."""
        if account not in self._keys:
            from moto.iam.models import iam_backends

            iam = iam_backends[account]["aws"]
            if REHEARSAL_USER not in iam.users:
                iam.create_user(DEFAULT_REGION, REHEARSAL_USER)
            key = iam.create_access_key(REHEARSAL_USER)
            self._keys[account] = (key.access_key_id, key.secret_access_key)
        return self._keys[account]

    def _seed(self, account: str, region: str) -> list[str]:
        """Seed the public SSM parameters the templates resolve, image ids pointing at registered AMIs."""
        from moto.ec2.models import ec2_backends
        from moto.ssm.models import ssm_backends

        from neuronkit.mockaws import pinned_image_ids, seed_pinned_images, seed_public_parameter

        self._credentials(account)
        seeded = []
        wanted: dict[str, str] = {}
        assert self.assembly is not None
        for s in self.assembly.stacks:
            if (s.account, s.region) == (account, region):
                wanted.update(ssm_parameter_defaults(s))
                # Pinned images (cdk.context.json lookups) are literal ids: the mock must know them to launch nodes.
                for image_id in seed_pinned_images(account, region, pinned_image_ids(s.template)):
                    seeded.append(f"{image_id} (pinned image registered in the mock)")
        ssm = ssm_backends[account][region]
        ec2 = ec2_backends[account][region]
        families = {f.ssm_parameter: f for f in catalog.ami_families().values()}
        for name, kind in sorted(wanted.items()):
            if name == BOOTSTRAP_PARAMETER or (account, region, name) in self._images:
                continue  # `cdk bootstrap` creates the version parameter
            current = ssm.get_parameter(name)
            if "AWS::EC2::Image::Id" in kind:
                if current is not None and current.value in ec2.amis:
                    continue
                family = families.get(name)
                image = ec2.register_image(
                    name=f"neuronkit-rehearsal/{family.name if family else name.strip('/').replace('/', '-')}",
                    description=f"stand-in for the public image behind {name}",
                )
                if family is not None:
                    image.root_device_name = family.root_device_name
                seed_public_parameter(account, region, name, image.id)
                self._images[(account, region, name)] = image.id
                seeded.append(f"{name} = {image.id} (AMI registered in the mock)")
            elif current is None:
                seed_public_parameter(account, region, name, "neuronkit-rehearsal-placeholder")
                seeded.append(f"{name} = neuronkit-rehearsal-placeholder")
        for line in seeded:
            self.progress(f"seeded {account}/{region}: {line}")
        return seeded

    # ---------------------------------------------------------------- the CLI
    def _cli_env(self, account: str, region: str) -> dict[str, str]:
        key, secret = self._credentials(account)
        return cli_environment(
            self.endpoint,
            access_key_id=key,
            secret_access_key=secret,
            region=region,
            blank_file=self.blank_file,
            cdk_home=self.cdk_home,
            path_prefix=[str(Path(sys.executable).parent), str(self.project_dir / "node_modules" / ".bin")],
        )

    def _cli(
        self,
        args: Sequence[str],
        *,
        account: str,
        region: str,
        label: str,
        on_line: Callable[[str], None] | None = None,
    ) -> list[str]:
        command = [str(self.cdk), *args, "--no-notices"]
        tail: deque[str] = deque(maxlen=CLI_TAIL_LINES)
        lines: list[str] = []
        proc = subprocess.Popen(
            command,
            cwd=self.project_dir,
            env=self._cli_env(account, region),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            text=True,
            encoding="utf-8",
            errors="replace",
        )
        assert proc.stdout is not None
        for raw in proc.stdout:
            line = _ANSI.sub("", raw.rstrip("\n"))
            lines.append(line)
            if line.strip():
                tail.append(line)
            if self.verbose and line.strip():
                self.progress(f"[{label}] | {line}")
            elif line.lstrip().startswith(("❌", "‣")):
                self.progress(f"[{label}] {line.strip()}")
            if on_line is not None:
                on_line(line)
        code = proc.wait()
        if code != 0:
            shown = " ".join(args)
            raise RehearsalError(
                f"`cdk {shown}` failed for {label} (exit {code}); moto's log: {self.log_file}; the CLI's last lines:",
                tail=list(tail),
            )
        return lines

    def _selection(self, environment: str) -> list[str]:
        """``--all`` when the assembly holds only this environment's stacks (as a user would type), else their ids."""
        assert self.assembly is not None
        mine = self.stacks(environment)
        if len(mine) == len(self.assembly.stacks):
            return ["--all"]
        return [s.artifact_id for s in mine]

    # ---------------------------------------------------------------- deploy and verify
    def _deploy_one(self, name: str) -> EnvironmentReport:
        stacks = self.stacks(name)
        targets = self._targets(name)
        account, region = targets[0]
        report = EnvironmentReport(name=name, account=account, region=region)
        start = time.monotonic()
        for acct, reg in targets:
            if (acct, reg) in self._bootstrapped:
                continue
            self.progress(f"[{name}] cdk bootstrap aws://{acct}/{reg}")
            self._cli(
                ["bootstrap", f"aws://{acct}/{reg}", "--app", str(self._assembly_path)], account=acct, region=reg, label=name
            )
            self._ensure_bootstrap_version(acct, reg)
            self._bootstrapped.add((acct, reg))
        report.seconds["bootstrap"] = time.monotonic() - start

        by_id = {s.artifact_id: s for s in stacks}

        def on_line(line: str) -> None:
            m = _STACK_DONE.match(line)
            if m and m.group(1) in by_id and not m.group(2):
                stack = by_id[m.group(1)]
                self.progress(f"[{name}] {self._stack_line(self._stack_report(stack))}")

        start = time.monotonic()
        selection = self._selection(name)
        self.progress(f"[{name}] cdk deploy {' '.join(selection)} --require-approval never --method=direct")
        # One CLI run per environment: all its stacks share one account/region in neuronkit, and the CLI
        # refuses stacks of an account other than its credentials'.
        for acct, reg in targets:
            mine = [s.artifact_id for s in stacks if (s.account, s.region) == (acct, reg)]
            chosen = selection if len(targets) == 1 else mine
            self._cli(
                ["deploy", *chosen, "--app", str(self._assembly_path), "--require-approval", "never", "--method=direct"],
                account=acct,
                region=reg,
                label=name,
                on_line=on_line,
            )
        report.seconds["deploy"] = time.monotonic() - start
        start = time.monotonic()
        self._verify(report, stacks)
        report.seconds["verify"] = time.monotonic() - start
        return report

    @property
    def _assembly_path(self) -> Path:
        assert self.assembly is not None
        return self.assembly.path

    def _ensure_bootstrap_version(self, account: str, region: str) -> None:
        ssm = self.client("ssm", account, region)
        try:
            ssm.get_parameter(Name=BOOTSTRAP_PARAMETER)
        except ssm.exceptions.ParameterNotFound:
            ssm.put_parameter(Name=BOOTSTRAP_PARAMETER, Value="30", Type="String")
            self.progress(f"seeded {account}/{region}: {BOOTSTRAP_PARAMETER} = 30 (bootstrap did not create it)")

    def _stack_report(self, stack: StackInfo) -> StackReport:
        cfn = self.client("cloudformation", stack.account, stack.region)
        try:
            status = cfn.describe_stacks(StackName=stack.name)["Stacks"][0]["StackStatus"]
        except cfn.exceptions.ClientError:
            status = "MISSING"
        types = {k: v.get("Type", "") for k, v in stack.resources()}
        skipped = unmodelled_types(types.values())
        listed = self._physical_ids(stack) if status != "MISSING" else {}
        unmodelled = sorted((k, t) for k, t in types.items() if t in skipped)
        created = sum(1 for k, t in types.items() if t not in skipped and t not in NOT_A_RESOURCE and k in listed)
        real = sum(1 for t in types.values() if t not in NOT_A_RESOURCE)
        return StackReport(name=stack.name, status=status, resources=real, created=created, unmodelled=unmodelled)

    @staticmethod
    def _stack_line(s: StackReport) -> str:
        line = f"{s.name}: {s.status}, {s.created} resources created in moto"
        if s.unmodelled:
            kinds = sorted({t.split("::", 1)[1] for _, t in s.unmodelled})
            line += f", {len(s.unmodelled)} not modelled by moto ({', '.join(kinds)})"
        return line

    def _verify(self, report: EnvironmentReport, stacks: list[StackInfo]) -> None:
        for stack in stacks:
            s = self._stack_report(stack)
            report.stacks.append(s)
            if s.status not in COMPLETE:
                report.problems.append(f"{s.name}: {s.status}, expected CREATE_COMPLETE or UPDATE_COMPLETE")
            physical = self._physical_ids(stack)
            self._verify_pools(report, stack, physical)
            self._verify_buckets(report, stack, physical)
            skipped = {t for _, t in s.unmodelled}
            for logical_id, resource in stack.resources(*FILE_SYSTEM_TYPES):
                report.file_systems.append(
                    FileSystemReport(
                        stack=stack.name,
                        logical_id=logical_id,
                        type=resource["Type"],
                        description=_file_system_description(resource),
                        retained=resource.get("DeletionPolicy") in ("Retain", "RetainExceptOnCreate"),
                        modelled=resource["Type"] not in skipped,
                    )
                )
            for logical_id, resource in stack.resources(*ALARM_TYPES):
                props = resource.get("Properties") or {}
                report.alarms.append(
                    AlarmReport(
                        stack=stack.name,
                        logical_id=logical_id,
                        name=str(props.get("AlarmName") or physical.get(logical_id) or logical_id),
                        modelled=resource["Type"] not in skipped,
                    )
                )

    def _physical_ids(self, stack: StackInfo) -> dict[str, str]:
        cfn = self.client("cloudformation", stack.account, stack.region)
        try:
            listed = cfn.describe_stack_resources(StackName=stack.name)["StackResources"]
        except cfn.exceptions.ClientError:
            return {}
        # moto lists a skipped (unmodelled) resource without logical or physical id.
        return {r["LogicalResourceId"]: r.get("PhysicalResourceId") or "" for r in listed if r.get("LogicalResourceId")}

    def _verify_pools(self, report: EnvironmentReport, stack: StackInfo, physical: dict[str, str]) -> None:
        autoscaling = self.client("autoscaling", stack.account, stack.region)
        ec2 = self.client("ec2", stack.account, stack.region)
        for logical_id, resource in stack.resources(ASG_TYPE):
            meta = (resource.get("Metadata") or {}).get("neuronkit") or {}
            name = physical.get(logical_id, "")
            pool = PoolReport(stack=stack.name, logical_id=logical_id, group_name=name, metadata=meta)
            report.pools.append(pool)
            where = f"{stack.name}/{logical_id}"
            groups = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[name])["AutoScalingGroups"] if name else []
            if not groups:
                report.problems.append(f"{where}: Auto Scaling group {name or '(no physical id)'} does not exist")
                continue
            group = groups[0]
            pool.min_size, pool.desired_size, pool.max_size = group["MinSize"], group["DesiredCapacity"], group["MaxSize"]
            pool.instances = len(group.get("Instances") or [])
            expected = (meta.get("min_size"), meta.get("desired_size", meta.get("min_size")), meta.get("max_size"))
            if meta and (pool.min_size, pool.desired_size, pool.max_size) != expected:
                report.problems.append(
                    f"{where}: min/desired/max {pool.min_size}/{pool.desired_size}/{pool.max_size}, "
                    f"the Metadata says {expected[0]}/{expected[1]}/{expected[2]}"
                )
            spec = group.get("LaunchTemplate") or (group.get("MixedInstancesPolicy") or {}).get("LaunchTemplate", {}).get(
                "LaunchTemplateSpecification", {}
            )
            pool.launch_template_id = spec.get("LaunchTemplateId")
            pool.launch_template_version = str(spec.get("Version")) if spec.get("Version") is not None else None
            own = {physical.get(k) for k, _ in stack.resources(LAUNCH_TEMPLATE_TYPE)}
            if not pool.launch_template_id or pool.launch_template_id not in own:
                report.problems.append(
                    f"{where}: launch template {pool.launch_template_id} is not the stack's own ({sorted(x for x in own if x)})"
                )
                continue
            versions = ec2.describe_launch_template_versions(LaunchTemplateId=pool.launch_template_id)["LaunchTemplateVersions"]
            data = versions[-1]["LaunchTemplateData"] if versions else {}
            pool.launch_template_instance_type = data.get("InstanceType")
            pool.image_id = data.get("ImageId")
            types = meta.get("instance_types") or []
            if pool.launch_template_instance_type and types and pool.launch_template_instance_type not in types:
                report.problems.append(f"{where}: launch template type {pool.launch_template_instance_type} is not in {types}")
            if pool.image_id:
                images = ec2.describe_images(ImageIds=[pool.image_id])["Images"]
                if not images:
                    report.problems.append(f"{where}: image {pool.image_id} of the launch template does not exist")

    def _verify_buckets(self, report: EnvironmentReport, stack: StackInfo, physical: dict[str, str]) -> None:
        s3 = self.client("s3", stack.account, stack.region)
        for logical_id, resource in stack.resources(BUCKET_TYPE):
            name = physical.get(logical_id) or str((resource.get("Properties") or {}).get("BucketName", ""))
            exists = _bucket_exists(s3, name)
            report.buckets.append(
                BucketReport(
                    stack=stack.name,
                    logical_id=logical_id,
                    name=name,
                    exists=exists,
                    retained=resource.get("DeletionPolicy") in ("Retain", "RetainExceptOnCreate"),
                )
            )
            if not exists:
                report.problems.append(f"{stack.name}/{logical_id}: bucket {name or '(no name)'} does not exist")

    # ---------------------------------------------------------------- destroy
    def _destroy_one(self, name: str) -> DestroyReport:
        deployed = self.reports.get(name)
        if deployed is None:
            raise RehearsalError(f"{name}: not deployed in this rehearsal; deploy before destroying", code=2)
        stacks = self.stacks(name)
        out = DestroyReport(name=name)
        start = time.monotonic()
        for b in deployed.buckets:
            if b.retained and b.exists:
                s3 = self.client("s3", deployed.account, deployed.region)
                s3.put_object(
                    Bucket=b.name, Key=PROBE_KEY, Body=f"written by neuronkit rehearse before destroying {name}".encode()
                )
        targets = self._targets(name)
        selection = self._selection(name)
        self.progress(f"[{name}] cdk destroy {' '.join(selection)} --force")

        def on_line(line: str) -> None:
            m = _STACK_DONE.match(line)
            if m and m.group(2):
                self.progress(f"[{name}] {m.group(1)}: destroyed")

        for acct, reg in targets:
            mine = [s.artifact_id for s in stacks if (s.account, s.region) == (acct, reg)]
            chosen = selection if len(targets) == 1 else mine
            self._cli(
                ["destroy", *chosen, "--app", str(self._assembly_path), "--force"],
                account=acct,
                region=reg,
                label=name,
                on_line=on_line,
            )
        for stack in stacks:
            cfn = self.client("cloudformation", stack.account, stack.region)
            try:
                status = cfn.describe_stacks(StackName=stack.name)["Stacks"][0]["StackStatus"]
            except cfn.exceptions.ClientError:
                status = "DELETE_COMPLETE"
            if status == "DELETE_COMPLETE":
                out.stacks_deleted.append(stack.name)
            else:
                out.problems.append(f"{stack.name}: {status} after cdk destroy, expected DELETE_COMPLETE")
        s3 = self.client("s3", deployed.account, deployed.region)
        for b in deployed.buckets:
            if not b.exists:
                continue
            still = _bucket_exists(s3, b.name)
            if b.retained:
                if not still:
                    out.problems.append(f"{b.stack}/{b.logical_id}: retained bucket {b.name} was deleted")
                    continue
                try:
                    s3.get_object(Bucket=b.name, Key=PROBE_KEY)["Body"].read()
                except s3.exceptions.ClientError:
                    out.problems.append(f"{b.stack}/{b.logical_id}: bucket {b.name} kept, but the object {PROBE_KEY} is gone")
                    continue
                out.buckets_kept.append(b.name)
            elif still:
                out.problems.append(f"{b.stack}/{b.logical_id}: bucket {b.name} has no DeletionPolicy Retain but still exists")
        autoscaling = self.client("autoscaling", deployed.account, deployed.region)
        ec2 = self.client("ec2", deployed.account, deployed.region)
        for p in deployed.pools:
            if (
                p.group_name
                and autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[p.group_name])["AutoScalingGroups"]
            ):
                out.problems.append(f"{p.stack}/{p.logical_id}: Auto Scaling group {p.group_name} still exists after cdk destroy")
            else:
                out.compute_removed.append(f"Auto Scaling group {p.group_name}")
            if p.launch_template_id:
                try:  # AWS raises NotFound for an unknown id, moto returns an empty list
                    found = ec2.describe_launch_templates(LaunchTemplateIds=[p.launch_template_id])["LaunchTemplates"]
                except ec2.exceptions.ClientError:
                    found = []
                if found:
                    out.problems.append(
                        f"{p.stack}/{p.logical_id}: launch template {p.launch_template_id} still exists after cdk destroy"
                    )
                else:
                    out.compute_removed.append(f"launch template {p.launch_template_id}")
        for fs in deployed.file_systems:
            where = f"{fs.stack}/{fs.logical_id} ({fs.description})"
            if fs.retained:
                how = "kept: the template's DeletionPolicy Retain makes CloudFormation keep it"
            else:
                how = "DELETED with its data: the template has no DeletionPolicy Retain"
                out.problems.append(f"{where}: file system without DeletionPolicy Retain; cdk destroy deletes its data")
            checked = "" if fs.modelled else " (moto does not model it: the template is the evidence)"
            out.file_systems.append(f"{where}: {how}{checked}")
        out.seconds = time.monotonic() - start
        return out


def _bucket_exists(s3: Any, name: str) -> bool:
    if not name:
        return False
    try:
        s3.head_bucket(Bucket=name)
    except s3.exceptions.ClientError:
        return False
    return True


def _file_system_description(resource: dict[str, Any]) -> str:
    props = resource.get("Properties") or {}
    kind = props.get("FileSystemType") or resource.get("Type", "").split("::")[-1]
    lustre = props.get("LustreConfiguration") or {}
    parts = [str(kind)]
    if props.get("FileSystemTypeVersion"):
        parts[0] += f" {props['FileSystemTypeVersion']}"
    if lustre.get("DeploymentType"):
        parts.append(str(lustre["DeploymentType"]))
    if props.get("StorageCapacity") is not None:
        parts.append(f"{props['StorageCapacity']} GiB")
    if lustre.get("PerUnitStorageThroughput"):
        parts.append(f"{lustre['PerUnitStorageThroughput']} MB/s/TiB")
    return ", ".join(parts)


_TEARDOWN_TAUGHT = False


def teach_moto_network_teardown() -> None:
    """Teach moto to tear down what CloudFormation deletes, so ``cdk destroy`` can delete a VPC stack.

    moto 5.2.5 creates route tables, subnet associations, gateway attachments, internet gateways, VPC
    endpoints, NAT gateways, routes, flow logs and Elastic IPs from CloudFormation, but deleting the stack
    leaves them in place, and the VPC then refuses deletion ("has dependencies"). Each method added here
    makes the same EC2 backend call that ``aws ec2 delete-*`` makes; a method moto already has is left
    alone. Dependency errors propagate, so moto's delete loop retries in a later pass, as CloudFormation
    orders deletes. And a deleted stack shows no outputs (moto would re-create the resources its outputs
    reference when someone describes it). Idempotent; affects only moto.
    """
    global _TEARDOWN_TAUGHT
    if _TEARDOWN_TAUGHT:
        return
    from moto.ec2.models import ec2_backends
    from moto.ec2.models.elastic_ip_addresses import ElasticAddress
    from moto.ec2.models.flow_logs import FlowLogs
    from moto.ec2.models.internet_gateways import InternetGateway
    from moto.ec2.models.nat_gateways import NatGateway
    from moto.ec2.models.route_tables import Route, RouteTable
    from moto.ec2.models.subnets import SubnetRouteTableAssociation
    from moto.ec2.models.vpcs import VPCEndPoint
    from moto.ec2.models.vpn_gateway import VPCGatewayAttachment

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

    taught: list[tuple[type, Callable[..., None]]] = [
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
    for cls, method in taught:
        if not hasattr(cls, "delete"):
            setattr(cls, "delete", method)  # noqa: B010 - adding a method to a moto class

    # Describing a deleted stack resolves its Outputs again, and resolving a Ref re-creates the deleted
    # resource (the VPC and a subnet of the network stack). CloudFormation shows no outputs once deleted.
    from moto.cloudformation.models import Stack

    outputs: Any = vars(Stack)["outputs"]  # the property objects
    exports: Any = vars(Stack)["exports"]

    def deleted(stack: Any) -> bool:
        return str(getattr(stack, "status", "")) == "DELETE_COMPLETE"

    Stack.outputs = property(lambda self: None if deleted(self) else outputs.fget(self))  # type: ignore[method-assign,assignment]
    Stack.exports = property(lambda self: [] if deleted(self) else exports.fget(self))  # type: ignore[method-assign,assignment]
    _TEARDOWN_TAUGHT = True


@contextlib.contextmanager
def _server_log(path: Path) -> Iterator[None]:
    """Send the embedded server's request log and moto's warnings to ``path`` instead of the terminal."""
    handler = logging.FileHandler(path, encoding="utf-8")
    handler.setFormatter(logging.Formatter("%(asctime)s %(name)s %(levelname)s %(message)s"))
    saved = []
    for name in ("werkzeug", "moto"):
        logger = logging.getLogger(name)
        saved.append((logger, logger.level, logger.propagate))
        logger.addHandler(handler)
        logger.setLevel(logging.INFO)
        logger.propagate = False
    import warnings

    with warnings.catch_warnings():
        # moto's UserWarnings (skipped types, unmapped error shapes) go nowhere; the report lists skipped types.
        warnings.filterwarnings("ignore", category=UserWarning, module=r"moto\.")
        try:
            yield
        finally:
            for logger, level, propagate in saved:
                logger.removeHandler(handler)
                logger.setLevel(level)
                logger.propagate = propagate
            handler.close()


@contextlib.contextmanager
def _without_env(*names: str) -> Iterator[None]:
    saved = {n: os.environ.pop(n) for n in names if n in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


# --------------------------------------------------------------------------------------------
# rendering
# --------------------------------------------------------------------------------------------
def _table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: str = "") -> list[str]:
    widths = [max(len(str(r[i])) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: Sequence[str]) -> str:
        out = [
            str(c).rjust(w) if str(i) in right else str(c).ljust(w) for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ]
        return "  ".join(out).rstrip()

    return [line(headers), "  ".join("-" * w for w in widths), *(line(r) for r in rows)]


def _efa(instance_type: str) -> str:
    try:
        it = catalog.get(instance_type)
    except KeyError:
        return "?"
    if not it.efa_supported:
        return "none"
    return f"{it.efa_max_interfaces} x EFA, {it.efa_bandwidth_gbps:g} Gbps"


def _facts(instance_type: str) -> tuple[int | None, int | None, int | None]:
    try:
        it = catalog.get(instance_type)
    except KeyError:
        return None, None, None
    return it.neuron_devices, it.neuron_cores, it.gpus


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _accelerators(instance_type: str, nodes: int) -> str:
    chips, cores, gpus = _facts(instance_type)
    if chips is None:
        return "?"
    if chips:
        return f"{_plural(chips * nodes, 'chip')}, {_plural((cores or 0) * nodes, 'NeuronCore')}"
    return _plural((gpus or 0) * nodes, "GPU") if gpus else "none"


def _listing(items: Sequence[str], shown: int = 3) -> str:
    more = len(items) - shown
    return ", ".join(items[:shown]) + (f" and {more} more" if more > 0 else "")


def render_report(report: EnvironmentReport) -> str:
    """The per-environment tables ``neuronkit rehearse`` prints."""
    seconds = ", ".join(f"{k} {v:.1f} s" for k, v in report.seconds.items())
    verdict = "OK" if report.ok else f"FAILED ({len(report.problems)} problem(s))"
    lines = [f"== {report.name}: account {report.account}, {report.region}: {verdict} ({seconds})", ""]
    lines += _table(
        ["stack", "status", "resources", "created in moto", "not modelled by moto"],
        [[s.name, s.status, str(s.resources), str(s.created), str(len(s.unmodelled))] for s in report.stacks],
        right="234",
    )
    lines += ["", "pools (Auto Scaling groups: their neuronkit Metadata, sizes and launch template read back from moto):"]
    if report.pools:
        rows = []
        for p in report.pools:
            top = p.max_size if p.max_size is not None else int(p.metadata.get("max_size", 0))
            rows.append(
                [
                    p.pool,
                    str(p.metadata.get("role", "?")),
                    ", ".join(p.metadata.get("instance_types") or [p.launch_template_instance_type or "?"]),
                    f"{p.min_size}/{p.desired_size}/{p.max_size}",
                    _accelerators(p.primary_type, 1),
                    _accelerators(p.primary_type, top),
                    _efa(p.primary_type),
                    str(p.metadata.get("capacity", "on-demand")),
                    str(p.instances),
                    f"{p.launch_template_id} ({p.image_id})" if p.launch_template_id else "-",
                ]
            )
        lines += _table(
            [
                "pool",
                "role",
                "instance types",
                "min/desired/max",
                "per node",
                "at max",
                "EFA per node",
                "capacity",
                "instances in moto",
                "launch template (image)",
            ],
            rows,
            right="8",
        )
    else:
        lines.append("  none")
    lines += ["", "buckets:"]
    lines += [
        f"  {b.name} ({'retained' if b.retained else 'deleted with the stack'}, {'exists' if b.exists else 'MISSING'})"
        for b in report.buckets
    ] or ["  none"]
    lines += ["", "file systems:"]
    lines += [
        f"  {f.stack}/{f.logical_id}: {f.description}"
        + ("" if f.modelled else " (not modelled by moto: checked only in the template)")
        for f in report.file_systems
    ] or ["  none"]
    lines += ["", "alarms:"]
    lines += [f"  {a.name}" + ("" if a.modelled else " (not modelled by moto)") for a in report.alarms] or ["  none"]
    lines += ["", "not modelled by moto (skipped: nothing created, nothing tested; cover them with template assertions):"]
    lines += [f"  {kind} x{len(where)}: {_listing(where)}" for kind, where in report.unmodelled.items()] or ["  none"]
    if report.problems:
        lines += ["", "PROBLEMS:"] + [f"  {p}" for p in report.problems]
    return "\n".join(lines)


def render_destroy(report: DestroyReport) -> str:
    verdict = "OK" if report.ok else f"FAILED ({len(report.problems)} problem(s))"
    lines = [f"== {report.name}: cdk destroy: {verdict} ({report.seconds:.1f} s)"]
    lines.append(f"  stacks deleted: {', '.join(report.stacks_deleted) or 'none'}")
    lines.append(f"  buckets kept with their objects: {', '.join(report.buckets_kept) or 'none'}")
    lines.append(f"  compute removed: {', '.join(report.compute_removed) or 'none'}")
    for fs in report.file_systems:
        lines.append(f"  file system {fs}")
    if report.problems:
        lines += ["  PROBLEMS:"] + [f"    {p}" for p in report.problems]
    return "\n".join(lines)


# --------------------------------------------------------------------------------------------
# one call for the CLI and the bench
# --------------------------------------------------------------------------------------------
@dataclass
class RehearsalResult:
    environments: list[EnvironmentReport]
    destroyed: list[DestroyReport]
    synth_seconds: float
    wall_seconds: float

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.environments) and all(d.ok for d in self.destroyed)


def rehearse(
    project_dir: str | Path = ".",
    *,
    environments: Sequence[str] | None = None,
    destroy: bool = False,
    cdk_out: str | Path | None = None,
    progress: Progress | None = None,
    verbose: bool = False,
) -> RehearsalResult:
    """Synthesize, deploy and verify every (or the named) environment in moto; with ``destroy``, destroy too."""
    start = time.monotonic()
    emit = progress or _quiet_print
    with Rehearsal(project_dir, environments=environments, cdk_out=cdk_out, progress=progress, verbose=verbose) as r:
        reports = []
        destroyed = []
        for name in r.environment_names:
            report = r.deploy([name])[0]
            reports.append(report)
            emit(render_report(report))
            emit("")
        if destroy:
            for name in r.environment_names:
                d = r.destroy([name])[0]
                destroyed.append(d)
                emit(render_destroy(d))
                emit("")
        return RehearsalResult(reports, destroyed, r.synth_seconds, time.monotonic() - start)


def rehearsal_wall_times(project_dir: str | Path = ".", environments: Sequence[str] | None = None) -> dict[str, float]:
    """Wall seconds per environment of a quiet rehearsal (bootstrap + deploy + verification), for ``make bench``.

    The one synthesis all environments share is reported under the key ``"synth"``.
    """
    result = rehearse(project_dir, environments=environments)
    times = {"synth": round(result.synth_seconds, 2)}
    times.update({r.name: round(r.wall_seconds, 2) for r in result.environments})
    return times
