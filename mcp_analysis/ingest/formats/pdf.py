"""PDF text layer -> DoclingDocument, without layout models (none can be downloaded here).

pypdfium2 gives characters with font size and position, read line by line per page
(pdf_lines.py); pdf_layout.py turns the lines into docling items (paragraphs, headings, lists, tables, page
furniture). Every item carries its page number. A page without a text layer is read by OCR
(pdf_ocr.py) when `ingest.ocr` is auto; a page that yields no text either way is one warning
line, and a PDF without any text is refused.
"""

from __future__ import annotations

from mcp_analysis.errors import IngestError
from mcp_analysis.ingest.formats.base import Converted, Source, check_items
from mcp_analysis.ingest.formats.ocr import OcrBudget
from mcp_analysis.ingest.formats.pdf_lines import Line, page_lines

_OCR_SAYS = {"auto": " and no recognisable text", "off": " (OCR is off: ingest.ocr)"}


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
        ocr_pages: list[int] = []
        warnings: list[str] = []
        budget = OcrBudget(source.limits.max_seconds)
        for index in range(len(pdf)):
            page = pdf[index]
            sizes.append((float(page.get_width()), float(page.get_height())))
            lines = page_lines(page, index + 1)
            if not lines and source.limits.ocr == "auto":
                if budget.allows(index + 1):  # else named in the budget's one warning
                    from mcp_analysis.ingest.formats.pdf_ocr import ocr_page_lines

                    lines = ocr_page_lines(page, index + 1)
                    if lines:
                        ocr_pages.append(index + 1)
                    else:
                        warnings.append(f"page {index + 1}: no text layer" + _OCR_SAYS["auto"])
            elif not lines:
                warnings.append(f"page {index + 1}: no text layer" + _OCR_SAYS[source.limits.ocr])
            pages.append(lines)
            lines_seen += len(pages[-1])
            check_items(source, lines_seen, "lines of text")
    finally:
        pdf.close()
    if (left_out := budget.warning()) is not None:
        warnings.append(left_out)

    if not any(pages):
        raise IngestError("the PDF has no text layer" + _OCR_SAYS[source.limits.ocr])
    from mcp_analysis.ingest.formats.pdf_layout import build_document

    return Converted(build_document(source.stem, pages, sizes), "pdf", warnings=warnings, ocr_pages=ocr_pages)
