"""How search hits and documents look inside the sandbox: compact when printed, whole on access.

`print(await search("warranty", limit=10))` used to print ten 5,000-character passages. Host
functions can only return plain values (dicts, lists, ...), so a prelude, fed once to every
fresh interpreter, defines `search()` and `list_documents()` in the sandbox: they call the
host (`_mcp_search`, `_mcp_list_documents`) and wrap each dict in a small class whose repr is
one short line (a hit shows its excerpt and says `.content` holds the rest), while every
field stays one attribute or key away (`hit.content`, `hit["content"]`, `hit.to_dict()`).

The prelude is ordinary Python that monty and CPython both run: the host executes the same
source to render these objects when they come back as an execution's value (monty returns
them as `MontyClassProxy`). Being part of the interpreter state, the definitions survive
hibernation and restore; `new_analysis` starts a fresh interpreter, which gets the prelude
again.
"""

from __future__ import annotations

from typing import Any

from pydantic_monty import MontyClassProxy

from mcp_analysis.search.models import SearchResult
from mcp_analysis.store.models import INGEST_METADATA

EXCERPT_CHARS = 160  # of a hit's passage, shown when it is printed
RECORD_CLASS = "_Record"

PRELUDE = (
    f"_INGEST_METADATA = {INGEST_METADATA!r}\n"
    + '''
class _Record:
    """A search hit or a document: attributes and dict-style keys; print shows a summary."""

    def __init__(self, kind, fields):
        self._kind = kind
        self._fields = list(fields)
        for key in fields:
            setattr(self, key, fields[key])

    def __getitem__(self, key):
        if key in self._fields:
            return getattr(self, key)
        raise KeyError(key)

    def get(self, key, default=None):
        return getattr(self, key) if key in self._fields else default

    def keys(self):
        return list(self._fields)

    def values(self):
        return [getattr(self, key) for key in self._fields]

    def items(self):
        return [(key, getattr(self, key)) for key in self._fields]

    def __contains__(self, key):
        return key in self._fields

    def __iter__(self):
        return iter(self._fields)

    def to_dict(self):
        return {key: getattr(self, key) for key in self._fields}

    def __repr__(self):
        if self._kind == "hit":
            return _hit_repr(self)
        return _document_repr(self)


def _hit_repr(hit):
    parts = ["rank=" + str(hit.rank), "chunk_id=" + repr(hit.chunk_id), "document_id=" + repr(hit.document_id),
             "document_title=" + repr(hit.document_title)]
    headings = [h for h in hit.headings if h != hit.document_title]
    if headings:
        parts.append("headings=" + repr(headings))
    if hit.page_numbers:
        parts.append("page_numbers=" + repr(hit.page_numbers))
    parts.append("excerpt=" + repr(hit.excerpt))
    if len(hit.content) > len(hit.excerpt):
        parts.append(f"content=<{len(hit.content):,} chars: .content>")
    return "Hit(" + ", ".join(parts) + ")"


def _document_repr(doc):
    parts = ["id=" + repr(doc.id), "title=" + repr(doc.title), "uri=" + repr(doc.uri)]
    mine = {k: v for k, v in doc.metadata.items() if k not in _INGEST_METADATA}
    if mine:
        parts.append("metadata=" + repr(mine))
    return "Document(" + ", ".join(parts) + ")"


async def search(query, limit=None):
    """search(query, limit=10) -> list of hits (hit.content, hit["chunk_id"], hit.to_dict(), ...)."""
    return [_Record("hit", fields) for fields in await _mcp_search(query, limit)]


async def list_documents(offset=0, limit=None):
    """list_documents(offset=0, limit=None) -> list of documents (doc.id, doc["title"], doc.to_dict(), ...)."""
    return [_Record("document", fields) for fields in await _mcp_list_documents(offset, limit)]
'''
)

_host: dict[str, Any] = {}
exec(compile(PRELUDE, "<sandbox prelude>", "exec"), _host)  # the same definitions, to render returned values


def hit_fields(result: SearchResult, query: str) -> dict[str, Any]:
    """What a hit carries into the sandbox: every field of the result, plus a short excerpt."""
    return {**result.model_dump(), "excerpt": result.excerpt(query, EXCERPT_CHARS)}


def value_repr(value: Any, limit: int) -> str:
    """repr() of an execution's value as the sandbox would print it, without building a giant string."""
    if isinstance(value, str | bytes) and len(value) > limit:
        return repr(value[:limit]) + f" ... [{len(value) - limit} more characters]"
    try:
        return _repr(value) if _has_record(value) else repr(value)
    except Exception as exc:  # a proxy object whose repr fails must not fail the call
        return f"<{type(value).__name__} (repr failed: {exc})>"


def _is_record(value: Any) -> bool:
    return isinstance(value, MontyClassProxy) and value.name == RECORD_CLASS


def _has_record(value: Any, depth: int = 0) -> bool:
    if _is_record(value):
        return True
    if depth > 20:
        return False
    if isinstance(value, list | tuple | set | frozenset):
        return any(_has_record(v, depth + 1) for v in value)
    if isinstance(value, dict):
        return any(_has_record(v, depth + 1) for v in value.values())
    return False


def _repr(value: Any) -> str:
    if _is_record(value):
        record = object.__new__(_host[RECORD_CLASS])
        record.__dict__.update(value.attributes)
        return repr(record)
    if isinstance(value, list):
        return "[" + ", ".join(_repr(v) for v in value) + "]"
    if isinstance(value, tuple):
        return "(" + ", ".join(_repr(v) for v in value) + ("," if len(value) == 1 else "") + ")"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{_repr(k)}: {_repr(v)}" for k, v in value.items()) + "}"
    return repr(value)
