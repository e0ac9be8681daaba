"""docs/constructs.md: every python block is a complete program, run in a clean subprocess as a user would.

The blocks run one after another in one process (each makes its own App), with no cdk.json, no injected
context and CDK's default feature flags, so a construct that needs one of the kit's flags fails here.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from tests.conftest import ROOT, clean_environment

DOC = ROOT / "docs" / "constructs.md"
RUNNER = """
import json, sys, traceback
blocks = json.load(open(sys.argv[1]))
failed = []
for i, code in enumerate(blocks):
    try:
        exec(compile(code, f"docs/constructs.md block {i + 1}", "exec"), {"__name__": "__main__"})
    except BaseException:
        failed.append(i + 1)
        traceback.print_exc()
print("FAILED", failed)
sys.exit(1 if failed else 0)
"""


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), flags=re.S)


def test_every_public_construct_has_a_runnable_example() -> None:
    from neuronkit import constructs

    text = "\n".join(python_blocks()) + (ROOT / "examples" / "my_inference_app.py").read_text()
    classes = [
        n for n in constructs.__all__ if isinstance(getattr(constructs, n), type) and hasattr(getattr(constructs, n), "node")
    ]
    missing = [n for n in classes if not re.search(rf"\b{n}\(", text)]
    assert not missing, f"constructs without a runnable example in docs/constructs.md: {missing}"


def test_the_examples_run_in_a_clean_environment(tmp_path: Path) -> None:
    blocks = python_blocks()
    assert len(blocks) >= 10
    (tmp_path / "blocks.json").write_text(json.dumps(blocks))
    (tmp_path / "runner.py").write_text(RUNNER)
    env = clean_environment(tmp_path)
    done = subprocess.run(
        [sys.executable, "runner.py", "blocks.json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
