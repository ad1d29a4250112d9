"""A worksheet's extent is measured from its XML as calamine counts cells, in time linear in its size."""

from __future__ import annotations

import io
import zipfile

import pytest

from mcp_analysis.ingest.formats.base import BoundedZip, Source
from mcp_analysis.ingest.formats.sheet_extent import Extent, measure

PART = "xl/worksheets/sheet1.xml"


def archive(sheet_xml: bytes) -> BoundedZip:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zipped:
        zipped.writestr(PART, sheet_xml)
    return BoundedZip(Source(data=buffer.getvalue(), name="book.xlsx"))


def sheet(cells: str) -> bytes:
    return f'<worksheet><sheetData><row r="1">{cells}</row></sheetData></worksheet>'.encode()


def test_cells_with_a_value_set_the_extent() -> None:
    xml = sheet('<c r="B1"><v>1</v></c><c r="D1" t="s"><v>0</v></c>')
    assert measure(archive(xml), PART) == Extent(rows=1, columns=3)


EMPTY_FAR_CELLS = ['<c r="XFD1048576" s="1"/>', '<c r="XFD1048576" s="1"></c>', '<x:c r="XFD9"> </x:c>']


@pytest.mark.parametrize("empty", EMPTY_FAR_CELLS)
def test_a_styled_empty_far_cell_in_either_form_changes_nothing(empty: str) -> None:
    xml = sheet(f'<c r="A1"><v>1</v></c>{empty}')
    assert measure(archive(xml), PART) == Extent(rows=1, columns=1)


def test_a_far_cell_with_a_value_spans_the_grid() -> None:
    xml = sheet('<c r="A1"><v>1</v></c><c r="XFD1048576"><v>2</v></c>')
    assert measure(archive(xml), PART) == Extent(rows=1_048_576, columns=16_384)


@pytest.mark.timeout(60)  # the scan is linear: ~0.1 s here; a quadratic one takes hours on this input
def test_a_run_of_unclosed_cell_tags_is_scanned_in_linear_time() -> None:
    xml = sheet('<c r="A1"><v>1</v></c>' + "<c " * 400_000 + '<c r="C1"><v>2</v></c>')
    assert measure(archive(xml), PART) == Extent(rows=1, columns=3)
