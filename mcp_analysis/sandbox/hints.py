"""Errors from sandboxed code, as CPython-style tracebacks plus a hint where monty differs.

The model writing the code knows CPython; when it hits one of monty's gaps it gets
one line naming the supported alternative, so its next attempt works.
"""

from __future__ import annotations

import re

AVAILABLE_MODULES = (
    "json, re, math, pathlib, datetime, collections, itertools, functools, csv, hashlib, base64, "
    "asyncio, os (read-only /documents), time, random, dataclasses, typing, decimal, bisect, copy, "
    "unicodedata, sys, tomllib, statistics"
)

_HINTS: list[tuple[re.Pattern[str], str]] = [
    (
        re.compile(r"Object of type _Record is not JSON serializable"),
        "Hint: search() hits and list_documents() entries are objects; convert them with .to_dict(), "
        "e.g. json.dumps([h.to_dict() for h in hits]).",
    ),
    (
        re.compile(r"'_Record' object has no attribute"),
        "Hint: a hit has chunk_id, content, excerpt, document_id, document_title, document_uri, score, rank, "
        "page_numbers, headings, doc_item_refs, labels, picture_refs; a document has id, title, uri, "
        "created_at, metadata (hit.keys() lists them).",
    ),
    (
        re.compile(r"does not yet support class inheritance"),
        "Hint: classes cannot inherit here; use a class without a base, a dict, or functions.",
    ),
    (
        re.compile(r"does not yet support yield"),
        "Hint: generators (yield) are not supported; build and return a list instead.",
    ),
    (
        re.compile(r"does not yet support (\w[\w ]*)"),
        "Hint: this Python feature is not available in the sandbox; rewrite it with plain functions, "
        "loops, lists and dicts.",
    ),
    (
        re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'"),
        "Hint: only these modules exist: " + AVAILABLE_MODULES + ". There is no network, subprocess or "
        "host filesystem; read documents under /documents and use await search(...).",
    ),
    (
        re.compile(r"cannot create '(property|staticmethod|classmethod)' instances"),
        "Hint: property/staticmethod/classmethod decorators are not supported; use plain methods or functions.",
    ),
    (
        re.compile(r"'coroutine' object is not (iterable|subscriptable)|object of type 'coroutine' has no len"),
        "Hint: search() and list_documents() are async: write `results = await search('...')`.",
    ),
    (
        re.compile(r"'<' not supported between instances of '\w*Path'"),
        "Hint: Path objects are not orderable here; sort by name: sorted(paths, key=str).",
    ),
    (
        re.compile(r"'_io\.\w+' object is not iterable|file object is not iterable"),
        "Hint: iterate over the text instead: for line in f.read().splitlines(): ...",
    ),
    (
        re.compile(r"PermissionError"),
        "Hint: /documents is read-only and nothing else is writable; keep results in variables instead.",
    ),
    (
        re.compile(r"FileNotFoundError"),
        "Hint: documents live at /documents/{id}/ (metadata.json, content.txt, items.jsonl, toc.json, tables.json); "
        "list them with Path('/documents').iterdir() or await list_documents().",
    ),
    (
        re.compile(r"NameError: name '(__import__|open_url|requests|subprocess|exec_host)' is not defined"),
        "Hint: host access is limited to /documents, search() and list_documents().",
    ),
]


def hint_for(traceback_text: str) -> str | None:
    for pattern, hint in _HINTS:
        if pattern.search(traceback_text):
            return hint
    return None


def with_hint(traceback_text: str) -> str:
    hint = hint_for(traceback_text)
    return f"{traceback_text.rstrip()}\n{hint}" if hint else traceback_text.rstrip()
