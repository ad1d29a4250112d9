"""An .ods table's size is measured from content.xml as calamine counts it; a table too large is cut out
of the bytes calamine reads. A sheet calamine refuses for an odd cell is mended as spreadsheet programs read it."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import python_calamine as calamine

from mcp_analysis.ingest.formats.base import BoundedZip, Source
from mcp_analysis.ingest.formats.ods_extent import measure_ods, without_tables
from mcp_analysis.ingest.formats.sheet_repair import mended
from tests.ingest import hostile_workbooks as books

# (rows' XML, calamine's height x width): repeats within calamine's caps, read by calamine itself below.
SHAPES = [
    (books.repeated_rows(7, 5), (7, 5)),
    # LibreOffice's trailing empty cells and rows are no part of the grid
    (
        books.ODS_GOOD + '<table:table-row table:number-rows-repeated="1048574"><table:table-cell '
        'table:number-columns-repeated="1024"/></table:table-row>',
        (2, 2),
    ),
    # empty rows between two values are cloned into the grid; an empty run before a value is held
    (
        '<table:table-row><table:table-cell table:number-columns-repeated="3"/><table:table-cell office:value-type='
        '"float" office:value="1"/></table:table-row><table:table-row table:number-rows-repeated="40">'
        "<table:table-cell/></table:table-row>" + books.repeated_rows(2, 1),
        (43, 4),
    ),
]


@pytest.mark.parametrize(("rows", "shape"), SHAPES)
def test_a_table_is_measured_as_calamine_holds_it(tmp_path: Path, rows: str, shape: tuple[int, int]) -> None:
    path = books.ods(tmp_path / "book.ods", [("T", rows)])
    (table,) = measure_ods(BoundedZip(Source(path.read_bytes(), path.name)))
    sheet = calamine.CalamineWorkbook.from_path(str(path)).get_sheet_by_name("T")
    assert (sheet.height, sheet.width) == shape
    assert (table.extent.rows, table.extent.columns) == shape


def test_a_cut_table_is_empty_to_calamine_and_the_others_are_read(tmp_path: Path) -> None:
    path = books.ods(tmp_path / "book.ods", [("Data", books.ODS_GOOD), ("Big", books.repeated_rows(10**6, 10**4))])
    archive = BoundedZip(Source(path.read_bytes(), path.name))
    data, big = measure_ods(archive)
    assert big.extent.cells == 10**6 * 10**4 and data.extent.cells == 4
    book = calamine.CalamineWorkbook.from_filelike(io.BytesIO(without_tables(archive, [big])))
    assert book.sheet_names == ["Data", "Big"]
    assert book.get_sheet_by_name("Big").to_python() == []
    assert book.get_sheet_by_name("Data").to_python() == [["region", "revenue"], ["north", 120.0]]


@pytest.mark.parametrize(
    ("cell", "fixed"),
    [
        ('<c r="A2" t="n"><v> 41</v></c>', '<c r="A2" t="n"><v>41</v></c>'),
        ('<c r="A2"><v>4.1e1 </v></c>', '<c r="A2"><v>4.1e1</v></c>'),
        ('<c r="A2" t="n"><f>B2*2</f><v>\t-7</v></c>', '<c r="A2" t="n"><f>B2*2</f><v>-7</v></c>'),
        ('<c r="A2" t="n"><v>n/a</v></c>', '<c r="A2"><v>n/a</v></c>'),
        ('<c r="A2" t="e"><v>#OOPS</v></c>', '<c r="A2" t="str"><v>#OOPS</v></c>'),
        ('<c r="A2" t="x"><v>7</v></c>', '<c r="A2" t="str"><v>7</v></c>'),
        ('<c r="A2" t="str"><v> kept </v></c>', '<c r="A2" t="str"><v> kept </v></c>'),
    ],
)
def test_an_odd_cell_is_mended_as_spreadsheet_programs_read_it(cell: str, fixed: str) -> None:
    assert mended(cell.encode()) == fixed.encode()


def test_a_file_of_countless_tables_is_refused_naming_the_setting(tmp_path: Path) -> None:
    """Each table is a few bytes and an object here (and a sheet in calamine): their number is bounded."""
    from mcp_analysis.errors import IngestLimitError
    from mcp_analysis.ingest.limits import Limits

    path = books.ods(tmp_path / "book.ods", [(f"T{n}", books.ODS_GOOD) for n in range(20)])
    with pytest.raises(IngestLimitError, match=r"at least 11 sheets, over the limit of 10 \(raise ingest.max_items"):
        measure_ods(BoundedZip(Source(path.read_bytes(), path.name, Limits(max_items=10))))
