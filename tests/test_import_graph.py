"""No import cycles in mcp_analysis, lazy (function-level) imports included.

The graph is read from the source (AST), so an import inside a function counts as much
as one at the top: a cycle there still makes "import X" depend on the order modules were
first imported in. Importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``, so a
module depends on what its packages import at their top level.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "mcp_analysis"


def _modules() -> dict[str, tuple[ast.Module, bool]]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        found[name] = (ast.parse(path.read_text(encoding="utf-8")), is_package)
    return found


def import_graph() -> dict[str, set[str]]:
    """Module -> the modules of ours that importing (or running) it may import."""
    modules = _modules()

    def known(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    edges: dict[str, set[str]] = {name: set() for name in modules}
    top_level: dict[str, set[str]] = {name: set() for name in modules}
    for name, (tree, is_package) in modules.items():
        for node in ast.walk(tree):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = name if is_package else name.rpartition(".")[0]
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                # `from pkg import sub` imports the submodule; `from mod import name` needs mod itself.
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                module = known(target) if target.startswith("mcp_analysis") else None
                if module and module != name:
                    edges[name].add(module)
                    if node in tree.body:
                        top_level[name].add(module)
    for name in modules:
        parent = name
        while "." in parent:
            parent = parent.rpartition(".")[0]
            edges[name] |= top_level.get(parent, set()) - {name}
    return edges


def cycles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_the_walk_sees_lazy_imports_and_package_inits() -> None:
    graph = import_graph()
    assert "mcp_analysis.haiku.config_file" in graph["mcp_analysis.config"]  # a top-level import
    assert "mcp_analysis.yaml_files" in graph["mcp_analysis.config"]  # a function-level one
    assert "mcp_analysis.embed.onnx_model" in graph["mcp_analysis.embed.embedder"]
    # A made-up lazy cycle is found: a -> b at the top, b -> a inside a function.
    assert cycles({"a": {"b"}, "b": {"a"}, "c": {"a"}}) == [{"a", "b"}]


def test_the_package_has_no_import_cycle() -> None:
    assert [sorted(c) for c in cycles(import_graph())] == []


# Each layer and what it must never import (data flows down: cli -> server/agent -> tooling ->
# session -> sandbox -> corpus/search -> store -> ingest/embed -> config).
UPPER = {
    "mcp_analysis.agent": ("mcp_analysis.server", "mcp_analysis.cli"),
    "mcp_analysis.tooling": ("mcp_analysis.server", "mcp_analysis.agent", "mcp_analysis.cli"),
    "mcp_analysis.session": ("mcp_analysis.server", "mcp_analysis.agent", "mcp_analysis.tooling", "mcp_analysis.cli"),
    "mcp_analysis.sandbox": ("mcp_analysis.server", "mcp_analysis.agent", "mcp_analysis.session", "mcp_analysis.cli"),
    "mcp_analysis.search": (
        "mcp_analysis.server",
        "mcp_analysis.agent",
        "mcp_analysis.session",
        "mcp_analysis.sandbox",
    ),
    "mcp_analysis.store": (
        "mcp_analysis.server",
        "mcp_analysis.agent",
        "mcp_analysis.session",
        "mcp_analysis.sandbox",
        "mcp_analysis.search",
        "mcp_analysis.corpus",
    ),
    "mcp_analysis.embed": ("mcp_analysis.server", "mcp_analysis.session", "mcp_analysis.sandbox", "mcp_analysis.store"),
}


def test_lower_layers_never_import_upper_ones() -> None:
    wrong = [
        f"{module} -> {target}"
        for module, targets in import_graph().items()
        for layer, forbidden in UPPER.items()
        if module == layer or module.startswith(layer + ".")
        for target in targets
        if target.startswith(forbidden)
    ]
    assert wrong == []


def test_search_and_ingest_leave_lancedb_to_the_store() -> None:
    """search/ and ingest/ never import LanceDB (nor store/lance.py): the store owns every query."""
    wrong = []
    for path in [*(PACKAGE / "search").rglob("*.py"), *(PACKAGE / "ingest").rglob("*.py")]:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            wrong += [
                f"{path.name}: {n}" for n in names if n.split(".")[0] == "lancedb" or n == "mcp_analysis.store.lance"
            ]
    assert wrong == []
