"""The package layout shows the plan (docs/layout.md): moved modules keep their old import paths for one
release with a DeprecationWarning, and no function grows past what a reader can hold."""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from neuronkit._moved import MOVED

ROOT = Path(__file__).resolve().parents[2]
MAX_FUNCTION_LINES = 120


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_import_path_still_works_and_warns(old: str) -> None:
    # A fresh interpreter: this process may have imported the old path already (the warning fires once).
    code = (
        "import warnings, importlib\n"
        "with warnings.catch_warnings(record=True) as seen:\n"
        "    warnings.simplefilter('always')\n"
        f"    old = importlib.import_module({old!r})\n"
        f"new = importlib.import_module({MOVED[old]!r})\n"
        "assert old is new, (old, new)\n"
        "assert any(issubclass(w.category, DeprecationWarning) and "
        + repr(MOVED[old])
        + " in str(w.message) for w in seen), seen\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT)


def test_pilot_jobs_keep_importing_the_reporter_from_the_old_path() -> None:
    # Pilot job images import `from neuronkit.pilot_metrics import StepReporter` (docs/adoption.md).
    done = subprocess.run(
        [sys.executable, "-W", "always", "-c", "from neuronkit.pilot_metrics import StepReporter; print(StepReporter.__name__)"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    )
    assert done.stdout.strip() == "StepReporter" and "DeprecationWarning" in done.stderr


def test_the_kit_itself_imports_no_old_path() -> None:
    olds = {o.rpartition(".")[2] for o in MOVED}
    offenders = []
    for path in [*ROOT.joinpath("neuronkit").rglob("*.py"), ROOT / "app.py"]:
        if path.stem in olds and path.parent.name == "neuronkit":
            continue  # the deprecated modules themselves
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in MOVED:
                offenders.append(f"{path}:{node.lineno} imports {node.module}")
            if isinstance(node, ast.ImportFrom) and node.module == "neuronkit":
                offenders += [
                    f"{path}:{node.lineno} imports neuronkit.{a.name}" for a in node.names if f"neuronkit.{a.name}" in MOVED
                ]
            if isinstance(node, ast.Import):
                offenders += [f"{path}:{node.lineno} imports {a.name}" for a in node.names if a.name in MOVED]
    assert not offenders


def test_no_function_is_longer_than_the_limit() -> None:
    too_long = []
    for path in ROOT.joinpath("neuronkit").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = node.end_lineno - node.lineno + 1  # type: ignore[operator]
                if lines > MAX_FUNCTION_LINES:
                    too_long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} has {lines} lines")
    assert not too_long, f"split these into named steps (limit {MAX_FUNCTION_LINES} lines): {too_long}"


def test_the_limit_test_would_see_a_long_function(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES + 1))
    node = ast.parse(f"def f():\n{body}\n").body[0]
    assert node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES  # type: ignore[attr-defined,operator]


def test_the_lazy_construct_exports_match_what_type_checkers_see() -> None:
    """neuronkit.constructs resolves its names on first use (_EXPORTS) and shows type checkers the same names under
    TYPE_CHECKING: every name comes from the same module (and attribute) in both, and each one resolves."""
    import neuronkit.constructs as constructs

    tree = ast.parse(Path(constructs.__file__).read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If) and getattr(n.test, "id", None) == "TYPE_CHECKING")
    seen = {
        (alias.asname or alias.name): (node.module, alias.name)
        for node in block.body
        if isinstance(node, ast.ImportFrom)
        for alias in node.names
    }
    lazy = {name: (module, constructs._RENAMED.get(name, name)) for name, module in constructs._EXPORTS.items()}
    assert seen == lazy
    assert sorted(constructs.__all__) == sorted(lazy)
    for name, (module, attribute) in lazy.items():
        assert getattr(constructs, name) is getattr(importlib.import_module(module), attribute), name
