"""AnalysisState, with the reference system's semantics.

- document_filter: session configuration set by the operator, never by the model;
- executions: every execute_code call of the current analysis (code, output, success);
- citation_index: every citation ever resolved in this session (accumulates);
- citations: chunk ids cited for the current answer (deduplicated, per analysis);
- searches: results of tool and sandbox searches of the current analysis, by query;
- charts: the latest charts drawn in the current analysis (PNG, SVG, spec), numbered per session.
"""

from __future__ import annotations

from datetime import UTC, datetime

from pydantic import BaseModel, Field, PrivateAttr

from mcp_analysis.charts.models import Chart
from mcp_analysis.search.models import SearchResult
from mcp_analysis.store.models import ChunkRecord, DocumentMeta

MAX_EXECUTIONS_KEPT = 200
MAX_SEARCHES_KEPT = 200
# Characters of the oldest executions (code and output) and searches (passages) are dropped past
# these: a session is written through to its store on every call, so it must stay small.
MAX_EXECUTION_CHARS_KEPT = 2_000_000
MAX_SEARCH_CHARS_KEPT = 4_000_000


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


class CodeExecutionEntry(BaseModel):
    index: int = Field(description="1-based number of this execution within the session.")
    code: str
    stdout: str = ""
    stderr: str = ""
    value: str | None = None
    error: str | None = None
    success: bool
    duration_ms: float = 0.0
    truncated: bool = False
    started_at: str = Field(default_factory=now_iso)


class Citation(BaseModel):
    document_id: str
    chunk_id: str
    document_uri: str
    document_title: str
    page_numbers: list[int] = Field(default_factory=list)
    headings: list[str] = Field(default_factory=list)
    content: str = ""

    @classmethod
    def from_search(cls, hit: SearchResult) -> Citation:
        """From a search hit: its (expanded) content is what the model read. A hit has every field
        of a citation under the same name."""
        return cls.model_validate(hit.model_dump(include=set(cls.model_fields)))

    @classmethod
    def from_chunk(cls, chunk: ChunkRecord, meta: DocumentMeta) -> Citation:
        return cls(
            document_id=meta.id,
            chunk_id=chunk.id,
            document_uri=meta.uri,
            document_title=meta.title,
            **chunk.model_dump(include={"page_numbers", "headings", "content"}),
        )


class AnalysisState(BaseModel):
    document_filter: str | None = None
    executions: list[CodeExecutionEntry] = Field(default_factory=list)
    citation_index: dict[str, Citation] = Field(default_factory=dict)
    citations: list[str] = Field(default_factory=list)
    searches: dict[str, list[SearchResult]] = Field(default_factory=dict)
    execution_counter: int = 0
    analysis_number: int = 1
    charts: list[Chart] = Field(default_factory=list)
    chart_counter: int = 0
    _executions_chars: int | None = PrivateAttr(None)  # sum of _execution_chars(executions); None: not yet summed

    def record_search(self, query: str, results: list[SearchResult]) -> None:
        self.searches.pop(query, None)
        self.searches[query] = results
        size = sum(_search_chars(q, hits) for q, hits in self.searches.items())
        while len(self.searches) > 1 and (len(self.searches) > MAX_SEARCHES_KEPT or size > MAX_SEARCH_CHARS_KEPT):
            oldest = next(iter(self.searches))
            size -= _search_chars(oldest, self.searches.pop(oldest))

    def record_execution(self, entry: CodeExecutionEntry) -> None:
        # The kept executions' size is carried from call to call (summed once after a load), not
        # summed over up to MAX_EXECUTIONS_KEPT entries on every call.
        size = self._executions_chars
        if size is None:
            size = sum(_execution_chars(e) for e in self.executions)
        self.executions.append(entry)
        size += _execution_chars(entry)
        while len(self.executions) > 1 and (
            len(self.executions) > MAX_EXECUTIONS_KEPT or size > MAX_EXECUTION_CHARS_KEPT
        ):
            size -= _execution_chars(self.executions.pop(0))
        self._executions_chars = size

    def record_charts(
        self, charts: list[Chart], execution: int, most: int, most_bytes: int, most_held: int | None = None
    ) -> bool:
        """Keep `charts` (drawn by `execution`); the oldest go first past `most` charts, `most_bytes`
        (as stored) or `most_held` (in memory; None: no bound). True if `most_held` dropped one.

        A chart that alone exceeds a bound is not kept at all."""
        for chart in charts:
            chart.execution = execution
            self.chart_counter = max(self.chart_counter, chart.index)
        self.charts.extend(charts)
        size = sum(c.kept_bytes for c in self.charts)
        held = self.charts_held
        by_memory = False
        while self.charts and (
            len(self.charts) > most or size > most_bytes or (most_held is not None and held > most_held)
        ):
            by_memory = by_memory or (len(self.charts) <= most and size <= most_bytes)
            oldest = self.charts.pop(0)
            size -= oldest.kept_bytes
            held -= oldest.held_bytes
        return by_memory

    @property
    def charts_held(self) -> int:
        """Bytes the kept charts hold in memory (counted against sessions.max_memory_mb)."""
        return sum(c.held_bytes for c in self.charts)

    def chart(self, index: int) -> Chart | None:
        return next((c for c in self.charts if c.index == index), None)

    def start_new_analysis(self) -> None:
        """Clear executions, citations, searches and charts; keep citation_index and the filter."""
        self.executions.clear()
        self._executions_chars = 0
        self.citations.clear()
        self.searches.clear()
        self.charts.clear()
        self.analysis_number += 1


def _execution_chars(entry: CodeExecutionEntry) -> int:
    return len(entry.code) + len(entry.stdout) + len(entry.stderr) + len(entry.value or "") + len(entry.error or "")


def _search_chars(query: str, hits: list[SearchResult]) -> int:
    return len(query) + sum(len(hit.content) for hit in hits)
