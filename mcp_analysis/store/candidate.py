"""A search candidate: a chunk row and what each leg of a hybrid search measured for it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(eq=False)
class Candidate:
    """A chunk row (as our layers read it) and what each leg of the search measured for it."""

    row: dict[str, Any]
    cosine: float | None  # None only in keyword mode (no query vector)
    keyword: float | None  # BM25 score; None when the full-text leg did not return the chunk
    vector_rank: int | None = None  # 1-based rank in each leg, None when that leg missed it
    keyword_rank: int | None = None

    @property
    def key(self) -> str:
        return str(self.row["id"])
