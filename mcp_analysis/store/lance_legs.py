"""The search legs through Lance's own scanner (pylance), which takes a filtered view as its rows.

A view passing thousands of documents is ``document_id IN (<each id>)`` to LanceDB, which plans that
expression and looks each id up in the ``document_id`` index anew for each leg of every search
(`bench/view_split.py`: at a million chunks, a view passing a tenth spent about 7 ms planning it and
7 ms on that mask in each leg). Lance's scanner takes the rows instead (``row_addr_allowlist``: a
serialized set of row ids, applied before the leg ranks), so a view's chunk rows are looked up once
per view and version of the chunks table (`ViewRows`), and each leg runs on that version with them.

Every leg of a search runs here when pylance offers it (not only a view's) and the chunks table is
large enough (`search.scanner_min_chunks`: below, pylance's import is not worth the plans it saves,
and is never made): the scanner keeps its own index cache, and LanceDB's would otherwise hold the same
vector and full-text indexes a second time. One Lance session per store keeps that cache across
versions (an add that leaves an index as it was does not load it again). An exact scan of a view's
few rows takes its expression (under the allowlist Lance reads every row). pylance is a dependency
(pyproject.toml); an installation without it, or with one whose scanner lacks the allowlist, runs
the legs through LanceDB as before (`available`).
"""

from __future__ import annotations

import functools
import importlib.util
import inspect
import itertools
import logging
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

import anyio
import numpy as np

from mcp_analysis.errors import exception_leaves
from mcp_analysis.store import schema
from mcp_analysis.store.cosines import rows_and_cosines
from mcp_analysis.store.reads import StoreReads

log = logging.getLogger(__name__)

_SERIALS = itertools.count(1)
NPROBES = 20  # LanceDB 0.40's default for IVF indexes (its queries send it; the scanner's own is lower)


@functools.cache
def available() -> bool:
    """Whether pylance is installed and its scanner takes a row-id allowlist."""
    if importlib.util.find_spec("lance") is None:
        return False
    from lance.dataset import LanceDataset

    return "row_addr_allowlist" in inspect.signature(LanceDataset.scanner).parameters


@functools.cache
def samples() -> bool:
    """Whether pylance reads rows by id (`LanceLegs.sampled`; private in pylance 14, so checked, not assumed)."""
    from lance.dataset import LanceDataset

    return callable(getattr(LanceDataset, "_take_rows", None))


@dataclass(frozen=True)
class ViewRows:
    """A view's chunk rows at one version of the chunks table: how many of how many, and (with pylance)
    their row ids as the scanner's allowlist."""

    path: str
    version: int
    rows: int
    total: int
    allowed: bytes | None = None
    legs: int | None = field(default=None, compare=False)  # the `LanceLegs.serial` whose rows the allowlist names


class LanceDatasets:
    """One table through pylance: a dataset per version, sharing one session (one cache)."""

    def __init__(self, uri: str, options: dict[str, str] | None) -> None:
        import lance

        self._uri, self._options = uri, options
        self._session = lance.Session()
        self._dataset: Any = None

    def dataset(self, version: int) -> Any:
        """The table at `version` (the one LanceDB's handle reads), opened once per version."""
        dataset = self._dataset  # several threads ask at once (both legs; an item read and a scan)
        if dataset is None or dataset.version != version:
            import lance

            dataset = lance.dataset(self._uri, version=version, storage_options=self._options, session=self._session)
            self._dataset = dataset
        return dataset


class LanceLegs(LanceDatasets):
    """The legs of one store's chunks table."""

    def __init__(self, uri: str, options: dict[str, str] | None) -> None:
        super().__init__(uri, options)
        self.serial = next(_SERIALS)  # a view's rows name this one's (kept by number: a reference would keep its cache)

    def view_rows(self, version: int, where: str) -> tuple[int, int, bytes]:
        """The rows `where` passes at `version`: their count, the table's rows, and the allowlist."""
        from lance.dataset import serialize_row_addrs

        dataset = self.dataset(version)
        ids = dataset.to_table(columns=[], filter=where, with_row_id=True).column("_rowid").to_pylist()
        return len(ids), dataset.count_rows(), serialize_row_addrs(ids)

    def vector(
        self,
        version: int,
        unit: np.ndarray,
        columns: list[str],
        rows: int,
        where: str | bytes | None,
        *,
        ef: int | None,
        refine_factor: int,
    ) -> list[dict[str, Any]]:
        """The `rows` chunks nearest to `unit` by cosine (HNSW at `ef`, or an exact scan without one),
        under `where`: an allowlist (bytes), a SQL filter, or nothing."""
        nearest: dict[str, Any] = {"column": "vector", "q": unit, "k": rows, "metric": "cosine"}
        if ef is None:
            nearest["use_index"] = False
        else:
            nearest |= {"ef": ef, "refine_factor": refine_factor, "nprobes": NPROBES}
        scanner = self.dataset(version).scanner(columns=[*columns, "_distance"], nearest=nearest, **_restricted(where))
        return scanner.to_table().to_pylist()

    def sampled(
        self,
        version: int,
        unit: np.ndarray,
        columns: list[str],
        rows: int,
        over: int,
        passes: Callable[[Any], bool],
        *,
        ef: int,
    ) -> list[dict[str, Any]] | None:
        """A view's `rows` chunks nearest to `unit`, found among the `over` nearest of all chunks by the index's
        own (quantized) distances, reading only their documents; those the view passes (`passes`) are then read
        whole and ranked by their exact cosine. None when fewer than `rows` of them pass and the walk did not see
        the whole table: the caller runs the leg under the view. Lance's walk under an allowlist costs several
        unfiltered walks at a million chunks, and its exact re-rank reads `over` x refine vectors where this reads
        the view's few (bench/view_sample.py)."""
        dataset = self.dataset(version)
        nearest = {"column": "vector", "q": unit, "k": over, "metric": "cosine", "ef": max(ef, over)}
        nearest["nprobes"] = NPROBES
        found = dataset.scanner(
            columns=["document_id"], nearest=nearest, with_row_id=True, disable_scoring_autoprojection=True
        ).to_table()
        kept = [i for i, document in enumerate(found.column("document_id").to_pylist()) if passes(document)]
        if len(kept) < rows and found.num_rows < dataset.count_rows():  # short, and not for want of rows
            return None
        if not kept:
            return []
        ids = found.column("_rowid").to_numpy()[kept]
        read = dataset._take_rows(ids.tolist(), columns=[*columns, "vector"])
        listed, cosines = rows_and_cosines(read, unit)
        ranked = sorted(zip(listed, cosines, strict=True), key=lambda pair: -float(pair[1] or 0.0))[:rows]
        return [{**row, "_distance": 1.0 - float(cosine or 0.0)} for row, cosine in ranked]

    def keyword(self, version: int, query: str, columns: list[str], rows: int, where: str | bytes | None) -> Any:
        """The full-text leg's `rows` best chunks (BM25 over ``content_fts``) under `where`, as Arrow."""
        text = {"query": query, "columns": ["content_fts"]}
        scanner = self.dataset(version).scanner(
            columns=[*columns, "_score"], full_text_query=text, limit=rows, **_restricted(where)
        )
        return scanner.to_table()


