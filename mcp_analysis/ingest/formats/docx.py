"""DOCX through docling's Word backend (python-docx), after a streaming count of its paragraphs.

python-docx and docling hold every paragraph as objects (about 10 KB each once converted), so a
small file of tiny paragraphs can cost gigabytes: the body is counted first, unpacked piece by
piece under `ingest.max_unpacked_mb`, and refused past `ingest.max_items` before it is parsed.
"""

from __future__ import annotations

import re

from mcp_analysis.ingest.formats._docling import run_backend
from mcp_analysis.ingest.formats.base import BoundedZip, Converted, Source, check_items

_PARAGRAPH = re.compile(rb"<w:p[\s>/]")  # 5 bytes: a match always reaches past a 4-byte carry-over


def count_paragraphs(source: Source) -> int:
    """Paragraphs in word/document.xml, stopping as soon as there are more than `max_items`."""
    read = BoundedZip(source).chunks("word/document.xml")
    count = 0
    carry = b""
    while piece := read():
        window = carry + piece
        count += len(_PARAGRAPH.findall(window))
        check_items(source, count, "paragraphs")
        carry = window[-4:]
    return count


def convert(source: Source) -> Converted:
    from docling.backend.msword_backend import MsWordDocumentBackend
    from docling.datamodel.base_models import InputFormat

    count_paragraphs(source)
    return Converted(run_backend(source, InputFormat.DOCX, MsWordDocumentBackend, "docx"), "docx")
