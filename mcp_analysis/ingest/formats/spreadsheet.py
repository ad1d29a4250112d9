"""Workbooks (.xlsx .xlsm .xls .ods) -> one table per sheet, read by python-calamine.

calamine is a tolerant reader (Rust): a cell it cannot parse comes back as its text, a
formula as its cached value, a date as a date. Each sheet is read on its own: a sheet
that fails (a part missing from the archive, a chart sheet) is one warning line and the
other sheets still go in. A sheet is its used range, every row: notes above or below a
table are kept, since only code reading the CSV can tell them from data. Leading and
trailing empty rows are trimmed; empty rows inside are kept.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

from docling_core.types.doc import DoclingDocument

from mcp_analysis.errors import IngestError
from mcp_analysis.ingest.formats import native
from mcp_analysis.ingest.formats.base import Converted, Source, limit_error
from mcp_analysis.ingest.formats.cells import CsvLines, add_rows_table, cell_text
from mcp_analysis.ingest.formats.office import (
    another_kind,
    check_unpacked,
    encrypted_message,
    is_encrypted_odf,
    is_encrypted_ooxml,
    reason,
)
from mcp_analysis.ingest.formats.sheet_repair import reread
from mcp_analysis.ingest.formats.sheet_screen import screen


def convert(source: Source) -> Converted:
    import python_calamine as calamine

    if is_encrypted_ooxml(source.data) or is_encrypted_odf(source.data):
        raise IngestError(encrypted_message("workbook"))
    check_unpacked(source)
    screened = screen(source)
    try:
        book = calamine.CalamineWorkbook.from_filelike(io.BytesIO(screened.data))
    except calamine.PasswordError:
        raise IngestError(encrypted_message("workbook")) from None
    except calamine.CalamineError as exc:
        kind = another_kind(source.data, ".xlsx")
        message = f"not a readable workbook, damaged or another format ({reason(exc)}){kind}"
        raise IngestError(message) from None
    doc = DoclingDocument(name=source.stem)
    doc.add_title(text=source.stem)  # a workbook has no title of its own; its sheets are sections
    result = Converted(doc, "spreadsheet")
    cells_left = source.limits.max_table_cells
    with book:
        for meta in book.sheets_metadata:
            if meta.name in screened.refused:
                result.warnings.append(screened.refused[meta.name])
                continue
            try:
                sheet, lines, columns = _read_sheet(book, meta.name, source, cells_left)
            except IngestError:
                raise
            except calamine.WorksheetNotFound:
                result.warnings.append(f"sheet {meta.name!r} could not be read: its part is missing from the file")
                continue
            except Exception as exc:  # one sheet's failure never loses the others
                result.warnings.append(f"sheet {meta.name!r} could not be read: {reason(exc)}")
                continue
            except BaseException as exc:  # a Rust panic (pyo3): this sheet is lost, not the others
                if not native.is_panic(exc):
                    raise
                native.caught()
                result.warnings.append(f"sheet {meta.name!r} could not be read: its reader failed ({reason(exc)})")
                continue
            if not lines:
                continue  # an empty sheet holds nothing to read
            cells_left -= len(lines) * columns
            heading = doc.add_heading(text=meta.name, level=1)
            merged = _merged(sheet, lines, columns)
            result.tables.append(add_rows_table(doc, meta.name, lines, columns, parent=heading, merged=merged))
    listed = {meta.name for meta in book.sheets_metadata}
    result.warnings += [warning for name, warning in screened.refused.items() if name not in listed]
    if not doc.tables:
        detail = "; ".join(result.warnings) or "every sheet is empty"
        raise IngestError(f"no sheet could be read ({detail})")
    return result


def _read_sheet(book: Any, name: str, source: Source, cells_left: int) -> tuple[Any, list[str], int]:
    """The sheet from calamine, its lines and width; if calamine refuses a cell of it (a parse error,
    a date out of range, a panic converting one), from a mended copy of its XML (sheet_repair.py)."""
    import python_calamine as calamine

    try:
        sheet = book.get_sheet_by_name(name)
        return sheet, *_sheet_lines(sheet, name, source, cells_left)
    except (IngestError, calamine.WorksheetNotFound):
        raise
    except (calamine.CalamineError, ArithmeticError, ValueError) as exc:
        failed: BaseException = exc
    except BaseException as exc:
        if not native.is_panic(exc):
            raise
        native.caught()
        failed = exc
    sheet = reread(source, name)
    if sheet is None:
        raise failed
    return sheet, *_sheet_lines(sheet, name, source, cells_left)


def _sheet_lines(sheet: Any, name: str, source: Source, cells_left: int) -> tuple[list[str], int]:
    """The sheet's used range as CSV lines, and its width."""
    encoder = CsvLines()
    lines: list[str] = []
    pending_empty = 0
    width = 0
    for values in _rows(sheet):
        texts = [cell_text(v) for v in values]
        while texts and not texts[-1]:
            texts.pop()
        if not texts:
            pending_empty += 1 if lines else 0  # leading empty rows are not part of the used range
            continue
        lines.extend([""] * pending_empty)
        pending_empty = 0
        width = max(width, len(texts))
        lines.append(encoder.line(texts))
        if len(lines) * width > cells_left:
            used = source.limits.max_table_cells - cells_left + len(lines) * width
            found = f"{used:,} table cells by row {len(lines):,} of sheet {name!r}"
            raise limit_error(source.limits, "max_table_cells", found)
    return lines, width


def _rows(sheet: Any) -> Iterator[list[Any]]:
    start = sheet.start
    if start is None:
        return
    # calamine's iterator starts at the first row of the sheet, its columns at the used range's.
    yield from sheet.iter_rows()


def _merged(sheet: Any, lines: list[str], columns: int) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Merged ranges relative to the trimmed used range (xlsx/xls only; ods has none here)."""
    ranges = sheet.merged_cell_ranges or []
    if not ranges or sheet.start is None:
        return []
    top = _first_row(sheet)
    left = sheet.start[1]
    out = []
    for (r0, c0), (r1, c1) in ranges:
        out.append(((r0 - top, c0 - left), (r1 - top, c1 - left)))
    return [((a, b), (c, d)) for (a, b), (c, d) in out if a >= 0 and b >= 0 and a < len(lines) and b < columns]


def _first_row(sheet: Any) -> int:
    """Absolute index of the first non-empty row (where our trimmed lines start)."""
    for index, values in enumerate(sheet.iter_rows()):
        if any(cell_text(v) for v in values):
            return index
    return 0
