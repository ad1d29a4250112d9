"""The store imports LanceDB without pandas, and pandas data still converts when a caller uses it."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO

PROGRAM = """
import json, sys
import mcp_analysis.store.database, mcp_analysis.store.maintenance
loaded_with_store = "pandas" in sys.modules
import pandas as pd
import pyarrow as pa
frame = pd.DataFrame({"n": [1, 2, 3], "s": ["a", "b", "c"]})
print(json.dumps({
    "pandas_loaded_with_store": loaded_with_store,
    "from_pandas": pa.Table.from_pandas(frame).column("n").to_pylist(),
    "table_of_frame": pa.table(frame).column("s").to_pylist(),
    "series_type": str(pa.array(pd.Series([1, 2])).type),
    "to_pandas": pa.table({"x": [4, 5]}).to_pandas()["x"].tolist(),
}))
"""


def test_store_leaves_pandas_unloaded_and_pandas_conversions_still_work() -> None:
    run = subprocess.run([sys.executable, "-c", PROGRAM], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report == {
        "pandas_loaded_with_store": False,
        "from_pandas": [1, 2, 3],
        "table_of_frame": ["a", "b", "c"],
        "series_type": "int64",
        "to_pandas": [4, 5],
    }
