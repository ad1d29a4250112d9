"""Document filters: one SQL WHERE expression over document metadata.

A filter is checked before use. A syntax error, an unknown column or a second
statement is a FilterError naming the problem, never a crash and never
"no filter" (which would widen access).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from mcp_analysis.errors import FilterError

# Columns of `document_meta` (store/schema.py) a document filter may use. Kept here, not beside
# the pyarrow schemas, so that checking a filter at start-up does not import pyarrow.
FILTER_COLUMNS = (
    "id",
    "uri",
    "title",
    "metadata",
    "created_at",
    "updated_at",
    "content_hash",
    "content_size",
)

_HELP = (
    "A filter is one SQL WHERE expression over document metadata; columns: "
    + ", ".join(FILTER_COLUMNS)
    + ". Example: uri LIKE '%report%' AND created_at >= '2025-01-01'."
)
_MAX_LENGTH = 4000


def sql_quote(value: str) -> str:
    """A SQL string literal."""
    return "'" + value.replace("'", "''") + "'"


def sql_in(column: str, values: Iterable[str]) -> str:
    items = [sql_quote(v) for v in values]
    if not items:
        return "FALSE"
    return f"{column} IN ({', '.join(items)})"


def _outside_literals(expression: str) -> str:
    """The expression with string literals and quoted identifiers blanked out."""
    return re.sub(r"'(?:[^']|'')*'|\"(?:[^\"]|\"\")*\"|`[^`]*`", "''", expression)


def normalize_filter(expression: str | None) -> str | None:
    """Cheap syntactic checks; returns the trimmed filter or None for "no filter"."""
    if expression is None:
        return None
    text = expression.strip()
    if not text:
        return None
    if len(text) > _MAX_LENGTH:
        raise FilterError(f"Filter is {len(text)} characters long; the limit is {_MAX_LENGTH}. {_HELP}")
    bare = _outside_literals(text)
    if bare.count("'") % 2 or "'" in bare.replace("''", ""):
        raise FilterError(f"Filter has an unterminated string literal: {text!r}. {_HELP}")
    depth = 0
    for char in bare:
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth < 0:
            break
    if depth != 0:
        # Also what keeps "(a) AND (b)" from being widened by a b like "x) OR (1=1".
        raise FilterError(f"Filter has unbalanced parentheses: {text!r}. {_HELP}")
    if ";" in bare:
        raise FilterError(f"Filter must be a single expression; ';' is not allowed: {text!r}. {_HELP}")
    if "--" in bare or "/*" in bare:
        raise FilterError(f"Filter must not contain SQL comments: {text!r}. {_HELP}")
    if re.search(r"\b(select|insert|update|delete|drop|union|create|alter)\b", bare, re.IGNORECASE):
        raise FilterError(f"Filter must be a WHERE expression, not a statement or subquery: {text!r}. {_HELP}")
    return text


def combine_filters(*expressions: str | None) -> str | None:
    """AND of the given filters (None entries ignored)."""
    parts = [e for e in expressions if e]
    if not parts:
        return None
    if len(parts) == 1:
        return parts[0]
    return " AND ".join(f"({p})" for p in parts)


def filter_error_from(exc: Exception, expression: str) -> FilterError:
    """Turn a DataFusion/Lance planning error into a readable FilterError."""
    raw = str(exc).strip()
    unknown = re.search(r"No field named ([\w\"'`]+)", raw)
    if unknown:
        column = unknown.group(1).strip("\"'`")
        own = (  # a key given with `add --meta key=value` is no column: it is in the metadata's JSON text
            f" A key given with `--meta {column}=value` is inside the metadata column's JSON text: "
            f'metadata LIKE \'%"{column}": "value"%\'.'
        )
        return FilterError(f"Invalid filter {expression!r}: unknown column {column!r}.{own} {_HELP}")
    parser = re.search(r"sql parser error: (.*?)\)?$", raw.splitlines()[0] if raw else "")
    if parser:
        return FilterError(f"Invalid filter {expression!r}: syntax error ({parser.group(1)}). {_HELP}")
    message = raw.splitlines()[0] if raw else type(exc).__name__
    message = re.sub(r"^(lance error: |Invalid input, |Query Execution error: |Execution error: )+", "", message)
    message = re.sub(r", /\S+\.rs:\d+:\d+$", "", message)  # drop Rust source locations
    return FilterError(f"Invalid filter {expression!r}: {message[:300]}. {_HELP}")