def _restricted(where: str | bytes | None) -> dict[str, Any]:
    options: dict[str, Any] = {"disable_scoring_autoprojection": True}
    if isinstance(where, bytes):
        return {**options, "prefilter": True, "row_addr_allowlist": where}
    if where is not None:
        return {**options, "prefilter": True, "filter": where}
    return options


class View(Protocol):
    """A filtered view's prefilter (`candidates.VisibleDocuments`): its rows are found from its expression."""

    @property
    def expression(self) -> Any: ...


# A view's chunk rows, found once per view object and version of the chunks table.
_VIEW_ROWS: weakref.WeakKeyDictionary[View, ViewRows] = weakref.WeakKeyDictionary()


class StoreLegs(StoreReads):
    """The store's side: its chunks table's `LanceLegs`, and the rows of each filtered view."""

    async def scanner_legs(self, min_rows: int = 0) -> LanceLegs | None:
        """The legs through Lance's scanner (None: through LanceDB): once the chunks table holds `min_rows`
        rows, checked once per version until then, and kept from then on (its cache holds the indexes)."""
        table = self.tables[schema.CHUNKS]
        known = getattr(self, "_lance", None)  # (table, (version, min_rows) checked, legs)
        if known is not None and known[0] is table and known[2] is not None:
            return known[2]
        checked = (await table.version(), min_rows)
        if known is None or known[0] is not table or known[1] != checked:
            # The size first: asking whether pylance offers the allowlist imports it.
            enough = min_rows <= 0 or await table.count_rows() >= min_rows
            legs = LanceLegs(await table.uri(), self.lance_options()) if enough and available() else None
            known = (table, checked, legs)
            self._lance = known
        return known[2]

    async def view_rows(self, prefilter: View, lance: LanceLegs | None) -> ViewRows:
        """The chunks `prefilter` passes (with `lance`, also as the legs' allowlist) and the chunks table's
        rows, found once per view and version of the table (a view lives as long as its filter is in use; an
        add or removal finds them again)."""
        table = self.tables[schema.CHUNKS]
        version = await table.version()
        known, source = _VIEW_ROWS.get(prefilter), lance.serial if lance is not None else None
        if known is None or (known.path, known.version, known.legs) != (str(self.path), version, source):
            where = prefilter.expression.to_sql()
            if lance is not None:
                rows, total, allowed = await anyio.to_thread.run_sync(lance.view_rows, version, where)
                known = ViewRows(str(self.path), version, rows, total, allowed, lance.serial)
            else:
                known = ViewRows(str(self.path), version, await table.count_rows(where), await table.count_rows())
            _VIEW_ROWS[prefilter] = known
        return known

    def scanner_legs_running(self) -> bool:
        """Whether the legs run through Lance's scanner (the chunks table was found large enough)."""
        known = getattr(self, "_lance", None)
        return known is not None and known[2] is not None

    def drop_scanner_legs(self) -> bool:
        """Forget the scanner's datasets (and the view rows found in them); whether there were any."""
        known = getattr(self, "_lance", None)
        self._lance = None
        return known is not None and known[2] is not None


T = TypeVar("T")


def reopened_once(search: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
    """A store search that, failing through the scanner, runs once more on datasets opened afresh.

    The scanner reads the files of the version it opened, named by number: a knowledge base deleted and
    written again to the same version under a running server leaves it naming files that are gone
    (LanceDB's own handle opens the new ones). Any other failure (an object store that is down) is
    raised at once: searching again would only wait out its retries twice."""

    @functools.wraps(search)
    async def searched(self: StoreLegs, *args: Any, **kwargs: Any) -> T:
        try:
            return await search(self, *args, **kwargs)
        except Exception as exc:
            if not any(_vanished(leaf) for leaf in exception_leaves(exc)) or not self.drop_scanner_legs():
                raise
            log.info("a search through Lance's scanner failed (%s); opening the chunks table again", type(exc).__name__)
            return await search(self, *args, **kwargs)

    return searched


def _vanished(exc: BaseException) -> bool:
    """A file the scanner's dataset names is gone (Lance says "Not found", as pyarrow's ArrowInvalid)."""
    return isinstance(exc, FileNotFoundError) or (isinstance(exc, ValueError) and "Not found" in str(exc))
