"""Tables as CSV for people: cells a spreadsheet program would run as formulas are neutralised.

A cell opening with `=`, `+`, `-`, `@`, a tab or a carriage return is a formula to Excel,
LibreOffice and Google Sheets once the CSV is opened there (CSV injection: `=HYPERLINK(...)`
in a scraped page or a shared workbook becomes a live link or a DDE command on a reader's
machine). The `text/csv` MCP resource is what a client saves or shows to people, so such
cells get OWASP's leading `'` (shown as text, the quote hidden). Plain numbers (-3.5, +2,
-1e-05) stay numbers. The sandbox's `tables/{n}.csv` keeps every value raw: code reads it.
"""

from __future__ import annotations

import csv
import io
import re

_RISKY_LINE = re.compile(r'(?:^|,|\n)"?[=+\-@\t\r]')
_NUMBER = re.compile(r"[-+]?(\d+(\.\d*)?|\.\d+)([eE][-+]?\d+)?")
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def neutral_cell(cell: str) -> str:
    """`cell`, with a leading `'` when a spreadsheet would read it as a formula."""
    if cell.startswith(_FORMULA_START) and not _NUMBER.fullmatch(cell):
        return "'" + cell
    return cell


def for_people(text: str) -> str:
    """An RFC 4180 table (tables/{n}.csv) with formula cells neutralised. Parsed as CSV whole (a
    quoted cell may hold a line break); a table with no cell that could be one is returned as it is."""
    if not _RISKY_LINE.search(text):
        return text
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    for row in csv.reader(io.StringIO(text, newline="")):
        writer.writerow([neutral_cell(cell) for cell in row])
    written = buffer.getvalue()
    return written if text.endswith("\n") else written.removesuffix("\r\n")
