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


@pytest.mark.timeout(60)  # expat stops at the first malformed tag: no rescanning, however long the run
def test_a_run_of_unclosed_cell_tags_is_unmeasurable_at_once() -> None:
    xml = sheet('<c r="A1"><v>1</v></c>' + "<c " * 400_000 + '<c r="C1"><v>2</v></c>')
    extent = measure(archive(xml), PART)
    assert extent is not None and extent.problem and "not well-formed" in extent.problem


# calamine 0.37 reads each of these as XFD1048576 (or a wider column): its grid is built from them.
FAR_REFERENCES = [
    ("XFD01048576", 1_048_576, 16_384),
    ("xfd1048576", 1_048_576, 16_384),
    ("xFd000000001048576", 1_048_576, 16_384),
]


@pytest.mark.parametrize(("ref", "rows", "columns"), FAR_REFERENCES)
def test_a_far_reference_is_read_as_calamine_reads_it(ref: str, rows: int, columns: int) -> None:
    xml = sheet(f'<c r="A1"><v>1</v></c><c r="{ref}"><v>2</v></c>')
    assert measure(archive(xml), PART) == Extent(rows=rows, columns=columns)


@pytest.mark.parametrize("ref", ["$B$2", "B0", "B", "7", "B 2", "B2C"])
def test_a_reference_calamine_cannot_read_makes_the_sheet_unmeasurable(ref: str) -> None:
    xml = sheet(f'<c r="A1"><v>1</v></c><c r="{ref}"><v>2</v></c>')
    extent = measure(archive(xml), PART)
    assert extent is not None and extent.problem and repr(ref) in extent.problem


@pytest.mark.parametrize("ref", ["ZZZZ2", "XFE1", "A1048577", "AAAAAAAA1"])
def test_a_value_past_the_last_cell_of_the_grid_makes_the_sheet_unmeasurable(ref: str) -> None:
    """calamine reads `ZZZZ2` as 475,254 columns (and 8 letters wrap around 2**32): no program writes them."""
    xml = sheet(f'<c r="A1"><v>1</v></c><c r="{ref}"><v>2</v></c>')
    extent = measure(archive(xml), PART)
    assert extent is not None and extent.problem and "outside a worksheet's grid" in extent.problem
    assert measure(archive(sheet(f'<c r="A1"><v>1</v></c><c r="{ref}" s="1"/>')), PART) == Extent(1, 1)


def test_cells_without_references_follow_their_row_as_in_calamine() -> None:
    """A cell without `r` takes the column after the previous cell, and the row after the last </row>:
    a long run of them is a wide row, and a row number far below makes the grid tall."""
    run = "<c><v>1</v></c>" * 300
    xml = f'<worksheet><sheetData><row>{run}</row><row r="9000"><c><v>2</v></c></row></sheetData></worksheet>'
    assert measure(archive(xml.encode()), PART) == Extent(rows=9000, columns=300)


def test_markup_in_comments_and_inside_a_cell_does_not_move_the_rows() -> None:
    """`</row>` in a comment or inside a formula is not a row's end: counting it would put later cells
    on a row calamine does not, and hide how tall its grid is."""
    hidden = "<!-- </row> -->" * 50
    xml = (
        f'<worksheet><sheetData><row r="1"><c><f>x</f></c>{hidden}<c><v>1</v></c></row>'
        f'<row r="5000"><c r="A5000"><v>2</v></c></row></sheetData></worksheet>'
    )
    assert measure(archive(xml.encode()), PART) == Extent(rows=5000, columns=2)


def test_a_doctype_makes_the_sheet_unmeasurable() -> None:
    doctype = b'<!DOCTYPE w [<!ENTITY a "aaaa">]>'
    xml = doctype + sheet('<c r="A1"><v>&a;</v></c>')
    extent = measure(archive(xml), PART)
    assert extent is not None and extent.problem and "DOCTYPE" in extent.problem


def test_a_value_inside_an_inline_string_is_never_undone_by_a_later_child() -> None:
    """calamine keeps `<is>` holding anything (even an empty `<v/>`) as a string: the far cell is in its grid."""
    xml = sheet('<c r="A1"><v>1</v></c><c r="C1" t="inlineStr"><is><v/></is></c>')
    assert measure(archive(xml), PART) == Extent(rows=1, columns=3)
