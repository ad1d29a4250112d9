"""Source code: blank-line separated blocks as code items, in the docling model."""

from __future__ import annotations

from mcp_analysis.ingest.formats.base import Converted, Source, check_items, decode_text


def convert(source: Source) -> Converted:
    """Blank-line separated blocks as code items (indentation kept), under the file name as title."""
    from docling_core.types.doc import DoclingDocument

    text = decode_text(source.data).replace("\r\n", "\n")
    blocks: list[str] = []
    block: list[str] = []
    for line in text.split("\n"):
        if not line.strip() and block:
            blocks.append("\n".join(block))
            block = []
            check_items(source, len(blocks), "code blocks")
        elif line.strip() or block:
            block.append(line)
    if block:
        blocks.append("\n".join(block))
    check_items(source, len(blocks), "code blocks")
    doc = DoclingDocument(name=source.name)
    doc.add_title(text=source.name)
    for code in blocks:
        doc.add_code(text=code)
    return Converted(doc, "code")
