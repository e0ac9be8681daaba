"""A multi-node Neuron training job for one pool, as a JobSet admitted by Kueue (docs/training-on-eks.md).

Data first, like the other renderers of this package: plain dicts, no CDK, validated in tests against the checked-in
CRD schemas (``neuronkit/kubernetes/crds/``) and each pod template against the Kubernetes schema of the cluster.

One JobSet, one replicated job ``rank`` (one Kueue pod set, sized exactly to its nodes): an indexed Job of one pod
per node, each pod running, in order,

1. the per-node checks (init container ``node-check``, ``prejob.py node``) on its own node;
2. the job-wide collective (init container ``prejob-collective``): pod 0 drives a small ``nccom-test`` all-reduce
   with ``--check`` over MPI/SSH across **these very pods**, the others serve sshd until pod 0 writes the result on
   Lustre, all bounded by the check deadline; a failed collective exits ``EXIT_COLLECTIVE_FAILED``, which the Job's
   ``podFailurePolicy`` turns into ``FailJob`` and the JobSet's ``failurePolicy`` into ``FailJobSet``;
3. the launcher of the pool's launch profile (PyTorch/XLA ``torchrun`` on trn1 and releases up to 2.29; TorchNeuron
   ``torchrun`` from 2.33 on trn2/trn3).

``neuronkit job check`` renders a check-only JobSet (replicated job ``check``): the node checks, then the collective
as the pod's container.

Every pod asks for every Neuron device and EFA interface of the type (catalog counts), tolerates the Neuron taint and
selects the pool's nodes (``scheduling.py``), mounts the environment's Lustre claim in ``neuronkit-training`` and runs
under the pool's service account (pod identity: checkpoints under ``s3://CHECKPOINTS/POOL/``).
"""

from __future__ import annotations

import datetime as dt
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronkit import catalog, job_environment
from neuronkit.catalog import releases
from neuronkit.kubernetes import checkpoint_contract, scheduling
from neuronkit.kubernetes.neuron_chart import NEURON_DEVICE

EFA_DEVICE = "vpc.amazonaws.com/efa"
LUSTRE_MOUNT = "/fsx"
KIT_MOUNT = "/opt/neuronkit"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
JOB_LABEL = "neuronkit.io/job"  # on the JobSet, its pods and its ConfigMap
CHECK_JOB = "check"
RANK_JOB = "rank"
NODE_CHECK_CONTAINER = "node-check"
COLLECTIVE_CONTAINER = "prejob-collective"
TRAIN_CONTAINER = "train"
# Exit codes the Job's podFailurePolicy maps to FailJob; the JobSet's rules then fail the set or restart it:
EXIT_COLLECTIVE_FAILED = 3  # the job-wide collective ran and failed (or was wrong): the job's nodes are not fit
# The collective's peers never arrived within its deadline (pods Pending: a block's nodes still booting, a node being
# replaced): waiting, not failing. The JobSet restarts without counting it (RestartJobSetAndIgnoreMaxRestarts) and
# Kueue's waitForPodsReady timeout evicts and requeues the job when its pods are still not ready.
EXIT_PEERS_MISSING = 4
EXIT_CHECKPOINTED = checkpoint_contract.EXIT_CHECKPOINTED  # ranks checkpointed and stopped at the sentinel (block end)
# Not mapped: a pod Kubernetes stopped (drain, node repair) fails like any rank (128 + SIGTERM), so the JobSet restarts
# and resumes from the checkpoint the ranks wrote within the pod's grace; exit 0 would complete the pod's index.
EXIT_POD_STOPPED = 143
# The pod's interface for the collectives' sockets (the pod network's eth0), as AWS's own multi-node nccom-test on EKS
# sets it (aws/aws-k8s-tester test/cases/neuron/manifests/multi-node-test-neuron.yaml line 36) and the Neuron EKS
# samples set it for ranks (aws-neuron/aws-neuron-eks-samples dp_bert_hf_pretrain/lib/trn1_dist_ddp.py line 47). EKS
# only: an Auto Scaling node's interface is not eth0.
CCOM_SOCKET_IFNAME = "eth0"
# Pod-local files of the launcher and the checkpoint contract (the container's own /tmp: per pod, never shared).
RUN_DIR = "/tmp/neuronkit"
STOP_FILE = f"{RUN_DIR}/stop"  # the preStop hook creates it: the ranks checkpoint and exit within the pod's grace
STOPPED_FILE = f"{RUN_DIR}/stopped"  # a rank that checkpointed and stopped early writes it; the launcher exits 75
TORCHRUN_PID = f"{RUN_DIR}/torchrun.pid"
_HERE = Path(__file__).parent
_NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,38}[a-z0-9])?$")


class JobError(ValueError):
    """A job that cannot be rendered; the message names the setting and the fix (one line)."""


def facts() -> dict[str, Any]:
    out: dict[str, Any] = catalog.eks_facts()["training_jobs"]
    return out


# --- launch profiles -------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class LaunchProfile:
    """How ranks start on a family and release: the framework, the container and the processes per node."""

    framework: str  # "pytorch-xla" | "torchneuron"
    image: str
    release: str
    processes_per_node: int  # logical NeuronCores: physical cores / LNC


TORCHNEURON_FROM = "2.33.0"  # TorchNeuron (native PyTorch) replaces PyTorch/XLA for Trn2/Trn3 (release matrix)


