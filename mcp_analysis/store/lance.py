"""LanceDB, imported without pandas: the one way the store imports `lancedb`.

pyarrow's dataset module asks, while it initialises, whether pandas is installed, and so
imports it (~35 MB of memory, a third of LanceDB's import time) though nothing here uses
pandas. Importing it with pandas hidden lets pyarrow note "no pandas" for that one check;
pyarrow tries again whenever something really converts pandas data (``Table.from_pandas``,
``to_pandas``), and LanceDB imports pandas lazily itself, so both keep working when a
caller uses pandas (tests/store/test_lance_import.py).
"""

from __future__ import annotations

import sys
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from typing import Any


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


_import_dataset_without_pandas()

import lancedb  # noqa: E402
from lancedb.index import FTS, BTree, HnswSq  # noqa: E402

__all__ = ["FTS", "BTree", "HnswSq", "lancedb"]
