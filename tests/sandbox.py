"""A sandbox that runs a node's user data as a program: real bash, a throwaway root, stub commands.

The rendered user data (exactly what the launch template carries, its CloudFormation functions resolved)
runs under ``chroot`` in an overlay of this machine's root filesystem inside a private mount namespace:
every file it writes (/etc/neuronkit, /opt/neuronkit, /usr/local/bin, /var/log ...) lands in a temporary
upper directory and the machine is left as it was. ``/dev`` is a tmpfs holding the scenario's fake
devices (``/dev/neuron0..N``, ``/dev/infiniband/uverbs0..M``). Commands that would touch AWS or the
hardware (``aws``, ``curl``, ``mount``, ``systemctl``, ``modinfo``, ``lsblk`` ...) are stubs first on PATH:
each records its arguments, answers like the real one for the calls the scripts make, and fails when
the scenario says so. Needs no root: a user namespace (``unshare --user``) and overlayfs per top-level
directory; a machine without user namespaces fails the tests with the reason (``available``).
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tarfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.conftest import ROOT

REGION = "us-east-1"
INSTANCE_ID = "i-0123456789abcdef0"

# The stubs: one bash program each, written to /opt/stubs in the sandbox. "$0 $*" goes to the call log;
# a line "NAME REGEX" in /opt/stubs/fail makes a call of NAME whose arguments match REGEX exit 1.
_PRELUDE = r"""#!/bin/bash
name=$(basename "$0")
echo "${name} $*" >> /var/log/stub-calls
# A line "NAME REGEX" in /opt/stubs/hang: such a call never returns (a dnf or S3 call that hangs), in real time.
if [ -f /opt/stubs/hang ]; then
  while read -r who pattern; do
    if [ "${who}" = "${name}" ] && [[ "$*" =~ ${pattern} ]]; then exec /usr/bin/sleep 3600; fi
  done < /opt/stubs/hang
fi
if [ -f /opt/stubs/fail ]; then
  while read -r who pattern; do
    if [ "${who}" = "${name}" ] && [[ "$*" =~ ${pattern} ]]; then
      echo "stub ${name}: failing as the scenario asks" >&2
      exit 1
    fi
  done < /opt/stubs/fail
fi
"""
STUBS: dict[str, str] = {
    "aws": r"""
# The compiled-model cache: /opt/stubs/cache-complete-after N makes the _COMPLETE marker appear at the
# N-th look (0: there from the start; absent: never); /opt/stubs/lock-held refuses the conditional put.
looks=/opt/stubs/complete-looks
case "$1 $2" in
  "s3api head-object")
    case "$*" in
      *_COMPLETE*)
        [ -f /opt/stubs/cache-complete-after ] || exit 255
        n=$(( $(cat "${looks}" 2>/dev/null || echo 0) + 1 )); echo "${n}" > "${looks}"
        [ "${n}" -gt "$(cat /opt/stubs/cache-complete-after)" ] || exit 255 ;;
      # /opt/stubs/lock-modified: when another node took the lock (else now, by the sandbox clock).
      *_LOCK*) if [ -f /opt/stubs/lock-modified ]; then cat /opt/stubs/lock-modified; else date -u +%FT%TZ; fi ;;
    esac ;;
  "s3api put-object") [ -f /opt/stubs/lock-held ] && exit 255 ;;
  "s3api delete-object") case "$*" in *_LOCK*) rm -f /opt/stubs/lock-held /opt/stubs/lock-modified ;; esac ;;
  # Keep what the publisher's CLI sink sends (a temporary file it deletes afterwards).
  "cloudwatch put-metric-data")
    case "$*" in *file://*)
      all="$*"; f="${all##*file://}"; n=$(find /opt/stubs -name 'put-metric-data-*.json' | wc -l)
      cp "${f%% *}" "/opt/stubs/put-metric-data-$((n + 1)).json" ;; esac ;;
  "ecr get-login-password") echo password ;;
  # SSM Parameter Store: /opt/stubs/ssm/NAME (slashes as _); a put without --overwrite fails when it exists.
  "ssm get-parameter"|"ssm put-parameter")
    name=""; value=""; prev=""
    for a in "$@"; do case "${prev}" in --name) name="${a}" ;; --value) value="${a}" ;; esac; prev="${a}"; done
    f="/opt/stubs/ssm/$(printf '%s' "${name}" | tr / _)"
    if [ "$2" = get-parameter ]; then [ -f "${f}" ] || exit 254; cat "${f}"; exit 0; fi
    [ -f "${f}" ] && case "$*" in *--overwrite*) ;; *) exit 254 ;; esac
    mkdir -p /opt/stubs/ssm
    case "${value}" in file://*) cp "${value#file://}" "${f}" ;; *) printf '%s' "${value}" > "${f}" ;; esac ;;
  "s3 cp") case "$*" in *kit*) [ -f /opt/stubs/kit.zip ] && cp /opt/stubs/kit.zip "${@: -1}" ;; esac ;;
  "s3 sync") case "$*" in s3\ sync\ */compiled\ s3://*) ;; *) mkdir -p "${@: -1}" && echo weights > "${@: -1}/model.safetensors" ;; esac ;;
  # /opt/stubs/instances: the ready nodes of the group (text rows), else this node alone.
  "ec2 describe-instances")
    if [ -f /opt/stubs/instances ]; then cat /opt/stubs/instances
    else printf '2026-11-24T10:00:00Z\ti-0123456789abcdef0\t10.0.0.10\t%s\tNone\n' "$(cat /opt/stubs/driver 2>/dev/null)"; fi ;;
