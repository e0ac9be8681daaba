"""Running a rehearsal: the embedded moto server, seeding, and the pinned CDK CLI against it.

:class:`Rehearsal` (a context manager):

1. starts moto's ``ThreadedMotoServer`` on 127.0.0.1 (a free port) in this process, addressed as
   ``http://localhost:PORT`` (:mod:`neuronkit.rehearsal.safety` says why, and refuses anything not loopback),
   after applying :func:`neuronkit.rehearsal.moto_workarounds.apply`;
2. synthesizes the app with the pinned CLI (or reads a given cdk.out folder,
   :mod:`neuronkit.rehearsal.assembly`) and seeds what a real account has and moto lacks: every public SSM
   parameter the templates resolve, each image-typed one pointing at an AMI registered in the mocked EC2,
   and the AMIs pinned in cdk.context.json;
3. per environment runs ``cdk bootstrap aws://ACCOUNT/REGION`` and ``cdk deploy --require-approval never
   --method=direct`` with credentials that moto maps to that environment's own account (an IAM access key
   created in that account), so dev deploys into 111111111111 and prod into 222222222222;
4. reads the result back (:meth:`Rehearsal.deploy` returns :class:`~neuronkit.rehearsal.report.EnvironmentReport`);
5. :meth:`Rehearsal.destroy` runs ``cdk destroy --force`` between :func:`~neuronkit.rehearsal.report.put_probes`
   and :func:`~neuronkit.rehearsal.report.check_destroyed`.

:func:`rehearse` is the one call ``neuronkit rehearse`` makes; :func:`rehearsal_wall_times` is ``make bench``'s.
moto is a test/dev dependency (``make setup`` installs it); it is imported only when a rehearsal starts.
"""

from __future__ import annotations

import contextlib
import json
import logging
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

from neuronkit import catalog, config
from neuronkit.config import lookups
from neuronkit.config.lookups import CONTEXT_FILE
from neuronkit.rehearsal import moto_workarounds, safety
from neuronkit.rehearsal.assembly import (
    DEFAULT_ACCOUNT,
    DEFAULT_REGION,
    Assembly,
    StackInfo,
    pinned_image_ids,
    read_assembly,
    ssm_parameter_defaults,
)
from neuronkit.rehearsal.errors import RehearsalError
from neuronkit.rehearsal.report import (
    DestroyReport,
    EnvironmentReport,
    RehearsalResult,
    check_destroyed,
    put_probes,
    render_destroy,
    render_report,
    stack_line,
    stack_report,
    verify,
)

Progress = Callable[[str], None]

