"""Safety: a rehearsal talks only to its own embedded moto server, never to AWS or another machine.

- :func:`assert_local_endpoint` refuses any endpoint that is not loopback (localhost, 127.0.0.0/8, ::1);
  the runner calls it before anything starts, for every CLI environment and for every boto3 client.
- :func:`cli_environment` gives the CDK CLI subprocess this endpoint and dummy credentials, empty AWS
  config/credentials files, and drops every other ``AWS_*`` variable (profiles, session tokens,
  ``AWS_ENDPOINT_URL_*``, web-identity and container credentials).
- :func:`without_env` hides variables (``MOTO_ACCOUNT_ID``) while a rehearsal runs.
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from neuronkit.rehearsal.errors import RehearsalError

# Host name the CLI and boto3 use for the embedded server: moto's CloudFormation reads the template URL's
# host name to find the S3 bucket, so ``localhost``, not the IP. The runner reads it from this module at
# start (``safety.ENDPOINT_HOST``), so a test can point it elsewhere and watch the rehearsal refuse.
ENDPOINT_HOST = "localhost"
BIND_ADDRESS = "127.0.0.1"


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


def set_env(name: str, value: str) -> Callable[[], None]:
    """Set ``name`` in this process's environment; returns an idempotent function that puts back what was there."""
    saved = os.environ.get(name)
    os.environ[name] = value

    def restore() -> None:
        if saved is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = saved

    return restore


@contextlib.contextmanager
def without_env(*names: str) -> Iterator[None]:
    """Remove ``names`` from this process's environment for the block (moto reads ``MOTO_ACCOUNT_ID`` first)."""
    saved = {n: os.environ.pop(n) for n in names if n in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)
