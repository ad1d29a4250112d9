"""A search's item windows read by offset: where each document's items sit in the items table.

A search reads the items around its hits (search/expand.py) as ``document_id IN (...) AND
((document_id = ... AND position BETWEEN ...) OR ...)``: LanceDB looks the documents up in their
index, reads their positions and filters them, then reads the columns of what passed. Every
document's items are written in one append, in position order, so in the table's scan order a
document's items are one run, position 0 first: the item at position p is at offset first + p.
Once the run of every document is known for a version of the items table (one scan of two columns
in a thread, `ItemSpans.scan`), the windows are read as those offsets (Lance's ``take``). Offsets
are exact for that one version only (a removal shifts the rows after it), so the spans are keyed by
version: until they are found again for a new version, reads filter as before, never wrong and
never slower than before. A document whose items are not one ordered run (none that we write) is
read by filter as well. Only where the search legs run through Lance's scanner (large knowledge
bases, store/lance_legs.py): below, pylance is never imported.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import numpy as np

from mcp_analysis.store import schema
from mcp_analysis.store.lance_legs import LanceDatasets, StoreLegs
from mcp_analysis.store.reads import coalesced

log = logging.getLogger(__name__)

SCAN_BATCH = 1 << 20  # rows per batch of the scan: its two columns stay tens of MB at any size
REST_SHARE = 10  # a scan again no sooner than ten times its last duration after it: a tenth of a core at most


@dataclass(frozen=True)
class ItemSpans:
    """Each document's run in one version of the items table: ids sorted, with first offset and length."""

    version: int
    ids: np.ndarray  # sorted document ids (UTF-8 bytes)
    first: np.ndarray
    count: np.ndarray

    def run(self, document_id: str) -> tuple[int, int] | None:
        """(first offset, items) of `document_id`'s run, or None (not one ordered run at this version)."""
        key = document_id.encode()
        at = int(np.searchsorted(self.ids, key))
        if at < len(self.ids) and self.ids[at] == key:
            return int(self.first[at]), int(self.count[at])
        return None

    @classmethod
    def scan(cls, dataset: Any, version: int, batch_size: int = SCAN_BATCH) -> ItemSpans:
        """The runs of `dataset` (the items table at `version`), in one ordered scan of two columns: each
        batch's runs and the check of their positions in Arrow and numpy, a dictionary step per run."""
        import pyarrow as pa
        import pyarrow.compute as pc  # here: a server below the scanner's bound never needs it

        runs: dict[str, list[int]] = {}  # document -> [first offset, items so far]
        broken: set[str] = set()  # documents not in one run from position 0 on: read by filter
        previous, offset = None, 0
        for batch in dataset.to_batches(columns=["document_id", "position"], batch_size=batch_size, scan_in_order=True):
            ids, n = batch.column(0), batch.num_rows
            if n == 0:
                continue
            changed = pc.not_equal(ids.slice(1), ids.slice(0, n - 1)).to_numpy(zero_copy_only=False)
            starts = np.concatenate(([0], np.flatnonzero(changed) + 1))
            lengths = np.diff(np.append(starts, n))
            names = ids.take(pa.array(starts)).to_pylist()
            before = np.zeros(len(starts), dtype=np.int64)  # items a run had before this batch
            if names[0] == previous:
                before[0] = runs[names[0]][1]
            run_of = np.repeat(np.arange(len(starts)), lengths)
            expected = np.arange(n) - starts[run_of] + before[run_of]
            ordered = np.logical_and.reduceat(batch.column(1).to_numpy(zero_copy_only=False) == expected, starts)
            for i, (doc, length, good) in enumerate(zip(names, lengths.tolist(), ordered.tolist(), strict=True)):
                if i > 0 or doc != previous:  # a run starts (a batch's first may carry the last one on)
                    if doc in runs or doc in broken:
                        broken.add(doc)
                    runs[doc] = [offset + int(starts[i]), 0]
                runs[doc][1] += length
                if not good:
                    broken.add(doc)
            previous = names[-1]
            offset += n
        kept = sorted((doc.encode(), run) for doc, run in runs.items() if doc not in broken)
        return cls(
            version,
            np.array([k for k, _ in kept], dtype=bytes),
            np.array([r[0] for _, r in kept], dtype=np.int64),
            np.array([r[1] for _, r in kept], dtype=np.int64),
        )