BOOTSTRAP_QUALIFIER = "hnb659fds"
BOOTSTRAP_PARAMETER = f"/cdk-bootstrap/{BOOTSTRAP_QUALIFIER}/version"
REHEARSAL_USER = "neuronkit-rehearsal"
CLI_TAIL_LINES = 30
_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
_STACK_DONE = re.compile(r"^\s*✅\s+(?:Environment\s+)?(\S+?)(?::\s*(destroyed))?\s*$")


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
    ``environments`` set to one name, the synth passes ``-c env=NAME``); ``env_file`` synthesizes that one
    environment file instead of environments/ (``-c file=PATH``). ``progress`` receives one line per
    step; ``verbose`` forwards every CLI line to it. ``base_dir`` (with ``base_env_file``, its copy of the file): another
    revision's project folder, synthesized too (``base_assembly``) and deployed by ``deploy(base=True)``; ``neuronkit
    rehearse --base`` deploys it, then the head over it (:mod:`neuronkit.rehearsal.update`).
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
        env_file: str | Path | None = None,
        base_dir: str | Path | None = None,
        base_env_file: str | Path | None = None,
    ):
        safety.assert_local_endpoint(f"http://{safety.ENDPOINT_HOST}/")  # refuse before anything starts or is created
        self.project_dir = project_root(project_dir)
        self.wanted = list(environments) if environments else None
        self.given_cdk_out = Path(cdk_out).resolve() if cdk_out is not None else None
        self.env_file = Path(env_file).resolve() if env_file is not None else None
        # ``neuronkit rehearse --base``: another revision's project folder (and its copy of the file), synthesized too
        self.base_dir = Path(base_dir).resolve() if base_dir is not None else None
        self.base_env_file = Path(base_env_file).resolve() if base_env_file is not None else None
        self.base_assembly: Assembly | None = None
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
        self.stand_ins: list[str] = []  # one line per unpinned lookup filled with a stand-in image
        self.users_clusters: dict[str, list[str]] = {}  # per environment: the eks.existing clusters the mock holds
        self.app_dir = self.project_dir  # the CLI's working folder; a private copy once the rehearsal starts
        self.context: dict[str, Any] = {}  # the private cdk.context.json: the project's pins and the stand-ins

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
        self._exit.enter_context(safety.without_env("MOTO_ACCOUNT_ID"))
        # The mock needs none of moto's bundled public images: the rehearsal registers every image the stacks boot
        # (pinned or stand-in). Loading them costs 20-25 s at a region's first describe_images, against 2.6 s without.
        # moto's reset rebuilds its cached backends with the settings of that moment: the setting is put back (below)
        # before the closing reset, so that later users of moto in this process get the bundled images again.
        restore_amis = safety.set_env("MOTO_EC2_LOAD_DEFAULT_AMIS", "false")
        self._exit.callback(restore_amis)  # on a failure before the server is up
        moto_workarounds.apply()
        server = ThreadedMotoServer(ip_address=safety.BIND_ADDRESS, port=0, verbose=False)
        server.start()
        self._server = server
        self._exit.callback(server.stop)
        _, port = server.get_host_and_port()
        self.endpoint = safety.assert_local_endpoint(f"http://{safety.ENDPOINT_HOST}:{port}")
        self._reset_moto()
        self._exit.callback(self._reset_moto)
        self._exit.callback(restore_amis)  # runs first on close: the closing reset then loads the bundled images
        self.progress(f"moto server on {self.endpoint} (bound to {safety.BIND_ADDRESS}); work folder {self.work_dir}")
        self.app_dir, self.context = self._private_app(self.project_dir, "app", self.env_file)
        self.assembly = self._assembly(self.app_dir, self.work_dir / "cdk.out", self.env_file)
        missing = [e for e in self.wanted or [] if e not in self.assembly.environments()]
        if missing:
            known = ", ".join(self.assembly.environments()) or "none"
            raise RehearsalError(
                f"no stacks for environment(s) {', '.join(missing)} in {self.assembly.path}; known: {known}", code=2
            )
        if self.base_dir is not None:
            self.base_assembly = self._base_assembly(self.base_dir)
        for name in self.environment_names:
            for account, region in self._targets(name):
                self._seed(account, region)
                if self.base_assembly is not None:
                    self._seed(account, region, self.base_assembly)
        self._users_clusters()

    def _users_clusters(self) -> None:
        """eks.existing: the mock holds the user's cluster before the kit's stacks deploy against it, as their account
        would (moto_workarounds.seed_users_cluster); one line each in the progress and the report."""
        for env, _ in self._rehearsed_files(self.project_dir, self.env_file):
            if env.name not in self.environment_names:
                continue

            def client(service: str, env: config.Environment = env) -> Any:
                return self.client(service, env.account, env.region)

            made = moto_workarounds.seed_users_cluster(client, env.account, env.region, env)
            if made:
                line = (
                    f"[{env.name}] the mock holds EKS cluster {made}, created outside the kit (its VPC, subnets and "
                    "cluster security group under the file's ids), before the kit's stacks deploy against it"
                )
                self.users_clusters.setdefault(env.name, []).append(line)
                self.progress(line)

    def _base_assembly(self, base_dir: Path) -> Assembly:
        """The other revision synthesized with the same selection, in its own private folder (its own pins, the
        stand-ins of both)."""
        app, _ = self._private_app(base_dir, "base-app", self.base_env_file)
        assembly = self._assembly(app, self.work_dir / "base.out", self.base_env_file, label="base synth")
        missing = [e for e in self.environment_names if e not in assembly.environments()]
        if missing:
            raise RehearsalError(
                f"environment(s) {', '.join(missing)} have no stacks in the base revision: nothing to update; "
                "rehearse them without --base",
                code=2,
            )
        return assembly

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
            endpoint_url=safety.assert_local_endpoint(self.endpoint),
            region_name=region,
            aws_access_key_id=key,
            aws_secret_access_key=secret,
            config=Config(retries={"max_attempts": 2}, s3={"addressing_style": "path"}),
        )

    def deploy(self, environments: Sequence[str] | None = None, *, base: bool = False) -> list[EnvironmentReport]:
        """Bootstrap, deploy and verify each environment; raises :class:`RehearsalError` when the CLI fails.
        ``base``: deploy the base revision's assembly (a rehearsal started with ``base_dir``) instead of the head's."""
        assembly = self.base_assembly if base else self.assembly
        if base and assembly is None:
            raise RehearsalError("deploy(base=True) needs a rehearsal started with base_dir", code=2)
        reports = []
        for name in environments or self.environment_names:
            report = self._deploy_one(name, assembly)
            self.reports[name] = report
            reports.append(report)
        return reports

    def destroy(self, environments: Sequence[str] | None = None) -> list[DestroyReport]:
        """Put a probe object into every retained bucket, ``cdk destroy --force``, check what is kept/removed."""
        return [self._destroy_one(name) for name in environments or list(self.reports)]

    # ---------------------------------------------------------------- synth and seeding
    def _assembly(self, app_dir: Path, out: Path, env_file: Path | None, label: str = "synth") -> Assembly:
        if self.given_cdk_out is not None and label == "synth":
            self.progress(f"using the synthesized app in {self.given_cdk_out}")
            return read_assembly(self.given_cdk_out)
        args = ["synth", "--quiet", "--output", str(out)]
        if env_file is not None:
            args += ["-c", f"file={env_file}"]
        elif self.wanted and len(self.wanted) == 1:
            args += ["-c", f"env={self.wanted[0]}"]
        self.progress(f"{label}: cdk {' '.join(args)}" + (f" (in {app_dir})" if label != "synth" else ""))
        start = time.monotonic()
        self._cli(args, account=DEFAULT_ACCOUNT, region=DEFAULT_REGION, label=label, cwd=app_dir)
        self.synth_seconds += time.monotonic() - start
        return read_assembly(out)

    def _private_app(self, project_dir: Path, folder: str, env_file: Path | None) -> tuple[Path, dict[str, Any]]:
        """The CLI's working folder: the project's files linked, beside a private copy of cdk.context.json that
        takes the stand-ins of unpinned lookups and whatever the CLI writes. It goes with the work folder, so a
        rehearsal, passed or failed, leaves the project byte for byte as it was."""
        app = self.work_dir / folder
        app.mkdir(parents=True, exist_ok=True)
        for entry in project_dir.iterdir():
            if entry.name not in (CONTEXT_FILE, "cdk.out", ".git") and not (app / entry.name).exists():
                (app / entry.name).symlink_to(entry, target_is_directory=entry.is_dir())
        context = lookups.read_context(project_dir)
        if self.given_cdk_out is None:
            context.update(self._stand_ins(context, project_dir, env_file))
        (app / CONTEXT_FILE).write_text(json.dumps(context, indent=2) + "\n", encoding="utf-8")
        return app, context

    def _rehearsed_files(self, project_dir: Path, env_file: Path | None) -> list[tuple[config.Environment, str]]:
        """The environments the synth will build, with how commands name each (``--env NAME`` / ``--file PATH``)."""
        try:
            if env_file is not None:
                shown = env_file.relative_to(project_dir) if env_file.is_relative_to(project_dir) else env_file
                return [(config.load_environment(env_file), f"--file {shown}")]
            envs = config.load_all(project_dir / "environments")
        except config.ConfigError:
            return []  # the synth reports the file's problems itself
        # The synth builds one environment with -c env=NAME (one name wanted), else every file: each needs its images.
        only = self.wanted[0] if self.wanted and len(self.wanted) == 1 else None
        return [(e, f"--env {e.name}") for e in envs if only is None or e.name == only]

    def _stand_ins(self, context: dict[str, Any], project_dir: Path, env_file: Path | None) -> dict[str, str]:
        """An image registered in the mock for each lookup cdk.context.json does not pin: moto's own images would
        answer the CLI's DescribeImages with whatever matches, or nothing. Each is named in the report."""
        from moto.ec2.models import ec2_backends

        out: dict[str, str] = {}
        for env, select in self._rehearsed_files(project_dir, env_file):
            for lookup in lookups.unpinned_lookups(env, context):
                if lookup.context_key in self.context:  # the head's stand-in serves the base revision too
                    out[lookup.context_key] = self.context[lookup.context_key]
                elif lookup.context_key not in out:
                    image = ec2_backends[lookup.account][lookup.region].register_image(
                        name=f"neuronkit-rehearsal/stand-in/{lookup.family}",
                        description=f"stand-in for unpinned lookup {lookup.label}",
                    )
                    image.root_device_name = lookup.root_device_name
                    out[lookup.context_key] = image.id
                line = (
                    f"[{env.name}] stand-in for unpinned lookup {lookup.key_path} ({lookup.label}): "
                    f"{out[lookup.context_key]}; run `neuronkit pin {select}` to pin the real image"
                )
                self.stand_ins.append(line)
                self.progress(line)
        return out

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

    def _seed(self, account: str, region: str, assembly: Assembly | None = None) -> list[str]:
        """Seed the public SSM parameters the templates resolve, image ids pointing at registered AMIs."""
        from moto.ec2.models import ec2_backends
        from moto.ssm.models import ssm_backends

        self._credentials(account)
        seeded = []
        wanted: dict[str, str] = {}
        assembly = assembly or self.assembly
        assert assembly is not None
        for s in assembly.stacks:
            if (s.account, s.region) == (account, region):
                wanted.update(ssm_parameter_defaults(s))
                # Pinned images (cdk.context.json lookups) are literal ids: the mock must know them to launch nodes.
                for image_id in moto_workarounds.seed_pinned_images(account, region, pinned_image_ids(s.template)):
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
                moto_workarounds.seed_public_parameter(account, region, name, image.id)
                self._images[(account, region, name)] = image.id
                seeded.append(f"{name} = {image.id} (AMI registered in the mock)")
            elif current is None:
                moto_workarounds.seed_public_parameter(account, region, name, "neuronkit-rehearsal-placeholder")
                seeded.append(f"{name} = neuronkit-rehearsal-placeholder")
        for line in seeded:
            self.progress(f"seeded {account}/{region}: {line}")
        return seeded

    # ---------------------------------------------------------------- the CLI
    def _cli_env(self, account: str, region: str) -> dict[str, str]:
        key, secret = self._credentials(account)
        return safety.cli_environment(
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
        cwd: Path | None = None,
    ) -> list[str]:
        command = [str(self.cdk), *args, "--no-notices"]
        tail: deque[str] = deque(maxlen=CLI_TAIL_LINES)
        lines: list[str] = []
        proc = subprocess.Popen(
            command,
            cwd=cwd or self.app_dir,
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

    def _selection(self, environment: str, assembly: Assembly | None = None) -> list[str]:
        """``--all`` when the assembly holds only this environment's stacks (as a user would type), else their ids."""
        assembly = assembly or self.assembly
        assert assembly is not None
        mine = assembly.environments()[environment]
        if len(mine) == len(assembly.stacks):
            return ["--all"]
        return [s.artifact_id for s in mine]

    # ---------------------------------------------------------------- deploy and verify
    def _deploy_one(self, name: str, assembly: Assembly | None = None) -> EnvironmentReport:
        assembly = assembly or self.assembly
        assert assembly is not None
        stacks = assembly.environments()[name]
        targets = self._targets(name)
        account, region = targets[0]
        report = EnvironmentReport(name=name, account=account, region=region)
        start = time.monotonic()
        for acct, reg in targets:
            if (acct, reg) in self._bootstrapped:
                continue
            self.progress(f"[{name}] cdk bootstrap aws://{acct}/{reg}")
            self._cli(["bootstrap", f"aws://{acct}/{reg}", "--app", str(assembly.path)], account=acct, region=reg, label=name)
            self._ensure_bootstrap_version(acct, reg)
            self._bootstrapped.add((acct, reg))
        report.seconds["bootstrap"] = time.monotonic() - start

        by_id = {s.artifact_id: s for s in stacks}

        def on_line(line: str) -> None:
            m = _STACK_DONE.match(line)
            if m and m.group(1) in by_id and not m.group(2):
                stack = by_id[m.group(1)]
                self.progress(f"[{name}] {stack_line(stack_report(self.client, stack))}")

        start = time.monotonic()
        selection = self._selection(name, assembly)
        self.progress(f"[{name}] cdk deploy {' '.join(selection)} --require-approval never --method=direct")
        # One CLI run per environment: all its stacks share one account/region in neuronkit, and the CLI
        # refuses stacks of an account other than its credentials'.
        for acct, reg in targets:
            mine = [s.artifact_id for s in stacks if (s.account, s.region) == (acct, reg)]
            chosen = selection if len(targets) == 1 else mine
            self._cli(
                ["deploy", *chosen, "--app", str(assembly.path), "--require-approval", "never", "--method=direct"],
                account=acct,
                region=reg,
                label=name,
                on_line=on_line,
            )
        report.seconds["deploy"] = time.monotonic() - start
        start = time.monotonic()
        report.seeded += self.users_clusters.get(name, [])
        verify(self.client, report, stacks)
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

    def _destroy_one(self, name: str) -> DestroyReport:
        deployed = self.reports.get(name)
        if deployed is None:
            raise RehearsalError(f"{name}: not deployed in this rehearsal; deploy before destroying", code=2)
        stacks = self.stacks(name)
        out = DestroyReport(name=name)
        start = time.monotonic()
        put_probes(self.client, deployed)
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
        check_destroyed(self.client, deployed, stacks, out)
        out.seconds = time.monotonic() - start
        return out


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


# --------------------------------------------------------------------------------------------
# one call for the CLI and the bench
# --------------------------------------------------------------------------------------------
def rehearse(
    project_dir: str | Path = ".",
    *,
    environments: Sequence[str] | None = None,
    destroy: bool = False,
    cdk_out: str | Path | None = None,
    progress: Progress | None = None,
    verbose: bool = False,
    env_file: str | Path | None = None,
) -> RehearsalResult:
    """Synthesize, deploy and verify every (or the named) environment in moto; with ``destroy``, destroy too."""
    start = time.monotonic()
    emit = progress or _quiet_print
    with Rehearsal(
        project_dir, environments=environments, cdk_out=cdk_out, progress=progress, verbose=verbose, env_file=env_file
    ) as r:
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
        return RehearsalResult(reports, destroyed, r.synth_seconds, time.monotonic() - start, list(r.stand_ins))


def rehearsal_wall_times(project_dir: str | Path = ".", environments: Sequence[str] | None = None) -> dict[str, float]:
    """Wall seconds per environment of a quiet rehearsal (bootstrap + deploy + verification), for ``make bench``.

    The one synthesis all environments share is reported under the key ``"synth"``.
    """
    result = rehearse(project_dir, environments=environments)
    times = {"synth": round(result.synth_seconds, 2)}
    times.update({r.name: round(r.wall_seconds, 2) for r in result.environments})
    return times
