"""A search's item windows read by offset (store/item_offsets.py) read exactly what the filter reads.

Offsets hold for one version of the items table only: a removal shifts every row after it and a
compaction rewrites the files, so each is followed by reads compared with the filter's, first while
the spans of the new version are not known yet (read by filter) and then once they are (by offset).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path
from typing import Any

import anyio
import lance
import numpy as np
import pyarrow as pa
import pytest

from mcp_analysis.store import schema
from mcp_analysis.store.database import Store
from mcp_analysis.store.item_offsets import ItemSpans
from mcp_analysis.store.reads import StoreReads
from mcp_analysis.store.writes import DocumentRows
from tests.haiku_db import copy_fixture
from tests.search.long_sections import item_row, rows_of

pytestmark = pytest.mark.anyio

COLUMNS = ["document_id", "position", "self_ref", "label", "text", "page_numbers", "heading_level"]


def _document(index: int, items: int, mark: str = "") -> DocumentRows:
    doc_id = f"doc-{index:02d}"
    rows = [
        item_row(doc_id, p, 2 if p % 7 == 0 else None, f"{doc_id} item {p}{mark}", page=1 + p // 10)
        for p in range(items)
    ]
    chunk = {
        "id": f"{doc_id}-0",
        "document_id": doc_id,
        "content": f"harbour crane {index}",
        "content_fts": f"harbour crane {index}",
        "metadata": '{"item_range": [0, 0], "section_range": [0, 0], "labels": ["text"]}',
        "order": 0,
        "vector": [1.0, float(index), 0.0, 0.0],
    }
    return rows_of(doc_id, rows, [chunk])


async def _store(path: Path, mark: str = "", reverse: bool = False) -> Store:
    """24 documents of 1 to 47 items, written in two commits (two fragments of the items table); with
    `reverse`, the other way round (other rows at each offset)."""
    store = await Store.open(path, create=True)
    await store.initialize("test", 4)
    order = list(range(23, -1, -1) if reverse else range(24))
    for half in (order[:12], order[12:]):
        await store.write_documents([_document(i, 1 + (i * 11) % 47, mark) for i in half])
    assert await store.scanner_legs() is not None  # the offsets are read where the legs run through Lance
    return store


def _windows(seed: int, documents: list[str]) -> dict[str, list[tuple[int, int]]]:
    """Random windows: overlapping ones, ones past a document's end or before its start, an unknown id."""
    rng = np.random.default_rng(seed)
    out: dict[str, list[tuple[int, int]]] = {}
    for doc_id in documents:
        out[doc_id] = [(int(lo), int(lo + rng.integers(0, 12))) for lo in rng.integers(-3, 50, size=3)]
    out["no-such-document"] = [(0, 5)]
    return out


def _key(row: dict[str, Any]) -> tuple[str, int]:
    return row["document_id"], row["position"]


async def _reads_agree(store: Store, windows: dict[str, list[tuple[int, int]]]) -> int:
    """Read `windows` as the search does and by filter; both the same rows (returns how many)."""
    read = sorted(await store.item_windows(windows, COLUMNS), key=_key)
    filtered = sorted(await StoreReads.item_windows(store, windows, COLUMNS), key=_key)
    assert read == filtered
    return len(read)


async def _offsets_known(store: Store, windows: dict[str, list[tuple[int, int]]]) -> int:
    """Read until the spans of the items table's current version are known (a scan starts no sooner than
    ten times the last one's duration after it); returns that version."""
    version = int(await store.table(schema.DOCUMENT_ITEMS).version())
    deadline = time.monotonic() + 30
    while (spans := await store.item_spans(wait=1.0)) is None or spans.version != version:
        assert time.monotonic() < deadline, "the spans of the current version were never found"
        await _reads_agree(store, windows)
        await anyio.sleep(0.05)
    return version


