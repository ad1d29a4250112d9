"""An .xls's sheets are measured from its Workbook stream as calamine reads them; a refused sheet's
records are neutralised so calamine reads the others. A compound file that declares more than it
holds is Unreadable (it goes to calamine unmeasured) before olefile reads past the file for it."""

from __future__ import annotations

import io
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
import python_calamine as calamine

from mcp_analysis.ingest.formats.base import Source
from mcp_analysis.ingest.formats.sheet_screen import screen
from mcp_analysis.ingest.formats.xls_extent import Unreadable, measure_xls, neutralised
from tests.ingest import compound_files as cfb
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


def test_a_workbook_in_the_mini_stream_is_measured_and_neutralised(tmp_path: Path) -> None:
    path = books.xls_in_mini_stream(tmp_path / "book.xls")
    screened = screen(Source(path.read_bytes(), path.name))
    assert list(screened.refused) == ["Far"]
    assert "its cells span 65,536 rows x 65,536 columns" in screened.refused["Far"]
    assert len(screened.data) == path.stat().st_size
    book = calamine.CalamineWorkbook.from_filelike(io.BytesIO(screened.data))
    assert book.get_sheet_by_name("Far").to_python() == []
    assert book.get_sheet_by_name("Data").to_python() == [["region", "revenue"], ["north", 120.0]]


@pytest.mark.parametrize(
    ("hostile", "in_mini", "problem"),
    [
        (cfb.fat_of_billions, False, "its FAT is declared larger than the file"),
        (cfb.stream_of_gigabytes, False, "its Workbook stream is declared larger than the file"),
        (cfb.mini_chain_looping, True, "its Workbook stream's sectors do not chain as its size says"),
    ],
)
def test_a_compound_file_declaring_more_than_it_holds_is_unreadable_before_it_is_read(
    tmp_path: Path, hostile: Callable[[bytes], bytes], in_mini: bool, problem: str
) -> None:
    """Each is a few KB that olefile alone reads for minutes or into gigabytes (or, for the looping mini
    chain, writes back forever): it goes to calamine as it is, as a file this reader cannot follow does."""
    make = books.xls_in_mini_stream if in_mini else books.xls_far_record
    data = hostile(make(tmp_path / "book.xls").read_bytes())
    with pytest.raises(Unreadable, match=problem):
        measure_xls(Source(data, "book.xls"))
    screened = screen(Source(data, "book.xls"))
    assert screened.data == data and screened.refused == {}


def test_the_workbook_stream_calamine_reads_is_the_one_measured(tmp_path: Path) -> None:
    """calamine reads the first directory entry named Workbook; olefile finds one by name in the directory's
    tree: with two, which one each reads is not known, so neither is measured."""
    path = books.xls_in_mini_stream(tmp_path / "book.xls", extra=[cfb.Entry("Workbook", 2, start=0, size=100)])
    with pytest.raises(Unreadable, match="its Workbook stream is not the one its directory's tree leads to"):
        measure_xls(Source(path.read_bytes(), path.name))
