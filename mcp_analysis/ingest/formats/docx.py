"""DOCX through docling's Word backend (python-docx)."""

from __future__ import annotations

from mcp_analysis.ingest.formats._docling import run_backend
from mcp_analysis.ingest.formats.base import Converted, Source

SUFFIXES = (".docx",)


def convert(source: Source) -> Converted:
    from docling.backend.msword_backend import MsWordDocumentBackend
    from docling.datamodel.base_models import InputFormat

    return Converted(run_backend(source, InputFormat.DOCX, MsWordDocumentBackend, "docx"), "docx")