esac
exit 0
""",
    "curl": r"""
url="${@: -1}"
out=""
while [ $# -gt 0 ]; do [ "$1" = "-o" ] && out="$2"; shift; done
case "${url}" in
  */api/token) echo token ;;
  */meta-data/instance-id) echo i-0123456789abcdef0 ;;
  */meta-data/instance-type) cat /opt/stubs/instance-type ;;
  */meta-data/autoscaling/target-lifecycle-state) cat /opt/stubs/target-state 2>/dev/null || echo InService ;;
  *efa-installer*) cp /opt/stubs/efa.tar.gz "${out}" ;;
  *) [ -n "${out}" ] && : > "${out}" ;;
esac
exit 0
""",
    "modinfo": r"""
case "$*" in
  *"-F version neuron"*) cat /opt/stubs/driver 2>/dev/null || exit 1 ;;
  *efa*) [ -f /opt/stubs/efa-installed ] || exit 1 ;;
  *lustre*) exit 0 ;;
esac
exit 0
""",
    "mountpoint": r"""
[ "${@: -1}" = /fsx ] && { [ -f /opt/stubs/fsx-mounted ]; exit $?; }
exit 1
""",
    "mount": r"""
[ "${@: -1}" = /fsx ] && touch /opt/stubs/fsx-mounted
exit 0
""",
    "lsblk": "exit 0\n",
    # `docker login --password-stdin` reads its input, as the real one does: a stub that exits first would break
    # the `aws ecr get-login-password |` pipe (SIGPIPE under pipefail) at random.
    "docker": '[ "$1" = login ] && cat > /dev/null\nexit 0\n',
    "hostname": 'echo "10.0.0.10 "\n',
    "dpkg-query": 'printf "2.30.51.0"\n',
    "rpm": 'printf "2.30.51.0"\n',
    # The fake clock: sleep advances /opt/stubs/clock (epoch seconds) instead of waiting; `date` reads it
    # (tests/sandbox.py _DATE). /opt/stubs/job-ends-on-sleep: the running job finishes during the first sleep.
    "sleep": (
        "now=$(cat /opt/stubs/clock); echo $((now + ${1%s})) > /opt/stubs/clock\n"
        "[ -f /opt/stubs/job-ends-on-sleep ] && rm -f /run/neuronkit/job-active\n"
        # /opt/stubs/late-devices: the driver creates the accelerator devices (listed in it) at the N-th sleep
        # (/opt/stubs/late-after), as a driver unit not ordered before cloud-final does.
        'if [ -f /opt/stubs/late-devices ]; then n=$(( $(cat /opt/stubs/late-after) - 1 )); echo "${n}" > /opt/stubs/late-after\n'
        '  [ "${n}" -gt 0 ] || { xargs touch < /opt/stubs/late-devices; rm -f /opt/stubs/late-devices; }; fi\n'
        "exit 0\n"
    ),
    # nvidia-smi -L lists /opt/stubs/gpus GPUs (none when absent).
    "nvidia-smi": 'if [ "$1" = -L ]; then for i in $(seq 0 $(( $(cat /opt/stubs/gpus 2>/dev/null || echo 0) - 1 ))); do echo "GPU ${i}: stub"; done; fi\nexit 0\n',
    **{
        n: "exit 0\n"
        for n in (
            "systemctl",
            "shutdown",
            "sysctl",
            "modprobe",
            "mdadm",
            "mkfs.xfs",
            "blkid",
            "apt-get",
            "dnf",
            "dpkg",
            "gpg",
        )
    },
}
# `date` on the fake clock: the time is /opt/stubs/clock unless the caller names one (-d/--date). Not logged in
# the call log (every log line calls it).
_DATE = """#!/bin/bash
for a in "$@"; do case "${a}" in -d|--date|--date=*|-d*) exec /usr/bin/date "$@" ;; esac; done
exec /usr/bin/date -d "@$(cat /opt/stubs/clock)" "$@"
"""
# 2026-11-24T10:00:00Z, the sandbox's boot time.
CLOCK_START = 1795514400

_EFA_INSTALLER = """#!/bin/bash
echo "efa_installer.sh $*" >> /var/log/stub-calls
touch /opt/stubs/efa-installed
"""


@dataclass
class Scenario:
    """What the fake node has: its devices, its driver, and which commands fail or hang.

    Absences are real: a node without EFA devices has no /dev/infiniband at all (as on trn1.2xlarge, inf2 or g6e
    without EFA), a GPU node no /dev/neuron*, a node without ``driver`` no Neuron module. :meth:`of` derives the
    devices of an instance type from the catalog."""

    neuron_devices: int = 0
    efa_devices: int = 0
    driver: str | None = None
    instance_type: str = "trn1.32xlarge"
    fail: list[str] = field(default_factory=list)  # "NAME REGEX" lines
    stub_files: dict[str, str] = field(default_factory=dict)  # extra files under /opt/stubs (e.g. cache-complete-after)
    gpus: int = 0  # what nvidia-smi -L lists
    hang: list[str] = field(default_factory=list)  # "NAME REGEX" lines: such calls never return (real time)
    devices_after_sleeps: int = 0  # the Neuron devices appear at this many-th sleep (0: there from the start)

    @classmethod
    def of(cls, instance_type: str, *, driver: str | None, efa: bool = True, **over: Any) -> Scenario:
        """A healthy node of ``instance_type`` as the catalog describes it: its Neuron devices or GPUs, one uverbs
        device per EFA interface when the pool carries EFA (none, and no /dev/infiniband, when the type has no EFA),
        the given driver on Neuron types."""
        from neuronkit import catalog

        facts = catalog.get(instance_type)
        base: dict[str, Any] = {
            "instance_type": instance_type,
            "neuron_devices": facts.neuron_devices if facts.is_neuron else 0,
            "gpus": 0 if facts.is_neuron else facts.gpus,
            "efa_devices": facts.efa_max_interfaces if efa and facts.efa_supported else 0,
            "driver": driver if facts.is_neuron else None,
        }
        return cls(**{**base, **over})


@dataclass
class Run:
    returncode: int
    output: str
    calls: list[str]
    root: Path  # the upper directory: every file the boot wrote
    elapsed: int = 0  # seconds the fake clock advanced (every sleep)

    def called(self, prefix: str) -> list[str]:
        return [c for c in self.calls if c.startswith(prefix)]

    def file(self, path: str) -> str:
        return (self.root / path.lstrip("/")).read_text()


def resolve(value: Any, values: dict[str, str] | None = None) -> str:
    """A CloudFormation string expression with its functions resolved the way CloudFormation would."""
    known = {"AWS::Region": REGION, "AWS::URLSuffix": "amazonaws.com", "AWS::AccountId": "123456789012", "AWS::Partition": "aws"}
    known.update(values or {})
    if isinstance(value, str):
        return value
    if isinstance(value, dict) and "Fn::Base64" in value:
        return resolve(value["Fn::Base64"], known)
    if isinstance(value, dict) and "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return str(sep).join(resolve(p, known) for p in parts)
    if isinstance(value, dict) and "Ref" in value:
        return known.get(value["Ref"], f"ref-{value['Ref']}")
    if isinstance(value, dict) and "Fn::Sub" in value:
        text = value["Fn::Sub"] if isinstance(value["Fn::Sub"], str) else value["Fn::Sub"][0]
        for k, v in known.items():
            text = text.replace("${" + k + "}", v)
        return str(text)
    if isinstance(value, dict) and "Fn::GetAtt" in value:
        return "getatt-" + "-".join(map(str, value["Fn::GetAtt"]))
    if isinstance(value, dict) and "Fn::ImportValue" in value:
        return "import-" + str(value["Fn::ImportValue"]).rsplit(":", 1)[-1]
    raise ValueError(f"cannot resolve {json.dumps(value)[:200]}")


def _kit_zip() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for f in sorted((ROOT / "neuronkit" / "userdata" / "kit").iterdir()):
            if f.is_file():
                z.write(f, f"kit/{f.name}")
        # As the node kit asset (constructs/observability.py): the publisher beside kit/.
        z.write(ROOT / "neuronkit" / "userdata" / "neuron_monitor_publisher.py", "neuron_monitor_publisher.py")
    return buf.getvalue()


def _efa_tarball() -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        data = _EFA_INSTALLER.encode()
        info = tarfile.TarInfo("aws-efa-installer/efa_installer.sh")
        info.size, info.mode = len(data), 0o755
        tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def run_user_data(user_data: str, scenario: Scenario, workdir: Path, timeout: int = 120) -> Run:
    """Run ``user_data`` as root in a throwaway overlay root; return what it printed and did."""
    up, work, root = workdir / "up", workdir / "work", workdir / "root"
    for d in (up, work, root):
        d.mkdir(parents=True, exist_ok=True)
    stubs = up / "opt" / "stubs"
    stubs.mkdir(parents=True)
    for name, body in STUBS.items():
        (stubs / name).write_text(_PRELUDE + body)
        (stubs / name).chmod(0o755)
    (stubs / "fail").write_text("".join(f"{line}\n" for line in scenario.fail))
    (stubs / "date").write_text(_DATE)
    (stubs / "date").chmod(0o755)
    (stubs / "clock").write_text(f"{CLOCK_START}\n")
    (stubs / "kit.zip").write_bytes(_kit_zip())
    (stubs / "efa.tar.gz").write_bytes(_efa_tarball())
    (stubs / "instance-type").write_text(scenario.instance_type + "\n")
    (stubs / "gpus").write_text(f"{scenario.gpus}\n")
    if scenario.hang:
        (stubs / "hang").write_text("".join(f"{name}\n" for name in scenario.hang))
    late = scenario.devices_after_sleeps > 0
    if late:
        (stubs / "late-devices").write_text("".join(f"/dev/neuron{i}\n" for i in range(scenario.neuron_devices)))
        (stubs / "late-after").write_text(f"{scenario.devices_after_sleeps}\n")
    if scenario.driver is not None:
        (stubs / "driver").write_text(scenario.driver + "\n")
    for name, text in scenario.stub_files.items():
        (stubs / name).write_text(text)
    (up / "var" / "log").mkdir(parents=True, exist_ok=True)
    (up / "var" / "log" / "stub-calls").write_text("")
    (up / "opt" / "user-data.sh").write_text(user_data)
    devices = " ".join(
        [f"{root}/dev/neuron{i}" for i in range(0 if late else scenario.neuron_devices)]
        + [f"{root}/dev/infiniband/uverbs{i}" for i in range(scenario.efa_devices)]
    )
    done = subprocess.run(
        [*_UNSHARE, "bash", "-c", _setup(up, work, root, devices, infiniband=scenario.efa_devices > 0)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    calls = (up / "var" / "log" / "stub-calls").read_text().splitlines()
    # Every scenario: each AWS CLI call names its region (the DLAMI's CLI has no default one).
    unregioned = [c for c in calls if c.startswith("aws ") and "--region " not in c]
    assert not unregioned, f"AWS calls without --region: {unregioned}"
    elapsed = int((stubs / "clock").read_text()) - CLOCK_START
    return Run(done.returncode, done.stdout + done.stderr, calls, up, elapsed)


# The sandbox root, the same for root and non-root runners (a user namespace is all it needs):
# - /usr read-only from this machine (bound), with the top-level symlinks (bin -> usr/bin ...);
# - /etc a copy of this machine's, and /opt, /var, /root, /home, /usr/local empty, all in the scenario's upper
#   directory: every file the boot writes lands there (Run.root). Overlays would spare the copy, but inside a
#   user namespace the kernel refuses to clone "/" ("failed to clone lowerpath"), and a non-root user cannot
#   write through an overlay into directories owned by the real root;
# - /proc (a pid namespace of its own), /run (in the upper directory) and /tmp fresh; /dev a tmpfs holding the scenario's fake devices,
#   with null, zero, random and urandom as symlinks into this machine's /dev (bound below /dev/.host): device
#   nodes on a tmpfs mounted inside a user namespace cannot be opened.
_WRITABLE = ("opt", "var", "root", "home", "usr/local")
_SYMLINKS = ("bin", "sbin", "lib", "lib64", "lib32", "libx32")
_UNSHARE = ["unshare", "--user", "--map-root-user", "--mount", "--pid", "--fork", "--propagation", "private"]


def _setup(up: Path, work: Path, root: Path, devices: str, *, infiniband: bool) -> str:
    lines = [
        "set -e",
        f"mkdir -p {root}/usr {root}/etc {up}/etc",
        f"mount --rbind /usr {root}/usr",
        f"cp -a /etc/. {up}/etc/ 2>/dev/null || true",  # what the runner may not read (shadow, keys) stays out
        f"mount --bind {up}/etc {root}/etc",
    ]
    for d in _WRITABLE:
        lines += [f"mkdir -p {up}/{d} {root}/{d}", f"mount --bind {up}/{d} {root}/{d}"]
    # The usual layout of the emptied directories (an AMI has them).
    lines.append(f"mkdir -p {up}/usr/local/bin {up}/usr/local/sbin {up}/usr/local/lib {up}/var/log {up}/var/lib {up}/var/tmp")
    for link in _SYMLINKS:
        target = Path("/", link)
        if target.is_symlink():
            lines.append(f"ln -sfn {os.readlink(target)} {root}/{link}")
    lines += [
        f"mkdir -p {root}/proc {root}/dev {root}/run {root}/tmp {root}/sys",
        f"mount -t proc proc {root}/proc",
        f"mount -t tmpfs none {root}/dev",
        # /dev/infiniband exists only where the node has EFA devices (the kernel creates it with the first one).
        f"mkdir -p {root}/dev/.host" + (f" {root}/dev/infiniband" if infiniband else ""),
        f"mount --rbind /dev {root}/dev/.host",
        f"for n in null zero random urandom; do ln -s .host/$n {root}/dev/$n; done",
        f"ln -s /proc/self/fd {root}/dev/fd",
        f"mkdir -p {up}/run && mount --bind {up}/run {root}/run",  # fresh, and kept in Run.root for the tests
        f"mount -t tmpfs none {root}/tmp",
        "touch " + devices if devices else ":",
        "set +e",
        f"chroot {root} /usr/bin/env -i PATH=/opt/stubs:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root /bin/bash /opt/user-data.sh",
        "status=$?",
        # The boot's `tee` (exec > >(tee ...)) may still be writing when the script exits, and the namespace's
        # processes die with its first process: wait (at most 10 s) until no tee of the boot is left.
        f"for _ in $(seq 200); do grep -qsx tee {root}/proc/[0-9]*/comm || break; sleep 0.05; done",
        'exit "${status}"',
    ]
    return "\n".join(lines) + "\n"


def available() -> str | None:
    """Why the sandbox cannot run here, or None. It needs util-linux's unshare and unprivileged user namespaces
    (root is not needed): a runner without them fails the boot-script tests with this reason, never skips them."""
    if shutil.which("unshare") is None:
        return "the boot-script sandbox needs unshare (util-linux)"
    probe = subprocess.run([*_UNSHARE, "true"], capture_output=True, text=True, check=False)
    if probe.returncode != 0:
        return (
            "the boot-script sandbox needs user namespaces (unshare --user failed: "
            f"{probe.stderr.strip()}); enable them (sysctl user.max_user_namespaces>0, "
            "kernel.unprivileged_userns_clone=1, or AppArmor's userns restriction off) or run as root"
        )
    return None


def require() -> None:
    """Fail (never skip) the calling test with the reason the sandbox cannot run here (``available``)."""
    import pytest

    reason = available()
    if reason is not None:
        pytest.fail(reason, pytrace=False)
