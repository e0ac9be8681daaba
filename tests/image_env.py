"""The pinned training images as data (tests/fixtures/images/): PATH, LD_LIBRARY_PATH, user and tools, each from the
image's published Dockerfile with its line."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import ROOT

IMAGES = ROOT / "tests" / "fixtures" / "images"


@dataclass(frozen=True)
class ImageEnv:
    image: str
    user: str
    path: str
    ld_library_path: str
    tools: dict[str, str]  # name -> absolute path in the image
    not_on_path: tuple[str, ...]
    source: dict[str, Any]

    def env(self) -> dict[str, str]:
        """What the image's config gives every process (HOME for root, as the runtime sets it)."""
        return {"PATH": self.path, "LD_LIBRARY_PATH": self.ld_library_path, "HOME": "/root"}

    def on_path(self, tool: str) -> bool:
        return str(Path(self.tools[tool]).parent) in self.path.split(":")


@cache
def images() -> dict[str, ImageEnv]:
    out: dict[str, ImageEnv] = {}
    for f in sorted(IMAGES.glob("*.yaml")):
        d = yaml.safe_load(f.read_text())
        out[d["image"]] = ImageEnv(
            image=d["image"],
            user=d["user"]["name"],
            path=d["env"]["PATH"]["value"],
            ld_library_path=d["env"]["LD_LIBRARY_PATH"]["value"],
            tools={k: v["path"] for k, v in d["tools"].items()},
            not_on_path=tuple(d.get("not_on_path", [])),
            source=d["dockerfile"],
        )
    return out


def of(image: str) -> ImageEnv:
    found = images().get(image)
    if found is None:
        raise KeyError(f"{image}: no fake of this image in tests/fixtures/images/; add one from its Dockerfile")
    return found
