"""`make bench`: synth timings against an empty CDK app (the floor), and template sizes.

The gate: `cdk synth` of app.py over every example environment (environments/ and examples/environments/, so the EKS
charts and manifests are included; the pilot example, whose AMI lookups are unpinned, is left out) against an empty CDK app, interleaved (A B A B ...), five runs each; the median of
the pairwise ratios is compared with the ratio recorded in tests/bench.json, and a rise of more than 20% fails (exit
1). A ratio, not seconds: both sides run on the same machine in the same minutes, so the machine's speed cancels.
After a deliberate change in synth cost, record the new ratio with `BENCH_RECORD=1 make bench` and commit it.
Run through make so the CLI and jsii use the venv's Node 24.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FROZEN_NOW = "2026-11-01T00:00:00Z"  # tests/conftest.py's FROZEN_NOW (tests/unit/test_clock_pinned.py checks they agree)
CDK = ROOT / "node_modules" / ".bin" / "cdk"


def _context() -> dict[str, object]:
    """cdk.json's flags and cdk.context.json's pinned lookups, as the CLI passes them."""
    context: dict[str, object] = json.loads((ROOT / "cdk.context.json").read_text())
    context.update(json.loads((ROOT / "cdk.json").read_text())["context"])
    return context


def timed_synth(workdir: Path, *args: str) -> float:
    out = Path(tempfile.mkdtemp(prefix="bench-cdk-out-"))
    # The suite's frozen time (tests/conftest.py): the examples' Capacity Blocks synthesize the same whatever the day.
    env = {**os.environ, "CDK_DISABLE_VERSION_CHECK": "1", "NEURONKIT_NOW": os.environ.get("NEURONKIT_NOW", FROZEN_NOW)}
    start = time.perf_counter()
    command = [str(CDK), "synth", "--quiet", "--output", str(out), *args]
    subprocess.run(command, cwd=workdir, check=True, env=env, capture_output=True)
    elapsed = time.perf_counter() - start
    shutil.rmtree(out, ignore_errors=True)
    return elapsed


def empty_app() -> Path:
    work = Path(tempfile.mkdtemp(prefix="bench-empty-"))
    # One empty stack: the CLI refuses an app with no stacks. This is the jsii + CLI start-up floor.
    (work / "app.py").write_text("from aws_cdk import App, Stack\n\napp = App()\nStack(app, 'Empty')\napp.synth()\n")
    (work / "cdk.json").write_text(json.dumps({"app": f"{sys.executable} app.py"}))
    return work


def training_resources(nodes: int) -> int:
    from aws_cdk import App

    from neuronkit.config import load_environment
    from neuronkit.stacks import build_environment

    env = load_environment(ROOT / "environments" / "prod.yaml")
    cluster = env.training[0]
    capacity = cluster.capacity.model_copy(update={"instance_count": nodes})
    scaled = env.model_copy(
        update={"training": [cluster.model_copy(update={"max_size": nodes, "desired_size": nodes, "capacity": capacity})]}
    )
    app = App(context=_context(), builtin_cloud_formation_validation=False)
    stacks = build_environment(app, scaled)
    assert stacks.training is not None
    template = app.synth().get_stack_by_name(stacks.training.stack_name).template
    return len(template["Resources"])


def scale_templates() -> tuple[int, int, list[tuple[int, int, str]]]:
    """Template sizes of the scale environment (tests/scale.py: 8 training clusters, 4 inference fleets)."""
    from aws_cdk import App

    from neuronkit.stacks import build_environment
    from tests.scale import scale_environment

    env = scale_environment()
    out = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    app = App(context=_context(), outdir=str(out), builtin_cloud_formation_validation=False)
    build_environment(app, env)
    stacks = app.synth().stacks
    sizes = sorted(
        ((Path(s.template_full_path).stat().st_size, len(s.template["Resources"]), s.stack_name) for s in stacks), reverse=True
    )
    shutil.rmtree(out, ignore_errors=True)
    return len(env.training), len(env.inference), sizes


RECORDED = Path(__file__).resolve().parent / "bench.json"
ALLOWED_RISE = 0.20


def with_examples() -> Path:
    """The project with every example environment (environments/ and examples/environments/, the EKS example among them)
    in its environments folder (symlinks): the whole app as a user who deploys both platforms would synthesize it."""
    work = Path(tempfile.mkdtemp(prefix="bench-with-eks-"))
    for name in ("app.py", "cdk.json", "cdk.context.json", "neuronkit", "node_modules"):
        (work / name).symlink_to(ROOT / name)
    envs = work / "environments"
    envs.mkdir()
    # examples/environments/pilot.yaml is left out: its AMI lookups are not pinned in cdk.context.json, so `cdk synth`
    # would need credentials (docs/adoption.md: `neuronkit pin` first).
    for f in [*sorted((ROOT / "environments").glob("*.yaml")), ROOT / "examples" / "environments" / "eks.yaml"]:
        if not (envs / f.name).exists():
            (envs / f.name).symlink_to(f)
    return work


def interleaved_synths(runs: int = 5, app: Path = ROOT, *args: str) -> tuple[list[float], list[float]]:
    """Whole-app and empty-app synths in turn (A B A B ...), so a drift in machine speed hits both alike."""
    empty = empty_app()
    timed_synth(empty), timed_synth(app, *args)  # warm the file cache; not counted
    whole_times, floor_times = [], []
    for _ in range(runs):
        whole_times.append(timed_synth(app, *args))
        floor_times.append(timed_synth(empty))
    return whole_times, floor_times


def gate(runs: int) -> bool:
    """Every example environment against the empty app; True when the ratio is within the recorded one + 20%."""
    times, floor_times = interleaved_synths(runs, with_examples())
    ratio = statistics.median(w / f for w, f in zip(times, floor_times, strict=True))
    recorded = json.loads(RECORDED.read_text())
    limit = recorded["ratio"] * (1 + ALLOWED_RISE)
    print(
        f"  app.py, every example environment: {statistics.median(times):6.2f} s, empty app {statistics.median(floor_times):.2f} s"
    )
    print(f"  ratio {ratio:.2f}x; recorded {recorded['ratio']:.2f}x ({recorded['recorded']}); limit {limit:.2f}x (+20%)")
    if os.environ.get("BENCH_RECORD"):
        RECORDED.write_text(
            json.dumps({"ratio": round(ratio, 2), "recorded": time.strftime("%Y-%m-%d"), "runs": runs}, indent=2) + "\n"
        )
        print(f"  recorded {ratio:.2f}x in {RECORDED.relative_to(ROOT)}")
        return True
    return ratio <= limit


def main() -> None:
    os.environ.setdefault("NEURONKIT_NOW", FROZEN_NOW)  # every synth below, the rehearsal's included
    runs = int(os.environ.get("BENCH_RUNS", "5"))
    print(f"neuronkit bench (wall-clock seconds, cold CLI synth, this machine, {runs} interleaved runs, medians)")
    ok = gate(runs)
    if not ok or os.environ.get("BENCH_GATE_ONLY"):
        if not ok:
            print("bench: the synth ratio rose more than 20% over the recorded one (tests/bench.json)", file=sys.stderr)
        sys.exit(0 if ok else 1)
    whole_times, floor_times = interleaved_synths(runs)
    floor, whole = statistics.median(floor_times), statistics.median(whole_times)
    ratio = statistics.median(w / f for w, f in zip(whole_times, floor_times, strict=True))
    print(f"  empty CDK app synth (floor):  {floor:6.2f} s  (min {min(floor_times):.2f}, max {max(floor_times):.2f})")
    print(f"  whole app synth (all envs):   {whole:6.2f} s  (min {min(whole_times):.2f}, max {max(whole_times):.2f})")
    print(f"  ratio to floor (pairwise):    {ratio:6.2f}x  (target <= 1.5x)")
    one_times, one_floor = interleaved_synths(runs, ROOT, "-c", "file=examples/environments/eks.yaml")
    one_ratio = statistics.median(w / f for w, f in zip(one_times, one_floor, strict=True))
    print(f"  EKS example alone (-c file=): {statistics.median(one_times):6.2f} s  ratio to floor {one_ratio:.2f}x")
    for nodes in (1, 16, 256):
        print(f"  prod training stack at {nodes:>3} nodes: {training_resources(nodes)} resources")
    out = Path(tempfile.mkdtemp(prefix="bench-sizes-"))
    subprocess.run(
        [str(CDK), "synth", "--quiet", "--output", str(out)],
        cwd=ROOT,
        check=True,
        capture_output=True,
        env={**os.environ, "NEURONKIT_NOW": os.environ.get("NEURONKIT_NOW", FROZEN_NOW)},
    )
    sizes = sorted(
        ((p.stat().st_size, len(json.loads(p.read_text())["Resources"]), p.name) for p in out.glob("*.template.json")),
        reverse=True,
    )
    size, count, name = sizes[0]
    print(f"  largest template: {name}: {size / 1024:.1f} KiB, {count} resources (limits: 1 MB, 500)")
    shutil.rmtree(out, ignore_errors=True)
    clusters, fleets, scale = scale_templates()
    print(f"  scale environment ({clusters} training clusters, {fleets} inference fleets; tests/scale.py):")
    for size, count, name in scale:
        print(f"    {name:<22} {size / 1024:8.1f} KiB  {count:4d} resources")
    size, count, name = scale[0]
    print(f"  largest scale template: {name}: {size / 1024:.1f} KiB, {count} resources (limits: 1 MB, 500)")
    from neuronkit.rehearsal import rehearsal_wall_times

    times = rehearsal_wall_times(project_dir=str(ROOT), environments=None)
    print(f"  rehearsal synth (shared):     {times.pop('synth'):6.2f} s")
    for env_name, seconds in times.items():
        print(f"  rehearsal of {env_name:<16} {seconds:6.2f} s  (bootstrap + deploy + checks; whole-app synth: {whole:.2f} s)")


if __name__ == "__main__":
    main()
