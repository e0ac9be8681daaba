"""cfn-lint over every synthesized template: zero errors and zero warnings (no rule is ignored)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.conftest import Synth


def test_cfn_lint_is_clean(synth: Synth) -> None:
    files = sorted(str(p) for p in synth.outdir.glob("*.template.json"))
    assert len(files) == len(synth.templates)
    result = subprocess.run(
        [str(Path(sys.executable).parent / "cfn-lint"), "--format", "parseable", *files], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""
