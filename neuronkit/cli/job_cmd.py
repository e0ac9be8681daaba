"""``neuronkit job render | check POOL``: a multi-node training job for an EKS pool, as manifests (docs/training-on-eks.md).

Offline: it reads the environment file and the catalog and prints YAML; ``kubectl apply -f -`` stays the user's step.
"""

from __future__ import annotations

import argparse
import datetime as dt
import sys
from pathlib import Path
from typing import Any

import yaml

from neuronkit import config
from neuronkit.catalog import releases
from neuronkit.cli import selection
from neuronkit.cli.errors import CliError
from neuronkit.config.storage import bucket_names
from neuronkit.kubernetes import training_job as tj


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser("job", help="render a multi-node training job (or its pre-job checks alone) for an EKS pool")
    actions = p.add_subparsers(dest="action", required=True, metavar="ACTION")
    for name, help_text in (
        ("render", "the JobSet of a training job: pre-job checks, then the ranks (kubectl apply -f - it)"),
        ("check", "the pre-job checks alone on the pool's nodes: per-node checks and the collective"),
    ):
        a = actions.add_parser(name, help=help_text)
        a.add_argument("pool", metavar="POOL", help="a training pool of the environment (training[].name)")
        selection.add(a, count="one")
        a.add_argument("--nodes", type=int, default=None, metavar="N", help="nodes of the job (default: the pool's max_size)")
        a.add_argument(
            "--image", default=None, metavar="IMAGE", help="the training container (required where no tag is published)"
        )
        a.add_argument(
            "--image-release-window",
            action="store_true",
            help="accept an --image built for a newer Neuron release than the pool's, and hold the nodes' driver to THAT "
            "release's window in the pre-job check (default: such an image is refused)",
        )
        a.add_argument("--name", default=None, metavar="NAME",
                       help="the JobSet's name (default: POOL-MMDD-HHMMSS or POOL-check-MMDD-HHMMSS, UTC: unique per render)")  # fmt: skip
        a.add_argument("--min-busbw-gbps", type=float, default=None, metavar="GBPS",
                       help="fail the collective below this bus bandwidth (default: unset, completion and correctness only)")  # fmt: skip
        a.add_argument(
            "-o",
            "--output",
            type=Path,
            default=None,
            metavar="FILE",
            help="also write the manifests to FILE",
        )
        if name == "render":
            a.add_argument("--deadline", default=None, metavar="TIME",
                           help="when the job must be done (UTC, ISO 8601); refused past a Capacity Block's end minus its lead time")  # fmt: skip
            a.add_argument("--hold", action="store_true",
                           help="a Capacity Block pool before its start: render the job held (suspended, no queue label) instead of refusing it")  # fmt: skip
            a.add_argument("--command", dest="train_command", nargs=argparse.REMAINDER, default=None, metavar="ARGS",
                           help="the rest of the line: the training script and its arguments after torchrun (default: the checkpoint contract's sample)")  # fmt: skip
            a.set_defaults(func=render)
        else:
            a.add_argument("--calibrate", action="store_true", help="record a healthy run's numbers on Lustre for later runs")
            a.add_argument(
                "--cordon", action="store_true", help="print the kubectl commands that cordon the nodes a check failed on"
            )
            a.set_defaults(func=check)


def _pool(args: argparse.Namespace) -> tuple[config.Environment, Any, str]:
    env = selection.load(args, single=True)[0]
    if env.platform != "eks":
        raise CliError(
            f"{env.name}: job {args.action} renders Kubernetes jobs; the file says platform: {env.platform} (set platform: eks)"
        )
    pools = {c.name: c for c in env.training}
    if args.pool not in pools:
        raise CliError(f"{env.name}: no training pool '{args.pool}'; pools: {', '.join(pools) or 'none'}")
    release = config.pool_releases(env)[args.pool].release
    if release is None:
        raise CliError(f"{env.name}: training pool {args.pool} has no Neuron release that trains on it; set its neuron_sdk")
    return env, pools[args.pool], release.version


