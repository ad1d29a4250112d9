"""Where a search's time goes: each phase of `Corpus.search` timed on its own (bench/search.py).

Phases are timed by wrapping the functions `search_passages` calls (the wrappers only read the
clock), plus each leg of the candidate fetch run alone (unfiltered) as the store runs it.
"""

from __future__ import annotations

import functools
import statistics
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import anyio

from mcp_analysis.search import passages
from mcp_analysis.store import schema
from mcp_analysis.store.candidates import CHUNK_COLUMNS, StoreCandidates
from mcp_analysis.store.item_offsets import StoreItemOffsets
from mcp_analysis.store.reads import StoreReads

PHASES = ("candidates", "complete_chunks", "rerank", "expand", "items_read")


@contextmanager
def _timing(spent: dict[str, float], reads: list[tuple[Any, Any]]) -> Iterator[None]:
    """Wrap the phases of a search so each adds its time (ms) to `spent`; the item windows read go to
    `reads`."""
    saved: list[tuple[Any, str, Any]] = []

    def wrap(owner: Any, name: str, phase: str) -> None:
        original = getattr(owner, name)
        saved.append((owner, name, original))

        async def timed_async(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return await original(*args, **kwargs)
            finally:
                spent[phase] += (time.perf_counter() - started) * 1000

        def timed(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                spent[phase] += (time.perf_counter() - started) * 1000

        import inspect

        setattr(owner, name, timed_async if inspect.iscoroutinefunction(original) else timed)

    wrap(passages, "hybrid_search", "candidates")
    wrap(StoreReads, "complete_chunks", "complete_chunks")
    wrap(passages, "rerank", "rerank")
    wrap(passages, "distinct", "rerank")
    wrap(passages, "expand_hits", "expand")
    wrap(StoreItemOffsets, "item_windows", "items_read")
    original_windows = StoreItemOffsets.item_windows

    async def recorded(self: Any, windows: Any, columns: Any = None) -> Any:  # the read, for `items_read_by_filter`
        reads.append((windows, columns))
        return await original_windows(self, windows, columns)

    StoreItemOffsets.item_windows = recorded  # type: ignore[method-assign]
    saved.append((StoreItemOffsets, "item_windows", original_windows))
    try:
        yield
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)


async def phases(
    kb: Any, corpus: Any, embedder: Any, queries: list[str], limit: int, with_vector_leg: bool = True
) -> dict[str, float]:
    """Median ms per query of each phase, each leg alone (the vector leg only with `with_vector_leg`), and
    the rest of the search."""
    settings = kb.settings.search
    table = kb.store.table(schema.CHUNKS)
    per_query: dict[str, list[float]] = defaultdict(list)
    for q in queries:
        vector = await embedder.embed_query(q)
        spent: dict[str, float] = defaultdict(float)
        reads: list[tuple[Any, Any]] = []
        with _timing(spent, reads):
            started = time.perf_counter()
            await corpus.search(q, limit)
            total = (time.perf_counter() - started) * 1000
        for phase in PHASES:
            per_query[phase].append(spent[phase])
        for name, ms in (await _items_read_by_filter(kb, reads)).items():
            per_query[name].append(ms)
        accounted = spent["candidates"] + spent["rerank"] + spent["expand"]
        per_query["total"].append(total)
        per_query["rest (embed, visible, shaping)"].append(total - accounted)
        unit = vector / max(float((vector**2).sum() ** 0.5), 1e-12)
        legs = await _legs(kb, table, q, unit, settings)
        if not with_vector_leg:
            legs.pop("vector_leg")
        for name, leg in legs.items():
            started = time.perf_counter()
            await leg()
            per_query[name].append((time.perf_counter() - started) * 1000)
    return {name: statistics.median(values) for name, values in per_query.items()}


async def _legs(kb: Any, table: Any, q: str, unit: Any, settings: Any) -> dict[str, Callable[[], Any]]:
    """Each leg unfiltered, as the store runs it: through Lance's scanner when it can (store/lance_legs.py),
    else through LanceDB."""
    rows, ef, refine = settings.candidates, settings.ann_ef, settings.ann_refine_factor
    scanner = await kb.store.scanner_legs(settings.scanner_min_chunks)
    if scanner is not None:
        version, columns = await table.version(), list(CHUNK_COLUMNS)
        vector = functools.partial(scanner.vector, ef=max(ef, rows * refine), refine_factor=refine)
        return {
            "keyword_leg": lambda: anyio.to_thread.run_sync(
                scanner.keyword, version, q, [*columns, "vector"], rows, None
            ),
            "vector_leg": lambda: anyio.to_thread.run_sync(vector, version, unit, columns, rows, None),
        }
    vector_leg = table.query().nearest_to(unit).distance_type("cosine").select(list(CHUNK_COLUMNS))
    vector_leg = vector_leg.limit(rows).ef(max(ef, rows * refine)).refine_factor(refine)
    keyword_leg = table.query().nearest_to_text(q, columns=["content_fts"]).select([*CHUNK_COLUMNS, "vector"])
    return {"keyword_leg": keyword_leg.limit(rows).to_arrow, "vector_leg": vector_leg.to_list}


async def _items_read_by_filter(kb: Any, reads: list[tuple[Any, Any]]) -> dict[str, float]:
    """The expansion's item windows read again: as the search read them (by offset where the store knows
    where each document's items sit, store/item_offsets.py), by filter as before, and by filter without
    ``heading_level``: a nullable column whose values are all one level (the synthetic documents', and a
    PDF's whose headings docling gives one level) is stored by Lance as a constant with a validity buffer
    of the whole file, which each filtered read decodes."""
    out = {"items_read_again": 0.0, "items_read_by_filter": 0.0, "items_read_by_filter_without_heading_level": 0.0}
    for windows, columns in reads:
        for name, read, selected in (
            ("items_read_again", kb.store.item_windows, columns),
            ("items_read_by_filter", functools.partial(StoreReads.item_windows, kb.store), columns),
            (
                "items_read_by_filter_without_heading_level",
                functools.partial(StoreReads.item_windows, kb.store),
                [c for c in columns or () if c != "heading_level"] or None,
            ),
        ):
            started = time.perf_counter()
            await read(windows, selected)
            out[name] += (time.perf_counter() - started) * 1000
    return out


__all__ = ["PHASES", "StoreCandidates", "phases"]
