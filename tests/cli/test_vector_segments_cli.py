"""`mcp-analysis add`, run again and again, keeps the vector index at `search.vector_index_max_segments`.

Each add's optimize folds its rows into the HNSW index as one more segment; without the merge a
knowledge base fed file by file gains one per add, each read by every vector search.
"""

from __future__ import annotations

from pathlib import Path

import lance

from mcp_analysis.store import schema
from tests.conftest import run_cli

BOUND = 2  # the least a merge leaves (the first segment and one more): four adds pass it twice
ENV = {"MCP_ANALYSIS_SEARCH__VECTOR_INDEX_MIN_ROWS": "1", "MCP_ANALYSIS_SEARCH__VECTOR_INDEX_MAX_SEGMENTS": str(BOUND)}


def _note(path: Path, index: int) -> Path:
    words = ["harbour", "crane", "ledger", "tide", "cargo", "berth", "pilot", "quay", "manifest", "draught"]
    sections = [f"## Part {p}\n\n" + " ".join(words[(index + p + w) % 10] for w in range(120)) for p in range(8)]
    path.write_text(f"# Note {index}\n\n" + "\n\n".join(sections) + "\n", encoding="utf-8")
    return path


def _vector_segments(db: Path) -> int:
    dataset = lance.dataset(str(db / f"{schema.CHUNKS}.lance"))
    return next(len(d.segments) for d in dataset.describe_indices() if d.field_names == ["vector"])


def test_adds_one_file_at_a_time_keep_the_vector_segments_bounded(tmp_path: Path) -> None:
    db, docs = tmp_path / "kb.lancedb", tmp_path / "docs"
    docs.mkdir()
    counts = []
    for index in range(4):
        added = run_cli("--db", str(db), "add", str(_note(docs / f"note-{index}.md", index)), env=ENV)
        assert added.returncode == 0, added.stderr
        counts.append(_vector_segments(db))
    assert max(counts) <= BOUND, counts
    assert counts[-1] >= 2  # the adds did reach the bound and were merged, not left unindexed
