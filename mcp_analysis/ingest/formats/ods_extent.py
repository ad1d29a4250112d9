"""The size of each table of an .ods, measured from content.xml before calamine reads it.

calamine reads every table of an OpenDocument spreadsheet when the file is opened, and expands
repeats as it goes (ods.rs: `read_row`, `get_range`): a cell with `table:number-columns-repeated`
is cloned up to 16,384 times in its row, a row with `table:number-rows-repeated` up to 1,048,576
times in the table's grid, and a string cell's text (`<text:s text:c=N/>` is N spaces) with it.
So a file of a few hundred bytes asks for gigabytes, and the process aborts. content.xml is parsed
here in pieces (expat, through BoundedZip) and counted as calamine counts: the cells it holds
row by row, the grid between the first and last rows with a value, and the characters cloned.
A table too large is cut out of content.xml (`without_tables`) so the others are still read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from xml.parsers import expat
from xml.sax.saxutils import quoteattr

from mcp_analysis.ingest.formats.base import MB, BoundedZip, Source, check_items
from mcp_analysis.ingest.formats.sheet_extent import GRID_COLUMNS, GRID_ROWS, Extent, repack

CONTENT = "content.xml"
_CELLS = ("table:table-cell", "table:covered-table-cell")
# A cell with any of these holds a value (or a formula) to calamine; a string cell's text is its value.
_VALUED = ("office:value", "office:string-value", "office:date-value", "office:time-value", "office:boolean-value")


@dataclass
class OdsTable:
    """One table as calamine would hold it, and where it lies in content.xml (byte offsets)."""

    name: str
    start: int
    end: int = 0
    held: int = 0  # cells calamine keeps while reading the rows (each row's, repeats in a row cloned)
    rows: int = 0  # rows of the grid, repeats cloned, from the first row with a value to the last
    left: int = GRID_COLUMNS
    right: int = -1
    text: int = 0  # characters of text and formulas, clones counted
    problem: str | None = None
    first_row: int | None = field(default=None, repr=False)  # where the grid starts (the first row with a value)

    @property
    def extent(self) -> Extent:
        if self.problem:
            return Extent(0, 0, self.problem)
        columns = max(0, self.right - self.left + 1)
        return Extent(self.rows if columns else 0, columns)

    @property
    def cells(self) -> int:
        """The most cells calamine holds at once for this table."""
        return max(self.held, self.extent.cells)


class _Unmeasurable(Exception):
    pass


class _TooMany(Exception):
    pass


def _count(value: str | None, what: str) -> int:
    if value is None:
        return 1
    try:
        return int(value)
    except ValueError:
        raise _Unmeasurable(f"its {what} {value[:40]!r} is not a number") from None


class _Content:
    """expat handlers following calamine's ods reader over content.xml."""

    def __init__(self, parser: Any, max_tables: int) -> None:
        self.parser = parser
        self.max_tables = max_tables
        self.tables: list[OdsTable] = []
        self.table: OdsTable | None = None
        self.depth = 0  # elements open inside the table
        self.total_rows = 0
        self.row: tuple[int, int] | None = None  # (this row's capped repeats, its first expanded index)
        self.columns = self.pending = 0
        self.first = self.last = -1
        self.cell_depth = 0  # elements open inside the current cell (0: none open)
        self.cell_clones = 0
        self.cell_text = 0

    def start(self, name: str, attrs: dict[str, str]) -> None:
        table = self.table
        if table is None:
            if name == "table:table" and "table:name" in attrs:
                self.table = OdsTable(attrs["table:name"], self.parser.CurrentByteIndex)
                self.total_rows = self.depth = 0
            return
        self.depth += 1
        if table.problem:
            return
        try:
            if self.cell_depth:
                self.cell_depth += 1
                if name == "text:s":
                    self.cell_text += _count(attrs.get("text:c"), "space count")
                elif name == "text:p":
                    self.cell_text += 1
            elif self.row is not None and name in _CELLS:
                self._cell(table, attrs)
            elif name == "table:table-row":
                repeats = _count(attrs.get("table:number-rows-repeated"), "row repeat")
                repeats = min(repeats, GRID_ROWS - self.total_rows)
                self.row = (max(0, repeats), self.total_rows)
                self.total_rows += max(0, repeats)
                self.columns = self.pending = 0
                self.first = self.last = -1
        except _Unmeasurable as exc:
            table.problem = str(exc)

    def _cell(self, table: OdsTable, attrs: dict[str, str]) -> None:
        repeats = _count(attrs.get("table:number-columns-repeated"), "column repeat")
        empties = min(self.pending, GRID_COLUMNS - self.columns)
        self.columns += empties
        self.pending = 0
        clones = max(0, min(repeats, GRID_COLUMNS - self.columns))
        self.cell_depth = 1
        self.cell_text = sum(len(v) for k, v in attrs.items() if k in _VALUED or k == "table:formula")
        valued = any(k in attrs for k in _VALUED) or "table:formula" in attrs
        table.held += empties  # a run of empty cells is held once a cell follows it, empty or not
        if not valued and attrs.get("office:value-type") != "string":
            self.pending = clones
            self.cell_clones = 0
            return
        table.held += clones
        if clones:
            self.first = self.columns if self.first < 0 else self.first
            self.last = self.columns + clones - 1
        self.columns += clones
        self.cell_clones = clones

    def end(self, name: str) -> None:
        table = self.table
        if table is None:
            return
        if self.depth == 0:  # the table's own end
            table.end = self.parser.CurrentByteIndex
            self.tables.append(table)
            self.table = None
            if len(self.tables) > self.max_tables:
                raise _TooMany
            return
        self.depth -= 1
        if table.problem:
            return
        if self.cell_depth:
            self.cell_depth -= 1
            if not self.cell_depth and self.row is not None:
                table.text += self.cell_text * self.cell_clones * max(1, self.row[0])
            return
        if name == "table:table-row" and self.row is not None:
            repeats, top = self.row
            if self.first >= 0:
                table.first_row = top if table.first_row is None else table.first_row
                table.rows = top + repeats - table.first_row
                table.left, table.right = min(table.left, self.first), max(table.right, self.last)
            self.row = None

    def text(self, data: str) -> None:
        if self.cell_depth:
            self.cell_text += len(data)


