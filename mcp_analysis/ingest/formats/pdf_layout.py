"""A PDF's lines (pdf.py) -> docling items.

Lines are grouped into paragraphs by vertical gaps; lines set in a clearly larger (or bold,
short) font become section headers; lines repeated at the top/bottom of most pages become page
headers/footers; runs of lines split into cells by wide gaps become tables.
"""

from __future__ import annotations

import itertools
import re
import statistics
from collections import Counter
from typing import Any

from docling_core.types.doc import (
    BoundingBox,
    ContentLayer,
    DocItemLabel,
    DoclingDocument,
    ProvenanceItem,
    Size,
)

from mcp_analysis.ingest.formats.pdf_lines import Line

_BULLET = re.compile(r"^\s*([-\u2022\u2023\u25aa\u25cf\u2013*\u00b7]|\d{1,3}[.)]|[a-z][.)])\s+")


def build_document(name: str, pages: list[list[Line]], sizes: list[tuple[float, float]]) -> DoclingDocument:
    doc = DoclingDocument(name=name)
    for number, (width, height) in enumerate(sizes, start=1):
        doc.add_page(page_no=number, size=Size(width=width, height=height))
    body_lines = [line for lines in pages for line in lines]
    body_size = statistics.median(line.size for line in body_lines if line.size > 0) if body_lines else 10.0
    furniture = _furniture_keys(pages)
    heading_sizes = sorted({round(line.size, 1) for line in body_lines if line.size >= body_size * 1.15}, reverse=True)
    builder = _Builder(doc, body_size, furniture, heading_sizes)
    for lines in pages:
        builder.page(lines)
    return doc


def _normalize_furniture(text: str) -> str:
    return re.sub(r"\d+", "#", text.lower()).strip()


