"""Messy and hostile files in the real conversion worker, under a tight memory cap: what a user's
folder holds (a log without blank lines, a workbook with a stray far cell, a CSV mixing encodings,
a huge cell, an image that declares gigapixels) is read, or refused with a reason to act on."""

from __future__ import annotations

import csv
import io
import os
import signal
import struct
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
import xlsxwriter
import zstandard

from mcp_analysis.errors import IngestError
from mcp_analysis.ingest.limits import Limits
from mcp_analysis.ingest.pool import ConversionPool
from mcp_analysis.ingest.prepare import PreparedFile

pytestmark = pytest.mark.timeout(600)


@pytest.fixture(scope="module")
def pool() -> Iterator[ConversionPool]:
    workers = ConversionPool(Limits(max_memory_mb=128), chunk_tokens=256)
    try:
        yield workers
    finally:
        workers.close()


def convert(pool: ConversionPool, path: Path) -> PreparedFile:
    with pool.worker() as worker:
        worker.read(str(path), path.name)
        return worker.convert()


def test_a_log_of_megabytes_without_blank_lines_is_chunked_within_the_memory_cap(
    pool: ConversionPool, tmp_path: Path
) -> None:
    path = tmp_path / "service.log"  # one paragraph of 3.5 MB: tokenized whole, it needs ~175 MB
    with path.open("w") as log:
        for i in range(60_000):
            log.write(f"2025-03-31T10:00:00 INFO request {i} served by node-{i % 7}\n")
    prepared = convert(pool, path)
    assert len(prepared.chunks) > 500
    assert "request 59999 served" in prepared.chunks[-1].content
    assert max(len(c.embedding_text) for c in prepared.chunks) < 20_000


def test_a_csv_cell_of_megabytes_is_kept_whole(pool: ConversionPool, tmp_path: Path) -> None:
    blob = "x" * 1_000_000  # past the csv module's default limit of 128 KB per field
    path = tmp_path / "blobs.csv"
    path.write_text(f'id,payload\n1,"{blob}"\n2,small\n')
    prepared = convert(pool, path)
    (table,) = prepared.tables
    csv.field_size_limit(2_000_000)
    rows = list(csv.reader(io.StringIO(zstandard.decompress(table.csv).decode(), newline="")))
    assert rows == [["id", "payload"], ["1", blob], ["2", "small"]]
    assert max(len(c.embedding_text) for c in prepared.chunks) <= 20_000


def test_a_text_mixing_utf8_and_cp1252_lines_keeps_every_line_right(pool: ConversionPool, tmp_path: Path) -> None:
    path = tmp_path / "merged.csv"
    path.write_bytes("name,city\nJosé,Zürich\n".encode() + "Renée,Montréal\n".encode("cp1252"))
    content = convert(pool, path).content
    assert "José" in content and "Zürich" in content and "Renée" in content and "Montréal" in content
    assert "Ã" not in content


def test_a_quote_never_closed_is_a_warning_and_no_row_is_dropped(pool: ConversionPool, tmp_path: Path) -> None:
    path = tmp_path / "export.csv"
    path.write_text('id,comment\n1,"fine\nover two lines"\n2,"left open\n3,x\n4,y\n')
    prepared = convert(pool, path)
    assert prepared.warnings == [
        "a quote opened on line 4 is never closed: its 3 lines to the end of the file are read as one cell; "
        "close the quote and add the file again"
    ]
    assert "left open 3,x 4,y" in prepared.content


def test_a_sheet_spanning_the_whole_grid_is_refused_by_name_and_the_other_sheets_go_in(
    pool: ConversionPool, tmp_path: Path
) -> None:
    path = tmp_path / "stray.xlsx"
    book = xlsxwriter.Workbook(path)
    data = book.add_worksheet("Data")
    data.write_row(0, 0, ["region", "revenue"])
    data.write_row(1, 0, ["north", 120])
    stray = book.add_worksheet("Stray")
    stray.write(0, 0, "top")
    stray.write(1_048_575, 16_383, "a cell typed far away")  # calamine's grid: 17 billion cells
    styled = book.add_worksheet("Styled")
    styled.write(0, 0, "kept")
    styled.write_blank(1_048_575, 16_383, None, book.add_format({"bold": True}))  # no value: not in the grid
    book.close()
    prepared = convert(pool, path)
    assert [t.name for t in prepared.tables] == ["Data", "Styled"]
    (warning,) = prepared.warnings
    assert "sheet 'Stray' could not be read" in warning
    assert "1,048,576 rows x 16,384 columns" in warning and "ingest.max_table_cells" in warning


def _png_header_only(path: Path, width: int, height: int) -> Path:
    """A PNG declaring width x height, with a few bytes of (incomplete) image data."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 1, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"\0" * 64)))
    return path


def test_an_image_declaring_gigapixels_is_refused_from_its_header(pool: ConversionPool, tmp_path: Path) -> None:
    path = _png_header_only(tmp_path / "poster.png", 20_000, 20_000)
    with pytest.raises(IngestError, match=r"20,000 x 20,000 px \(400 megapixels\).*save it at a lower resolution"):
        convert(pool, path)


def test_a_converter_aborted_by_a_native_parser_is_reported_with_the_memory_setting(
    pool: ConversionPool, tmp_path: Path
) -> None:
    path = tmp_path / "note.md"
    path.write_text("# Note\n\nA short note.\n")
    with pool.worker() as worker:
        worker.read(str(path), path.name)  # a ready worker; then a native allocation failure aborts it
        os.kill(worker.process.pid, signal.SIGABRT)
        worker.process.wait(timeout=30)
        with pytest.raises(IngestError, match=r"aborted \(SIGABRT\).*raise ingest\.max_memory_mb"):
            worker.convert()


def test_an_office_file_under_another_suffix_is_named_with_the_suffix_to_give_it(
    pool: ConversionPool, tmp_path: Path
) -> None:
    document = tmp_path / "budget.xlsx"  # a Word document saved under the workbook's name
    with zipfile.ZipFile(document, "w") as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        archive.writestr("word/document.xml", "<w:document/>")
    with pytest.raises(IngestError, match=r"not a readable workbook.*; it is a Word document: rename it \.docx"):
        convert(pool, document)
    archive_only = tmp_path / "photos.xlsx"
    with zipfile.ZipFile(archive_only, "w") as archive:
        archive.writestr("holiday.txt", "not an office file")
    with pytest.raises(IngestError, match="; it is a plain zip archive, not an office file"):
        convert(pool, archive_only)


def test_a_worker_whose_native_library_panicked_is_replaced_after_the_file(
    pool: ConversionPool, tmp_path: Path
) -> None:
    """python-calamine panics on a number past the last date in a date style; the sheet is still read
    (from a mended copy), and the worker, whose library may be left in any state, ends after the file."""
    from tests.ingest.hostile_workbooks import dates_past_the_last_day

    prepared = convert(pool, dates_past_the_last_day(tmp_path / "dates.xlsx"))
    assert [t.name for t in prepared.tables] == ["Data", "Dates"] and prepared.warnings == []
    assert pool.pids() == []  # the worker that read it is gone
    started = pool.started
    path = tmp_path / "next.md"
    path.write_text("# Next\n\nRead by a fresh worker.\n")
    assert "fresh worker" in convert(pool, path).content
    assert pool.started == started + 1
