"""cfn-lint over every synthesized template, against its environment's region: zero errors and zero warnings
(no rule is ignored). The region matters: cfn-lint checks instance types and other values per region, and
defaults to us-east-1."""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from tests.conftest import Synth
from tests.project import environment_of, environments


def test_cfn_lint_is_clean(synth: Synth) -> None:
    regions = {name: env.region for name, env in environments().items()}
    files = sorted(synth.outdir.glob("*.template.json"))
    assert len(files) == len(synth.templates)
    by_region: dict[str, list[str]] = defaultdict(list)
    for path in files:
        by_region[regions[environment_of(path.name.removesuffix(".template.json"))]].append(str(path))
    assert set(by_region) == set(regions.values())
    for region, paths in sorted(by_region.items()):
        result = subprocess.run(
            [str(Path(sys.executable).parent / "cfn-lint"), "--format", "parseable", "--regions", region, "--", *paths],
            capture_output=True,
            text=True,
        )
        assert result.returncode == 0, result.stdout + result.stderr
        assert result.stdout.strip() == ""