async def test_windows_read_by_offset_are_the_filters_rows_across_removals_and_compaction(tmp_path: Path) -> None:
    store = await _store(tmp_path / "kb.lancedb")
    try:
        documents = [f"doc-{i:02d}" for i in range(24)]
        windows = _windows(1, documents)
        assert await _reads_agree(store, windows) > 100
        first = await _offsets_known(store, windows)
        spans = await store.item_spans()
        assert spans is not None and all(spans.run(d) is not None for d in documents)
        assert spans.run("no-such-document") is None
        read = await _reads_agree(store, windows)

        await store.delete_documents(["doc-03", "doc-15"])  # every row after each shifts
        kept = [d for d in documents if d not in ("doc-03", "doc-15")]
        assert await _reads_agree(store, windows) < read  # before the new spans are known: by filter
        after_removal = await _offsets_known(store, windows)
        assert after_removal > first
        assert await _reads_agree(store, _windows(2, kept)) > 100

        await store.optimize()  # the files rewritten: the rows' offsets anew
        await _offsets_known(store, windows)
        assert await _reads_agree(store, _windows(3, documents)) > 100
    finally:
        store.close()


async def test_a_knowledge_base_written_again_to_the_same_version_is_read_as_it_is_now(tmp_path: Path) -> None:
    """Deleted and written again (other rows at each offset, the same number of writes) under an open store:
    the offsets found in the old files are never applied to the new ones (the read by offset finds its
    files gone and reads by filter, as LanceDB's handle does once it reads the latest version), and the
    offsets are found again in the new files."""
    path = tmp_path / "kb.lancedb"
    store = await _store(path)
    try:
        documents = [f"doc-{i:02d}" for i in range(24)]
        windows = _windows(5, documents)
        version = await _offsets_known(store, windows)
        shutil.rmtree(path)
        again = await _store(path, mark=" (new)", reverse=True)
        again.close()
        assert await store.table(schema.DOCUMENT_ITEMS).version() == version
        await store.read_latest()
        read = await store.item_windows(windows, COLUMNS)
        assert len(read) > 100 and all(row["text"].endswith(" (new)") for row in read)
        assert sorted(read, key=_key) == sorted(await StoreReads.item_windows(store, windows, COLUMNS), key=_key)
        await _offsets_known(store, windows)
        assert all(row["text"].endswith(" (new)") for row in await store.item_windows(windows, COLUMNS))
    finally:
        store.close()


def test_a_document_not_in_one_ordered_run_is_left_to_the_filter(tmp_path: Path) -> None:
    """Runs across batch boundaries are joined; a document in two runs or out of order has no span."""
    rows = (
        [("a", p) for p in range(5)]
        + [("b", p) for p in (0, 2, 1)]  # out of order
        + [("c", p) for p in range(7)]  # across the batches of 4 rows below
        + [("d", 0), ("d", 1), ("e", 0), ("d", 2)]  # two runs
        + [("f", p) for p in range(1, 4)]  # not from position 0
        + [("g", 0)]
    )
    table = pa.table({"document_id": [d for d, _ in rows], "position": [p for _, p in rows]})
    dataset = lance.write_dataset(table, tmp_path / "items.lance", max_rows_per_file=6)
    spans = ItemSpans.scan(dataset, dataset.version, batch_size=4)
    assert spans.version == dataset.version
    assert {d: spans.run(d) for d in "abcdefg"} == {
        "a": (0, 5),
        "b": None,
        "c": (8, 7),
        "d": None,
        "e": (17, 1),
        "f": None,
        "g": (22, 1),
    }


async def test_a_haiku_rag_databases_windows_read_by_offset_are_the_filters_rows(tmp_path: Path) -> None:
    """haiku.rag writes each document's items in one append too; its layout reads them into our shape."""
    store = await Store.open(copy_fixture(tmp_path / "haiku.lancedb"))
    try:
        assert store.read_only and await store.scanner_legs() is not None
        documents = [meta.id for meta in await store.all_meta()]
        windows = _windows(4, documents)
        await _offsets_known(store, windows)
        spans = await store.item_spans()
        assert spans is not None and all(spans.run(d) is not None for d in documents)
        assert await _reads_agree(store, windows) > 100
    finally:
        store.close()
