"""The checkpoint contract the kit owns (docs/training-on-eks.md, "Checkpoint contract"), and a sample entrypoint.

A rank must checkpoint and exit when **any** of these arrives:

1. the **pod-local stop file** ``$NEURONKIT_STOP_FILE`` (``/tmp/neuronkit/stop``) exists: the train container's
   ``preStop`` hook creates it when Kubernetes stops the pod (node drained, JobSet restarted, Capacity Block
   scale-down) and waits for the ranks to end, so they get the pod's ``terminationGracePeriodSeconds`` (the launcher
   does not ``exec`` torchrun, whose agent would SIGKILL its workers 30 s after a SIGTERM);
2. ``SIGTERM`` reaches the rank itself (a launcher of your own that forwards it);
3. the **sentinel file** ``$NEURONKIT_CHECKPOINT_REQUEST`` (on Lustre, ``/fsx/.neuronkit/checkpoint/<pool>``) was
   written **after this pod started** (its mtime at or after ``$NEURONKIT_POD_STARTED``, which the launcher exports):
   the kit's CronJob writes it at ``E - L`` before a Capacity Block ends; an operator can touch it by hand. A sentinel
   older than the pod (a past block's) never stops a later job.

A rank always exits 0 after an early checkpoint, so torchrun does not kill its sibling processes mid-save. One stopped
by the sentinel first writes ``$NEURONKIT_STOPPED_FILE`` (pod-local) with the reason; the launcher then exits
``EXIT_CHECKPOINTED`` (75), which the Job's ``podFailurePolicy`` and the JobSet's ``failurePolicy`` turn into a failed
JobSet with the rule ``CheckpointedAndStoppedEarly``: an unfinished run never ends as Completed, and is not restarted
onto draining nodes. A pod stopped by Kubernetes (the stop file) exits 143 instead: an ordinary rank failure, so the
JobSet restarts and resumes from that checkpoint.

On start a rank resumes from the newest complete checkpoint under ``$NEURONKIT_CHECKPOINT_DIR`` (a step directory
holds a ``COMPLETE`` marker written last, so a checkpoint cut short by ``SIGKILL`` is never resumed from).

This module is shipped into the job's pods by the same ConfigMap as the pre-job checks; ``python3
/opt/neuronkit/checkpoint_contract.py`` runs the sample loop (a toy state, no framework), which a real training
script replaces by calling :class:`Contract` the same way.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType

COMPLETE = "COMPLETE"
EXIT_CHECKPOINTED = 75  # the launcher's exit code after a rank checkpointed and stopped early (EX_TEMPFAIL)


class Contract:
    """Watches the stop file, SIGTERM and the sentinel; ``should_stop()`` is True once one arrived. ``started`` (epoch
    seconds) defaults to ``$NEURONKIT_POD_STARTED``, else the time the contract was made."""

    def __init__(
        self,
        sentinel: str | None = None,
        *,
        stop_file: str | None = None,
        stopped_file: str | None = None,
        started: float | None = None,
        install: bool = True,
    ) -> None:
        env = os.environ
        self.sentinel = Path(sentinel or env.get("NEURONKIT_CHECKPOINT_REQUEST", "/fsx/.neuronkit/checkpoint/none"))
        self.stop_file = Path(stop_file or env.get("NEURONKIT_STOP_FILE", "/tmp/neuronkit/stop"))
        self.stopped_file = Path(stopped_file or env.get("NEURONKIT_STOPPED_FILE", "/tmp/neuronkit/stopped"))
        self.started = started if started is not None else float(env.get("NEURONKIT_POD_STARTED") or time.time())
        self.reason = ""
        if install:
            signal.signal(signal.SIGTERM, self._on_term)

    def _on_term(self, signum: int, frame: FrameType | None) -> None:
        self.reason = "SIGTERM"

    def _sentinel_is_new(self) -> bool:
        try:
            return self.sentinel.stat().st_mtime >= self.started
        except OSError:
            return False

    def should_stop(self) -> bool:
        if not self.reason and self.stop_file.exists():
            self.reason = f"pod stopping ({self.stop_file})"
        if not self.reason and self._sentinel_is_new():
            self.reason = f"sentinel {self.sentinel}"
        return bool(self.reason)

    def mark_stopped(self, step: int) -> None:
        """Record, pod-locally, that this rank checkpointed and stopped at the sentinel (the launcher exits 75 on it).
        A stop for any other reason (the pod is being stopped, SIGTERM) records nothing: the job restarts."""
        if not self.reason.startswith("sentinel"):
            return
        try:
            self.stopped_file.parent.mkdir(parents=True, exist_ok=True)
            self.stopped_file.write_text(f"step {step}: {self.reason}\n")
        except OSError:
            pass


def latest_checkpoint(root: Path) -> Path | None:
    """The newest step directory (``step-NNNNNNNN``) that carries the COMPLETE marker."""
    if not root.is_dir():
        return None
    done = [p for p in root.glob("step-*") if (p / COMPLETE).exists()]
    return max(done, key=lambda p: int(p.name.split("-", 1)[1]), default=None)


def save_checkpoint(root: Path, step: int, state: dict[str, int]) -> Path:
    path = root / f"step-{step:08d}"
    path.mkdir(parents=True, exist_ok=True)
    (path / "state.json").write_text(json.dumps(state, sort_keys=True))
    (path / COMPLETE).write_text("")  # last: a checkpoint without it is incomplete
    return path


def train(
    *, checkpoint_dir: Path, steps: int, contract: Contract, step_seconds: float = 0.0, save_every: int = 100, rank: int = 0
) -> int:
    """The sample loop: resume, step, save every ``save_every`` steps and when asked to stop. Returns the last step.
    Only global rank 0 writes (the toy state is the same on every rank); a real script writes per-rank shards, then
    one rank writes ``COMPLETE`` after a barrier."""
    last = latest_checkpoint(checkpoint_dir)
    state = json.loads((last / "state.json").read_text()) if last else {"step": 0, "total": 0}
    if last:
        print(f"resumed from {last}", flush=True)
    while state["step"] < steps:
        state = {"step": state["step"] + 1, "total": state["total"] + state["step"] + 1}
        if step_seconds:
            time.sleep(step_seconds)
        if contract.should_stop():
            if rank == 0:
                save_checkpoint(checkpoint_dir, state["step"], state)
            contract.mark_stopped(state["step"])
            print(f"checkpointed at step {state['step']} ({contract.reason}); exiting", flush=True)
            return state["step"]
        if state["step"] % save_every == 0 and rank == 0:
            save_checkpoint(checkpoint_dir, state["step"], state)
    if rank == 0:
        save_checkpoint(checkpoint_dir, state["step"], state)
    return state["step"]


def main() -> int:
    root = Path(os.environ.get("NEURONKIT_CHECKPOINT_DIR", "/fsx/checkpoints"))
    steps = int(os.environ.get("NEURONKIT_SAMPLE_STEPS", "1000"))
    rank = int(os.environ.get("RANK", "0"))  # torchrun sets RANK (global) and LOCAL_RANK for each process
    train(checkpoint_dir=root, steps=steps, contract=Contract(), step_seconds=0.1, rank=rank)
    return 0  # also after an early stop: the stopped file tells the launcher, and torchrun spares the other ranks


if __name__ == "__main__":
    sys.exit(main())
