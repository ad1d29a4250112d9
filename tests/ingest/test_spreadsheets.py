"""Workbooks and delimited files become tables: every row, values as data, ugly cases read."""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_analysis.errors import IngestError
from mcp_analysis.ingest.formats.cells import PREVIEW_ROWS, cell_text, parse_lines, written_cell
from mcp_analysis.ingest.tables import extract_tables
from tests.format_files import (
    convert_file,
    drop_part,
    encrypt_office,
    write_big_workbook,
    write_ods,
    write_workbook,
    write_xls,
)


def _convert(path: Path):  # type: ignore[no-untyped-def]
    return convert_file(path)


def _rows(table) -> list[list[str]]:  # type: ignore[no-untyped-def]
    return parse_lines(table.lines)


def test_a_sheet_starts_at_its_header_row_with_title_footer_dates_and_cached_formula_values(tmp_path: Path) -> None:
    converted = _convert(write_workbook(tmp_path / "revenue.xlsx"))
    tables = extract_tables(converted.document, converted.tables)
    assert [t.name for t in tables] == ["Revenue", "Staff"]  # the empty sheet has no table
    revenue = _rows(tables[0])
    assert revenue[0] == ["Region", "Q1", "Q2", "Reported"]  # the merged title and the blank row are above
    assert revenue[1] == ["North", "1200.5", "1300", "2025-03-31"]
    assert revenue[2] == ["South", "1000000", "0.25", "2025-04-01T14:05:00"]
    assert revenue[3] == ["Total", "1001200.5", "1300.25"]  # formulas give their cached values
    assert len(revenue) == 4 and tables[0].header == ["Region", "Q1", "Q2", "Reported"]
    layout = tables[0].layout_json()  # nothing is lost: the rows left out are in tables.json
    assert layout["title"] == "Revenue by region, EUR (notes above the table)" and layout["header_row"] == 2
    assert layout["footer"] == ["Source: finance department, unaudited"] and layout["total_rows"] == [2]
    assert _rows(tables[1]) == [["Name", "Role", "Started"], ["Ana", "Pilot", "2019-06-01"]]
    assert converted.warnings == []
    titles = [t.text for t in converted.document.texts]
    assert titles[:2] == ["revenue", "Revenue"]  # the file is the title, each sheet a section


def test_a_sheet_whose_part_is_missing_is_one_warning_and_the_others_go_in(tmp_path: Path) -> None:
    good = write_workbook(tmp_path / "good.xlsx")
    broken = drop_part(good, tmp_path / "broken.xlsx", "xl/worksheets/sheet2.xml")
    converted = _convert(broken)
    assert [t.name for t in extract_tables(converted.document, converted.tables)] == ["Revenue"]
    assert converted.warnings == ["sheet 'Staff' could not be read: its part is missing from the file"]


def test_encrypted_and_damaged_workbooks_are_refused_with_the_reason(tmp_path: Path) -> None:
    good = write_workbook(tmp_path / "good.xlsx")
    with pytest.raises(IngestError, match="password-protected"):
        _convert(encrypt_office(good, tmp_path / "locked.xlsx"))
    damaged = tmp_path / "damaged.xlsx"
    damaged.write_bytes(good.read_bytes()[:2000])
    with pytest.raises(IngestError, match="not a readable workbook"):
        _convert(damaged)


def test_xls_and_ods_are_read_with_typed_values(tmp_path: Path) -> None:
    xls = _convert(write_xls(tmp_path / "tonnage.xls"))
    assert _rows(extract_tables(xls.document, xls.tables)[0]) == [
        ["Port", "Tons", "Day"],
        ["Rotterdam", "1250.75", "2025-02-03"],
    ]
    ods = _convert(write_ods(tmp_path / "depths.ods"))
    table = extract_tables(ods.document, ods.tables)[0]
    assert table.name == "Depths"
    assert _rows(table) == [["Berth", "Depth"], ["B1", "14.5"], ["B2", "12"]]


