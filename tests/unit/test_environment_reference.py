"""docs/environment-file.md documents every key of the current schema, and nothing else.

The doc is generated (`make docs`); these checks are structural so that they hold whatever example files a
user keeps: every key path of the schema has its section with its description, no section names a key the
schema no longer has, and every example parses as YAML.
"""

from __future__ import annotations

import re

import yaml

from neuronkit.config import json_schema
from neuronkit.config.reference import entries, render
from tests.conftest import ROOT

DOC = ROOT / "docs" / "environment-file.md"


def _sections() -> dict[str, str]:
    text = DOC.read_text()
    parts = re.split(r"^#{2,6} `([^`]+)`\n", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


def test_every_key_has_a_section_and_every_section_a_key() -> None:
    paths = [e.path for e in entries(json_schema())]
    assert len(paths) == len(set(paths))
    assert list(_sections()) == paths, "run `make docs` after changing the config models"


def test_the_walk_reaches_nested_lists_and_each_variant_of_a_union() -> None:
    paths = {e.path for e in entries(json_schema())}
    assert {
        "network.az_ids",
        "training[].capacity.reservation_ids",  # only in the capacity-block variant
        "training[].capacity.create",  # only in the odcr variant
        "inference[].model.s3_prefix",
        "monitoring.alarms.p99_latency_ms",
    } <= paths


def test_each_section_carries_its_description_type_and_example() -> None:
    sections = _sections()
    for e in entries(json_schema()):
        body = sections[e.path]
        if e.description:
            assert e.description in body, e.path
        assert f"type: {e.type}" in body, e.path
        for block in re.findall(r"```yaml\n(.*?)```", body, flags=re.S):
            data = yaml.safe_load(block)
            assert isinstance(data, dict) and list(data) == [e.path.rsplit(".", 1)[-1].removesuffix("[]")], e.path


def test_render_takes_examples_from_the_files_it_is_given(tmp_path) -> None:  # type: ignore[no-untyped-def]
    f = tmp_path / "mine.yaml"
    f.write_text("network:\n  az_ids: [usw2-az9]\n")
    text = render(json_schema(), [f], tmp_path)
    section = text.split("`network.az_ids`", 1)[1].split("\n#", 1)[0]
    assert "Example (from `mine.yaml`)" in section and "usw2-az9" in section
