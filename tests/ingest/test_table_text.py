"""A table's text in a document is compact: a workbook's merged title once, no padded cells."""

from __future__ import annotations

import re
from pathlib import Path

from mcp_analysis.ingest.items import extract_items, render_content
from tests.conftest import run_cli
from tests.format_files import convert_file, write_workbook

TITLE = "Revenue by region, EUR (notes above the table)"
PRINT_CONTENT = """
from pathlib import Path
[doc] = await list_documents()
print(Path('/documents/' + doc['id'] + '/content.txt').read_text())
"""


def test_a_workbook_reads_as_its_title_once_then_a_compact_table_through_the_cli(tmp_path: Path) -> None:
    book = write_workbook(tmp_path / "revenue.xlsx")  # a real .xlsx: title merged over A1:D1
    db = tmp_path / "kb.lancedb"
    added = run_cli("--db", str(db), "add", str(book))
    assert added.returncode == 0, added.stderr
    shown = run_cli("--db", str(db), "exec", PRINT_CONTENT)
    assert shown.returncode == 0, shown.stderr
    text = shown.stdout
    assert text.count(TITLE) == 1  # the merged cell, once
    assert f"{TITLE}\n\n| Region | Q1 | Q2 | Reported |\n| --- | --- | --- | --- |\n| North | 1200.5 | 1300 |" in text
    assert "| Total | 1001200.5 | 1300.25 | |" in text
    assert "\n\nSource: finance department, unaudited" in text  # the footer, a line of its own
    assert not re.search(r"\S {2,}\S", text)  # no padded cell


def test_tables_of_other_formats_are_compact_pipe_tables_too(tmp_path: Path) -> None:
    page = tmp_path / "costs.md"
    page.write_text("# Costs\n\n| Item | Amount |\n|---|---|\n| A rather long item name here | 12 |\n| B | 3 |\n")
    text = render_content(extract_items(convert_file(page).document))
    assert "| Item | Amount |\n| --- | --- |\n| A rather long item name here | 12 |\n| B | 3 |" in text
