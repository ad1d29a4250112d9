"""Markdown through docling's Markdown backend (marko)."""

from __future__ import annotations

from mcp_analysis.ingest.formats._docling import run_backend
from mcp_analysis.ingest.formats.base import Converted, Source

SUFFIXES = (".md", ".markdown", ".mdx")


def convert(source: Source) -> Converted:
    from docling.backend.md_backend import MarkdownDocumentBackend
    from docling.datamodel.base_models import InputFormat

    return Converted(run_backend(source, InputFormat.MD, MarkdownDocumentBackend, "markdown"), "markdown")
