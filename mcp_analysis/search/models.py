"""Search results as every front door (tool, sandbox, CLI, agent) returns them."""

from __future__ import annotations

from pydantic import BaseModel, Field


class SearchResult(BaseModel):
    chunk_id: str = Field(description="Cite this id with the cite tool.")
    content: str = Field(description="The hit grown with its surrounding section (context expansion).")
    document_id: str
    document_title: str
    document_uri: str
    score: float = Field(description="Reciprocal-rank-fusion score of vector and full-text ranks.")
    rank: int = Field(description="1 = best.")
    page_numbers: list[int] = Field(default_factory=list)
    headings: list[str] = Field(default_factory=list)
    doc_item_refs: list[str] = Field(default_factory=list, description="self_ref values in items.jsonl.")
    labels: list[str] = Field(default_factory=list)
    picture_refs: list[str] = Field(default_factory=list)