def launch_profile(instance_type: str, release: str, *, image: str | None = None, lnc: int | None = None) -> LaunchProfile:
    """The launch profile of a pool; refuses a release without PyTorch training on the family, and a TorchNeuron
    release without a published training container when no ``image`` is named."""
    family = releases.family_of(instance_type)
    rel = releases.release(release)
    status = releases.support(rel, family, "pytorch-training")
    if status == "unsupported":
        last = releases.last_supporting(family, "pytorch-training")
        hint = f"pin the pool's neuron_sdk to {last.version}" if last else "use another family"
        raise JobError(f"Neuron {release} has no PyTorch training on {family}; {hint}")
    torchneuron = releases.version_key(release) >= releases.version_key(TORCHNEURON_FROM)
    published = rel.container("training")
    chosen = image or published
    if chosen is None:
        raise JobError(
            f"Neuron {release} publishes no TorchNeuron training container for {family}; "
            "name the image you built with --image REPOSITORY:TAG"
        )
    if chosen.endswith(":latest") or ":" not in chosen.rsplit("/", 1)[-1]:
        raise JobError(f"--image {chosen}: name a pinned tag, never latest")
    facts_ = catalog.get(instance_type)
    lnc = lnc if lnc is not None else catalog.lnc_default(family)
    per_node = facts_.neuron_cores // (lnc or 1)
    return LaunchProfile(
        framework="torchneuron" if torchneuron else "pytorch-xla", image=chosen, release=release, processes_per_node=per_node
    )


# --- the job ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class JobSpec:
    """One training job of a pool. ``command`` is the training script and its arguments after the launcher."""

    name: str
    environment: str
    pool: str
    instance_type: str
    nodes: int
    release: str
    datasets_bucket: str
    checkpoints_bucket: str
    image: str | None = None
    lnc: int | None = None
    command: tuple[str, ...] = (f"{KIT_MOUNT}/checkpoint_contract.py",)
    max_restarts: int = field(default_factory=lambda: int(facts()["defaults"]["max_restarts"]))
    termination_grace_seconds: int = field(default_factory=lambda: int(facts()["defaults"]["termination_grace_seconds"]))
    # How long a checkpoint may take (the pool's capacity.checkpoint_budget_minutes on a Capacity Block): the preStop
    # hook waits at most this for the ranks, and never past the grace less its margin.
    checkpoint_budget_seconds: int = field(default_factory=lambda: 60 * int(facts()["defaults"]["checkpoint_budget_minutes"]))
    min_busbw_gbps: float | None = None  # unset by default: completion and correctness only
    calibrate: bool = False
    check_only: bool = False
    # Held: rendered without Kueue's queue label, so Kueue leaves it suspended (manageJobsWithoutQueueName is off)
    # until someone labels it (``kubectl label jobset NAME kueue.x-k8s.io/queue-name=POOL``): Kueue accepts a queue
    # name added to a suspended job (kueue v0.19.2 pkg/controller/jobframework/validation.go lines 180-184).
    hold: bool = False
    window_release: str | None = None  # the release whose driver window the node check uses (default: ``release``)

    def __post_init__(self) -> None:
        if not _NAME_RE.match(self.name):
            raise JobError(f"job name '{self.name}': 1-40 lower-case letters, digits and '-'; e.g. llama-pretrain")
        if self.nodes < 1:
            raise JobError(f"--nodes {self.nodes}: a job needs at least one node")
        if not catalog.get(self.instance_type).is_neuron:
            raise JobError(f"pool {self.pool}: {self.instance_type} has no Neuron devices; training jobs run on Trainium pools")
        self.profile  # noqa: B018 -- refuse a family/release/image that cannot train now, with its fix

    @property
    def stop_wait_seconds(self) -> int:
        margin = int(facts()["defaults"]["stop_margin_seconds"])
        return max(1, min(self.checkpoint_budget_seconds, self.termination_grace_seconds - margin))

    @property
    def profile(self) -> LaunchProfile:
        return launch_profile(self.instance_type, self.release, image=self.image, lnc=self.lnc)


def service_account(pool: str) -> str:
    """The pool's training service account (a pod identity association gives it the pool's checkpoint prefix)."""
    return f"{pool}-training"


def lustre_claim(environment: str) -> str:
    """The environment's Lustre claim in the training namespace (its own static volume: a claim binds one volume)."""
    return f"{environment}-lustre"


def compile_cache_url(pool: str) -> str:
    """The Neuron compile cache on Lustre, per pool: a restart (or the next job) finds its compiled graphs there."""
    return f"{LUSTRE_MOUNT}/neuron-compile-cache/{pool}/"


def checkpoint_request(pool: str) -> str:
    """The sentinel file of the checkpoint contract (checkpoint_contract.py). A rank honours it only when it was written
    after the rank's pod started (its mtime), so a past block's sentinel never stops a later job."""
    return f"{LUSTRE_MOUNT}/.neuronkit/checkpoint/{pool}"


def calibration_file(pool: str) -> str:
    return f"{LUSTRE_MOUNT}/.neuronkit/calibration/{pool}.json"


def config_map_name(job: str) -> str:
    """The job's own ConfigMap of programs (``job render`` prints it with the JobSet, from the same kit version): never
    the stack's object, so a ``kubectl apply`` of a job neither rewrites nor unlabels what CloudFormation owns."""
    return f"{job}-prejob"


