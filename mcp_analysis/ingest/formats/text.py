"""Plain text: blank-line separated paragraphs, in the docling model."""

from __future__ import annotations

import re

from mcp_analysis.ingest.formats.base import Converted, Source, check_items, decode_text

_BLANK_LINES = re.compile(r"\n\s*\n")


def convert(source: Source) -> Converted:
    """Blank-line separated paragraphs; a short first line on its own is the title."""
    from docling_core.types.doc import DocItemLabel, DoclingDocument

    text = decode_text(source.data).replace("\r\n", "\n")
    blocks = [b.strip() for b in _BLANK_LINES.split(text) if b.strip()]
    check_items(source, len(blocks), "paragraphs")
    doc = DoclingDocument(name=source.stem)
    if len(blocks) > 1 and "\n" not in blocks[0] and len(blocks[0]) <= 150 and source.suffix != ".csv":
        doc.add_title(text=blocks.pop(0))
    for block in blocks:
        doc.add_text(label=DocItemLabel.TEXT, text=block)
    return Converted(doc, "text")
