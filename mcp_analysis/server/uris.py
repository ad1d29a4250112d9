"""Every resource URI the server serves or names: the templates it registers and their builders.

A builder fills its template, so a URI written into a tool result always matches a
resource the server answers.
"""

from __future__ import annotations

#: The files of a document, as the sandbox has them under /documents/{id}/, and their MIME types.
DOCUMENT_FILES = {
    "metadata.json": "application/json",
    "content.txt": "text/plain",
    "items.jsonl": "application/jsonl",
    "toc.json": "application/json",
    "tables.json": "application/json",
}
#: Every row of one of a document's tables (tables.json lists them): not listed, read by template.
DOCUMENT_TABLE_CSV = "documents:///{document_id}/tables/{index}.csv"

SESSION_STATE = "analysis://sessions/{session_id}/state"
SESSION_EXECUTION = "analysis://sessions/{session_id}/executions/{index}"
#: A chart a session keeps, by its number: the PNG, the SVG, and the Vega-Lite spec with its rows.
SESSION_CHART_FILES = {"png": "image/png", "svg": "image/svg+xml", "json": "application/json"}


def document_file_template(name: str) -> str:
    """The template of one of `DOCUMENT_FILES`, e.g. ``documents:///{document_id}/content.txt``."""
    return "documents:///{document_id}/" + name


def document_file(document_id: str, name: str) -> str:
    return document_file_template(name).format(document_id=document_id)


def session_state(session_id: str) -> str:
    return SESSION_STATE.format(session_id=session_id)


def session_execution(session_id: str, index: int | str) -> str:
    return SESSION_EXECUTION.format(session_id=session_id, index=index)


def session_chart_template(extension: str) -> str:
    """The template of a chart file, e.g. ``analysis://sessions/{session_id}/charts/{n}.png``."""
    return "analysis://sessions/{session_id}/charts/{n}." + extension


def session_chart(session_id: str, n: int | str, extension: str) -> str:
    return session_chart_template(extension).format(session_id=session_id, n=n)
