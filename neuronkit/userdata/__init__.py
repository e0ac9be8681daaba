"""Boot scripts for nodes, rendered with values rather than concatenated from fragments.

Each script under this folder is a complete, shellcheck-clean bash file that reads its values from
``/etc/neuronkit/node.env``. :func:`render` prepends a header that writes that file, so a value can
be a CloudFormation token (a bucket name, a file system's DNS name) resolved at deploy time.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

_HERE = Path(__file__).parent
_KEY = re.compile(r"^[A-Z][A-Z0-9_]*$")


def script_path(name: str) -> Path:
    return _HERE / name


def required_keys(name: str) -> set[str]:
    """Keys a script reads from node.env (declared on its ``# requires:`` lines)."""
    keys: set[str] = set()
    for line in script_path(name).read_text().splitlines():
        if line.startswith("# requires:"):
            keys.update(line.split(":", 1)[1].split())
    return keys


def render(name: str, values: Mapping[str, str | int]) -> str:
    """The user data for ``name``: a header writing node.env, then the script itself."""
    missing = required_keys(name) - set(values)
    if missing:
        raise ValueError(f"userdata {name}: missing values for {', '.join(sorted(missing))}")
    body = script_path(name).read_text()
    if body.startswith("#!"):
        body = body.split("\n", 1)[1]
    lines = ["#!/bin/bash", "# Rendered by neuronkit. Values for this node's pool:", "install -d -m 0755 /etc/neuronkit"]
    lines.append("cat > /etc/neuronkit/node.env <<'NEURONKIT_ENV'")
    for key, value in sorted(values.items()):
        if not _KEY.match(key):
            raise ValueError(f"userdata {name}: bad key {key!r}")
        text = str(value)
        if "'" in text or "\n" in text:
            raise ValueError(f"userdata {name}: value of {key} may not contain quotes or newlines")
        lines.append(f"{key}='{text}'")
    lines.append("NEURONKIT_ENV")
    return "\n".join(lines) + "\n" + body
