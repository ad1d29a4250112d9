"""Markdown through docling's Markdown backend (marko), after a check of its block nesting depth.

marko parses nested block quotes and lists recursively, at a cost that grows with the depth (1,000
nested quotes took seconds, then hit Python's recursion limit): the deepest line is measured
first (its `>` markers plus its indentation in list steps) and a document nested deeper than
`ingest.max_depth` is refused before it is parsed.

docling reads a document with HTML blocks a second time, serialised to HTML, with its HTML
backend, which it names inside `convert()`: `_backend()` has it read with ours instead, which
keeps the text docling's drops around nested lists (see html_backend.py); an HTML block nested
deeper than `ingest.max_depth` is refused as an HTML page is.
"""

from __future__ import annotations

import functools
import re
from html import unescape
from io import BytesIO
from typing import TYPE_CHECKING, Any

from mcp_analysis.ingest.formats.base import Converted, Source, check_depth

if TYPE_CHECKING:
    from docling_core.types.doc import DoclingDocument

    from mcp_analysis.ingest.limits import Limits


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


@functools.cache
def _backend(limits: Limits) -> type:
    """docling's Markdown backend handing its HTML blocks to our HTML backend.

    docling's `convert()` parses the Markdown, counting HTML blocks in `_html_blocks`, then, if it
    met any, serialises the document to HTML and reads that with its own backend. The count is
    taken over as the parse ends, so `convert()` returns the parsed document, and that last step
    is redone here (a function: docling is imported when first used).
    """
    from docling.backend.md_backend import _START_MARKER, _STOP_MARKER, MarkdownDocumentBackend
    from docling.backend.utils.markdown_html import MarkdownHTMLDocumentBackend, serialize_markdown_for_html

    from mcp_analysis.ingest.formats.html import nesting_depth as html_depth
    from mcp_analysis.ingest.formats.html_backend import HTMLBackend, convert_embedded

    class _HTML(HTMLBackend, MarkdownHTMLDocumentBackend):
        """Ours, taking the Markdown's pictures as docling's Markdown-to-HTML backend does."""

    blocks = re.compile(
        rf"<pre>\s*<code>\s*{re.escape(_START_MARKER)}(.*?){re.escape(_STOP_MARKER)}\s*</code>\s*</pre>", re.DOTALL
    )

    class _Backend(MarkdownDocumentBackend):
        _html_found = 0

        def _iterate_elements(self, **kwargs: Any) -> None:
            super()._iterate_elements(**kwargs)
            if kwargs["depth"] == 0:  # the whole document is parsed
                self._html_found, self._html_blocks = self._html_blocks, 0

        def convert(self) -> DoclingDocument:
            def _bounded(html: str) -> str:
                """An HTML block, refused as an HTML page is when nested deeper than `ingest.max_depth`."""
                block = Source(html.encode(), self.file.name, limits)
                check_depth(block, html_depth(block))
                return html

            doc = super().convert()
            if not self._html_found:
                return doc
            payload = serialize_markdown_for_html(doc, source_hash=self.document_hash)
            text, count = blocks.subn(lambda match: _bounded(unescape(match.group(1))), payload.text)
            if count != self._html_found:
                raise RuntimeError(f"{count} of the {self._html_found} HTML blocks came back from serialisation")
            stream = BytesIO(text.encode("utf-8"))
            return convert_embedded(stream, self.file.name, _HTML, picture_refs=payload.picture_refs)

    return _Backend


def convert(source: Source) -> Converted:
    from docling.datamodel.base_models import InputFormat

    from mcp_analysis.ingest.formats.html_backend import convert_checked

    check_depth(source, nesting_depth(source.data, source.limits.max_depth))
    return convert_checked(source, InputFormat.MD, _backend(source.limits), "markdown", "markdown")
