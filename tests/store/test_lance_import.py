"""The store imports LanceDB without pandas or its namespace client; both still work when a caller uses them."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from tests.conftest import REPO

IMPORTS_LANCEDB = re.compile(r"^\s*(from|import)\s+lancedb\b", re.MULTILINE)


def test_only_the_store_lance_module_imports_lancedb() -> None:
    """Any other module importing LanceDB first would load pandas and the namespace client with it."""
    importers = sorted(
        str(path.relative_to(REPO))
        for path in (REPO / "mcp_analysis").rglob("*.py")
        if IMPORTS_LANCEDB.search(path.read_text(encoding="utf-8"))
    )
    assert importers == ["mcp_analysis/store/lance.py"]


PROGRAM = """
import asyncio, json, sys, tempfile
import mcp_analysis.corpus, mcp_analysis.session.manager  # what a starting server imports first
pandas_loaded_with_store = "pandas" in sys.modules
from mcp_analysis.store.database import Store
from mcp_analysis.store.deferred_modules import is_deferred
from mcp_analysis.store.lance import lancedb, table_names
import pyarrow as pa

report = {"deferred_with_store": is_deferred("lance_namespace") and is_deferred("lance_namespace_urllib3_client"),
          "rest_api_loaded_with_store": "lance_namespace_urllib3_client.api" in sys.modules}

async def directory_connection():
    await Store.open(tempfile.mkdtemp() + "/kb", create=True)
    report["deferred_after_store_open"] = is_deferred("lance_namespace")
    db = await lancedb.connect_async(tempfile.mkdtemp())
    for name in ("a", "b"):
        await db.create_table(name, pa.table({"x": [1]}))
    report["table_names"] = sorted(await table_names(db))
    report["deferred_after_listing"] = is_deferred("lance_namespace")
    report["public_listing"] = sorted((await db.list_tables()).tables)  # loads the real client

asyncio.run(directory_connection())
db = lancedb.connect_namespace("dir", {"root": tempfile.mkdtemp()})
db.create_table("t", pa.table({"x": [1, 2]}))
listing = db.list_tables()
import lance_namespace, lance_namespace_urllib3_client
from lance_namespace.errors import TableNotFoundError
try:
    db.open_table("missing")
except TableNotFoundError as exc:
    report["missing_table"] = type(exc).__name__
report["namespace_listing"] = listing.tables
report["response_is_real_model"] = isinstance(listing, lance_namespace.ListTablesResponse)
report["client_whole"] = hasattr(lance_namespace_urllib3_client, "TableApi")
report["deferred_at_end"] = is_deferred("lance_namespace")

import pandas as pd
frame = pd.DataFrame({"n": [1, 2, 3], "s": ["a", "b", "c"]})
report["pandas"] = {
    "loaded_with_store": pandas_loaded_with_store,
    "from_pandas": pa.Table.from_pandas(frame).column("n").to_pylist(),
    "table_of_frame": pa.table(frame).column("s").to_pylist(),
    "series_type": str(pa.array(pd.Series([1, 2])).type),
    "to_pandas": pa.table({"x": [4, 5]}).to_pandas()["x"].tolist(),
}
print(json.dumps(report))
"""


def test_store_leaves_pandas_and_the_namespace_client_unloaded_and_both_still_work_when_used() -> None:
    """A directory store loads neither pandas nor LanceDB's namespace client; a caller using either gets all of it."""
    run = subprocess.run([sys.executable, "-c", PROGRAM], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report == {
        "deferred_with_store": True,
        "rest_api_loaded_with_store": False,
        "deferred_after_store_open": True,
        "table_names": ["a", "b"],
        "deferred_after_listing": True,
        "public_listing": ["a", "b"],
        "missing_table": "TableNotFoundError",
        "namespace_listing": ["t"],
        "response_is_real_model": True,
        "client_whole": True,
        "deferred_at_end": False,
        "pandas": {
            "loaded_with_store": False,
            "from_pandas": [1, 2, 3],
            "table_of_frame": ["a", "b", "c"],
            "series_type": "int64",
            "to_pandas": [4, 5],
        },
    }


OVERRIDES_PROGRAM = """
import json, sys
import mcp_analysis.store.lance
from lancedb.db import LanceDBConnection
report = {"marked": getattr(LanceDBConnection.open_table, "__override__", False),
          "package_loaded_by_store": "overrides" in sys.modules}
import overrides
report["real_package"] = getattr(overrides, "__file__", None) is not None  # not a stand-in module
try:
    class Base:
        pass
    class Child(Base):
        @overrides.override
        def nowhere_in_base(self):
            pass
    report["real_check"] = "none"
except TypeError as exc:
    report["real_check"] = "TypeError"
print(json.dumps(report))
"""


def test_lancedb_is_imported_as_on_python_312_and_the_overrides_package_stays_real() -> None:
    """LanceDB's methods carry the override mark without the ``overrides`` package checking them at
    import; anyone importing that package later gets the real one, which still checks."""
    run = subprocess.run(
        [sys.executable, "-c", OVERRIDES_PROGRAM], cwd=REPO, capture_output=True, text=True, timeout=120
    )
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {
        "marked": True,
        "package_loaded_by_store": False,
        "real_package": True,
        "real_check": "TypeError",
    }
