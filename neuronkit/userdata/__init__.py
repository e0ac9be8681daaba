"""Boot scripts for nodes, rendered with values rather than concatenated from fragments.

Each script under this folder is a complete, shellcheck-clean bash file that reads its values from
``/etc/neuronkit/node.env``. :func:`render` prepends a header that writes that file, so a value can
be a CloudFormation token (a bucket name, a file system's DNS name) resolved at deploy time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from pathlib import Path

_HERE = Path(__file__).parent

# How the kit runs shellcheck (make lint, tests): every finding, libraries followed from this folder.
SHELLCHECK_ARGS = ("--severity=style", "--external-sources", f"--source-path={_HERE}")
_KEY = re.compile(r"^[A-Z][A-Z0-9_]*$")
_HEREDOC = re.compile(r"(?<!<)<<-?\s*['\"]?([A-Za-z_][A-Za-z0-9_]*)['\"]?")


def script_path(name: str) -> Path:
    return _HERE / name


def _declared(name: str, marker: str) -> list[str]:
    words: list[str] = []
    for line in script_path(name).read_text().splitlines():
        if line.startswith(marker):
            words.extend(line.split(":", 1)[1].split())
    return words


def libraries(name: str) -> list[str]:
    """Shell libraries a script sources from /opt/neuronkit (declared on its ``# uses:`` lines)."""
    return _declared(name, "# uses:")


def required_keys(name: str) -> set[str]:
    """Keys a script, and the libraries it uses, read from node.env (its ``# requires:`` lines)."""
    keys = set(_declared(name, "# requires:"))
    for lib in libraries(name):
        keys |= required_keys(lib)
    return keys


def _strip_shebang(text: str) -> str:
    return _compact(text.split("\n", 1)[1] if text.startswith("#!") else text)


def _compact(text: str) -> str:
    """The script without its comment-only lines and indentation: they document the source, and EC2 caps user data
    at 16 KB. Here-documents keep every line as written.

    Shebangs (of scripts written by heredocs) and shellcheck directives stay.
    """
    keep: list[str] = []
    end: str | None = None  # the delimiter of the here-document being copied
    for line in text.split("\n"):
        if end is not None:
            keep.append(line)
            end = None if line.strip() == end else end
            continue
        bare = line.lstrip()
        if bare.startswith("#") and not bare.startswith(("#!", "# shellcheck")):
            continue
        keep.append(bare)
        here = _HEREDOC.search(bare)
        end = here.group(1) if here else None
    return "\n".join(keep)


def render(names: str | Sequence[str], values: Mapping[str, str | int]) -> str:
    """The user data for one script or several run in order: a header writing node.env, then each script.

    Each script runs in its own ``bash`` process, so one script's ``set -e`` or ``exit`` cannot skip
    the next one's setup silently; a failing script still fails the boot (its exit status is kept).
    """
    scripts = [names] if isinstance(names, str) else list(names)
    name = "+".join(scripts)
    missing = set().union(*(required_keys(n) for n in scripts)) - set(values)
    if missing:
        raise ValueError(f"userdata {name}: missing values for {', '.join(sorted(missing))}")
    libs = list(dict.fromkeys(lib for script in scripts for lib in libraries(script)))
    shared = []
    for lib in libs:
        # Written once, before any script runs; each script sources it.
        shared.append(f"install -d -m 0755 /opt/neuronkit && cat > /opt/neuronkit/{lib} <<'NEURONKIT_LIB'")
        shared.append(_strip_shebang(script_path(lib).read_text()).rstrip("\n"))
        shared.append("NEURONKIT_LIB")
    deadline = "BOOT_DEADLINE_SECONDS" in values
    if len(scripts) == 1:
        body = _strip_shebang(script_path(scripts[0]).read_text())
    else:
        parts = ["status=0"]
        if deadline:
            # One boot deadline (node-lib.sh start_deadline): a script before the last one gets no more than all of it.
            parts.append("# shellcheck source=/dev/null\n. /etc/neuronkit/node.env")
        for i, script in enumerate(scripts):
            marker = f"NEURONKIT_SCRIPT_{i}"
            parts.append(f"install -d -m 0755 /opt/neuronkit && cat > /opt/neuronkit/{script} <<'{marker}'")
            parts.append(_compact(script_path(script).read_text()).rstrip("\n"))
            parts.append(marker)
            bounded = 'timeout "${BOOT_DEADLINE_SECONDS}" ' if deadline and i < len(scripts) - 1 else ""
            parts.append(f"{bounded}bash /opt/neuronkit/{script} || status=$?")
        parts.append('exit "${status}"')
        body = "\n".join(parts) + "\n"
    lines = ["#!/bin/bash", "# Rendered by neuronkit. Values for this node's pool:", "install -d -m 0755 /etc/neuronkit"]
    if "BOOT_DEADLINE_SECONDS" in values:
        # When the boot started: the boot deadline counts from here (node-lib.sh start_deadline).
        lines.append("install -d -m 0755 /run/neuronkit && cut -d. -f1 /proc/uptime > /run/neuronkit/boot-started")
    lines.append("cat > /etc/neuronkit/node.env <<'NEURONKIT_ENV'")
    for key, value in sorted(values.items()):
        if not _KEY.match(key):
            raise ValueError(f"userdata {name}: bad key {key!r}")
        text = str(value)
        if "'" in text or "\n" in text:
            raise ValueError(f"userdata {name}: value of {key} may not contain quotes or newlines")
        lines.append(f"{key}='{text}'")
    lines.append("NEURONKIT_ENV")
    lines.extend(shared)
    return "\n".join(lines) + "\n" + body


def boot_values(
    *, driver_min: str | None = None, driver_shipped: str | None = None, release: str | None = None
) -> dict[str, str | int]:
    """The node-lib.sh values every node check shares: the Neuron driver rule of the pool's release (``driver_min``
    fails below it, ``driver_shipped`` warns below it; none on GPU pools or where the image's driver is not tied to a
    release), with ``release`` its driver window (``catalog.releases.driver_window``: the first driver a stated rule
    refuses and the newest driver the catalog has read, each with its rule, so that a node outside fails naming driver,
    release and rule), and the boot deadline and device wait of ``catalog/software.yaml`` (``lifecycle``)."""
    from neuronkit import catalog  # the catalog imports nothing of this package; a late import keeps it so
    from neuronkit.catalog import releases

    lifecycle = catalog.software_facts()["lifecycle"]
    window = releases.driver_window(release) if release and driver_min else None
    limit, rule = "", ""
    if window is not None:
        # One bound keeps the EKS part under its size budget: the first driver outside the window's top, with the rule
        # behind it (a stated rule's bound, else the first driver after the newest one the catalog has read; drivers
        # are a.b.c.d, so that is a.b.c.d+1). tests/unit/test_driver_window.py holds it to driver_fit.
        if window.high:
            limit, rule = window.high, f"Neuron {window.release}: {window.high_short}"
        else:
            *head, last = window.read.split(".")
            limit = ".".join([*head, str(int(last) + 1)])
            rule = f"Neuron {window.release}: newer than {window.read}, the newest driver the catalog has read"
    return {
        "EXPECTED_NEURON_DRIVER": (window.low if window else driver_min) or "",
        "NEURON_DRIVER_SHIPPED": driver_shipped or driver_min or "",
        "DRIVER_LIMIT": limit,
        "DRIVER_RULE": rule.replace("'", ""),
        "BOOT_DEADLINE_SECONDS": int(lifecycle["boot_deadline_seconds"]),
        "DEVICE_WAIT_SECONDS": int(lifecycle["device_wait_seconds"]),
    }
