"""The import graph of ``weir`` runs one way: no cycle between packages, and the runtime
never imports the API (``weir.datastream``).

Computed from the source with ``ast`` (imports inside functions count too), over
engine/, harness/ and workloads/ as the package ``weir`` maps them. A package is
``weir.<first part>``; top-level modules (``weir.cli``, ``weir.errors``, ...) are their
own packages.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = {"engine": "weir", "harness": "weir.harness", "workloads": "weir.workloads"}
RUNTIME = (
    "weir.core",
    "weir.graph",
    "weir.keys",
    "weir.codec",
    "weir.network",
    "weir.time",
    "weir.state",
    "weir.checkpoint",
    "weir.operators",
    "weir.task",
    "weir.cluster",
    "weir.loop",
)


def _modules() -> dict[str, Path]:
    modules = {}
    for folder, name in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = [p for p in path.relative_to(ROOT / folder).with_suffix("").parts if p != "__init__"]
            modules[".".join([name, *parts])] = path
    return modules


def _imports() -> dict[str, set[str]]:
    """Module -> the weir modules it imports (``from a import b`` counts ``a.b`` when it is one)."""
    modules = _modules()
    edges: dict[str, set[str]] = defaultdict(set)
    for module, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                continue
            edges[module].update(t for t in targets if t in modules and t != module)
    return edges


def package(module: str) -> str:
    return ".".join(module.split(".")[:2])


def _package_edges() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = defaultdict(set)
    for a, targets in _imports().items():
        for b in targets:
            if package(a) != package(b):
                edges[package(a)].add(package(b))
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one package (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
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

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_spans_packages() -> None:
    assert _cycles(_package_edges()) == []


def test_the_runtime_never_imports_the_api() -> None:
    offenders = sorted(
        f"{a} imports {b}"
        for a, targets in _imports().items()
        if package(a) in RUNTIME
        for b in targets
        if package(b) == "weir.datastream"
    )
    assert offenders == []


def test_core_imports_only_common_and_errors() -> None:
    below = {"weir.common", "weir.errors"}
    assert _package_edges().get("weir.core", set()) <= below


def test_the_cycle_finder_sees_a_cycle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert _cycles(edges) == [["a", "b", "c"]]
