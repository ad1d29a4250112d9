"""Search candidates: the chunks each leg of a hybrid search finds, with what each leg measured.

The vector leg (cosine) and the full-text leg (BM25 over ``content_fts``) run as two queries,
each for `per_leg` rows, both kept to a filtered view's documents (under its prefilter, or as
`ViewLegs` chooses for the view). One LanceDB hybrid query
would not do: it fuses both legs by rank and cuts the fused list to its limit (lancedb 0.40,
``results.slice(offset, length=limit)``; tests/store/test_candidates.py pins it), so a
re-ranker could only re-order the few rows rank fusion already chose.

Every candidate carries its vector's cosine to the query (exact, whichever leg found it),
its BM25 score (None when the full-text leg did not return it) and its rank in each leg.
A chunk that is only a heading is never a candidate on its own (store/bare_headings.py).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import anyio
import numpy as np

from mcp_analysis.store import schema
from mcp_analysis.store.bare_headings import CHUNK_COLUMNS, StoreBareHeadings
from mcp_analysis.store.candidate import Candidate
from mcp_analysis.store.cosines import rows_and_cosines, unit_vector
from mcp_analysis.store.lance import col
from mcp_analysis.store.lance_legs import LanceLegs, ViewRows, reopened_once, samples

# An unfiltered leg of a view fetches this many times per leg / share rows: the nearest chunks come in runs of
# one document, so exactly per leg / share rows often hold fewer than per leg of the view's, and the leg would
# run again under the prefilter (bench/prefilter.py --strategies counts the queries left short).
POST_FILTER_MARGIN = 1.5
# A vector leg under a view's prefilter re-ranks at most this many times its rows exactly, its walk as broad as
# the unfiltered leg's re-rank needs (`ViewPlan.ef`): that walk goes on until ef of the view's rows pass, and
# re-ranking 150 of the 200 it found kept the exact 10 nearest as often as all 200 at a million chunks, one read
# of 50 vectors fewer (bench/view_forms.py).
VIEW_REFINE_FACTOR = 3
# A sampled vector leg (`LanceLegs.sampled`) walks the index broader than an unfiltered one (`sampled_breadth`):
# the view's 10 nearest stand among the first 10 / share of all chunks, where a walk at the unfiltered ef missed
# some (recall@10 0.93 for a view passing a tenth of a million chunks; 0.97 at twice that ef, 1.00 at four times),
# and the fewer the view passes, the deeper they stand: twice the ef from a tenth up, and in proportion below.
# Below `SAMPLED_MIN_SHARE` that walk costs more than the prefiltered one (bench/view_sample.py).
SAMPLED_BREADTH = 2
SAMPLED_MIN_SHARE = 0.05
SAMPLED_MAX_ROWS = 5000  # a leg asked for more candidates walks under the prefilter (its walk would cost more)


@dataclass(frozen=True, eq=False)
class VisibleDocuments:
    """The documents a filtered view passes: a search's prefilter. The store turns the ids into a
    LanceDB expression itself (each id a literal, never SQL text), once per object: a view builds
    one per metadata version (corpus.py), and thousands of ids are hundreds of kB as SQL, which
    LanceDB would parse for each leg of every search (bench/prefilter.py).

    LanceDB plans each leg's expression anew, at a cost that grows with its literals (bench/search.py
    times views passing a tenth and nine tenths of the documents): a view passing most documents is
    written as ``NOT IN`` the few it hides. That form would also pass a document
    written after the view was read (in neither set), so the store keeps only candidates whose
    document is in `ids`, whichever form the legs ran with."""

    ids: frozenset[str]
    hidden: frozenset[str] | None = None  # the others of the view's version; None: not known (IN form)

    @classmethod
    def of(cls, ids: Iterable[str], hidden: Iterable[str] | None = None) -> VisibleDocuments:
        return cls(frozenset(ids), None if hidden is None else frozenset(hidden))

    @staticmethod
    def within(view: VisibleDocuments | None, document_ids: Iterable[str]) -> VisibleDocuments:
        """A prefilter of `document_ids` that `view` passes (all of them without a view), for a fetch of
        ranked documents' own chunks: the ids come from a ranking of visible candidates, and the view is
        applied again, so a document the view hides is never read even if a caller named it. Empty when
        it passes none, and the store then returns no candidate."""
        wanted = frozenset(document_ids)
        return VisibleDocuments.of(wanted if view is None else wanted & view.ids)

    @property
    def share(self) -> float:
        """The view's share of the knowledge base's documents (1 when the others are not known)."""
        if self.hidden is None:
            return 1.0
        return len(self.ids) / max(len(self.ids) + len(self.hidden), 1)

    @functools.cached_property
    def expression(self) -> Any:
        """``document_id`` in the ids, or not in the hidden ones when they are fewer: a LanceDB
        expression of literals (no SQL text to quote or to parse), built once per object."""
        if self.hidden is not None and len(self.hidden) < len(self.ids):
            return ~col("document_id").isin(sorted(self.hidden))
        return col("document_id").isin(sorted(self.ids))

    def passes(self, document_id: Any) -> bool:
        return document_id in self.ids


def sampled_breadth(ef: int, share: float) -> int:
    """The ef of a sampled vector leg of a view passing `share` of the chunks (see `SAMPLED_BREADTH`)."""
    return math.ceil(ef * SAMPLED_BREADTH * max(1.0, 0.1 / max(share, 1e-9)))


@dataclass(frozen=True)
class ViewLegs:
    """How the legs apply a view whose hidden documents are known (a filtered view's prefilter), chosen per
    view by the chunks it passes, counted once per view and version of the chunks table
    (bench/prefilter.py --strategies measures the three forms at a million chunks):

    - at most `flat_max_rows` chunks: the vector leg scans exactly those rows (no index: LanceDB's HNSW
      walk under a prefilter goes on until ef rows pass, ever longer the fewer pass);
    - else, at least `post_filter_min_share` of the documents and of the chunks: both legs run
      unfiltered for `POST_FILTER_MARGIN` x `per_leg` / (the chunks' share) rows, and the store keeps
      the visible ones (planning a prefilter of thousands of ids costs more than the rows); a leg left
      with fewer than `per_leg` runs again under the prefilter. Both shares: a view passing most
      documents but few chunks (many small mails, a few large reports hidden) would fall short each
      time;
    - otherwise both legs run under the prefilter, the vector leg at ef scaled by the chunks' share
      (`ViewPlan.ef`: the walk depends on the rows that pass, not on the documents), unless the legs run through
      Lance's scanner, the chunks table holds at least `sample_min_chunks` rows and the view passes at least
      `SAMPLED_MIN_SHARE` of them (any share not post-filtered): then the vector leg walks the index
      unfiltered for `POST_FILTER_MARGIN` x `per_leg` / share rows by its quantized distances and ranks the
      view's among them exactly (`LanceLegs.sampled`; under the prefilter when too few are the view's).

    Whichever form ran, only candidates whose document the view passes are kept (`candidates`)."""

    flat_max_rows: int = 0
    post_filter_min_share: float = 2.0  # above 1: never
    scanner_min_rows: int = 0  # the legs through Lance's scanner from this many chunks on (store/lance_legs.py)
    sample_min_chunks: int | None = None  # None: never

    @property
    def chooses(self) -> bool:
        """Whether either form can apply (else a view's chunks need not be counted)."""
        return self.flat_max_rows > 0 or self.post_filter_min_share <= 1

    def flat_scans(self, rows: int) -> bool:
        """Whether the vector leg scans a view of `rows` chunks exactly."""
        return self.flat_max_rows > 0 and rows <= self.flat_max_rows

    def post_filters(self, prefilter: VisibleDocuments, chunk_share: float) -> bool:
        """Whether both legs run unfiltered and keep the view's rows."""
        return min(prefilter.share, chunk_share) >= self.post_filter_min_share


@dataclass(frozen=True)
class ViewPlan:
    """The form `ViewLegs` chose for one view: the vector leg scans its rows exactly (`flat`), or both
    legs run unfiltered for rows enough at `share` and keep the view's (`post`), or neither; the view's
    rows, which the legs run under (as Lance's allowlist, store/lance_legs.py) when known; and the
    breadth of a vector leg under the view (`ef`). `share` is the share of the chunks the view passes
    (of its documents when its chunks were not counted)."""

    flat: bool = False
    post: bool = False
    share: float = 1.0
    rows: ViewRows | None = field(default=None, compare=False)
    sampled: bool = False  # the vector leg through `LanceLegs.sampled` (the full-text leg under the view)

    def ef(self, ef: int, floor: int) -> int:
        """The HNSW ef of a vector leg under the view: LanceDB's walk under a prefilter goes on until ef
        rows pass, about ef / share nodes (10x the unfiltered walk for a view passing a tenth of the
        chunks), so ef is scaled by the share, never below `floor` (the rows the unfiltered leg refines; under
        the view it refines fewer: `refine`). An unfiltered leg of the view (`post`) keeps the unscaled ef."""
        return max(floor, math.ceil(ef * self.share))

    @staticmethod
    def refine(refine_factor: int) -> int:
        """The exact re-rank factor of a vector leg under the view (`VIEW_REFINE_FACTOR`); its `ef` keeps the
        floor of the caller's factor."""
        return min(refine_factor, VIEW_REFINE_FACTOR)


class StoreCandidates(StoreBareHeadings):
    """The search read of the `Store`: candidate chunks with both legs' scores."""

    @reopened_once
    async def candidates(
        self,
        query: str,
        vector: np.ndarray | None,
        per_leg: int,
        prefilter: VisibleDocuments | None,
        *,
        ef: int,
        refine_factor: int,
        bare_heading_words: int = 3,
        view_legs: ViewLegs | None = None,
    ) -> list[Candidate]:
        """Up to `per_leg` chunks from each leg (fewer once bare headings joined their sections),
        vector leg first, then the full-text leg's others, each in its leg's order.

        `prefilter` (the documents a filtered view passes) is applied inside both legs before they
        rank, so a chunk outside it is never a candidate (or, as `view_legs` chooses for a view, after
        an unfiltered leg; see `ViewLegs`). With an HNSW index,
        `ef` widens the graph search (to at least the `per_leg` x `refine_factor` rows it refines,
        which LanceDB requires) and `refine_factor` re-ranks with exact distances (both always the
        caller's: search.ann_ef and search.ann_refine_factor are their one source)."""
        if schema.CHUNKS not in self.tables or (prefilter is not None and not prefilter.ids):
            return []
        unit = None if vector is None else unit_vector(vector)
        form = view_legs or ViewLegs()
        lance = await self.scanner_legs(form.scanner_min_rows)
        plan = await self._view_plan(prefilter, form, unit is not None, lance)
        flat, post = plan.flat, plan.post
        refined = {False: refine_factor, True: plan.refine(refine_factor) if prefilter else refine_factor}  # by `view`
        if plan.rows is not None and plan.rows.rows == 0:
            return []  # the view's documents have no chunks (and an empty allowlist must never reach a leg)
        table = self.tables[schema.CHUNKS]
        version = plan.rows.version if plan.rows is not None else await table.version() if lance else 0

        async def fetch(name: str, view: bool, rows: int) -> Any:
            """A leg's rows, under the view (`view`) or unfiltered: through Lance's scanner when it can."""
            if lance is None:
                return await _rows(name, leg(name, prefilter.expression if view and prefilter else None, rows))
            where: str | bytes | None = None
            if view and prefilter is not None:  # the view's rows, but not for an exact scan: it would read every row
                allowed = plan.rows.allowed if plan.rows is not None and not (flat and name == "vector") else None
                where = allowed or prefilter.expression.to_sql()
            columns = list(CHUNK_COLUMNS)
            if name == "keyword":
                columns += ["vector"] if unit is not None else []
                return await anyio.to_thread.run_sync(lance.keyword, version, query, columns, rows, where)
            run = functools.partial(lance.vector, ef=breadth(view, rows), refine_factor=refined[view])
            return await anyio.to_thread.run_sync(run, version, unit, columns, rows, where)

        def breadth(view: bool, rows: int) -> int | None:
            """The vector leg's ef (None: the exact scan of the view's rows): the plan's under the view."""
            if flat:
                return None
            return plan.ef(ef, rows * refine_factor) if view else max(ef, rows * refine_factor)

        def leg(name: str, where: Any, rows: int) -> Any:
            if name == "keyword":
                built = table.query().nearest_to_text(query, columns=["content_fts"])
                built = built.select([*CHUNK_COLUMNS, *(["vector"] if unit is not None else [])]).limit(rows)
            else:
                built = table.query().nearest_to(unit).distance_type("cosine").select(list(CHUNK_COLUMNS)).limit(rows)
                width, refine = breadth(where is not None, rows), refined[where is not None]
                built = built.bypass_vector_index() if width is None else built.ef(width).refine_factor(refine)
            return built.where(where) if where is not None else built

        legs: dict[str, Any] = {"vector": [], "keyword": None}

        async def run(name: str) -> None:
            over = math.ceil(per_leg * POST_FILTER_MARGIN / plan.share)
            if name == "vector" and plan.sampled and prefilter is not None and lance is not None:
                walk = sampled_breadth(ef, plan.share)
                legs[name] = await _sampled(lance, version, unit, per_leg, over, prefilter, walk)
                if legs[name] is not None:
                    return
            if post and prefilter is not None:  # unfiltered, for as many rows as hold `per_leg` visible ones
                found = await fetch(name, False, over)
                visible = _visible(found, prefilter)
                if _count(visible) >= per_leg or _count(found) < over:  # enough, or every match seen
                    legs[name] = _head(visible, per_leg)
                    return
            found = await fetch(name, True, per_leg)
            legs[name] = found if prefilter is None else _visible(found, prefilter)  # whichever form the leg ran with

        async with anyio.create_task_group() as group:  # both legs at once, as LanceDB's hybrid query does
            group.start_soon(run, "keyword")
            if unit is not None:
                group.start_soon(run, "vector")
        listed = _merged(legs["vector"], legs["keyword"], unit)
        completed = await self.complete_chunks([c.row for c in listed])
        for candidate, row in zip(listed, completed, strict=True):
            candidate.row = row
        return await self._join_bare_headings(listed, unit, bare_heading_words)

    async def view_plan(self, prefilter: VisibleDocuments | None, form: ViewLegs, *, vector: bool) -> ViewPlan:
        """How the legs keep to `prefilter` (see `ViewLegs`): a filtered view's chunks decide."""
        return await self._view_plan(prefilter, form, vector, await self.scanner_legs(form.scanner_min_rows))

    async def _view_plan(
        self, prefilter: VisibleDocuments | None, form: ViewLegs, vector: bool, lance: LanceLegs | None
    ) -> ViewPlan:
        """`view_plan` with the legs' engine a search has already chosen (looked up once per search)."""
        if prefilter is None or prefilter.hidden is None:
            return ViewPlan()
        if lance is None and not form.chooses:
            return ViewPlan(share=prefilter.share)  # its chunks need not be counted
        # The rows as an allowlist only for a view whose legs can run under it: one passing at least
        # `post_filter_min_share` of the documents counts its chunks (a rare leg run again takes the expression).
        counted = await self.view_rows(prefilter, lance if prefilter.share < form.post_filter_min_share else None)
        chunk_share = counted.rows / counted.total if counted.total else 1.0
        flat = vector and form.flat_scans(counted.rows)
        post = not flat and counted.rows > 0 and form.post_filters(prefilter, chunk_share)
        sampled = form.sample_min_chunks is not None and counted.total >= form.sample_min_chunks
        sampled = sampled and lance is not None and vector and not (flat or post) and chunk_share >= SAMPLED_MIN_SHARE
        sampled = sampled and samples()
        return ViewPlan(flat, post, chunk_share, counted, sampled=sampled and counted.rows > 0)


def _merged(vector_rows: list[dict[str, Any]], keyword: Any, unit: np.ndarray | None) -> list[Candidate]:
    """Both legs' rows as candidates: the vector leg's in its order, then the full-text leg's others."""
    found: dict[str, Candidate] = {}
    for rank, row in enumerate(vector_rows, start=1):
        cosine = 1.0 - float(row.pop("_distance"))
        found[row["id"]] = Candidate(row, cosine, None, vector_rank=rank)
    keyword_rows, cosines = rows_and_cosines(keyword, unit)
    for rank, (row, cosine) in enumerate(zip(keyword_rows, cosines, strict=True), start=1):
        score = float(row.pop("_score"))
        if row["id"] in found:
            known = found[row["id"]]
            known.keyword, known.keyword_rank = score, rank
        else:
            found[row["id"]] = Candidate(row, cosine, score, keyword_rank=rank)
    return list(found.values())


async def _sampled(
    lance: LanceLegs, version: int, unit: Any, per_leg: int, over: int, view: VisibleDocuments, ef: int
) -> list[dict[str, Any]] | None:
    """A view's vector leg sampled (`LanceLegs.sampled`); None when it fell short or would walk too far."""
    if over > SAMPLED_MAX_ROWS:
        return None
    sample = functools.partial(lance.sampled, ef=ef)
    found = await anyio.to_thread.run_sync(sample, version, unit, list(CHUNK_COLUMNS), per_leg, over, view.passes)
    return None if found is None else _visible(found, view)  # as every other form's rows, checked once more


async def _rows(name: str, leg: Any) -> Any:
    """A leg's rows: the vector leg's as dicts, the full-text leg's as an Arrow table (it carries vectors)."""
    return await (leg.to_list() if name == "vector" else leg.to_arrow())


def _visible(found: Any, prefilter: VisibleDocuments) -> Any:
    """A leg's rows (a list or an Arrow table) whose document the prefilter passes."""
    if isinstance(found, list):
        return [row for row in found if prefilter.passes(row["document_id"])]
    if found is None or found.num_rows == 0:
        return found
    keep = [prefilter.passes(d) for d in found.column("document_id").to_pylist()]
    return found if all(keep) else found.filter(keep)


def _count(found: Any) -> int:
    return len(found) if isinstance(found, list) else 0 if found is None else found.num_rows


def _head(found: Any, rows: int) -> Any:
    return found[:rows] if isinstance(found, list) else found.slice(0, rows)
