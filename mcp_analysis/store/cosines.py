"""A query's unit vector and the exact cosine of rows' vectors to it: every leg's score is the same measure."""

from __future__ import annotations

from typing import Any

import numpy as np


def unit_vector(vector: np.ndarray) -> np.ndarray:
    as_float = np.asarray(vector, dtype=np.float32)
    return as_float / max(float(np.linalg.norm(as_float)), 1e-12)


def rows_and_cosines(table: Any, unit: np.ndarray | None) -> tuple[list[dict[str, Any]], list[float | None]]:
    """An Arrow table's rows without their vectors, and each vector's cosine to `unit` (None without one)."""
    if table is None:
        return [], []
    if unit is None or "vector" not in table.column_names or table.num_rows == 0:
        names = [n for n in table.column_names if n != "vector"]
        return table.select(names).to_pylist(), [None] * table.num_rows
    column = table.column("vector").combine_chunks()
    vectors = column.values.to_numpy(zero_copy_only=False).reshape(table.num_rows, -1).astype(np.float32)
    norms = np.maximum(np.linalg.norm(vectors, axis=1), 1e-12)
    cosines = (vectors @ unit) / norms
    return table.drop_columns(["vector"]).to_pylist(), [float(c) for c in cosines]
