"""How search hits and documents look inside the sandbox: compact when printed, whole on access.

Printed whole, `print(await search("warranty", limit=10))` would show ten 5,000-character passages. Host
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

from mcp_analysis.sandbox.charting import CHART_PRELUDE
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
    + CHART_PRELUDE
)

_host: dict[str, Any] = {}
exec(compile(PRELUDE, "<sandbox prelude>", "exec"), _host)  # the same definitions, to render returned values


def hit_fields(result: SearchResult, query: str) -> dict[str, Any]:
    """What a hit carries into the sandbox: every field of the result, plus a short excerpt."""
    return {**result.model_dump(), "excerpt": result.excerpt(query, EXCERPT_CHARS)}


def value_repr(value: Any, limit: int) -> str:
    """repr() of an execution's value as the sandbox would print it, in at most `limit` characters.

    Built piece by piece and stopped at the limit: a value cheap for the sandbox to hold can be
    huge to print (``[s] * 3000`` is 3,000 references to one string), and rendering it whole
    built gigabytes on the server's event loop. Records render through the prelude's own code,
    from attributes cut to the limit first.
    """
    if isinstance(value, str | bytes) and len(value) > limit:
        return repr(value[:limit]) + f" ... [{len(value) - limit} more characters]"
    writer = _Writer(limit)
    try:
        _write(value, writer)
    except _Full:
        return writer.text() + f" … [value cut at {limit:,} characters: print or slice the part you need]"
    except Exception as exc:  # a proxy whose repr fails, nesting too deep: must not fail the call
        return f"<{type(value).__name__} (repr failed: {exc})>"
    return writer.text()


# The attributes the prelude's __repr__ reads (a record may carry any number of others).
_RECORD_SHOWS = (
    "_kind", "rank", "chunk_id", "document_id", "document_title", "headings", "page_numbers", "excerpt", "content",
    "id", "title", "uri", "metadata",
)  # fmt: skip


class _Full(Exception):
    """The writer reached its limit."""


class _Writer:
    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.parts: list[str] = []
        self.size = 0

    @property
    def room(self) -> int:
        return self.limit - self.size

    def write(self, text: str) -> None:
        if len(text) > self.room:
            self.parts.append(text[: self.room])
            self.size = self.limit
            raise _Full
        self.parts.append(text)
        self.size += len(text)

    def text(self) -> str:
        return "".join(self.parts)


def _is_record(value: Any) -> bool:
    return isinstance(value, MontyClassProxy) and value.name == RECORD_CLASS


def _write(value: Any, out: _Writer) -> None:
    if isinstance(value, str | bytes | bytearray):
        out.write(repr(value[: out.room + 1]))  # never more than fits (a cut repr loses its quote: fine)
    elif isinstance(value, int) and not isinstance(value, bool):
        out.write(_int_repr(value))
    elif _is_record(value):
        record = object.__new__(_host[RECORD_CLASS])
        fields = value.attributes
        record.__dict__.update({k: _clipped(fields[k], out.room + 1) for k in _RECORD_SHOWS if k in fields})
        out.write(repr(record))
    elif isinstance(value, MontyClassProxy):
        out.write(f"MontyClassProxy(name={value.name!r}, attributes=")
        _write(value.attributes, out)
        out.write(")")
    elif isinstance(value, list):
        _write_items(value, "[", "]", out)
    elif isinstance(value, tuple):
        _write_items(value, "(", ",)" if len(value) == 1 else ")", out)
    elif isinstance(value, set | frozenset):
        kind = type(value).__name__
        if not value:
            out.write(f"{kind}()")
        else:
            _write_items(value, "{" if kind == "set" else "frozenset({", "}" if kind == "set" else "})", out)
    elif isinstance(value, dict):
        out.write("{")
        for i, (key, item) in enumerate(value.items()):
            if i:
                out.write(", ")
            _write(key, out)
            out.write(": ")
            _write(item, out)
        out.write("}")
    else:
        out.write(repr(value))


def _write_items(items: Any, opening: str, closing: str, out: _Writer) -> None:
    out.write(opening)
    for i, item in enumerate(items):
        if i:
            out.write(", ")
        _write(item, out)
    out.write(closing)


def _int_repr(value: int) -> str:
    try:
        return repr(value)
    except ValueError:  # more digits than Python converts (sys.get_int_max_str_digits)
        digits = int(value.bit_length() * 0.30103) + 1
        return f"<int of {digits:,} digits>"


class _Shown:
    """A value inside a record, already rendered (bounded) by `value_repr`."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


class _Long(str):
    """The head of a long text attribute; `len()` still gives the whole length (a hit prints it)."""

    whole: int

    def __new__(cls, text: str, whole: int) -> _Long:
        made = super().__new__(cls, text)
        made.whole = whole
        return made

    def __len__(self) -> int:
        return self.whole


def _clipped(value: Any, room: int) -> Any:
    """`value` cut so that its repr inside a record's stays within about `room` characters."""
    if isinstance(value, str):
        return value if len(value) <= room else _Long(value[:room], len(value))
    if isinstance(value, bool | float | type(None)) or (isinstance(value, int) and value.bit_length() <= 4096):
        return value
    if isinstance(value, list | dict):  # stays a list / dict: the prelude iterates it
        kept: Any = [] if isinstance(value, list) else {}
        left = room
        for item in value:
            if left <= 0:
                if isinstance(kept, list):
                    kept.append(_Shown("..."))
                else:
                    kept["..."] = _Shown("...")
                break
            if isinstance(kept, list):
                kept.append(_clipped(item, left))
                left -= len(repr(kept[-1])) + 2
            else:
                key, shown = _clipped(item, left), _Shown(value_repr(value[item], left))
                kept[key] = shown
                left -= len(repr(key)) + len(shown.text) + 4
        return kept
    return _Shown(value_repr(value, room))