def rank_environment(spec: JobSpec) -> dict[str, str]:
    """The ranks' variables: the ASG path's job environment (same functions) plus this job's rendezvous."""
    profile = spec.profile
    env = job_environment.job_environment(
        environment=spec.environment,
        pool=spec.pool,
        instance_type=spec.instance_type,
        datasets_bucket=spec.datasets_bucket,
        checkpoints_bucket=spec.checkpoints_bucket,
        compile_cache_url=compile_cache_url(spec.pool),
        lnc=spec.lnc if spec.lnc is not None else catalog.lnc_default(releases.family_of(spec.instance_type)),
    )
    env.update(
        {
            "NNODES": str(spec.nodes),
            "MASTER_ADDR": f"{spec.name}-{RANK_JOB}-0-0.{spec.name}",
            "NEURONKIT_ROOT_COMM_PORT": str(job_environment.collective_ports().root_comm_port),
            "NEURONKIT_NPROC_PER_NODE": str(profile.processes_per_node),
            "NEURONKIT_FRAMEWORK": profile.framework,
            "NEURONKIT_CHECKPOINT_REQUEST": checkpoint_request(spec.pool),
            "NEURONKIT_CHECKPOINT_DIR": f"{LUSTRE_MOUNT}/checkpoints/{spec.pool}/{spec.name}/",
            "NEURONKIT_RUN_DIR": RUN_DIR,
            "NEURONKIT_STOP_FILE": STOP_FILE,
            "NEURONKIT_STOPPED_FILE": STOPPED_FILE,
            "NEURONKIT_EXIT_CHECKPOINTED": str(EXIT_CHECKPOINTED),
            "NEURONKIT_EXIT_POD_STOPPED": str(EXIT_POD_STOPPED),
            "CCOM_SOCKET_IFNAME": CCOM_SOCKET_IFNAME,
            "NEURONKIT_STOP_WAIT_SECONDS": str(spec.stop_wait_seconds),
        }
    )
    return env


# The launcher: rank from the indexed Job, the root communicator on rank 0's address (the runtime wants an address,
# the headless Service gives a name), then torchrun with MASTER_PORT apart from the root communicator's port.
# torchrun is a child, not exec'd: Kubernetes' SIGTERM would reach torchrun, whose agent SIGKILLs its workers 30 s
# later whatever the pod's grace. The preStop hook (and a TERM trap) create the pod-local stop file instead, which the
# ranks honour (checkpoint_contract.py), and the hook waits for torchrun to end. A rank that checkpointed and stopped
# at the sentinel leaves the stopped file: the launcher then exits EXIT_CHECKPOINTED, which fails the JobSet with its
# own rule; a pod stopped by Kubernetes exits EXIT_POD_STOPPED, an ordinary rank failure (restart and resume).
LAUNCHER = """set -euo pipefail
export NODE_RANK="${JOB_COMPLETION_INDEX}"
NEURONKIT_POD_STARTED="$(date +%s)"
export NEURONKIT_POD_STARTED
mkdir -p "${NEURONKIT_RUN_DIR}"
rm -f "${NEURONKIT_STOP_FILE}" "${NEURONKIT_STOPPED_FILE}"
until MASTER_IP=$(getent hosts "${MASTER_ADDR}" | awk '{print $1; exit}') && [ -n "${MASTER_IP}" ]; do sleep 2; done
export NEURON_RT_ROOT_COMM_ID="${MASTER_IP}:${NEURONKIT_ROOT_COMM_PORT}"
mkdir -p "${NEURON_COMPILE_CACHE_URL}" "${NEURONKIT_CHECKPOINT_DIR}"
echo "neuronkit: node ${NODE_RANK} of ${NNODES}, main node ${MASTER_ADDR}:${MASTER_PORT}, root communicator ${NEURON_RT_ROOT_COMM_ID}"
torchrun --nnodes="${NNODES}" --node_rank="${NODE_RANK}" --nproc_per_node="${NEURONKIT_NPROC_PER_NODE}" \\
  --master_addr="${MASTER_ADDR}" --master_port="${MASTER_PORT}" "$@" &
pid=$!
echo "${pid}" > "${NEURONKIT_RUN_DIR}/torchrun.pid"
trap 'touch "${NEURONKIT_STOP_FILE}"' TERM
rc=0
while :; do
  if wait "${pid}"; then rc=0; else rc=$?; fi
  kill -0 "${pid}" 2>/dev/null || break
done
if [ -e "${NEURONKIT_STOPPED_FILE}" ]; then
  echo "neuronkit: node ${NODE_RANK}: checkpointed and stopped early: $(cat "${NEURONKIT_STOPPED_FILE}")" | { tee /dev/termination-log || true; }
  exit "${NEURONKIT_EXIT_CHECKPOINTED}"
fi
if [ -e "${NEURONKIT_STOP_FILE}" ]; then
  echo "neuronkit: node ${NODE_RANK}: the pod was stopped (torchrun exit ${rc}); the job restarts from its checkpoint" | { tee /dev/termination-log || true; }
  exit "${NEURONKIT_EXIT_POD_STOPPED}"
fi
exit "${rc}"
"""

# The preStop hook of the train container: ask the ranks to stop (the pod-local stop file), then wait for torchrun to
# end, at most NEURONKIT_STOP_WAIT_SECONDS (the checkpoint budget, below the grace): ranks blocked in a collective
# with a dead peer never reach their checkpoint, so then the hook stops torchrun (its agent ends the workers within
# 30 s) instead of holding the pod for the whole grace. Kubernetes sends SIGTERM only after the hook returns, and the
# hook counts against the pod's grace period.
PRE_STOP = f"""mkdir -p {RUN_DIR} && touch {STOP_FILE}
pid=$(cat {TORCHRUN_PID} 2>/dev/null) || exit 0
end=$(( $(date +%s) + ${{NEURONKIT_STOP_WAIT_SECONDS:-60}} ))
while kill -0 "${{pid}}" 2>/dev/null; do
  if [ "$(date +%s)" -ge "${{end}}" ]; then
    echo "neuronkit: the ranks did not stop within ${{NEURONKIT_STOP_WAIT_SECONDS:-60}} s; stopping torchrun"
    kill -TERM "${{pid}}" 2>/dev/null || true
    break
  fi
  sleep 2
done
"""

