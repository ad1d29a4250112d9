"""The `list_documents` result: a page of documents, shorter when the budget is reached."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, Field

from mcp_analysis.store.models import DocumentMeta
from mcp_analysis.text import label, shared_dir
from mcp_analysis.tooling.fitting import largest_fit

DOCUMENT_LABEL_CHARS = 200  # of a listed title or uri (metadata.json has them whole)
METADATA_CHARS = 300  # of a listed document's metadata, as JSON


def shown_metadata(metadata: dict[str, Any], limit: int = METADATA_CHARS) -> dict[str, Any]:
    """`metadata` within about `limit` characters of JSON: long values cut, keys past the limit left out."""
    shown: dict[str, Any] = {}
    size = 0
    for key, value in metadata.items():
        rendered = json.dumps(value, ensure_ascii=False)
        if len(rendered) > DOCUMENT_LABEL_CHARS:
            value = label(value if isinstance(value, str) else rendered, DOCUMENT_LABEL_CHARS)
        cost = len(key) + min(len(rendered), DOCUMENT_LABEL_CHARS) + 6
        if shown and size + cost > limit:
            shown["…"] = f"{len(metadata) - len(shown)} more keys in metadata.json"
            break
        shown[label(key, 60)] = value
        size += cost
    return shown


class DocumentInfo(BaseModel):
    id: str
    title: str
    uri: str
    metadata: dict[str, Any] = Field(
        default_factory=dict, description="Your metadata (all of it, with format and file_name: metadata.json)."
    )

    @classmethod
    def of(cls, meta: DocumentMeta) -> DocumentInfo:
        return cls(
            id=meta.id,
            title=label(meta.title, DOCUMENT_LABEL_CHARS),
            uri=label(meta.uri, DOCUMENT_LABEL_CHARS),
            metadata=shown_metadata(meta.user_metadata()),
        )


class ListDocumentsOutput(BaseModel):
    session: str
    total: int = Field(description="Documents visible to this client.")
    offset: int
    documents: list[DocumentInfo]
    next_offset: int | None = Field(None, description="Pass as `offset` to get the next page; null at the end.")


def render_documents(out: ListDocumentsOutput) -> str:
    if not out.documents:
        return "No documents are visible." if out.total == 0 else f"No documents at offset {out.offset}."
    end = out.offset + len(out.documents)
    prefix = shared_dir([d.uri for d in out.documents]) if len(out.documents) > 2 else ""
    shown = f"uri after {prefix}" if prefix else "uri"
    lines = [f"Documents {out.offset + 1}-{end} of {out.total} (id | title | {shown}):"]
    for d in out.documents:
        meta = " | " + ", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in d.metadata.items())
        lines.append(f"{d.id} | {d.title} | {d.uri[len(prefix) :]}{meta if d.metadata else ''}")
    if out.next_offset is not None:
        lines.append(f"More: list_documents(offset={out.next_offset}).")
    lines.append("Files: /documents/{id}/metadata.json, content.txt, items.jsonl, toc.json, tables.json")
    return "\n".join(lines)


def documents_result(
    session: str, documents: list[DocumentInfo], total: int, offset: int, note: str, budget: int
) -> tuple[ListDocumentsOutput, str]:
    """A page of documents; a shorter page (with its next_offset) when the budget is reached.

    A page holds at least one document (unless its title and uri alone exceed the budget), so paging
    by next_offset moves on: when the first one does not fit with its metadata, it is listed without
    (metadata.json has all of it).
    """

    def build(k: int) -> tuple[ListDocumentsOutput, str]:
        end = offset + k
        model = ListDocumentsOutput(
            session=session,
            total=total,
            offset=offset,
            documents=documents[:k],
            next_offset=end if end < total else None,
        )
        return model, render_documents(model) + note

    model, text = largest_fit(build, len(documents), budget)
    if model.documents or not documents:
        return model, text
    first = documents[0]
    documents = [first.model_copy(update={"metadata": {}})]
    note = f"\n(Metadata of {first.id} left out to fit the result budget: /documents/{first.id}/metadata.json)" + note
    return largest_fit(build, 1, budget)  # the budget still wins over a title or uri longer than it
