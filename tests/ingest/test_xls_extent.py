"""An .xls's sheets are measured from its Workbook stream as calamine reads them; a refused sheet's
records are neutralised so calamine reads the others."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import python_calamine as calamine

from mcp_analysis.ingest.formats.base import Source
from mcp_analysis.ingest.formats.sheet_screen import screen
from mcp_analysis.ingest.formats.xls_extent import measure_xls, neutralised
from tests.ingest import hostile_workbooks as books


def test_sheets_are_measured_as_calamine_holds_them(tmp_path: Path) -> None:
    path = books.xls_far_record(tmp_path / "book.xls", row=40, column=200)
    sheets, _stream = measure_xls(Source(path.read_bytes(), path.name))
    book = calamine.CalamineWorkbook.from_path(str(path))
    for sheet in sheets:
        held = book.get_sheet_by_name(sheet.name)
        assert (sheet.extent.rows, sheet.extent.columns) == (held.height, held.width)
    assert [s.name for s in sheets] == ["Data", "Far"] and sheets[1].extent.cells == 41 * 201


def test_a_far_record_is_neutralised_and_the_other_sheets_are_read(tmp_path: Path) -> None:
    path = books.xls_far_record(tmp_path / "book.xls")
    data = path.read_bytes()
    sheets, stream = measure_xls(Source(data, path.name))
    assert sheets[1].extent.cells == 65_536 * 65_536
    book = calamine.CalamineWorkbook.from_filelike(io.BytesIO(neutralised(data, [sheets[1]], stream)))
    assert book.get_sheet_by_name("Far").to_python() == []
    assert book.get_sheet_by_name("Data").to_python() == [["region", "revenue"], ["north", 120.0]]


def test_a_dimensions_record_declaring_billions_of_cells_refuses_its_sheet(tmp_path: Path) -> None:
    """calamine reserves what DIMENSIONS declares (rows in 32 bits) before it reads a cell."""
    path = books.xls_far_record(tmp_path / "book.xls", row=1, column=1)
    data = bytearray(path.read_bytes())
    far = data.index(b"\x00\x02\x0e\x00", data.index(b"\x00\x02\x0e\x00") + 1)  # the second sheet's DIMENSIONS
    data[far + 4 : far + 18] = struct.pack("<2I2HH", 0, 0xFFFF_FFFF, 0, 0x100, 0)
    screened = screen(Source(bytes(data), "book.xls"))
    assert list(screened.refused) == ["Far"]
    assert "its DIMENSIONS record declares 1,099,511,627,520 cells" in screened.refused["Far"]
    assert "ingest.max_table_cells" in screened.refused["Far"]
    book = calamine.CalamineWorkbook.from_filelike(io.BytesIO(screened.data))
    assert book.get_sheet_by_name("Data").to_python() == [["region", "revenue"], ["north", 120.0]]
