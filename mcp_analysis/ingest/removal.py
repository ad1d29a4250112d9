"""Removing documents by what a person calls them: id, unique id prefix, uri or path.

`rm` takes several at once: every reference is resolved first, and when any names no document
(or several) nothing is removed and the error lists each of them, so a typo never leaves half a
batch applied; the documents found are then removed in one commit per table (store/writes.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.errors import AnalysisError
from mcp_analysis.ingest.lock import ingest_lock
from mcp_analysis.store.models import DocumentMeta

MIN_ID_PREFIX = 4


def find_document(metas: Sequence[DocumentMeta], reference: str) -> DocumentMeta:
    """The document `reference` names: its id, a unique id prefix (>= 4 characters), its uri,
    or the path it was added from. Ambiguous or unknown references are clear errors."""
    reference = reference.strip()
    exact = next((m for m in metas if reference in (m.id, m.uri)), None)
    if exact is not None:
        return exact
    if "://" not in reference:
        uri = Path(reference).expanduser().resolve().as_uri()
        by_path = next((m for m in metas if m.uri == uri), None)
        if by_path is not None:
            return by_path
    matches = [m for m in metas if m.id.startswith(reference.lower())] if len(reference) >= MIN_ID_PREFIX else []
    if len(matches) == 1:
        return matches[0]
    if matches:
        shown = ", ".join(m.id for m in matches[:5]) + (", ..." if len(matches) > 5 else "")
        raise AnalysisError(
            f"Id prefix {reference!r} matches {len(matches)} documents ({shown}); give more characters of the id."
        )
    raise AnalysisError(
        f"No document with id, id prefix (at least {MIN_ID_PREFIX} characters), uri or path {reference!r}. "
        "`mcp-analysis list` shows them."
    )


async def remove_document(kb: KnowledgeBase, reference: str) -> DocumentMeta:
    """Delete one document by id, unique id prefix, uri or path (see `find_document`)."""
    return (await remove_documents(kb, [reference]))[0]


async def remove_documents(kb: KnowledgeBase, references: Sequence[str]) -> list[DocumentMeta]:
    """Delete the documents `references` name, all or none (see module docs); one read of the metadata."""
    store = kb.store
    store.check_writable()
    metas = await store.all_meta()
    found: dict[str, DocumentMeta] = {}
    errors: list[str] = []
    for reference in references:
        try:
            meta = find_document(metas, reference)
        except AnalysisError as exc:
            errors.append(str(exc))
            continue
        found.setdefault(meta.id, meta)
    if errors:
        raise AnalysisError(" ".join(errors) + (" Nothing was removed." if len(references) > 1 else ""))
    async with ingest_lock(store.path):
        await store.delete_documents(list(found))
    await kb.refresh()
    return list(found.values())
