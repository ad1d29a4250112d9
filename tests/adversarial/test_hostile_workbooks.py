"""Hostile and odd workbooks through `mcp-analysis add`, the real command line and conversion workers.

A sheet calamine would build as a grid too large to hold (a far cell in any spelling calamine
reads, cells and rows repeated in an .ods, an .xls record past the BIFF grid) is refused by name
before calamine reads it, naming the setting, and the file's other sheets go in. A native parser
that aborts anyway (that .xls with the cell bound raised past it) costs that file alone, in one
line that gives no advice no setting can follow, and its backtrace never reaches stderr. A sheet
calamine refuses for one odd cell (numbers written with spaces) is read as spreadsheet programs
read it. One `add` of one folder serves most checks (module-scoped).
"""

from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any

import anyio
import pytest

from mcp_analysis.corpus import KnowledgeBase
from tests.conftest import make_settings, run_cli
from tests.ingest import hostile_workbooks as books

pytestmark = pytest.mark.timeout(900)


@dataclass
class Added:
    folder: Path
    db: Path
    result: CompletedProcess[str]
    report: dict[str, Any]

    def notes(self, name: str) -> list[str]:
        return [text for path, text in self.report["warnings"] if Path(path).name == name]

    def skipped(self, name: str) -> str:
        (reason,) = [text for path, text in self.report["skipped"] if Path(path).name == name]
        return str(reason)


@pytest.fixture(scope="module")
def added(tmp_path_factory: pytest.TempPathFactory) -> Added:
    folder = tmp_path_factory.mktemp("workbooks") / "docs"
    folder.mkdir()
    far = [("Zeros", "XFD01048576"), ("Lower", "xfd1048576"), ("Wide", "ZZZZ2")]
    books.xlsx(folder / "stray.xlsx", [("Data", books.GOOD_ROWS)] + [(n, books.one_far_cell(r)) for n, r in far])
    books.ods(
        folder / "repeated.ods",
        [
            ("Data", books.ODS_GOOD),
            ("Repeats", books.repeated_rows(6_000, 16_384)),  # 98 million cells: calamine asks for 3 GB
            ("Spaces", books.repeated_spaces(1_000_000_000, 4)),  # a string of a billion spaces, 4 times
        ],
    )
    books.xls_far_record(folder / "far.xls")
    books.xls_in_mini_stream(folder / "far-mini.xls")
    books.xlsx(folder / "quakes.xlsx", [("Data", books.GOOD_ROWS), ("quakes", books.spaced_numbers(20))])
    books.dates_past_the_last_day(folder / "dates.xlsx")
    db = folder.parent / "kb.lancedb"
    result = run_cli("--db", str(db), "add", str(folder), "--json", env={"RUST_BACKTRACE": "1"}, timeout=840)
    assert result.stdout.strip(), result.stderr
    return Added(folder, db, result, json.loads(result.stdout))


@pytest.fixture(scope="module")
def aborted(tmp_path_factory: pytest.TempPathFactory) -> Added:
    """The .xls with `ingest.max_table_cells` raised past its grid: calamine asks for 128 GB and aborts.
    RUST_BACKTRACE=1 (as on many hosts) makes the abort print ~40 lines."""
    folder = tmp_path_factory.mktemp("aborting") / "docs"
    folder.mkdir()
    books.xls_far_record(folder / "far.xls")
    books.xlsx(folder / "after.xlsx", [("Data", books.GOOD_ROWS)])
    db = folder.parent / "kb.lancedb"
    env = {"RUST_BACKTRACE": "1", "MCP_ANALYSIS_INGEST__MAX_TABLE_CELLS": str(10**12)}
    result = run_cli("--db", str(db), "add", str(folder), "--json", env=env, timeout=840)
    assert result.stdout.strip(), result.stderr
    return Added(folder, db, result, json.loads(result.stdout))


async def _contents(db: Path) -> dict[str, str]:
    kb = await KnowledgeBase.open(make_settings(db))
    try:
        return {Path(meta.uri).name: await kb.corpus().content(meta.id) for meta in await kb.store.all_meta()}
    finally:
        await kb.close()


def test_every_workbook_goes_in_with_its_good_sheets(added: Added) -> None:
    assert added.result.returncode == 0, added.result.stderr
    names = ["dates.xlsx", "far-mini.xls", "far.xls", "quakes.xlsx", "repeated.ods", "stray.xlsx"]
    assert sorted(Path(uri).name for uri in added.report["added"]) == names
    contents = anyio.run(_contents, added.db)
    assert all("north" in contents[name] and "120" in contents[name] for name in names)


