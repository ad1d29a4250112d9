"""PDF text layer -> DoclingDocument, without layout models (none can be downloaded here).

pypdfium2 gives characters with font size and position, read line by line per page
(pdf_lines.py); pdf_layout.py turns the lines into docling items (paragraphs, headings, lists, tables, page
furniture). Every item carries its page number. Scanned PDFs without a text layer yield no
text (there is no OCR); they are reported, not ingested empty.
"""

from __future__ import annotations

from mcp_analysis.errors import IngestError
from mcp_analysis.ingest.formats.base import Converted, Source, check_items
from mcp_analysis.ingest.formats.pdf_lines import Line, page_lines


def convert(source: Source) -> Converted:
    """The PDF's text layer as docling items, one page at a time, under `ingest.max_items`."""
    import pypdfium2 as pdfium

    try:
        pdf = pdfium.PdfDocument(source.data)
    except Exception as exc:
        raise IngestError(f"not a readable PDF ({exc})") from exc
    try:
        check_items(source, len(pdf), "pages")
        pages: list[list[Line]] = []
        sizes: list[tuple[float, float]] = []
        lines_seen = 0
        for index in range(len(pdf)):
            page = pdf[index]
            sizes.append((float(page.get_width()), float(page.get_height())))
            pages.append(page_lines(page, index + 1))
            lines_seen += len(pages[-1])
            check_items(source, lines_seen, "lines of text")
    finally:
        pdf.close()

    if not any(pages):
        raise IngestError("the PDF has no text layer (scanned images need OCR, which is not available)")
    from mcp_analysis.ingest.formats.pdf_layout import build_document

    return Converted(build_document(source.stem, pages, sizes), "pdf")