def image_window(env: str, pool: str, release: str, image: str | None, take_window: bool) -> str:
    """The release whose driver window the pre-job node check uses. An image built for a newer release than the pool's
    (its tag's ``sdkX.Y.Z``) is refused, as on the Batch path: its runtime may need a driver outside the pool's window
    (``catalog.releases.driver_fit``); with ``--image-release-window`` the image's release and its window are taken."""
    built = releases.container_release(image) if image else None
    if built is None or releases.version_key(built) <= releases.version_key(release):
        return release
    if not take_window:
        window = releases.driver_window(release)
        raise CliError(
            f"{env}: pool {pool} is on Neuron {release}; --image {image} is built for Neuron {built}, newer: its runtime "
            f"may need a driver outside the pool's window ({window.describe()}); name an image of {release} or older, "
            f"or pass --image-release-window to check the nodes against {built}'s window"
        )
    if built not in releases.versions():
        raise CliError(
            f"{env}: --image {image} is built for Neuron {built}, which the release matrix does not hold: its driver "
            "window is unknown (catalog/neuron_releases.yaml); name an image of a release the catalog holds"
        )
    return built


def _spec(args: argparse.Namespace, *, check_only: bool, command: tuple[str, ...] | None = None) -> tj.JobSpec:
    env, pool, release = _pool(args)
    nodes = args.nodes if args.nodes is not None else pool.max_size
    if nodes > pool.max_size:
        raise CliError(f"--nodes {nodes}: pool {pool.name} has at most {pool.max_size} nodes (max_size); ask for fewer")
    names = bucket_names(env.name, env.account, env.region)
    extra: dict[str, Any] = {"command": command} if command else {}
    budget = getattr(pool.capacity, "checkpoint_budget_minutes", None)
    if budget is not None:
        extra["checkpoint_budget_seconds"] = 60 * int(budget)
    window = image_window(env.name, pool.name, release, args.image, getattr(args, "image_release_window", False))
    if window != release:
        extra["window_release"] = window
    try:
        return tj.JobSpec(
            name=args.name or default_name(pool.name, check_only=check_only, now=_now()),
            environment=env.name,
            pool=pool.name,
            instance_type=pool.instance_type,
            nodes=nodes,
            release=release,
            datasets_bucket=names["datasets"],
            checkpoints_bucket=names["checkpoints"],
            image=args.image,
            lnc=pool.lnc,
            min_busbw_gbps=args.min_busbw_gbps,
            calibrate=getattr(args, "calibrate", False),
            check_only=check_only,
            hold=bool(getattr(args, "hold", False)),
            **extra,
        )
    except tj.JobError as err:
        raise CliError(f"{env.name}: pool {pool.name}: {err}") from err


def default_name(pool: str, *, check_only: bool, now: dt.datetime) -> str:
    """A name of its own per render: JobSet's webhook refuses to re-apply a name a finished JobSet still holds. The
    pool's name is shortened to keep the kit's 40-character limit."""
    stamp = now.astimezone(dt.UTC).strftime("%m%d-%H%M%S")
    suffix = f"-check-{stamp}" if check_only else f"-{stamp}"
    return f"{pool[: 40 - len(suffix)].rstrip('-')}{suffix}"


def block_lead(pool: Any) -> tuple[dt.datetime, int] | None:
    """A Capacity Block pool's end and lead time L (EKS node group: EKS's 40 minutes or the kit's own earlier
    scale-down, plus the pool's checkpoint budget); None for other capacity."""
    cap = pool.capacity
    if getattr(cap, "type", None) != "capacity-block":
        return None
    lead = tj.lead_minutes("eks-node-group", cap.checkpoint_budget_minutes, kit_drain_minutes=cap.drain_minutes)
    return cap.end, lead


def _deadline(text: str) -> dt.datetime:
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as err:
        raise CliError(f"--deadline {text}: not a date and time; use ISO 8601 in UTC, e.g. 2027-01-18T09:00:00Z", code=2) from err
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the programs, the launcher) as literal blocks, readable in the output; no YAML anchors and
    aliases (a shared dict is written out in full where each container uses it, as a reader of a manifest expects)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|" if "\n" in value else None)


_Dumper.add_representer(str, _str)


def _emit(docs: list[dict[str, Any]], output: Path | None) -> None:
    text = yaml.dump_all(docs, Dumper=_Dumper, sort_keys=False, width=120)
    sys.stdout.write(text)  # the kit's -o convention: also write to FILE (README, "Options")
    if output is not None:
        output.write_text(text)


def _now() -> dt.datetime:
    from neuronkit import clock

    return clock.utc_now()