# The collective step, in an init container of every rank pod after its node check: pod 0 keeps the run's SSH key in
# its own /root/.ssh and publishes only the public key on Lustre; every pod writes its address and serves sshd; pod 0
# runs nccom-test over MPI across the pods' addresses, writes the result, waits for its peers to read it and removes
# the run's directory. Every wait is bounded by the check deadline; a failed collective exits EXIT_COLLECTIVE_FAILED
# (the Job's podFailurePolicy fails the Job, the JobSet fails at once); peers that never arrived, or a collective the
# deadline cut, exit EXIT_PEERS_MISSING (the JobSet restarts, Kueue requeues).
#
# A requeued job (Kueue suspends and resumes the JobSet; its restart attempt does not change) finds the directory of the
# earlier admission, with its key, addresses and result (review of issue 48). So nothing there is trusted by age:
# every pod draws a nonce; its address line carries the nonce and the id of the public key it installed; pod 0 clears
# the directory when it starts, counts only lines made with its own key and lists the nonces it used in the result; a
# peer re-reports when its line is gone or the key changed, and takes only a result that lists its own nonce.
COLLECTIVE = """set -euo pipefail
deadline=$(( $(date +%s) + NEURONKIT_CHECK_DEADLINE_SECONDS ))
left() { echo $(( deadline - $(date +%s) )); }
dir="/fsx/.neuronkit/prejob/${JOBSET_UID}/attempt-${JOBSET_RESTART_ATTEMPT}"
me="$(cat /proc/sys/kernel/random/uuid 2>/dev/null || echo "${NODE_NAME}-$$-$(date +%s%N)")"
key_id() { cksum < "$1" | awk '{print $1}'; }
# used: the nonces of the address lines made with pod 0's current key (the pods of this admission)
used() {
  k="$(key_id "${dir}/key.pub")"
  for i in $(seq 0 $((NNODES - 1))); do
    [ -f "${dir}/hosts/${i}" ] && awk -v k="${k}" '$3 == k {print $1}' "${dir}/hosts/${i}"
  done
  return 0
}
# fail CODE REASON: pod 0 hands the code to the peers of this admission; "peers never arrived" is waiting
fail() {
  code="$1"; shift
  if [ "${JOB_COMPLETION_INDEX}" = 0 ]; then { echo "${code}"; used; } > "${dir}/result.tmp" && mv "${dir}/result.tmp" "${dir}/result" || true; fi
  if [ "${code}" = "${NEURONKIT_EXIT_PEERS_MISSING}" ]; then what="WAITING"; else what="FAILED"; fi
  echo "node ${NODE_NAME}: collective: ${what}: $*" | { tee /dev/termination-log || true; } >&2
  exit "${code}"
}
# report: install pod 0's current key, then write this pod's line: nonce, address, id of the key installed
report() {
  cp "${dir}/key.pub" /root/.ssh/authorized_keys
  echo "${me} $(hostname -i | awk '{print $1}') $(key_id /root/.ssh/authorized_keys)" > "${dir}/hosts/.${JOB_COMPLETION_INDEX}.tmp"
  mv "${dir}/hosts/.${JOB_COMPLETION_INDEX}.tmp" "${dir}/hosts/${JOB_COMPLETION_INDEX}"
}
mkdir -p "${dir}" /root/.ssh && chmod 700 /root/.ssh
if [ "${JOB_COMPLETION_INDEX}" = 0 ]; then
  rm -rf "${dir}/hosts" "${dir}/ack" "${dir}/result" "${dir}/key.pub"
  mkdir -p "${dir}/hosts" "${dir}/ack"
  [ -f /root/.ssh/id_ed25519 ] || ssh-keygen -q -t ed25519 -N '' -f /root/.ssh/id_ed25519
  cp /root/.ssh/id_ed25519.pub "${dir}/key.pub.tmp" && mv "${dir}/key.pub.tmp" "${dir}/key.pub"
fi
until [ -f "${dir}/key.pub" ]; do
  [ "$(left)" -gt 0 ] || fail "${NEURONKIT_EXIT_PEERS_MISSING}" "no public key from pod 0 within ${NEURONKIT_CHECK_DEADLINE_SECONDS} s"
  sleep 2
done
mkdir -p "${dir}/hosts" "${dir}/ack"
report || true  # pod 0 may be clearing the directory this moment: the loop below reports again
ssh-keygen -A >/dev/null && mkdir -p /run/sshd && /usr/sbin/sshd -p 22
if [ "${JOB_COMPLETION_INDEX}" = 0 ]; then
  printf 'Host *\\n  StrictHostKeyChecking no\\n  UserKnownHostsFile /dev/null\\n' > /root/.ssh/config
  until [ "$(used | wc -l)" -ge "${NNODES}" ]; do
    [ "$(left)" -gt 0 ] || fail "${NEURONKIT_EXIT_PEERS_MISSING}" "$(used | wc -l) of ${NNODES} pods reported within the deadline"
    sleep 2
  done
  for i in $(seq 0 $((NNODES - 1))); do awk '{print $2}' "${dir}/hosts/${i}"; done > /tmp/neuronkit-hostfile
  NEURON_RT_ROOT_COMM_ID="$(head -n1 /tmp/neuronkit-hostfile):${NEURONKIT_ROOT_COMM_PORT}"
  export NEURON_RT_ROOT_COMM_ID
  [ "$(left)" -gt 0 ] || fail "${NEURONKIT_EXIT_PEERS_MISSING}" "no time left for the all-reduce"
  rc=0; timeout "$(left)" python3 /opt/neuronkit/prejob.py collective --hosts-file /tmp/neuronkit-hostfile \\
    --data-collector-host "${POD_IP}" "$@" || rc=$?
  # Cut by the deadline (timeout's 124): the last peer arrived too late for the all-reduce to finish. That is waiting,
  # not a failed collective: exit as "peers never arrived" so the JobSet restarts (review of issue 48).
  if [ "${rc}" = 124 ]; then rc="${NEURONKIT_EXIT_PEERS_MISSING}"; elif [ "${rc}" != 0 ]; then rc="${NEURONKIT_EXIT_COLLECTIVE_FAILED}"; fi
  { echo "${rc}"; used; } > "${dir}/result.tmp" && mv "${dir}/result.tmp" "${dir}/result"
  until [ "$(find "${dir}/ack" -type f | wc -l)" -ge $((NNODES - 1)) ] || [ "$(left)" -le 0 ]; do sleep 2; done
  rm -rf "${dir}"
  exit "${rc}"
fi
# A peer: re-report when pod 0 cleared the directory or published a new key; take only a result that lists this pod
while :; do
  if [ -f "${dir}/result" ] && tail -n +2 "${dir}/result" | grep -qx "${me}"; then break; fi
  if [ -f "${dir}/key.pub" ] && { [ ! -f "${dir}/hosts/${JOB_COMPLETION_INDEX}" ] \\
      || [ "$(key_id "${dir}/key.pub")" != "$(key_id /root/.ssh/authorized_keys)" ]; }; then
    { mkdir -p "${dir}/hosts" "${dir}/ack" && report; } || true
  fi
  [ "$(left)" -gt 0 ] || fail "${NEURONKIT_EXIT_PEERS_MISSING}" "no result from pod 0 within ${NEURONKIT_CHECK_DEADLINE_SECONDS} s"
  sleep 2
done
rc="$(head -n1 "${dir}/result")"
touch "${dir}/ack/${JOB_COMPLETION_INDEX}"
exit "${rc}"
"""


