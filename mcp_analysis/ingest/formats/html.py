"""HTML through docling's HTML backend (BeautifulSoup)."""

from __future__ import annotations

from mcp_analysis.ingest.formats._docling import run_backend
from mcp_analysis.ingest.formats.base import Converted, Source

SUFFIXES = (".html", ".htm", ".xhtml")


def convert(source: Source) -> Converted:
    from docling.backend.html_backend import HTMLDocumentBackend
    from docling.datamodel.base_models import InputFormat

    return Converted(run_backend(source, InputFormat.HTML, HTMLDocumentBackend, "html"), "html")
