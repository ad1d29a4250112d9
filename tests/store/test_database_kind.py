"""Upper layers never learn which kind of database they read: the store identifies it and hides it.

A database is identified by its settings row (store/identify.py) and read through a layout
adapter the `Store` keeps private; what legitimately differs between kinds is asked as a
property (`read_only`, `ids_are_immutable`). These tests hold the door shut: only three
modules import haiku.rag support, and nothing outside the store touches its internals.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

from mcp_analysis.store.database import Store
from tests.haiku_db import copy_fixture

pytestmark = pytest.mark.anyio

PACKAGE = Path(__file__).resolve().parent.parent.parent / "mcp_analysis"
# The only modules that may import mcp_analysis.haiku (besides the package itself).
HAIKU_DOORS = {
    "mcp_analysis/config.py",  # a haiku.rag.yaml is a config source
    "mcp_analysis/store/haiku_layout.py",  # a haiku.rag database's query embedder
    "mcp_analysis/agent/skill.py",  # haiku.rag's skill API
}
# Store modules the layers above must not import: identification and the layouts are the store's own.
STORE_PRIVATE = {"mcp_analysis.store.identify", "mcp_analysis.store.layout", "mcp_analysis.store.base"}


@functools.cache
def _sources() -> dict[str, ast.Module]:
    root = PACKAGE.parent
    return {str(p.relative_to(root)): ast.parse(p.read_text(encoding="utf-8")) for p in PACKAGE.rglob("*.py")}


def _imported(tree: ast.Module) -> set[str]:
    """Every module named by an import anywhere in the module (functions included)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def _haiku_importers(sources: dict[str, ast.Module]) -> set[str]:
    return {
        path
        for path, tree in sources.items()
        if not path.startswith("mcp_analysis/haiku/")
        and any(name == "mcp_analysis.haiku" or name.startswith("mcp_analysis.haiku.") for name in _imported(tree))
    }


def _store_private_importers(sources: dict[str, ast.Module]) -> dict[str, list[str]]:
    return {
        path: sorted(_imported(tree) & STORE_PRIVATE)
        for path, tree in sources.items()
        if not path.startswith(("mcp_analysis/store/", "mcp_analysis/haiku/")) and _imported(tree) & STORE_PRIVATE
    }


SDK_INTERNALS = "mcp_analysis/server/sdk_compat.py"  # the one module that may touch the SDK's privates


# The standard library's own names that start with an underscore and are meant to be called: the
# CLI ends a finished command with them (cli/app.py `_end`).
STDLIB_UNDERSCORED = {"os._exit", "atexit._run_exitfuncs"}


def _private_reaches(sources: dict[str, ast.Module]) -> list[str]:
    """Private attributes (`x._name`) read on anything but `self`/`cls`/`super()` (a subclass calls
    its own base's steps), outside the store."""
    return [
        f"{path}:{node.lineno} {ast.unparse(node)}"
        for path, tree in sources.items()
        if not path.startswith("mcp_analysis/store/") and path != SDK_INTERNALS
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
        and not (isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == "super")
        and ast.unparse(node) not in STDLIB_UNDERSCORED
    ]


def test_only_three_doors_import_haiku_rag_support() -> None:
    assert _haiku_importers(_sources()) == HAIKU_DOORS


def test_nothing_above_the_store_imports_its_identification_or_layouts() -> None:
    assert _store_private_importers(_sources()) == {}


def test_no_module_outside_the_store_touches_private_attributes_of_other_objects() -> None:
    """`store._layout`, `store._connection`, `kb._search_slots`...: upper layers ask public names only."""
    assert _private_reaches(_sources()) == []


def test_the_checks_catch_an_offender() -> None:
    offender = ast.parse(
        "def search(kb):\n"
        "    from mcp_analysis.haiku.embedders import unavailable\n"
        "    from mcp_analysis.store.layout import OwnLayout\n"
        "    return kb.store._layout, self._fine, kb.__class__, super()._step, make()._layout\n"
    )
    sources = {"mcp_analysis/corpus.py": offender, "mcp_analysis/store/reads.py": offender}
    assert _haiku_importers(sources) == {"mcp_analysis/corpus.py", "mcp_analysis/store/reads.py"}
    assert _store_private_importers(sources) == {"mcp_analysis/corpus.py": ["mcp_analysis.store.layout"]}
    assert _private_reaches(sources) == [
        "mcp_analysis/corpus.py:4 kb.store._layout",
        "mcp_analysis/corpus.py:4 make()._layout",
    ]


async def test_each_kind_is_told_by_its_settings_row_and_answers_the_same_questions(tmp_path: Path) -> None:
    empty = await Store.open(tmp_path / "new.lancedb", create=True)
    try:  # no settings row yet: a new knowledge base of ours, writable
        assert empty.settings is None
        assert (empty.read_only, empty.ids_are_immutable) == (False, True)
        await empty.initialize("onnx:all-MiniLM-L6-v2", 384)
    finally:
        empty.close()
    ours = await Store.open(tmp_path / "new.lancedb")
    try:
        assert ours.settings is not None and (ours.settings.origin, ours.settings.embedder) == (
            "mcp-analysis",
            "onnx:all-MiniLM-L6-v2",
        )
        assert (ours.read_only, ours.ids_are_immutable, ours.describe()) == (False, True, "mcp-analysis knowledge base")
        ours.check_writable()  # does not raise
    finally:
        ours.close()
    theirs = await Store.open(copy_fixture(tmp_path / "haiku.lancedb"))
    try:
        assert theirs.settings is not None and theirs.settings.origin == "haiku.rag"
        assert (theirs.read_only, theirs.ids_are_immutable) == (True, False)
        assert theirs.describe() == "haiku.rag 0.101.1 knowledge base"
    finally:
        theirs.close()