def _resources(instance_type: str) -> dict[str, dict[str, Any]]:
    """One rank pod per node: every device and EFA interface, the node's CPU and memory less the reserve."""
    it = catalog.get(instance_type)
    want: dict[str, Any] = {**scheduling.node_share(instance_type), NEURON_DEVICE: str(it.neuron_devices)}
    if it.efa_supported:
        want[EFA_DEVICE] = str(it.efa_max_interfaces)
    limits = {k: v for k, v in want.items() if k in (NEURON_DEVICE, EFA_DEVICE)}
    return {"requests": want, "limits": limits}


def per_node_quota(instance_type: str) -> dict[str, str]:
    """What one node of the pool gives a job (the ClusterQueue counts this per node)."""
    return dict(_resources(instance_type)["requests"])


def _env_list(env: dict[str, str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in sorted(env.items())]
    out.append({"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}})
    return out


def _jobset_fields() -> list[dict[str, Any]]:
    """The JobSet's uid and restart attempt (labels the JobSet controller puts on its pods, v0.12.0
    ``jobset.sigs.k8s.io/jobset-uid`` and ``restart-attempt``): one rendezvous directory per attempt."""
    labels = {"JOBSET_UID": "jobset.sigs.k8s.io/jobset-uid", "JOBSET_RESTART_ATTEMPT": "jobset.sigs.k8s.io/restart-attempt"}
    return [{"name": k, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{v}']"}}} for k, v in labels.items()]


def _volumes(spec: JobSpec) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    volumes: list[dict[str, Any]] = [
        {"name": "lustre", "persistentVolumeClaim": {"claimName": lustre_claim(spec.environment)}},
        {"name": "kit", "configMap": {"name": config_map_name(spec.name), "defaultMode": 0o555}},
        {"name": "shm", "emptyDir": {"medium": "Memory"}},
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "lustre", "mountPath": LUSTRE_MOUNT},
        {"name": "kit", "mountPath": KIT_MOUNT, "readOnly": True},
        {"name": "shm", "mountPath": "/dev/shm"},
    ]
    return volumes, mounts


def node_check_args(spec: JobSpec) -> list[str]:
    """The per-node checks. The driver rule is the boot check's: outside the release's driver window fails
    (``releases.driver_window``, the rendering of ``driver_fit``: below ``driver_min``, at or above a driver a stated
    rule refuses, newer than the newest driver the catalog has read), between ``driver_min`` and ``driver_shipped``
    passes with a warning (catalog/neuron_releases.yaml). The window is ``window_release``'s when set."""
    it = catalog.get(spec.instance_type)
    rel = releases.release(spec.window_release or spec.release)
    window = releases.driver_window(rel.version)
    args = ["python3", f"{KIT_MOUNT}/prejob.py", "node", "--devices", str(it.neuron_devices)]
    args += ["--cores", str(spec.profile.processes_per_node), "--driver-floor", window.low, "--driver-shipped", rel.driver]
    args += ["--release", rel.version, "--driver-read", window.read, "--driver-read-rule", window.read_rule]
    if window.high:
        args += ["--driver-below", window.high, "--driver-below-rule", window.high_rule]
    if it.efa_supported:
        args += ["--efa", str(it.efa_max_interfaces)]
    return args + ["--lustre", LUSTRE_MOUNT]


def collective_args(spec: JobSpec) -> list[str]:
    args = ["--cores", str(spec.profile.processes_per_node)]
    if spec.min_busbw_gbps is not None:
        args += ["--min-busbw-gbps", f"{spec.min_busbw_gbps:g}"]
    if spec.calibrate:
        args += ["--calibrate", calibration_file(spec.pool)]
    return args


def _collective_env() -> list[dict[str, Any]]:
    """What the collective step adds: its deadline, its failure code, the JobSet's uid and attempt, and Open MPI's
    consent to run as root (the DLC runs as root; mpirun refuses without it)."""
    extra = {
        "NEURONKIT_CHECK_DEADLINE_SECONDS": str(int(facts()["defaults"]["check_deadline_seconds"])),
        "NEURONKIT_EXIT_COLLECTIVE_FAILED": str(EXIT_COLLECTIVE_FAILED),
        "NEURONKIT_EXIT_PEERS_MISSING": str(EXIT_PEERS_MISSING),
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    }
    # nccom-test's --data-collector-host: the pod's IP, as aws-k8s-tester passes it ("--data-collector-host $POD_IP",
    # multi-node-test-neuron.yaml lines 21-24 and 38); its default, the current host's name, is a short pod hostname
    # its peers may not resolve (JobSet publishes <pod>.<jobset>.<namespace>.svc).
    pod_ip = {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}
    return [{"name": k, "value": v} for k, v in sorted(extra.items())] + _jobset_fields() + [pod_ip]


def reserved_ports_sysctl() -> dict[str, str]:
    """MASTER_PORT and the root communicator's port kept out of the pod's ephemeral range, as the Auto Scaling node
    reserves them (userdata/training-node.sh; AWS's Neuron samples: ``net.ipv4.ip_local_reserved_ports=44000,48620``,
    aws-neuron/aws-neuron-eks-samples llama3.1_8B_finetune_ray_ptl_neuron/.../tp_zero1_llama3_8b_hf_finetune_ptl.sh
    line 53). A namespaced sysctl the Pod Security Standards' baseline allows since Kubernetes 1.27."""
    ports = job_environment.collective_ports()
    return {"name": "net.ipv4.ip_local_reserved_ports", "value": f"{ports.master_port},{ports.root_comm_port}"}


def _pod(spec: JobSpec) -> dict[str, Any]:
    """One pod per node: the node check, the collective across the job's pods, then (unless check-only) the ranks."""
    env = _env_list(rank_environment(spec))
    volumes, mounts = _volumes(spec)
    common = {
        "image": spec.profile.image,
        "resources": _resources(spec.instance_type),
        "volumeMounts": mounts,
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    node_check = {"name": NODE_CHECK_CONTAINER, "command": node_check_args(spec), "env": env, **common}
    collective = {
        "name": COLLECTIVE_CONTAINER,
        "command": ["bash", "-c", COLLECTIVE, "collective", *collective_args(spec)],
        "env": env + _collective_env(),
        **common,
    }
    train = {
        "name": TRAIN_CONTAINER,
        "command": ["bash", "-c", LAUNCHER, "launcher"],
        "args": list(spec.command),
        "env": env,
        # the ranks get the pod's grace to checkpoint, not torchrun's 30 s: the hook asks them through a file
        "lifecycle": {"preStop": {"exec": {"command": ["bash", "-c", PRE_STOP]}}},
        **common,
    }
    init, containers = ([node_check], [collective]) if spec.check_only else ([node_check, collective], [train])
    return {
        "metadata": {"labels": {scheduling.POOL_LABEL: spec.pool, JOB_LABEL: spec.name}},
        "spec": {
            "restartPolicy": "Never",
            "serviceAccountName": service_account(spec.pool),
            "nodeSelector": scheduling.pool_node_selector(spec.pool),
            "tolerations": scheduling.accelerator_tolerations("neuron"),
            "terminationGracePeriodSeconds": spec.termination_grace_seconds,
            "securityContext": {"sysctls": [reserved_ports_sysctl()]},
            "initContainers": init,
            "containers": containers,
            "volumes": volumes,
        },
    }


def fail_job_rules(spec: JobSpec) -> list[tuple[str, str, int, str]]:
    """The Job's podFailurePolicy FailJob rules, in order: (JobSet rule name, container, exit code, JobSet action).
    Each fails the Job with reason PodFailurePolicy and a message ending "matching FailJob rule at index N"; the
    JobSet rule of the same index applies its action (jobset v0.12.0 api/jobset/v1alpha2/jobset_types.go lines
    414-449: FailJobSet, RestartJobSetAndIgnoreMaxRestarts ...)."""
    collective = COLLECTIVE_CONTAINER
    rules = [
        ("PreJobCollectiveFailed", collective, EXIT_COLLECTIVE_FAILED, "FailJobSet"),
        ("PreJobPeersNeverArrived", collective, EXIT_PEERS_MISSING, "RestartJobSetAndIgnoreMaxRestarts"),
    ]
    if not spec.check_only:
        rules.append(("CheckpointedAndStoppedEarly", TRAIN_CONTAINER, EXIT_CHECKPOINTED, "FailJobSet"))
    return rules


def _job(spec: JobSpec) -> dict[str, Any]:
    return {
        "parallelism": spec.nodes,
        "completions": spec.nodes,
        "completionMode": "Indexed",
        "backoffLimit": 0,  # a failed pod fails the Job; the JobSet's failurePolicy restarts the whole set
        # A failed collective and an early stop fail the Job at once with reason PodFailurePolicy (containerName may
        # name an init container: Kubernetes 1.35 PodFailurePolicyOnExitCodesRequirement).
        "podFailurePolicy": {
            "rules": [
                {"action": "FailJob", "onExitCodes": {"containerName": c, "operator": "In", "values": [code]}}
                for _, c, code, _ in fail_job_rules(spec)
            ]
        },
        "template": _pod(spec),
    }


def render_jobset(spec: JobSpec) -> dict[str, Any]:
    """The JobSet: one replicated job ``rank`` (``check`` when ``check_only``: the pre-job checks alone, ``neuronkit
    job check``), so Kueue sees one pod set of exactly the job's nodes."""
    job = CHECK_JOB if spec.check_only else RANK_JOB
    # JobSet rules are matched in order; the first that matches a failed Job applies. The Job's FailJob rules become
    # their JobSet action by their index in the Job's failure message; any other failure restarts the whole set.
    rules: list[dict[str, Any]] = [
        {
            "name": name,
            "action": action,
            "onJobFailureReasons": ["PodFailurePolicy"],
            "onJobFailureMessagePatterns": [f"matching FailJob rule at index {i}$"],
            "targetReplicatedJobs": [job],
        }
        for i, (name, _, _, action) in enumerate(fail_job_rules(spec))
    ]
    return {
        "apiVersion": facts()["jobset"]["api_version"],
        "kind": "JobSet",
        "metadata": {
            "name": spec.name,
            "namespace": scheduling.TRAINING_NAMESPACE,
            "labels": {
                **({} if spec.hold else {QUEUE_LABEL: local_queue_name(spec.pool)}),
                scheduling.POOL_LABEL: spec.pool,
                JOB_LABEL: spec.name,
            },
        },
        "spec": {
            "suspend": True,  # Kueue unsuspends it once the whole job fits (gang admission)
            "network": {"enableDNSHostnames": True, "subdomain": spec.name},
            # A failed pod fails its Job; the JobSet recreates every Job (all ranks resume from the latest
            # checkpoint), at most max_restarts times, then fails. A failed collective or an early stop fails it now.
            "failurePolicy": {"maxRestarts": spec.max_restarts, "rules": rules},
            "successPolicy": {"operator": "All", "targetReplicatedJobs": [job]},
            "replicatedJobs": [{"name": job, "replicas": 1, "template": {"spec": _job(spec)}}],
        },
    }


def prejob_config_map(spec: JobSpec) -> dict[str, Any]:
    """The programs the job's pods run: the pre-job checks and the checkpoint contract's sample entrypoint, from the kit
    that rendered the JobSet (its scripts call them with this version's arguments)."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": config_map_name(spec.name),
            "namespace": scheduling.TRAINING_NAMESPACE,
            "labels": {scheduling.POOL_LABEL: spec.pool, JOB_LABEL: spec.name},
        },
        "data": {
            "prejob.py": (_HERE / "prejob.py").read_text(),
            "checkpoint_contract.py": (_HERE / "checkpoint_contract.py").read_text(),
        },
    }


def render_job(spec: JobSpec) -> list[dict[str, Any]]:
    """What ``neuronkit job render`` prints: the job's ConfigMap of the programs, then the JobSet."""
    return [prejob_config_map(spec), render_jobset(spec)]


# --- Kueue: one flavor, cluster queue and local queue per pool -----------------------------------------------


# The Kubernetes group of eks.job_submitters' access entries, bound to the submitter Role in the training namespace.
SUBMITTERS_GROUP = "neuronkit:job-submitters"


def submitter_rbac() -> list[dict[str, Any]]:
    """What a job submitter needs beyond EKS's namespace-scoped edit policy: the JobSets (a CRD the EKS policy does not
    name) and a read of Kueue's workloads and queues, in the training namespace only."""
    ns = scheduling.TRAINING_NAMESPACE
    name = "neuronkit-job-submitter"
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": name, "namespace": ns},
            "rules": [
                {
                    "apiGroups": ["jobset.x-k8s.io"],
                    "resources": ["jobsets"],
                    "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
                },
                {"apiGroups": ["jobset.x-k8s.io"], "resources": ["jobsets/status"], "verbs": ["get"]},
                {"apiGroups": ["kueue.x-k8s.io"], "resources": ["workloads", "localqueues"], "verbs": ["get", "list", "watch"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": name, "namespace": ns},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": SUBMITTERS_GROUP}],
        },
    ]


def local_queue_name(pool: str) -> str:
    return pool


def cluster_queue_name(environment: str, pool: str) -> str:
    return f"{environment}-{pool}"


def kueue_manifests(
    *, environment: str, pool: str, instance_type: str, max_nodes: int, cluster_queue: str | None = None
) -> list[dict[str, Any]]:
    """ResourceFlavor (the pool's node label and taint), ClusterQueue sized to the pool, LocalQueue in the namespace.
    With ``cluster_queue`` (a ClusterQueue the user runs, training[].cluster_queue): no ClusterQueue of the kit's, the
    LocalQueue points at the user's, which needs the stanza of :func:`cluster_queue_stanza`.

    The quota is exactly the pool: ``max_nodes`` times what one pod asks for. A kit job is one pod set of one pod per
    node (the checks run in the pods' init containers), so Kueue admits a job only when all its nodes are free and
    never reclaims part of a running job's quota. A job is admitted only when all its pods fit (and, with
    waitForPodsReady, only keeps its quota once they are all ready).
    """
    api = facts()["kueue"]["api_version"]
    flavor = flavor_name(environment, pool)
    per_node = per_node_quota(instance_type)
    resources = [{"name": k, "nominalQuota": _times(v, max_nodes)} for k, v in sorted(per_node.items())]
    queue = cluster_queue or cluster_queue_name(environment, pool)
    docs = [
        {
            "apiVersion": api,
            "kind": "ResourceFlavor",
            "metadata": {"name": flavor},
            "spec": {
                "nodeLabels": scheduling.pool_node_selector(pool),
                "nodeTaints": [{"key": scheduling.NEURON_TAINT.key, "effect": scheduling.NEURON_TAINT.effect}],
                "tolerations": scheduling.accelerator_tolerations("neuron"),
            },
        },
        {
            "apiVersion": api,
            "kind": "ClusterQueue",
            "metadata": {"name": cluster_queue_name(environment, pool)},
            "spec": {
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": scheduling.TRAINING_NAMESPACE}},
                "queueingStrategy": "StrictFIFO",
                "resourceGroups": [{"coveredResources": sorted(per_node), "flavors": [{"name": flavor, "resources": resources}]}],
            },
        },
        {
            "apiVersion": api,
            "kind": "LocalQueue",
            "metadata": {"name": local_queue_name(pool), "namespace": scheduling.TRAINING_NAMESPACE},
            "spec": {"clusterQueue": queue},
        },
    ]
    return [d for d in docs if cluster_queue is None or d["kind"] != "ClusterQueue"]


def flavor_name(environment: str, pool: str) -> str:
    return f"{environment}-{pool}"


def cluster_queue_stanza(
    *, environment: str, pool: str, instance_type: str, max_nodes: int, cluster_queue: str
) -> dict[str, Any]:
    """What the user adds to their ClusterQueue ``cluster_queue`` for a pool: the pool's flavor at the pool's size, and
    the namespace the kit's LocalQueue lives in (their ``namespaceSelector`` must admit it).

    Kueue lets each resource sit in one resource group of a ClusterQueue only ("Each resource and each flavor can only
    form part of one resource group", kueue apis/kueue clusterqueue_types.go, ResourceGroups): a queue that already
    covers cpu and memory refuses a second group that covers them too (review of issue 51). So ``resourceGroups`` is
    the group for a queue with no group of these resources yet, and ``howTo`` says how to merge it into the group that
    already covers cpu and memory instead: add the flavor there, add the Neuron (and EFA) resources to that group's
    ``coveredResources`` and give the group's other flavors a quota of 0 for them (every flavor lists every covered
    resource, in the group's order)."""
    per_node = per_node_quota(instance_type)
    resources = [{"name": k, "nominalQuota": _times(v, max_nodes)} for k, v in sorted(per_node.items())]
    accelerator = sorted(k for k in per_node if k not in ("cpu", "memory"))
    return {
        "clusterQueue": cluster_queue,
        "namespace": scheduling.TRAINING_NAMESPACE,
        "howTo": (
            f"if {cluster_queue} has a resource group covering cpu and memory, add this flavor to that group's flavors, "
            f"add {', '.join(accelerator)} to its coveredResources, and give its other flavors a nominalQuota of 0 for "
            "them; otherwise add resourceGroups[0] as a new group (Kueue allows each resource in one group only)"
        ),
        "resourceGroups": [
            {"coveredResources": sorted(per_node), "flavors": [{"name": flavor_name(environment, pool), "resources": resources}]}
        ],
    }


def _times(quantity: str, n: int) -> str:
    m = re.fullmatch(r"(\d+)(Gi)?", quantity)
    if m is None:
        raise ValueError(quantity)
    return f"{int(m.group(1)) * n}{m.group(2) or ''}"


# --- Capacity Block end: lead time, signal and admission -----------------------------------------------------


def earliest_drain_minutes(block_kind: str, *, kit_drain_minutes: int | None = None) -> int:
    """How long before a block's end its nodes start to go, for a kind of block (catalog ``block_drain_minutes``):
    ``eks-node-group`` (EKS scales the group to zero 40 minutes before), ``instances`` (EC2 terminates from 30),
    ``ultraserver`` (none published: EC2's 30 is used). ``kit_drain_minutes``: the kit's own scale-down,
    ``capacity.drain_minutes`` before EC2's reclaim, when earlier."""
    table = facts()["block_drain_minutes"]
    if block_kind not in table:
        raise JobError(f"block kind '{block_kind}': use one of {', '.join(table)}")
    value = table[block_kind] if table[block_kind] is not None else table["instances"]
    kit = table["instances"] + kit_drain_minutes if kit_drain_minutes is not None else 0
    return max(int(value), kit)


def lead_minutes(block_kind: str, checkpoint_budget_minutes: int, *, kit_drain_minutes: int | None = None) -> int:
    """L = the earliest drain that applies + the pool's checkpoint budget B (B at least 1 minute)."""
    if checkpoint_budget_minutes < 1:
        raise JobError(f"checkpoint budget {checkpoint_budget_minutes} min: give the job at least 1 minute to checkpoint")
    return earliest_drain_minutes(block_kind, kit_drain_minutes=kit_drain_minutes) + checkpoint_budget_minutes


def signal_at(block_end: dt.datetime, lead: int) -> dt.datetime:
    """When running jobs are asked to checkpoint: E - L."""
    return block_end - dt.timedelta(minutes=lead)


def admission_problem(deadline: dt.datetime, block_end: dt.datetime, lead: int) -> str | None:
    """None when a job that must finish by ``deadline`` fits before E - L; otherwise the one-line reason."""
    cutoff = signal_at(block_end, lead)
    if deadline > cutoff:
        return (
            f"--deadline {deadline.isoformat()} is after {cutoff.isoformat()} (the block ends {block_end.isoformat()}, "
            f"minus {lead} min to drain and checkpoint); end the job by then or use another pool"
        )
    return None


def checkpoint_signal_cronjob(*, pool: str, environment: str, at: dt.datetime, image: str) -> dict[str, Any]:
    """A CronJob that writes the checkpoint sentinel on Lustre at E - L (UTC). Writing a file needs no Kubernetes
    rights: every rank of the pool sees it (checkpoint_contract.py). It runs on the pool's nodes, which already hold
    the image."""
    at = at.astimezone(dt.UTC)
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": f"{pool}-checkpoint-signal", "namespace": scheduling.TRAINING_NAMESPACE},
        "spec": {
            "schedule": f"{at.minute} {at.hour} {at.day} {at.month} *",
            "timeZone": "Etc/UTC",
            "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": 300,
            "jobTemplate": {
                "spec": {
                    "backoffLimit": 3,
                    "template": {
                        "spec": {
                            "restartPolicy": "OnFailure",
                            "nodeSelector": scheduling.pool_node_selector(pool),
                            "tolerations": scheduling.accelerator_tolerations("neuron"),
                            "containers": [
                                {
                                    "name": "signal",
                                    "image": image,
                                    "command": [
                                        "sh",
                                        "-c",
                                        f'mkdir -p "$(dirname {checkpoint_request(pool)})" && date -u > {checkpoint_request(pool)}',
                                    ],
                                    "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
                                    "volumeMounts": [{"name": "lustre", "mountPath": LUSTRE_MOUNT}],
                                }
                            ],
                            "volumes": [{"name": "lustre", "persistentVolumeClaim": {"claimName": lustre_claim(environment)}}],
                        }
                    },
                }
            },
        },
    }


__all__ = [
    "JobError",
    "JobSpec",
    "LaunchProfile",
    "admission_problem",
    "checkpoint_signal_cronjob",
    "compile_cache_url",
    "kueue_manifests",
    "launch_profile",
    "lead_minutes",
    "per_node_quota",
    "render_job",
    "render_jobset",
    "signal_at",
]