def notes(spec: tj.JobSpec, pool: Any, now: dt.datetime) -> list[str]:
    """Stderr lines a user should read before applying: a Capacity Block that has not started or has ended (the queue's
    quota is static: a job applied then is admitted, its pods stay Pending and Kueue evicts and requeues it every
    waitForPodsReady timeout; ``job render`` refuses it unless held), and a training container of another release than the pool's."""
    out: list[str] = []
    cap = pool.capacity
    if getattr(cap, "type", None) == "capacity-block":
        if now < cap.start and spec.hold:
            out.append(
                f"neuronkit: pool {pool.name}'s Capacity Block starts {cap.start.isoformat()}: {spec.name} is held (no queue "
                f"label); at the start run: kubectl label jobset -n {tj.scheduling.TRAINING_NAMESPACE} {spec.name} "
                f"{tj.QUEUE_LABEL}={tj.local_queue_name(pool.name)}"
            )
        elif now < cap.start:
            out.append(
                f"neuronkit: WARNING: pool {pool.name}'s Capacity Block starts {cap.start.isoformat()}: until then the pool "
                "has no nodes; a job applied now is admitted but its pods stay Pending (apply it after the start)"
            )
        elif now >= cap.end:
            out.append(
                f"neuronkit: WARNING: pool {pool.name}'s Capacity Block ended {cap.end.isoformat()}: the pool has no nodes"
            )
    queue = getattr(pool, "cluster_queue", None)
    if queue is not None and not spec.hold:
        out.append(
            f"neuronkit: pool {pool.name} queues in LocalQueue {tj.local_queue_name(pool.name)} (namespace "
            f"{tj.scheduling.TRAINING_NAMESPACE}), which points at your ClusterQueue {queue}: it admits the job once it "
            "holds the pool's flavor (`neuronkit summary` prints the stanza)"
        )
    image_release = releases.container_release(spec.profile.image)
    if image_release is not None and image_release != spec.release:
        out.append(
            f"neuronkit: pool {pool.name} is on Neuron {spec.release}; its training container is {image_release}'s "
            f"({spec.profile.image}, the one the release matrix names): the job runs {image_release}'s runtime and "
            "libraries on the pool's driver"
        )
    return out


def render(args: argparse.Namespace) -> int:
    spec = _spec(args, check_only=False, command=tuple(args.train_command) if args.train_command else None)
    env, pool, _ = _pool(args)
    cap = pool.capacity
    if getattr(cap, "type", None) == "capacity-block" and _now() < cap.start and not spec.hold:
        raise CliError(
            f"{env.name}: pool {pool.name}: its Capacity Block starts {cap.start.isoformat()} and the pool has no nodes "
            "until then; apply the job after the start, or render it with --hold (suspended until you label it)"
        )
    docs = tj.render_job(spec)
    block = block_lead(pool)
    if block is not None:
        end, lead = block
        if args.deadline is not None:
            problem = tj.admission_problem(_deadline(args.deadline), end, lead)
            if problem:
                raise CliError(f"{env.name}: pool {pool.name}: {problem}")
        print(
            f"neuronkit: pool {pool.name} is a Capacity Block ending {end.isoformat()}: jobs are asked to checkpoint at "
            f"{tj.signal_at(end, lead).isoformat()} (E - {lead} min)",
            file=sys.stderr,
        )
    for line in notes(spec, pool, _now()):
        print(line, file=sys.stderr)
    _emit(docs, args.output)
    return 0


def check(args: argparse.Namespace) -> int:
    spec = _spec(args, check_only=True)
    _, pool, _ = _pool(args)
    for line in notes(spec, pool, _now()):
        print(line, file=sys.stderr)
    _emit(tj.render_job(spec), args.output)
    if args.cordon:
        print(cordon_commands(spec.name), file=sys.stderr)
    return 0


def cordon_commands(job: str) -> str:
    """What an operator runs after a failed check: the nodes of the job's failed pods, cordoned (the check itself has
    no rights on nodes)."""
    return (
        f"# nodes whose pre-job checks failed in {job}; review, then cordon them:\n"
        f"kubectl get pods -n {tj.scheduling.TRAINING_NAMESPACE} -l jobset.sigs.k8s.io/jobset-name={job} "
        "--field-selector=status.phase=Failed -o jsonpath='{range .items[*]}{.spec.nodeName}{\"\\n\"}{end}' "
        "| sort -u | xargs -r -n1 kubectl cordon"
    )
