"""Slide decks (.pptx) -> one page per slide, read by python-pptx.

Each slide's title is a section heading; its text frames become paragraphs and list
items (indented paragraphs), its tables tables, a chart's data a table named after the
chart, and the speaker notes a paragraph starting "Notes:". Every item carries the slide
number as its page. A shape that cannot be read is one warning line; the rest of the
slide and deck still goes in.
"""

from __future__ import annotations

import io
from typing import Any

from docling_core.types.doc import BoundingBox, DocItemLabel, DoclingDocument, ProvenanceItem, Size

from mcp_analysis.errors import IngestError
from mcp_analysis.ingest.formats.base import Converted, Source, check_items
from mcp_analysis.ingest.formats.cells import add_table, cell_text, written_cell
from mcp_analysis.ingest.formats.office import (
    another_kind,
    check_unpacked,
    encrypted_message,
    is_encrypted_ooxml,
    reason,
)

_EMU_PER_POINT = 12700


def convert(source: Source) -> Converted:
    if is_encrypted_ooxml(source.data):
        raise IngestError(encrypted_message("slide deck"))
    check_unpacked(source)
    from pptx import Presentation

    try:
        deck = Presentation(io.BytesIO(source.data))
    except Exception as exc:
        kind = another_kind(source.data, ".pptx")
        raise IngestError(f"not a readable slide deck, damaged or another format ({reason(exc)}){kind}") from None
    slides = list(deck.slides)
    check_items(source, len(slides), "slides")
    width = (deck.slide_width or 9144000) / _EMU_PER_POINT
    height = (deck.slide_height or 6858000) / _EMU_PER_POINT
    doc = DoclingDocument(name=source.stem)
    result = Converted(doc, "pptx")
    for number, slide in enumerate(slides, start=1):
        doc.add_page(page_no=number, size=Size(width=width, height=height))
        _Slide(doc, result, number, width, height).read(slide)
    return result


class _Slide:
    def __init__(self, doc: DoclingDocument, result: Converted, number: int, width: float, height: float) -> None:
        self.doc = doc
        self.result = result
        self.number = number
        self.prov = ProvenanceItem(page_no=number, bbox=BoundingBox(l=0, t=height, r=width, b=0), charspan=(0, 0))
        self.heading: Any = None

    def read(self, slide: Any) -> None:
        title_shape = slide.shapes.title
        title = " ".join(title_shape.text_frame.text.split()) if title_shape is not None else ""
        self.heading = self.doc.add_heading(text=title or f"Slide {self.number}", level=1, prov=self.prov)
        for shape in slide.shapes:
            if title_shape is not None and shape.shape_id == title_shape.shape_id:
                continue
            self._shape(shape)
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame
            text = notes.text.strip() if notes is not None else ""
            if text:
                self.doc.add_text(label=DocItemLabel.TEXT, text=f"Notes: {text}", parent=self.heading, prov=self.prov)

    def _shape(self, shape: Any) -> None:
        try:
            if shape.shape_type is not None and shape.shape_type == 6:  # MSO_SHAPE_TYPE.GROUP
                for inner in shape.shapes:
                    self._shape(inner)
            elif getattr(shape, "has_table", False) and shape.has_table:
                rows = [[written_cell(cell.text) for cell in row.cells] for row in shape.table.rows]
                add_table(self.doc, rows, parent=self.heading, prov=self.prov)
            elif getattr(shape, "has_chart", False) and shape.has_chart:
                self._chart(shape.chart)
            elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
                self._text(shape.text_frame)
        except Exception as exc:  # one odd shape never loses the slide
            name = getattr(shape, "name", "a shape")
            self.result.warnings.append(f"slide {self.number}: {name!r} could not be read ({reason(exc)})")

    def _text(self, frame: Any) -> None:
        group = None
        for paragraph in frame.paragraphs:
            text = " ".join("".join(run.text for run in paragraph.runs).split()) or " ".join(paragraph.text.split())
            if not text:
                continue
            if paragraph.level > 0:
                group = group or self.doc.add_list_group(parent=self.heading)
                self.doc.add_list_item(text=text, parent=group, prov=self.prov)
            else:
                group = None
                self.doc.add_text(label=DocItemLabel.TEXT, text=text, parent=self.heading, prov=self.prov)

    def _chart(self, chart: Any) -> None:
        plot = chart.plots[0]
        categories = [cell_text(c) for c in plot.categories]
        series = list(plot.series)
        rows = [["", *[s.name or "" for s in series]]]
        for i, category in enumerate(categories):
            rows.append([category, *[cell_text(s.values[i]) if i < len(s.values) else "" for s in series]])
        if chart.has_title and chart.chart_title.has_text_frame:
            self.doc.add_text(label=DocItemLabel.CAPTION, text=chart.chart_title.text_frame.text, parent=self.heading)
        add_table(self.doc, rows, parent=self.heading, prov=self.prov)
