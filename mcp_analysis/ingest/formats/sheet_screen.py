"""Which sheets of a workbook calamine may read, decided from their XML before it reads any.

A sheet too large for `ingest.max_table_cells` (all sheets of the file together, in order), or
that cannot be measured, is refused by name with a warning, and the other sheets still go in.
An .xlsx sheet is simply not asked for; an .ods or .xls is read whole when it is opened, so a
refused sheet is first emptied in the bytes calamine gets (ods_extent.without_tables,
xls_extent.neutralised). An .xls whose compound file this reader cannot follow goes to calamine
as it is: a grid it then cannot allocate ends the conversion worker, which reports it for that
file alone.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

from mcp_analysis.errors import IngestError, IngestLimitError
from mcp_analysis.ingest.formats.base import BoundedZip, Source, limit_error
from mcp_analysis.ingest.formats.ods_extent import CONTENT, OdsTable, measure_ods, without_tables
from mcp_analysis.ingest.formats.sheet_extent import Extent, measure, sheet_parts
from mcp_analysis.ingest.formats.xls_extent import MAGIC, Unreadable, XlsSheet, measure_xls, neutralised

_STRAY = "if most of them are empty, delete the stray cells far from the data"
_REPEATED = "a cell or row repeated across the grid (number-columns-repeated, number-rows-repeated) makes them"


@dataclass
class Screened:
    data: bytes  # what calamine reads: the file, or an .ods with its refused tables left empty
    refused: dict[str, str] = field(default_factory=dict)  # sheet name -> the warning saying why


def screen(source: Source) -> Screened:
    """The sheets to refuse before calamine reads the file, and the bytes it reads."""
    if source.data.startswith(MAGIC):
        return _screen_xls(source)
    if not source.data.startswith(b"PK"):
        return Screened(source.data)
    try:
        archive = BoundedZip(source)
        if CONTENT in archive.names() and "xl/workbook.xml" not in archive.names():
            return _screen_ods(source, archive)
        sheets = [(name, measure(archive, part)) for name, part in sheet_parts(archive).items()]
    except IngestLimitError:
        raise
    except IngestError:  # a damaged archive or part: calamine says what it makes of it, sheet by sheet
        return Screened(source.data)
    refused: dict[str, str] = {}
    left = source.limits.max_table_cells
    for name, extent in sheets:
        if extent is None:
            continue
        if extent.problem or extent.cells > left:
            refused[name] = too_large(source, name, extent, extent.cells, left, _STRAY)
        else:
            left -= extent.cells
    return Screened(source.data, refused)


def _screen_ods(source: Source, archive: BoundedZip) -> Screened:
    tables = measure_ods(archive)
    if isinstance(tables, str):  # no table can be told safe: refusing the file loses nothing readable
        raise IngestError(f"its tables cannot be measured before they are read: {tables}")
    refused: dict[str, str] = {}
    cut: list[OdsTable] = []
    left = source.limits.max_table_cells
    for table in tables:
        extent = table.extent
        if extent.problem or table.cells > left:
            refused[table.name] = too_large(source, table.name, extent, table.cells, left, _REPEATED)
        elif table.text > source.limits.max_unpacked_bytes:
            found = f"{table.text:,} characters of text once its repeated cells are copied"
            error = limit_error(source.limits, "max_unpacked_bytes", found)
            refused[table.name] = f"sheet {table.name!r} could not be read: {error}"
        else:
            left -= table.cells
            continue
        cut.append(table)
    return Screened(without_tables(archive, cut) if cut else source.data, refused)


def _screen_xls(source: Source) -> Screened:
    try:
        sheets, stream = measure_xls(source)
    except (Unreadable, struct.error, IndexError, UnicodeDecodeError):
        return Screened(source.data)
    refused: dict[str, str] = {}
    cut: list[XlsSheet] = []
    left = source.limits.max_table_cells
    for sheet in sheets:
        if sheet.cells <= left:
            left -= sheet.cells
            continue
        cut.append(sheet)
        if sheet.extent.cells >= sheet.reserve:
            refused[sheet.name] = too_large(source, sheet.name, sheet.extent, sheet.cells, left, _STRAY)
        else:  # calamine reserves what the record declares, whatever the sheet holds
            declared = limit_error(source.limits, "max_table_cells", f"{sheet.reserve:,} cells")
            refused[sheet.name] = (
                f"sheet {sheet.name!r} could not be read: its DIMENSIONS record declares {declared}; "
                "save it again from a spreadsheet program"
            )
    return Screened(neutralised(source.data, cut, stream) if cut else source.data, refused)


def too_large(source: Source, name: str, extent: Extent, cells: int, cells_left: int, hint: str) -> str:
    """One sheet too large to hold (or that cannot be measured): named with its extent and the setting,
    the other sheets still go in."""
    if extent.problem:
        return (
            f"sheet {name!r} could not be read: {extent.problem} (refused before reading: the grid calamine would "
            "build from it cannot be bounded); correct the sheet, or save it again from a spreadsheet program"
        )
    limit = limit_error(source.limits, "max_table_cells", f"{cells:,} cells")
    left = "" if cells_left == source.limits.max_table_cells else f" ({cells_left:,} left after the sheets before it)"
    return (
        f"sheet {name!r} could not be read: its cells span {extent.rows:,} rows x {extent.columns:,} columns "
        f"({limit}){left}; {hint}"
    )
