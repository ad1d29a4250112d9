"""E-books (.epub) through docling's EPUB backend: chapters in spine order, as HTML.

The backend bounds what it reads from the archive (per member and in total) and
refuses unsafe member paths; images are not fetched. docling's EPUB backend reads the
chapters, joined, with its own HTML backend, which it names inside `convert()`: `_Backend`
redoes that one method (without fetching images) and reads them with ours, so a chapter
keeps the text docling's drops around nested lists (see html_backend.py). Each chapter is
refused, as an HTML page is, when its elements nest deeper than `ingest.max_depth`.
"""

from __future__ import annotations

import functools
import re
from io import BytesIO
from typing import TYPE_CHECKING

from mcp_analysis.ingest.formats.base import Converted, Source, check_depth
from mcp_analysis.ingest.formats.html import nesting_depth
from mcp_analysis.ingest.formats.office import check_unpacked

if TYPE_CHECKING:
    from docling_core.types.doc import DoclingDocument

    from mcp_analysis.ingest.limits import Limits

_BODY = re.compile(r"<body[^>]*>(.*?)</body>", re.DOTALL | re.IGNORECASE)  # as docling finds a chapter's body


@functools.cache
def _backend(limits: Limits) -> type:
    """The EPUB backend reading its chapters, each nested no deeper than `limits.max_depth` (see
    html.py), with our HTML backend (a function: docling is imported when first used)."""
    from docling.backend.epub_backend import EpubDocumentBackend
    from docling.backend.utils.archive_limits import ArchiveLimitError, read_member
    from docling_core.types.doc import DocumentOrigin

    from mcp_analysis.ingest.formats.html_backend import add_note, convert_embedded

    class _Backend(EpubDocumentBackend):
        def convert(self) -> DoclingDocument:
            """docling's `convert()` with images never fetched, through `HTMLBackend`."""
            if not self.is_valid() or self.epub_zip is None:
                raise RuntimeError("the EPUB backend failed to open the file")
            parts = ['<!DOCTYPE html><html><head><meta charset="utf-8"/></head><body>']
            for name in self.content_files:  # spine order
                try:
                    text = self._decode_content_file(read_member(self.epub_zip, name, self.options.max_file_bytes))
                except ArchiveLimitError:
                    raise
                except Exception as exc:  # as docling does: the book without that chapter, and a warning of the file
                    add_note(self.file.name, f"chapter {name} could not be read: {exc}")
                    continue
                body = _BODY.search(text)
                html = body.group(1) if body else text
                chapter = Source(html.encode(), name, limits)
                check_depth(chapter, nesting_depth(chapter))  # before the HTML parser: html.py says why
                parts.append(self._fix_internal_links(html))
            parts.append("</body></html>")
            name = self.file.name or "book.epub"  # what the HTML backend's warnings name
            doc = convert_embedded(BytesIO("\n".join(parts).encode("utf-8")), name)
            doc.origin = DocumentOrigin(filename=name, mimetype="application/epub+zip", binary_hash=self.document_hash)
            doc.name = self.file.stem or "book"
            return doc

    return _Backend


def convert(source: Source) -> Converted:
    from docling.datamodel.backend_options import EpubBackendOptions
    from docling.datamodel.base_models import InputFormat

    from mcp_analysis.ingest.formats.html_backend import convert_checked

    check_unpacked(source)
    options = EpubBackendOptions(fetch_images=False)
    return convert_checked(source, InputFormat.EPUB, _backend(source.limits), "e-book", "epub", options)
