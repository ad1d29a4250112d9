"""No import cycles in mcp_analysis, lazy (function-level) imports included.

The graph is read from the source (AST), so an import inside a function counts as much
as one at the top: a cycle there still makes "import X" depend on the order modules were
first imported in. Importing ``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``, so a
module depends on what its packages import at their top level.
"""

from __future__ import annotations

import ast
import functools
import shutil
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "mcp_analysis"


def _modules(package: Path = PACKAGE) -> dict[str, tuple[ast.Module, bool]]:
    found = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        is_package = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_package else parts)
        found[name] = (ast.parse(path.read_text(encoding="utf-8")), is_package)
    return found


@functools.cache
def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the modules of ours that importing (or running) it may import (read once per
    package: callers must not change it)."""
    modules = _modules(package)

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


ARCHITECTURE = PACKAGE.parent / "docs" / "architecture.md"


def drawn_layers(text: str) -> list[list[str]]:
    """The layers drawn in the first code block of docs/architecture.md, top first: per line, the
    entries before its `──` (`cli/` a package, `corpus.py` or `ingest/limits.py` a module)."""
    block = text.split("```\n", 1)[1].split("```", 1)[0]
    layers = []
    for line in block.splitlines():
        names = line.split("──", 1)[0].replace(",", " ").split()
        layers.append([n for n in names if n.endswith(("/", ".py"))])
    return [layer for layer in layers if layer]


def _entry_module(entry: str) -> str:
    path = entry.rstrip("/").removesuffix(".py").removesuffix("__init__").rstrip("/")
    return ".".join(["mcp_analysis", *path.split("/")]) if path else "mcp_analysis"


def layer_of(modules: set[str], layers: list[list[str]]) -> dict[str, tuple[int, str]]:
    """Module -> (its layer, the entry it belongs to): the most specific entry naming it."""
    entries = {_entry_module(entry): (index, entry) for index, layer in enumerate(layers) for entry in layer}
    found = {}
    for module in modules:
        name = module
        while name not in entries and "." in name:
            name = name.rpartition(".")[0]
        if name in entries and (name != "mcp_analysis" or module == name):
            found[module] = entries[name]
    return found


def upward_imports(graph: dict[str, set[str]], layers: list[list[str]]) -> list[str]:
    """Every import from a module to one in a layer drawn above it."""
    where = layer_of(set(graph).union(*graph.values()), layers)
    return sorted(
        f"{module} ({where[module][1]}) -> {target} ({where[target][1]})"
        for module, targets in graph.items()
        for target in targets
        if module in where and target in where and where[target][0] < where[module][0]
    )


def test_the_drawing_places_every_module_once() -> None:
    layers = drawn_layers(ARCHITECTURE.read_text(encoding="utf-8"))
    entries = [entry for layer in layers for entry in layer]
    assert len(entries) == len(set(entries))
    assert [e for e in entries if not (PACKAGE / e).exists()] == []
    graph = import_graph()
    assert sorted(set(graph) - set(layer_of(set(graph), layers))) == []


def test_lower_layers_never_import_upper_ones() -> None:
    layers = drawn_layers(ARCHITECTURE.read_text(encoding="utf-8"))
    assert upward_imports(import_graph(), layers) == []


def test_the_two_front_doors_never_import_each_other() -> None:
    graph = import_graph()
    server = {m for m in graph if m.startswith("mcp_analysis.server")}
    agent = {m for m in graph if m.startswith("mcp_analysis.agent")}
    assert [
        f"{m} -> {t}"
        for m in server | agent
        for t in graph[m]
        if (m in server) != (t in server) and t in server | agent
    ] == []


def test_a_lower_module_importing_an_upper_one_is_caught(tmp_path: Path) -> None:
    """The check reads real sources: a copy of the package where the store imports the server fails it."""
    copy = tmp_path / "mcp_analysis"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("*.pyc", "__pycache__", "data", "documents"))
    reads = copy / "store" / "reads.py"
    reads.write_text(reads.read_text(encoding="utf-8") + "\n\ndef late():\n    from mcp_analysis.server import app\n")
    layers = drawn_layers(ARCHITECTURE.read_text(encoding="utf-8"))
    assert upward_imports(import_graph(copy), layers) == [
        "mcp_analysis.store.reads (store/) -> mcp_analysis.server.app (server/)"
    ]
    assert upward_imports(import_graph(), layers) == []
    # A module left off the drawing is named, and a made-up drawing's order is what counts.
    assert "mcp_analysis.charts.spec" not in layer_of({"mcp_analysis.charts.spec"}, [["store/"], ["cli/"]])
    assert upward_imports({"mcp_analysis.cli.app": {"mcp_analysis.store.reads"}}, [["store/"], ["cli/"]]) == [
        "mcp_analysis.cli.app (cli/) -> mcp_analysis.store.reads (store/)"
    ]


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


def test_search_builds_no_query_of_the_store() -> None:
    """search/ asks the store for candidates and item windows; it writes no SQL of the store's
    columns (store/filters.py's quoting stays below it, in the store)."""
    wrong = [
        f"{path.name}: {node.module}"
        for path in (PACKAGE / "search").rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ImportFrom) and node.module == "mcp_analysis.store.filters"
    ]
    assert wrong == []
