"""A folder as analysts have it, through the real command line: what goes in, what is reported,
and the tables as data in the sandbox (`mcp-analysis exec`)."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.docs_factory import write_html
from tests.format_files import (
    drop_part,
    encrypt_office,
    write_big_workbook,
    write_deck,
    write_scan,
    write_workbook,
)

ENV = {"MCP_ANALYSIS_INGEST__MAX_TABLE_CHUNKS": "10"}
# One `add` of eleven files (OCR and the embedder included) runs in the first test's setup:
# minutes on a loaded 2-core machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1800)]


@pytest.fixture(scope="module")
def folder_kb(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    """A knowledge base built by `add` from a messy folder; returns (db, the add process)."""
    root = tmp_path_factory.mktemp("formats")
    docs = root / "docs"
    docs.mkdir()
    workbook = write_workbook(docs / "revenue.xlsx")
    drop_part(workbook, docs / "partial.xlsx", "xl/worksheets/sheet2.xml")
    encrypt_office(workbook, docs / "locked.xlsx")
    write_big_workbook(docs / "orders.xlsx", 1300)
    deck = write_deck(docs / "results.pptx")
    (docs / "corrupt.pptx").write_bytes(deck.read_bytes()[:4000])
    write_scan(docs / "scan.png")
    from PIL import Image

    Image.new("RGB", (600, 400), (240, 240, 240)).save(docs / "blank.png")
    (docs / "export.csv").write_text("region,amount\nNorth,10\nSouth,30\n", encoding="utf-8")
    write_html(docs / "berths.html")
    (docs / "vanished.txt").symlink_to(docs / "gone.txt")  # listed, but its file is gone when read
    db = root / "kb.lancedb"
    result = run_cli("--db", str(db), "add", str(docs), env=ENV, timeout=900)
    return db, result


def test_add_names_each_failed_file_once_with_its_reason_and_exits_1(folder_kb: tuple[Path, object]) -> None:
    _db, result = folder_kb
    assert result.returncode == 1, result.stderr  # type: ignore[attr-defined]
    lines = [line for line in result.stderr.splitlines() if line.strip()]  # type: ignore[attr-defined]
    skipped = {line.split(": ", 1)[0].rsplit("/", 1)[-1]: line for line in lines if line.startswith("skipped")}
    skipped["vanished.txt"] = skipped.pop(
        "gone.txt", skipped.get("vanished.txt", "")
    )  # a link may be named by its target
    assert set(skipped) == {"locked.xlsx", "corrupt.pptx", "blank.png", "vanished.txt"}, lines
    assert "password-protected" in skipped["locked.xlsx"]
    assert "not a readable slide deck" in skipped["corrupt.pptx"]
    assert "no recognisable text" in skipped["blank.png"]
    assert "does not exist" in skipped["vanished.txt"]
    partly = [line for line in lines if line.startswith("note")]
    assert len(partly) == 1 and "partial.xlsx: sheet 'Staff' could not be read" in partly[0]
    assert "7 added" in result.stdout  # type: ignore[attr-defined]


def _exec(db: Path, code: str, *args: str) -> object:
    """Run `code` with `mcp-analysis exec`; its value (a JSON text) decoded."""
    result = run_cli("--db", str(db), "exec", "--json", *args, code, env=ENV)
    assert result.returncode == 0, result.stderr
    return json.loads(ast.literal_eval(json.loads(result.stdout)["value"]))


# What code sees: every document's tables, a column averaged across documents with the csv
# module, every row of the big sheet and a search for one of its deep rows; one interpreter run.
SANDBOX_VIEW = """
import csv, json, statistics
from pathlib import Path
out = {}
for d in Path('/documents').iterdir():
    meta = json.loads((d / 'metadata.json').read_text())
    out[meta['metadata']['file_name']] = {
        'meta': meta['metadata'],
        'tables': json.loads((d / 'tables.json').read_text()),
        'files': sorted(p.name for p in (d / 'tables').iterdir()),
    }
values = []
for entry_file in Path('/documents').glob('*/tables.json'):
    for table in json.loads(entry_file.read_text()):
        if 'amount' in table['header']:
            rows = list(csv.DictReader(Path(table['path']).read_text().splitlines()))
            values += [float(r['amount']) for r in rows]
