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
    # One cfn-lint per region, all at once (each is single-threaded).
    runs = {
        region: subprocess.Popen(
            [str(Path(sys.executable).parent / "cfn-lint"), "--format", "parseable", "--regions", region, "--", *paths],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for region, paths in sorted(by_region.items())
    }
    for region, proc in runs.items():
        out, _ = proc.communicate()
        assert proc.returncode == 0 and out.strip() == "", f"{region}: {out[-3000:]}"


def test_the_only_acknowledged_rule_is_the_region_offering_of_a_pool_validate_warned_about(synth: Synth) -> None:
    """cfn-lint's region rule (its own recorded offerings) is acknowledged only on the launch templates of a
    Capacity Block or UltraServer cluster outside the catalog's offerings, each with the text `validate` warns."""
    from neuronkit.config.training import offering_warnings
    from neuronkit.constructs.compliance import CFN_LINT_REASONS, CFN_LINT_REGION_RULE

    expected = {
        name: {f"{key}: {line}" for key, line in offering_warnings(env.region, list(env.training))}
        for name, env in environments().items()
    }
    assert any(expected.values()), "no file has a block outside the offerings: this test would check nothing"
    found: dict[str, set[str]] = defaultdict(set)
    for stack, template in synth.templates.items():
        for lid, resource in template["Resources"].items():
            metadata = resource.get("Metadata") or {}
            if "cfn-lint" not in metadata:
                continue
            assert metadata["cfn-lint"] == {"config": {"ignore_checks": [CFN_LINT_REGION_RULE]}}, (stack, lid)
            assert resource["Type"] == "AWS::EC2::LaunchTemplate", (stack, lid)
            found[environment_of(stack)].add(metadata[CFN_LINT_REASONS][CFN_LINT_REGION_RULE])
    assert {k: v for k, v in found.items() if v} == {k: v for k, v in expected.items() if v}