def _no_doctype(*_args: Any) -> None:
    raise _Unmeasurable("its content.xml declares a DOCTYPE, which no spreadsheet has")


def measure_ods(archive: BoundedZip) -> list[OdsTable] | str:
    """Every table of content.xml in order, measured; or why content.xml cannot be measured."""
    if CONTENT not in archive.names():
        return []  # calamine says what it makes of a file without one
    parser = expat.ParserCreate()
    content = _Content(parser, archive.limits.max_items)
    parser.buffer_text = True
    parser.StartElementHandler = content.start
    parser.EndElementHandler = content.end
    parser.CharacterDataHandler = content.text
    parser.StartDoctypeDeclHandler = _no_doctype
    read = archive.chunks(CONTENT, MB)
    try:
        while piece := read():
            parser.Parse(piece, False)
        parser.Parse(b"", True)
    except _Unmeasurable as exc:
        return str(exc)
    except _TooMany:
        check_items(Source(b"", CONTENT, archive.limits), len(content.tables), "sheets")
    except expat.ExpatError as exc:
        return f"its content.xml is not well-formed XML ({exc})"
    return content.tables


def without_tables(archive: BoundedZip, tables: list[OdsTable]) -> bytes:
    """The file again, with each of `tables` left empty in content.xml (calamine then reads the others)."""
    content = archive.read(CONTENT)
    pieces, at = [], 0
    for table in sorted(tables, key=lambda t: t.start):
        close = content.index(b">", table.end) + 1
        pieces += [content[at : table.start], f"<table:table table:name={quoteattr(table.name)}/>".encode()]
        at = close
    pieces.append(content[at:])
    return repack(archive, {CONTENT: b"".join(pieces)})