orders = out['orders.xlsx']['tables'][0]['path']
lines = Path(orders).read_text().splitlines()
hits = await search('1234 East', limit=3)
json.dumps({'docs': out, 'average': statistics.mean(values), 'orders': [lines[0], lines[-1], len(lines)],
            'hits': [h['content'] for h in hits]})
"""


@pytest.fixture(scope="module")
def sandbox_view(folder_kb: tuple[Path, object]) -> dict:
    return _exec(folder_kb[0], SANDBOX_VIEW)  # type: ignore[return-value]


def test_every_format_lists_its_tables_with_names_headers_and_paths(sandbox_view: dict) -> None:
    found = sandbox_view["docs"]
    assert set(found) == {"revenue.xlsx", "partial.xlsx", "orders.xlsx", "results.pptx", "scan.png",
                          "export.csv", "berths.html"}  # fmt: skip
    revenue = found["revenue.xlsx"]["tables"]
    assert [(t["index"], t["name"], t["rows"], t["columns"]) for t in revenue] == [
        (0, "Revenue", 4, 4),
        (1, "Staff", 2, 3),
    ]
    assert revenue[1]["header"] == ["Name", "Role", "Started"]
    assert revenue[0]["header"] == ["Region", "Q1", "Q2", "Reported"] and revenue[0]["header_row"] == 2
    assert revenue[0]["title"].startswith("Revenue by region") and revenue[0]["footer"][0].startswith("Source:")
    assert revenue[1]["path"].endswith("/tables/1.csv") and found["revenue.xlsx"]["files"] == ["0.csv", "1.csv"]
    assert all(t["chunk_ids"] for t in revenue)  # searchable
    assert found["revenue.xlsx"]["meta"]["tables"] == 2
    assert found["partial.xlsx"]["meta"]["warnings"] == [
        "sheet 'Staff' could not be read: its part is missing from the file"
    ]
    orders = found["orders.xlsx"]["tables"][0]
    assert orders["rows"] == 1301 and len(orders["chunk_ids"]) == 10  # grouped rows, bounded chunks
    deck = found["results.pptx"]["tables"]
    assert [t["page_numbers"] for t in deck] == [[2], [2]] and deck[0]["header"] == ["Region", "Q1", "Q2"]
    assert found["berths.html"]["tables"][0]["header"] == ["Berth", "Depth"]
    assert found["scan.png"]["tables"] == [] and found["scan.png"]["files"] == []
    assert found["scan.png"]["meta"]["ocr_pages"] == [1]


def test_code_averages_a_column_across_documents_with_the_csv_module(sandbox_view: dict) -> None:
    assert sandbox_view["average"] == 20.0


def test_every_row_of_a_big_sheet_is_in_its_csv_and_a_deep_row_is_searchable(sandbox_view: dict) -> None:
    assert sandbox_view["orders"] == ["order_id,region,units,price", "1300,North,0,31.3", 1301]
    # The passage is the sheet's heading, then the chunk: the header row and the rows around 1234.
    assert any("order_id,region,units,price\n" in c and "\n1234,East," in c for c in sandbox_view["hits"])


def test_a_filtered_view_sees_only_its_documents_tables(folder_kb: tuple[Path, object]) -> None:
    db, _ = folder_kb
    code = (
        "import json\nfrom pathlib import Path\njson.dumps([str(p) for p in Path('/documents').glob('*/tables/*.csv')])"
    )
    only_csv = _exec(db, code, "--filter", "uri LIKE '%export.csv'")
    assert len(only_csv) == 1 and only_csv[0].endswith("/tables/0.csv")  # type: ignore[arg-type]


def test_info_says_which_pages_were_ocred(folder_kb: tuple[Path, object]) -> None:
    db, _ = folder_kb
    result = run_cli("--db", str(db), "info", "--json")
    ocr = json.loads(result.stdout)["ocr"]
    assert ocr["setting"] == "auto" and ocr["documents"] == 1 and ocr["pages"] == 1
    assert [pages for uri, pages in ocr["pages_by_document"].items() if uri.endswith("scan.png")] == [[1]]
