"""PDF pages without a text layer, read by OCR (ingest.ocr = auto).

pdf.py reads the text layer; a page that has none is rendered at 300 dpi (pypdfium2) and
its OCR lines are handed back as pdf_lines.Line in PDF points, so the same paragraph, list
and furniture rules apply. The caller records OCR'd pages; a page where OCR finds nothing
is one warning line.
"""

from __future__ import annotations

import statistics
from typing import Any

from mcp_analysis.ingest.formats.ocr import OcrLine, recognise
from mcp_analysis.ingest.formats.pdf_lines import Line

DPI = 300


def ocr_page_lines(page: Any, number: int) -> list[Line]:
    """The page's text by OCR, as lines (empty when OCR recognises nothing)."""
    image = page.render(scale=DPI / 72).to_pil()
    lines = recognise(image)
    return _as_pdf_lines(lines, float(page.get_height()), number) if lines else []


def _as_pdf_lines(lines: list[OcrLine], page_height: float, number: int) -> list[Line]:
    """OCR lines (pixels, top-left origin) as PDF lines (points, bottom-left origin).

    A line's font size is the page's median line height unless it is clearly taller (a
    heading): ascenders and descenders must not make ordinary lines look like headings."""
    scale = 72 / DPI
    heights = [line.bottom - line.top for line in lines]
    median = statistics.median(heights)
    out = []
    for line, height in zip(lines, heights, strict=True):
        size = (height if height > 1.4 * median else median) * scale * 0.75
        out.append(
            Line(
                text=line.text,
                size=size,
                bold=False,
                top=page_height - line.top * scale,
                bottom=page_height - line.bottom * scale,
                left=line.left * scale,
                right=line.right * scale,
                page=number,
                page_height=page_height,
            )
        )
    return out
