"""The package layout shows the plan (docs/layout.md): no import cycle among the kit's modules, the paths removed in 0.3
are gone, and no function grows past what a reader can hold."""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MAX_FUNCTION_LINES = 120


# The module paths removed in 0.3 (CHANGELOG.md): each moved in 0.2 and kept a deprecated alias for one release.
REMOVED_IN_0_3 = {
    "neuronkit.summary": "neuronkit.reports.summary",
    "neuronkit.review": "neuronkit.reports.review",
    "neuronkit.cost": "neuronkit.reports.cost",
    "neuronkit.pools": "neuronkit.reports.pools",
    "neuronkit.assess": "neuronkit.adoption.assess",
    "neuronkit.pilot": "neuronkit.adoption.pilot",
    "neuronkit.pilot_metrics": "neuronkit.adoption.pilot_metrics",
    "neuronkit.preflight": "neuronkit.account.preflight",
    "neuronkit.compliance": "neuronkit.constructs.compliance",
    "neuronkit.addressing": "neuronkit.config.addressing",
    "neuronkit.serving": "neuronkit.catalog.serving",
}


def test_the_removed_paths_are_gone_and_the_changelog_names_each_replacement() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    for old, new in REMOVED_IN_0_3.items():
        assert importlib.util.find_spec(old) is None, f"{old} still exists"
        assert importlib.util.find_spec(new) is not None, f"{new} is missing"
        assert f"`{old}`" in changelog and f"`{new}`" in changelog, f"CHANGELOG.md does not name {old} -> {new}"


def _module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(package: Path, root: Path = ROOT) -> dict[str, set[str]]:
    """Module -> the kit's modules it imports, from the AST: every import at any depth (a function-level import
    still forms a cycle at run time), except those under ``if TYPE_CHECKING:``, which never run. ``from P import
    name`` counts as an import of ``P.name`` when that is a module, else of ``P``."""
    modules = {_module_name(p, root): p for p in package.rglob("*.py")}

    def owner(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(), filename=str(path))
        typing_only = {
            id(sub)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for sub in ast.walk(node)
        }
        deps: set[str | None] = set()
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.Import):
                deps |= {owner(a.name) for a in node.names if a.name.startswith("neuronkit")}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    source = ".".join([*base, *([node.module] if node.module else [])])
                else:
                    source = node.module or ""
                if source.startswith("neuronkit"):
                    deps |= {
                        owner(f"{source}.{a.name}") if f"{source}.{a.name}" in modules else owner(source) for a in node.names
                    }
        graph[name] = {d for d in deps if d and d != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_among_the_kits_modules() -> None:
    graph = import_graph(ROOT / "neuronkit")
    assert len(graph) > 100 and sum(map(len, graph.values())) > 200, "the walk found too few imports"
    assert cycles(graph) == []


def test_the_cycle_test_sees_a_cycle(tmp_path: Path) -> None:
    """A function-level import closing a loop is a cycle; one under TYPE_CHECKING is not."""
    package = tmp_path / "neuronkit"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "a.py").write_text("from neuronkit.sub.b import X\n")
    (package / "sub" / "b.py").write_text("def f():\n    from neuronkit.sub import a\n")
    (package / "sub" / "c.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from neuronkit.sub.a import Y\n"
    )
    graph = import_graph(package, root=tmp_path)
    assert cycles(graph) == [["neuronkit.sub.a", "neuronkit.sub.b"]]
    assert graph["neuronkit.sub.c"] == set()


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