def _furniture_keys(pages: list[list[Line]]) -> set[str]:
    """Lines that repeat near the top or bottom of most pages (running headers/footers)."""
    if len(pages) < 3:
        return set()
    counts: Counter[str] = Counter()
    for lines in pages:
        seen = set()
        for line in lines:
            near_edge = line.top > line.page_height * 0.92 or line.bottom < line.page_height * 0.08
            if near_edge and len(line.text) < 120:
                seen.add(_normalize_furniture(line.text))
        counts.update(seen)
    return {key for key, n in counts.items() if n >= max(2, len(pages) // 2)}


def _is_page_number(line: Line, body_size: float) -> bool:
    near_edge = line.top > line.page_height * 0.92 or line.bottom < line.page_height * 0.08
    return (
        near_edge
        and line.size <= body_size * 1.05
        and bool(re.fullmatch(r"(page\s*)?\d+(\s*(of|/)\s*\d+)?", line.text.strip(), re.IGNORECASE))
    )


def _add_table(doc: DoclingDocument, rows: list[list[str]], first: Line) -> None:
    from docling_core.types.doc import TableCell, TableData

    width = max(len(r) for r in rows)
    data = TableData(num_rows=len(rows), num_cols=width, table_cells=[])
    for r, row in enumerate(rows):
        for c, value in enumerate(row):
            data.table_cells.append(
                TableCell(
                    text=value,
                    start_row_offset_idx=r,
                    end_row_offset_idx=r + 1,
                    start_col_offset_idx=c,
                    end_col_offset_idx=c + 1,
                    column_header=r == 0,
                )
            )
    bbox = BoundingBox(l=first.left, t=first.top, r=first.right, b=first.bottom)
    doc.add_table(data=data, prov=ProvenanceItem(page_no=first.page, bbox=bbox, charspan=(0, 0)))


def _prov(line: Line, charlen: int) -> ProvenanceItem:
    bbox = BoundingBox(l=line.left, t=line.top, r=line.right, b=line.bottom)
    return ProvenanceItem(page_no=line.page, bbox=bbox, charspan=(0, charlen))


class _Builder:
    """Turns each page's lines into docling items (furniture, tables, headings, paragraphs)."""

    def __init__(self, doc: DoclingDocument, body_size: float, furniture: set[str], heading_sizes: list[float]):
        self.doc = doc
        self.body_size = body_size
        self.furniture = furniture
        self.heading_sizes = heading_sizes
        self.title_done = False
        self.paragraph: list[Line] = []
        self.widest = 1.0
        self.list_group: Any = None  # the open list, while consecutive bullets continue it

    def flush(self, keep_list: bool = False) -> None:
        if not self.paragraph:
            if not keep_list:
                self.list_group = None
            return
        # Lines that fill the measure are wrapped prose; short lines (addresses, verse)
        # keep their breaks so their structure survives.
        text = self.paragraph[0].text
        for prev, line in itertools.pairwise(self.paragraph):
            full = (prev.right - prev.left) >= self.widest * 0.7
            text += (" " if full else "\n") + line.text
        text = re.sub(r"(\w)- (\w)", r"\1\2", text)  # re-join hyphenated line breaks
        bullet = _BULLET.match(text)
        prov = _prov(self.paragraph[0], len(text))
        if bullet:
            if self.list_group is None:
                self.list_group = self.doc.add_list_group()
            marker = bullet.group(1)
            enumerated = marker[0].isalnum()
            self.doc.add_list_item(
                text=text[bullet.end() :], marker=marker, enumerated=enumerated, parent=self.list_group, prov=prov
            )
        else:
            self.list_group = None
            self.doc.add_text(label=DocItemLabel.TEXT, text=text, prov=prov)
        self.paragraph = []
        if not keep_list:
            self.list_group = None

    def page(self, lines: list[Line]) -> None:
        pitches = [
            a.bottom - b.bottom for a, b in itertools.pairwise(lines) if 0 < a.bottom - b.bottom < self.body_size * 3
        ]
        pitch = statistics.median(pitches) if pitches else self.body_size * 1.4
        self.widest = max((line.right - line.left for line in lines), default=1.0) or 1.0
        all_bold = all(p.bold for p in lines)
        index = 0
        while index < len(lines):
            line = lines[index]
            following = lines[index + 1] if index + 1 < len(lines) else None
            if _normalize_furniture(line.text) in self.furniture or _is_page_number(line, self.body_size):
                self.flush()
                label = DocItemLabel.PAGE_HEADER if line.top > line.page_height / 2 else DocItemLabel.PAGE_FOOTER
                self.doc.add_text(
                    label=label, text=line.text, prov=_prov(line, len(line.text)), content_layer=ContentLayer.FURNITURE
                )
                index += 1
                continue
            if line.cells and following is not None and following.cells:
                self.flush()
                rows = [line.cells]
                while index + 1 < len(lines) and lines[index + 1].cells:
                    index += 1
                    rows.append(lines[index].cells or [])
                _add_table(self.doc, rows, line)
                index += 1
                continue
            larger = round(line.size, 1) in self.heading_sizes
            gap_after = (line.bottom - following.bottom) if following else pitch * 2
            bold_heading = (
                line.bold
                and not larger
                and not all_bold
                and len(line.text) < 100
                and not line.text.endswith((".", ",", ";", ":"))
                and gap_after > pitch * 1.2
            )
            if larger or bold_heading:
                index = self._heading(lines, index, larger)
                continue
            if _BULLET.match(line.text) and self.paragraph:
                self.flush(keep_list=True)  # each bullet starts a new list item
            elif self.paragraph:
                previous = self.paragraph[-1]
                gap = previous.bottom - line.bottom
                if gap > pitch * 1.3 or gap < 0 or abs(line.size - previous.size) > 0.5:
                    self.flush(keep_list=bool(_BULLET.match(self.paragraph[0].text)) and gap < pitch * 2.5)
            self.paragraph.append(line)
            index += 1
        self.flush()

    def _heading(self, lines: list[Line], index: int, larger: bool) -> int:
        """Add the heading starting at lines[index] (wrapped headings joined); return the next index."""
        self.flush()
        line = lines[index]
        text = line.text
        while index + 1 < len(lines):
            following = lines[index + 1]
            same_style = abs(following.size - line.size) < 0.2 and following.bold == line.bold
            if not (same_style and 0 < line.bottom - following.bottom < line.size * 1.8):
                break
            text += " " + following.text
            index += 1
            line = following
        size = round(line.size, 1)
        first_page_top = line.page == 1 and bool(self.heading_sizes) and size == self.heading_sizes[0]
        if larger and not self.title_done and first_page_top:
            self.doc.add_title(text=text, prov=_prov(line, len(text)))
            self.title_done = True
        else:
            level = self.heading_sizes.index(size) if larger else len(self.heading_sizes)
            level = max(1, min(level + (0 if self.title_done else 1), 6))
            self.doc.add_heading(text=text, level=level, prov=_prov(line, len(text)))
        return index + 1
