"""LanceDB, imported without pandas or its namespace client: the one way the store imports `lancedb`.

pyarrow's dataset module asks, while it initialises, whether pandas is installed, and so
imports it (~35 MB of memory, a third of LanceDB's import time) though nothing here uses
pandas. Importing it with pandas hidden lets pyarrow note "no pandas" for that one check;
pyarrow tries again whenever something really converts pandas data (``Table.from_pandas``,
``to_pandas``), and LanceDB imports pandas lazily itself, so both keep working when a
caller uses pandas (tests/store/test_lance_import.py).

LanceDB's namespace client (~30 MB, half of LanceDB's import time) is imported only when
something uses it, such as a namespace or remote connection (see deferred_modules); a
directory or object-store connection never does.

Below Python 3.12 LanceDB marks the methods its connection classes override with the
``overrides`` package, whose decorator disassembles the caller's frame for each of the ~100
methods (a third of LanceDB's import time by `python -X importtime`); from 3.12 it uses ``typing.override``, a
marker. LanceDB is imported here as on 3.12 (`_overrides_as_on_python_312`); the ``overrides``
package itself is left as it is for anyone else.
"""

from __future__ import annotations

import sys
import typing
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

from mcp_analysis.store.deferred_modules import deferring

#: LanceDB's namespace client, which a directory or object-store connection never uses.
NAMESPACE_CLIENT = ("lance_namespace", "lance_namespace_urllib3_client")


class _PandasHidden(MetaPathFinder):
    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if name == "pandas":
            raise ModuleNotFoundError("pandas is not imported with pyarrow's dataset module", name=name)
        return None


def _import_dataset_without_pandas() -> None:
    if "pyarrow.dataset" in sys.modules or "pandas" in sys.modules:
        return
    hidden = _PandasHidden()
    sys.meta_path.insert(0, hidden)
    try:
        import pyarrow.dataset  # noqa: F401
    finally:
        sys.meta_path.remove(hidden)


def _mark_override(method: Any) -> Any:
    """What ``typing.override`` does on Python 3.12: mark the method, check nothing."""
    with suppress(AttributeError, TypeError):
        method.__override__ = True
    return method


class _EnforceNothing:
    """LanceDB's own stand-in for ``overrides.EnforceOverrides`` on Python 3.12+."""


@contextmanager
def _overrides_as_on_python_312() -> Iterator[None]:
    """While LanceDB is imported, ``from overrides import ...`` gets what LanceDB uses on 3.12."""
    if sys.version_info >= (3, 12):
        yield
        return
    shim = ModuleType("overrides")
    shim.override = _mark_override  # type: ignore[attr-defined]
    shim.EnforceOverrides = _EnforceNothing  # type: ignore[attr-defined]
    shim.final = typing.final  # type: ignore[attr-defined]
    saved = sys.modules.get("overrides")
    sys.modules["overrides"] = shim
    try:
        yield
    finally:
        if saved is None:
            sys.modules.pop("overrides", None)
        else:
            sys.modules["overrides"] = saved


_import_dataset_without_pandas()

with _overrides_as_on_python_312(), deferring(NAMESPACE_CLIENT, real=("lance_namespace.errors",)):
    import lancedb
    from lancedb.expr import col
    from lancedb.index import FTS, Bitmap, BTree, HnswSq


async def table_names(db: lancedb.AsyncConnection) -> set[str]:
    """The names of the tables in a connection's root namespace, every page.

    The same listing as ``(await db.list_tables()).tables``, read from the dict that
    ``list_tables`` wraps in the namespace client's response model, so that listing tables
    does not import the namespace client (tests/store/test_lance_import.py compares the two).
    """
    names: set[str] = set()
    token: str | None = None
    while True:
        page = await db._inner.list_tables(namespace_path=[], page_token=token, limit=None)
        names.update(page["tables"])
        token = page.get("page_token")
        if not token:
            return names


__all__ = ["FTS", "BTree", "Bitmap", "HnswSq", "col", "lancedb", "table_names"]
