"""The checkpoint contract the kit owns (docs/training-on-eks.md, "Checkpoint contract"), and a sample entrypoint.

A rank must checkpoint and exit when **either** arrives:

1. ``SIGTERM`` (Kubernetes stops the pod: node drained, JobSet restarted, Capacity Block scale-down); the pod has
   ``terminationGracePeriodSeconds`` (the pool's checkpoint budget) before ``SIGKILL``;
2. the **sentinel file** ``$NEURONKIT_CHECKPOINT_REQUEST`` exists (on Lustre, ``/fsx/.neuronkit/checkpoint/<pool>``):
   the kit's CronJob writes it at ``E - L`` before a Capacity Block ends, so jobs checkpoint while the nodes are
   still theirs; an operator can touch it by hand.

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
EXIT_CHECKPOINTED = 0


class Contract:
    """Watches SIGTERM and the sentinel file; ``should_stop()`` is True once either arrived."""

    def __init__(self, sentinel: str | None = None, *, install: bool = True) -> None:
        self.sentinel = Path(sentinel or os.environ.get("NEURONKIT_CHECKPOINT_REQUEST", "/fsx/.neuronkit/checkpoint/none"))
        self.reason = ""
        if install:
            signal.signal(signal.SIGTERM, self._on_term)

    def _on_term(self, signum: int, frame: FrameType | None) -> None:
        self.reason = "SIGTERM"

    def should_stop(self) -> bool:
        if not self.reason and self.sentinel.exists():
            self.reason = f"sentinel {self.sentinel}"
        return bool(self.reason)


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


def train(*, checkpoint_dir: Path, steps: int, contract: Contract, step_seconds: float = 0.0, save_every: int = 100) -> int:
    """The sample loop: resume, step, save every ``save_every`` steps and when asked to stop. Returns the last step."""
    last = latest_checkpoint(checkpoint_dir)
    state = json.loads((last / "state.json").read_text()) if last else {"step": 0, "total": 0}
    if last:
        print(f"resumed from {last}", flush=True)
    while state["step"] < steps:
        state = {"step": state["step"] + 1, "total": state["total"] + state["step"] + 1}
        if step_seconds:
            time.sleep(step_seconds)
        if contract.should_stop():
            save_checkpoint(checkpoint_dir, state["step"], state)
            print(f"checkpointed at step {state['step']} ({contract.reason}); exiting", flush=True)
            return state["step"]
        if state["step"] % save_every == 0:
            save_checkpoint(checkpoint_dir, state["step"], state)
    save_checkpoint(checkpoint_dir, state["step"], state)
    return state["step"]


def main() -> int:
    root = Path(os.environ.get("NEURONKIT_CHECKPOINT_DIR", "/fsx/checkpoints"))
    train(checkpoint_dir=root, steps=int(os.environ.get("NEURONKIT_SAMPLE_STEPS", "1000")), contract=Contract(), step_seconds=0.1)
    return EXIT_CHECKPOINTED


if __name__ == "__main__":
    sys.exit(main())