class StoreItemOffsets(StoreLegs):
    """The store's item windows, read by offset where the spans of the current version are known."""

    async def item_windows(
        self, windows: Mapping[str, Sequence[tuple[int, int]]], columns: Sequence[str] | None = None
    ) -> list[dict[str, Any]]:
        spans = await self._current_spans()
        if spans is None:
            return await super().item_windows(windows, columns)
        offsets: list[int] = []
        rest: dict[str, Sequence[tuple[int, int]]] = {}
        for doc_id, wanted in windows.items():
            run = spans.run(doc_id)
            if run is None:
                rest[doc_id] = wanted
                continue
            first, length = run
            for lo, hi in coalesced(wanted):
                offsets.extend(range(first + max(lo, 0), first + min(hi, length - 1) + 1))
        rows: list[dict[str, Any]] = []
        if offsets:
            try:
                taken = await anyio.to_thread.run_sync(
                    _take, self._item_datasets(), spans.version, offsets, self._layout.item_columns(columns)
                )
            except Exception as exc:  # e.g. the files of that version gone (the knowledge base written anew)
                log.info("reading items by offset failed (%s); reading them by filter", type(exc).__name__)
                self._item_state().forget()  # found again, on datasets opened afresh (no sooner than the rest)
                return await super().item_windows(windows, columns)
            rows = await self._layout.item_rows(taken, self.tables, columns)
        if rest:
            rows += await super().item_windows(rest, columns)
        return rows

    def _item_datasets(self) -> LanceDatasets:
        state = self._item_state()
        assert state.uri is not None, "the table's location is known before its first dataset"
        if state.datasets is None:
            state.datasets = LanceDatasets(state.uri, self.lance_options())
        return state.datasets

    def _item_state(self) -> _SpansState:
        state: _SpansState | None = getattr(self, "_items_spans", None)
        table = self.tables[schema.DOCUMENT_ITEMS]
        if state is None or state.table is not table:
            state = _SpansState(table)
            self._items_spans = state
        return state

    async def _current_spans(self) -> ItemSpans | None:
        """The spans of the items table's current version, if known; else None (and, unless one ran too
        recently, a scan for them starts in a thread)."""
        if schema.DOCUMENT_ITEMS not in self.tables or not self.scanner_legs_running():
            return None
        state = self._item_state()
        version = int(await state.table.version())
        if state.spans is not None and state.spans.version == version:
            return state.spans
        if state.uri is None:
            state.uri = await state.table.uri()
        state.start(self._item_datasets(), version)
        return None

    async def item_spans(self, wait: float = 0.0) -> ItemSpans | None:
        """The last spans found (None: none yet), waiting up to `wait` seconds for a scan under way (an
        operator's and a test's view of the offset reads)."""
        state: _SpansState | None = getattr(self, "_items_spans", None)
        if state is None:
            return None
        await anyio.to_thread.run_sync(state.done.wait, wait)
        return state.spans


def _take(reader: LanceDatasets, version: int, offsets: list[int], columns: list[str] | None) -> list[dict[str, Any]]:
    return reader.dataset(version).take(offsets, columns=columns).to_pylist()


class _SpansState:
    """One items table's spans: the last found, and the scan under way (at most one at a time)."""

    def __init__(self, table: Any) -> None:
        self.table = table
        self.uri: str | None = None
        self.datasets: LanceDatasets | None = None
        self.spans: ItemSpans | None = None
        self.done = threading.Event()
        self.done.set()
        self._next_after = 0.0

    def forget(self) -> None:
        """Drop the spans and datasets (a read by offset failed), keeping the rest between scans."""
        self.spans, self.datasets = None, None

    def start(self, datasets: LanceDatasets, version: int) -> None:
        if not self.done.is_set() or time.monotonic() < self._next_after:
            return
        self.done.clear()
        threading.Thread(target=self._scan, args=(datasets, version), name="item-spans", daemon=True).start()

    def _scan(self, datasets: LanceDatasets, version: int) -> None:
        started = time.monotonic()
        try:
            self.spans = ItemSpans.scan(datasets.dataset(version), version)
        except Exception as exc:  # the reads filter as before; the next version tries again
            log.warning("could not find where the items sit at version %d (%s): reading them by filter", version, exc)
        finally:
            ended = time.monotonic()
            self._next_after = ended + REST_SHARE * (ended - started)
            self.done.set()
