"""The release matrix's image tags against the catalog's dated record of published tags (catalog/images.py), and
the record's refresh against recorded registry answers (tests/fixtures/ecr-public)."""

from __future__ import annotations

import datetime as dt
import json
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from neuronkit.catalog import images, releases
from tests.conftest import ROOT

FIXTURES = ROOT / "tests" / "fixtures" / "ecr-public"


def test_every_pinned_image_is_a_published_tag() -> None:
    pinned = images.pinned_images()
    assert len(pinned) >= 8  # the matrix pins containers for several releases, plus the GPU image
    assert images.missing() == []


def test_a_tag_that_was_never_published_is_caught() -> None:
    real = releases.release("2.28.1").container("vllm-serving")
    assert real is not None
    invented = real.replace("0.13.0", "0.13.9")
    assert images.missing([real, invented]) == [invented]


def test_the_record_is_dated_and_sourced() -> None:
    doc = images.record()
    assert dt.date.fromisoformat(doc["checked"]) <= dt.date.today() and doc["source"]


def _recorded(requests: list[str]) -> images.Fetch:
    def fetch(request: urllib.request.Request) -> tuple[dict[str, Any], dict[str, str]]:
        url = request.full_url
        requests.append(url)
        if "/token/" in url:
            return json.loads((FIXTURES / "token.json").read_text()), {}
        assert request.get_header("Authorization") == "Bearer eyJ0ZXN0IjoidG9rZW4ifQ=="
        if "last=" in url:
            return json.loads((FIXTURES / "tags-page-2.json").read_text()), {}
        link = '</v2/neuron/pytorch-inference-vllm-neuronx/tags/list?last=0.16.0-neuronx-py312-sdk2.29.1-ubuntu24.04&n=1000>; rel="next"'
        return json.loads((FIXTURES / "tags-page-1.json").read_text()), {"Link": link}

    return fetch


def test_tags_follow_the_registrys_pages() -> None:
    requests: list[str] = []
    found = images.tags("public.ecr.aws/neuron/pytorch-inference-vllm-neuronx", _recorded(requests))
    assert len(found) == 4 and "0.29.0.1.2.0-neuronx-py314-sdk2.33.0-ubuntu26.04" in found
    assert requests[0] == "https://public.ecr.aws/token/?scope=repository%3Aneuron/pytorch-inference-vllm-neuronx%3Apull"
    assert requests[1] == "https://public.ecr.aws/v2/neuron/pytorch-inference-vllm-neuronx/tags/list?n=1000"
    assert "last=0.16.0" in requests[2] and len(requests) == 3


def test_refresh_rewrites_the_record_with_the_registrys_answer_and_the_date(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "published_images.json"
    path.write_text(json.dumps({"repositories": {"public.ecr.aws/neuron/pytorch-inference-vllm-neuronx": []}}))
    monkeypatch.setattr(
        images,
        "pinned_images",
        lambda: ["public.ecr.aws/neuron/pytorch-inference-vllm-neuronx:0.13.0-neuronx-py312-sdk2.28.0-ubuntu24.04"],
    )
    doc = images.refresh(_recorded([]), today=dt.date(2026, 11, 25), path=path)
    assert doc["checked"] == "2026-11-25" and json.loads(path.read_text()) == doc
    assert len(doc["repositories"]["public.ecr.aws/neuron/pytorch-inference-vllm-neuronx"]) == 4