def test_a_big_sheet_keeps_every_row_but_the_document_shows_the_first_ones(tmp_path: Path) -> None:
    converted = _convert(write_big_workbook(tmp_path / "orders.xlsx", 3000))
    (table,) = extract_tables(converted.document, converted.tables)
    assert table.rows == 3001 and table.partial_in_document
    assert _rows(table)[-1] == ["3000", "North", "0", "1.9"]
    assert converted.document.tables[0].data.num_rows == PREVIEW_ROWS  # no 12,000 cell objects


def test_a_file_over_the_cell_limit_is_refused_naming_the_limit(tmp_path: Path) -> None:
    path = write_big_workbook(tmp_path / "orders.xlsx", 300)
    with pytest.raises(IngestError, match=r"over the limit of 1,000 \(raise ingest\.max_table_cells"):
        convert_file(path, max_table_cells=1000)


def test_delimited_files_are_sniffed_and_cells_made_plain_only_where_unambiguous(tmp_path: Path) -> None:
    path = tmp_path / "export.csv"
    path.write_text(
        "Sales export, generated 2025-04-01\n\nregion;amount;date;note\n"
        'North;"1,234.50";31 Mar 2025;"two\nlines"\nSouth;1,234;03/04/2025;\n',
        encoding="utf-8",
    )
    converted = _convert(path)
    table = extract_tables(converted.document, converted.tables)[0]
    rows = _rows(table)
    assert rows[0] == ["region", "amount", "date", "note"]  # the title line is tables.json's `title`
    assert table.layout.title == "Sales export, generated 2025-04-01" and table.layout.header_row == 2
    assert rows[1] == ["North", "1234.50", "2025-03-31", "two lines"]  # one row per CSV line
    assert rows[2] == ["South", "1,234", "03/04/2025"]  # ambiguous: kept as written
    tsv = tmp_path / "t.tsv"
    tsv.write_text("a\tb\n1\t2,5\n", encoding="utf-8")
    converted = _convert(tsv)
    assert _rows(extract_tables(converted.document, converted.tables)[0]) == [["a", "b"], ["1", "2,5"]]


@pytest.mark.parametrize(
    ("value", "text"),
    [(1300.0, "1300"), (1e12, "1000000000000"), (1.5e-07, "0.00000015"), (True, "TRUE"), (None, "")],
)
def test_cell_values_as_text(value: object, text: str) -> None:
    assert cell_text(value) == text


@pytest.mark.parametrize(
    ("written", "plain"),
    [("1,234,567", "1234567"), ("1,234.50", "1234.50"), ("1,234", "1,234"), ("March 5, 2025", "2025-03-05")],
)
def test_written_cells(written: str, plain: str) -> None:
    assert written_cell(written) == plain


def test_a_big_sheet_is_a_bounded_number_of_row_groups_each_embedding_a_bounded_lead(tmp_path: Path) -> None:
    from mcp_analysis.embed.onnx_model import load_tokenizer
    from mcp_analysis.ingest.chunker import chunk_items
    from mcp_analysis.ingest.items import extract_items

    tokenizer = load_tokenizer(max_tokens=100_000)

    def count(texts):  # type: ignore[no-untyped-def]
        return [len(e.ids) for e in tokenizer.encode_batch(list(texts), add_special_tokens=False)]

    converted = _convert(write_big_workbook(tmp_path / "orders.xlsx", 3000))
    tables = {t.self_ref: t for t in extract_tables(converted.document, converted.tables)}
    (table,) = tables.values()
    chunks = chunk_items(extract_items(converted.document), count, 64, tables, max_table_chunks=10)
    groups = [c for c in chunks if c.lead is not None]
    assert len(groups) == 10
    header = table.lines[0]
    rows_seen = [line for c in groups for line in c.content.split("\n")[1:]]
    assert all(c.content.startswith(header + "\n") for c in groups)
    assert rows_seen == table.lines[1:]  # every row in exactly one group, in order
    for chunk in groups:
        lead = chunk.lead or ""
        assert lead.startswith(header + "\n") and chunk.content.startswith(lead)
        assert count([lead])[0] <= 64 < count([chunk.content])[0]
        assert chunk.embedding_text.endswith(lead) and chunk.fts_text.endswith(chunk.content)
