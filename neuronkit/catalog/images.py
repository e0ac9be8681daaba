"""A dated, sourced record of the container tags the registries publish (``published_images.json``), as
``instances.json`` records EC2: every image the release matrix and the serving catalog pin must be in it, so a
tag that does not exist fails a test instead of a node's ``docker pull``.

``refresh`` re-reads the tags of each recorded repository from ECR Public's registry API (the Docker Registry
HTTP API v2: an anonymous pull token from ``https://public.ecr.aws/token/``, then
``GET /v2/<repository>/tags/list``, paged by the ``Link`` header) and rewrites the record with today's date. It
runs only when someone asks (``neuronkit catalog refresh --images``), never at synth.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from neuronkit import clock

RECORD = Path(__file__).with_name("published_images.json")
REGISTRY = "public.ecr.aws"
_NEXT = re.compile(r'<([^>]+)>;\s*rel="next"')

Fetch = Callable[[urllib.request.Request], tuple[dict[str, Any], dict[str, str]]]


def record() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(RECORD.read_text())
    return data


def split(image: str) -> tuple[str, str]:
    """``public.ecr.aws/neuron/repo:tag`` -> (``public.ecr.aws/neuron/repo``, ``tag``)."""
    repository, _, tag = image.rpartition(":")
    return repository, tag


def pinned_images() -> list[str]:
    """Every image the kit pins: the release matrix's containers and the serving catalog's GPU image."""
    from neuronkit.catalog import releases, serving

    images = [image for r in releases.releases() for image in r.containers.values()]
    images.append(serving.facts()["gpu_image"])
    return sorted(set(images))


def missing(images: Iterable[str] | None = None) -> list[str]:
    """Pinned images whose tag the record does not list (or whose repository it does not know)."""
    tags = record()["repositories"]
    return [i for i in (images if images is not None else pinned_images()) if split(i)[1] not in tags.get(split(i)[0], [])]


def _urlopen(request: urllib.request.Request) -> tuple[dict[str, Any], dict[str, str]]:
    with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 - a fixed https registry
        return json.loads(answer.read()), dict(answer.headers)


def tags(repository: str, fetch: Fetch = _urlopen) -> list[str]:
    """Every tag of an ECR Public repository (``public.ecr.aws/<namespace>/<name>``)."""
    path = repository.removeprefix(f"{REGISTRY}/")
    token_url = f"https://{REGISTRY}/token/?scope=" + urllib.parse.quote(f"repository:{path}:pull")
    token, _ = fetch(urllib.request.Request(token_url))
    url: str | None = f"https://{REGISTRY}/v2/{path}/tags/list?n=1000"
    out: list[str] = []
    while url:
        page, headers = fetch(urllib.request.Request(url, headers={"Authorization": f"Bearer {token['token']}"}))
        out.extend(page.get("tags") or [])
        link = _NEXT.search(headers.get("Link", "") or headers.get("link", ""))
        url = urllib.parse.urljoin(f"https://{REGISTRY}/", link.group(1)) if link else None
    return sorted(set(out))


def refresh(fetch: Fetch = _urlopen, today: dt.date | None = None, path: Path = RECORD) -> dict[str, Any]:
    """Re-read every recorded repository (and every pinned one) and write the record; returns it."""
    current = json.loads(path.read_text()) if path.exists() else {"repositories": {}}
    repositories = sorted(set(current["repositories"]) | {split(i)[0] for i in pinned_images() if i.startswith(REGISTRY)})
    doc = {
        "about": current.get("about", "Tags published by each repository the kit pins from, read from ECR Public."),
        "source": f"https://{REGISTRY}/v2/<repository>/tags/list (Docker Registry HTTP API v2, anonymous pull token)",
        "checked": (today or clock.utc_now().date()).isoformat(),
        "repositories": {r: tags(r, fetch) for r in repositories},
    }
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return doc
