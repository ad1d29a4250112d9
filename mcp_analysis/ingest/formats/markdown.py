"""Markdown through docling's Markdown backend (marko), after a check of its block nesting depth.

marko parses nested block quotes and lists recursively, at a cost that grows with the depth (1,000
nested quotes took seconds, then hit Python's recursion limit): the deepest line is measured
first (its `>` markers plus its indentation in list steps) and a document nested deeper than
`ingest.max_depth` is refused before it is parsed.
"""

from __future__ import annotations

import re

from mcp_analysis.ingest.formats._docling import run_backend
from mcp_analysis.ingest.formats.base import Converted, Source, check_depth


def nesting_depth(data: bytes, limit: int) -> int:
    """The deepest line's `>` markers plus its indentation in two-space list steps, counted exactly
    only for lines whose prefix could pass `limit` (a tab is at most two steps): a plain document
    costs one scan in C."""
    candidates = re.compile(rb"^[ \t>]{%d,}" % max(1, (limit + 1) // 2), re.MULTILINE)
    deepest = 0
    for match in candidates.finditer(data):
        prefix = match.group().expandtabs(4)
        quotes = prefix.count(b">")
        indent = len(prefix) - prefix.rfind(b">") - 1 if quotes else len(prefix)
        deepest = max(deepest, quotes + indent // 2)
    return deepest


def convert(source: Source) -> Converted:
    from docling.backend.md_backend import MarkdownDocumentBackend
    from docling.datamodel.base_models import InputFormat

    check_depth(source, nesting_depth(source.data, source.limits.max_depth))
    return Converted(run_backend(source, InputFormat.MD, MarkdownDocumentBackend, "markdown"), "markdown")