def test_a_far_cell_in_any_spelling_calamine_reads_refuses_its_sheet_by_name(added: Added) -> None:
    zeros, lower, wide = added.notes("stray.xlsx")
    for note, name in ((zeros, "Zeros"), (lower, "Lower")):
        assert note.startswith(f"sheet '{name}' could not be read: its cells span 1,048,576 rows x 16,384 columns")
        assert "ingest.max_table_cells" in note
    assert wide.startswith("sheet 'Wide' could not be read: a cell with a value at row 2, column 475,254 lies outside")


def test_repeated_ods_cells_are_refused_by_table_naming_the_setting(added: Added) -> None:
    repeats, spaces = added.notes("repeated.ods")
    assert repeats.startswith("sheet 'Repeats' could not be read: its cells span 6,000 rows x 16,384 columns")
    assert "98,304,000 cells" in repeats and "ingest.max_table_cells" in repeats
    assert spaces.startswith("sheet 'Spaces' could not be read: 4,000,000,004 characters of text")
    assert "ingest.max_unpacked_mb" in spaces


@pytest.mark.parametrize("name", ["far.xls", "far-mini.xls"])  # its Workbook stream in FAT or mini sectors
def test_an_xls_record_past_the_biff_grid_refuses_its_sheet_by_name(added: Added, name: str) -> None:
    (note,) = added.notes(name)
    assert note.startswith("sheet 'Far' could not be read: its cells span 65,536 rows x 65,536 columns")
    assert "ingest.max_table_cells" in note


def test_a_native_abort_costs_its_file_alone_in_one_line_with_no_advice_to_raise_memory(aborted: Added) -> None:
    assert [Path(uri).name for uri in aborted.report["added"]] == ["after.xlsx"]
    reason = aborted.skipped("far.xls")
    assert "a parser asked for 131,072 MB at once, more than this machine has" in reason
    assert "max_memory_mb" not in reason and "\n" not in reason


def test_a_native_abort_leaves_no_backtrace_on_stderr(aborted: Added) -> None:
    stderr = aborted.result.stderr
    assert "backtrace" not in stderr and "memory allocation of" not in stderr and "panicked" not in stderr, stderr


def test_a_number_past_the_last_date_is_read_as_a_number_and_its_sheet_kept(added: Added) -> None:
    """python-calamine panics (chrono) on -1e300 in a date style: the sheet is read again from a copy
    where that number has no style, as Excel keeps it, and the panic's text stays off stderr."""
    assert added.notes("dates.xlsx") == []
    dates = anyio.run(_contents, added.db)["dates.xlsx"]
    assert "## Dates" in dates and "2023-03-15" in dates and "10000000000" in dates
    assert "panicked" not in added.result.stderr and "TimeDelta" not in added.result.stderr, added.result.stderr


def test_numbers_written_with_spaces_are_read_as_numbers(added: Added) -> None:
    assert added.notes("quakes.xlsx") == []
    quakes = anyio.run(_contents, added.db)["quakes.xlsx"]
    assert "## quakes" in quakes and "-20.21" in quakes and "4.21" in quakes


PANIC_HOOK = Path(__file__).resolve().parent / "panic_hook"


def test_a_native_panic_costs_its_file_alone_in_one_line_and_a_fresh_worker_reads_the_next(tmp_path: Path) -> None:
    """No workbook found makes calamine 0.37 panic, so panic_hook/ raises pyo3's real PanicException where
    calamine would: the worker says why in one line and ends (a panicked library may be left in any
    state); the next file is read by a fresh one, and no traceback reaches stderr."""
    folder = tmp_path / "docs"
    folder.mkdir()
    books.xlsx(folder / "a-panics.xlsx", [("PANIC-MARKER", books.GOOD_ROWS)], compression=zipfile.ZIP_STORED)
    books.xlsx(folder / "b-after.xlsx", [("Data", books.GOOD_ROWS)])
    hook = os.pathsep.join(filter(None, [str(PANIC_HOOK), os.environ.get("PYTHONPATH")]))
    env = {"PYTHONPATH": hook, "MCP_ANALYSIS_TEST_PANIC": "PANIC-MARKER"}

    result = run_cli("--db", str(tmp_path / "kb.lancedb"), "add", str(folder), "--json", env=env)

    report = json.loads(result.stdout)
    assert [Path(uri).name for uri in report["added"]] == ["b-after.xlsx"], result.stderr
    ((path, reason),) = report["skipped"]
    assert Path(path).name == "a-panics.xlsx"
    assert reason == (
        "its converter failed inside a native parser (index out of bounds: the len is 3 but the index is 7); "
        "the file is damaged or hostile"
    )
    assert "Traceback" not in result.stderr and "PanicException" not in result.stderr, result.stderr
