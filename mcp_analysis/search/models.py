"""Search results: the full record (sandbox, CLI, Python API) and the compact hit tools return."""

from __future__ import annotations

from pydantic import BaseModel, Field, PrivateAttr

from mcp_analysis.search.budget import passage_widths
from mcp_analysis.search.excerpt import excerpt, tidy
from mcp_analysis.text import label, label_path


class SearchResult(BaseModel):
    chunk_id: str = Field(description="Cite this id with the cite tool.")
    content: str = Field(description="The hit grown with its surrounding section (context expansion).")
    document_id: str
    document_title: str
    document_uri: str
    score: float = Field(
        description="Relevance, higher is better: the fused re-ranking score (search.rerank), else the "
        "reciprocal-rank-fusion score of vector and full-text ranks."
    )
    rank: int = Field(description="1 = best.")
    page_numbers: list[int] = Field(default_factory=list)
    headings: list[str] = Field(default_factory=list)
    doc_item_refs: list[str] = Field(default_factory=list, description="self_ref values in items.jsonl.")
    labels: list[str] = Field(default_factory=list)
    picture_refs: list[str] = Field(default_factory=list)
    _anchor: tuple[int, int] | None = PrivateAttr(None)
    _anchors: list[tuple[int, int, float]] = PrivateAttr(default_factory=list)
    _share: float | None = PrivateAttr(None)

    @property
    def anchor(self) -> tuple[int, int] | None:
        """Where the matched chunk lies inside `content` (None: anywhere)."""
        return self._anchor

    @anchor.setter
    def anchor(self, value: tuple[int, int] | None) -> None:
        self._anchor = value

    @property
    def anchors(self) -> list[tuple[int, int, float]]:
        """Where each scored hit inside `content` lies, with its score (empty: only `anchor` is known)."""
        return self._anchors

    @anchors.setter
    def anchors(self, value: list[tuple[int, int, float]]) -> None:
        self._anchors = value

    @property
    def share(self) -> float | None:
        """Its relative share of a result's passage budget (None: a fixed `context` each; budget.py)."""
        return self._share

    @share.setter
    def share(self, value: float | None) -> None:
        self._share = value

    def excerpt(self, query: str, size: int) -> str:
        """At most `size` characters of `content` around the match (see search/excerpt.py)."""
        return excerpt(self.content, query, size, self._anchor, anchors=self._anchors)

    @property
    def heading_path(self) -> list[str]:
        """The headings without a leading copy of the document title (shown separately)."""
        return self.headings[1:] if self.headings[:1] == [self.document_title] else self.headings


class SearchHit(BaseModel):
    """A hit as the search tool returns it: where it is, and the passage around the match."""

    # Title and section path are labels (text.py): a document's huge heading must not
    # push its own passage, or every other hit, out of the result. (The docstring is in the schema.)

    rank: int = Field(description="1 = best.")
    chunk_id: str = Field(description="Pass to cite.")
    document_id: str = Field(description="Its files: /documents/{document_id}/content.txt, ...")
    document_title: str
    headings: list[str] = Field(default_factory=list, description="Section path of the hit.")
    page_numbers: list[int] = Field(default_factory=list)
    content: str = Field(description="The passage around the match.")
    full_chars: int = Field(description="Length of the whole passage (a larger `context` shows more).")

    @classmethod
    def of(cls, result: SearchResult, query: str, context: int) -> SearchHit:
        return cls(
            rank=result.rank,
            chunk_id=result.chunk_id,
            document_id=result.document_id,
            document_title=label(result.document_title),
            headings=label_path(result.heading_path),
            page_numbers=result.page_numbers,
            content=result.excerpt(query, context),
            full_chars=len(tidy(result.content)),
        )

    @classmethod
    def all_of(cls, results: list[SearchResult], query: str, context: int) -> list[SearchHit]:
        """The hits of `results`, passages `context` characters each, or on average when every
        result has a share of the budget (see search/budget.py)."""
        shares = [r.share for r in results]
        weights = None if None in shares else [s for s in shares if s is not None]
        widths = passage_widths([len(r.content) for r in results], context, weights)
        return [cls.of(r, query, width) for r, width in zip(results, widths, strict=True)]
