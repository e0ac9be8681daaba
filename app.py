#!/usr/bin/env python3
"""CDK entry point: one set of stacks per environment file (``-c env=NAME`` selects one under environments/,
``-c file=PATH`` deploys one file from anywhere, e.g. examples/environments/pilot.yaml)."""

import atexit
import gc
import importlib
import os
import sys
import threading
from typing import Any

# A synth is one short process that builds a few thousand objects and exits: CPython's cyclic garbage
# collector only rescans them (about 0.4 s of a whole-app synth, docs/performance.md). Reference counting
# still frees what it can; the peak memory of a whole-app synth was lower, not higher, without it. Only when
# run as the app: a test that imports this file keeps its collector.
# cdk.json runs this file with `python3 -O`: jsii's Python-side argument type checks (typeguard, about 0.3 s of
# a whole-app synth) only run when __debug__ is true. The tests import the kit without -O, so every construct
# path is still type-checked there, and a test requires byte-identical templates both ways (docs/performance.md).
_EXIT_STATUS = [1]  # what the process exits with: 1 until main() returns or exits with its own status


def _exit_without_teardown() -> None:
    """The last exit handler: exit with main's status once every other handler has run (jsii's, registered
    later, runs first and stops the Node process and removes its files). Python's own teardown would then free
    the whole construct tree object by object and collect it once more: about 0.3 s of a whole-app synth, for a
    process that has already written everything (docs/performance.md)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_EXIT_STATUS[0])


# aws-cdk-lib's Python modules the stacks use, and the kit's: class definitions only, no call to the jsii kernel
# when imported (tests/unit/test_app.py checks that), so a second thread may import them while the main thread
# talks to Node.
PURE_PYTHON_MODULES = (
    "aws_cdk.aws_iam",
    "aws_cdk.aws_ec2",
    "aws_cdk.aws_kms",
    "aws_cdk.aws_s3",
    "aws_cdk.aws_logs",
    "aws_cdk.aws_sns",
    "aws_cdk.aws_lambda",
    "aws_cdk.aws_cloudwatch",
    "aws_cdk.aws_autoscaling",
    "aws_cdk.aws_events",
    "aws_cdk.aws_elasticloadbalancingv2",
    "aws_cdk.custom_resources",
    "neuronkit.constructs.compliance",
    "neuronkit.stacks",
)


class _Prepare(threading.Thread):
    """Loads environments/ and imports aws-cdk-lib's Python modules in a second thread while the main thread waits
    for Node to load aws-cdk-lib and cdk-nag (about 0.5 s in which Python would sit idle; docs/performance.md).
    Nothing here calls the jsii kernel, which only the main thread talks to: the modules make no call when imported,
    and the only calls an import makes (loading aws-cdk-lib and cdk-nag into Node) happen inside aws_cdk's and
    cdk_nag's own imports, which Python's import locks let one thread run at a time, whichever starts them. A problem is kept for the main
    thread, which reports it as it would have (main() loads again when the context selects a file or an
    environment, and imports what this thread could not)."""

    def __init__(self) -> None:
        super().__init__(name="neuronkit-prepare", daemon=True)
        self.environments: list[Any] | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            from neuronkit.config import load_all

            self.environments = load_all("environments")
        except BaseException as err:  # noqa: BLE001 -- handed to the main thread
            self.error = err
        try:
            for module in PURE_PYTHON_MODULES:
                importlib.import_module(module)  # waits for the main thread's `import aws_cdk`
        except Exception:  # noqa: BLE001, S110 -- the main thread imports them again and reports a failure
            pass


_LOADING: _Prepare | None = None
if __name__ == "__main__":
    gc.disable()
    atexit.register(_exit_without_teardown)  # before aws_cdk starts jsii: handlers run last-registered first
    _LOADING = _Prepare()
    _LOADING.start()

import json  # noqa: E402
from pathlib import Path  # noqa: E402

import cdk_nag  # noqa: E402, F401 -- Node loads cdk-nag now, while the other thread works
from aws_cdk import App  # noqa: E402

from neuronkit import clock  # noqa: E402
from neuronkit.config import ConfigError, block_problems, load_all, load_environment, neuron_warnings  # noqa: E402
from neuronkit.constructs import compliance  # noqa: E402
from neuronkit.stacks import build_environment, failed_lookups, missing_lookups  # noqa: E402

HERE = Path(__file__).parent


def _loaded() -> list[Any] | None:
    """The environments the other thread loaded (None when it did not run), or its error raised here."""
    if _LOADING is None:
        return None
    _LOADING.join()
    if _LOADING.error is not None:
        raise _LOADING.error
    return _LOADING.environments


def main() -> None:
    # Feature flags live in cdk.json and pinned lookups (AMIs) in cdk.context.json; load both when the app
    # runs without the CDK CLI too (the CLI passes them itself, and its values win).
    context = json.loads((HERE / "cdk.json").read_text())["context"]
    pinned = HERE / "cdk.context.json"
    if pinned.is_file():
        context = {**json.loads(pinned.read_text()), **context}
    # CDK's built-in CloudFormation validation is off: it took 40% of a whole-app synth, and `make test`
    # runs cfn-lint over every template with zero findings allowed (docs/performance.md).
    app = App(context=context, builtin_cloud_formation_validation=False)
    try:
        file, only = app.node.try_get_context("file"), app.node.try_get_context("env")
        environments = _loaded() if not (file or only) else None
        if environments is None:
            environments = [load_environment(file)] if file else load_all("environments", only=only)
    except ConfigError as err:
        for line in err.problems:
            print(line, file=sys.stderr)
        sys.exit(1)
    # A Capacity Block whose scale-down has passed cannot be scheduled (neuronkit.clock: -c neuronkit:now=... sets the time).
    ended = [
        f"{file or f'environments/{env.name}.yaml'}: {key}: {msg}"
        for env in environments
        for key, msg in block_problems(list(env.training), clock.now(app))
    ]
    if ended:
        print("\n".join(ended), file=sys.stderr)
        sys.exit(1)
    for env in environments:
        for line in neuron_warnings(env):
            print(f"warning: {file or f'environments/{env.name}.yaml'}: {line}", file=sys.stderr)
        try:
            build_environment(app, env)
        except ValueError as err:
            # A setting the file's validation let through but a construct refuses: still one clear line.
            print(f"{file or f'environments/{env.name}.yaml'}: {err}", file=sys.stderr)
            sys.exit(1)
    compliance.apply(app)
    assembly = app.synth()
    # Under the CDK CLI (which sets CDK_CLI_VERSION) a missing lookup is normal: the CLI performs it with the
    # caller's credentials, writes cdk.context.json and runs the app again; that run names the lookups that
    # failed (once). Without the CLI the templates would carry CDK's dummy image id: name them and fail.
    if "CDK_CLI_VERSION" in os.environ:
        for line in failed_lookups(app, environments, file):
            print(line, file=sys.stderr)
        return
    missing = missing_lookups(assembly.directory, environments, file)
    for line in missing:
        print(line, file=sys.stderr)
    if missing:
        sys.exit(1)


if __name__ == "__main__":
    try:
        main()
        _EXIT_STATUS[0] = 0
    except SystemExit as exit_:
        # sys.exit(n) keeps n; sys.exit("message") prints the message and exits 1, as Python would.
        _EXIT_STATUS[0] = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        raise
