"""A second, tolerant reading of an .xlsx sheet calamine could not read, before the sheet is given up.

calamine refuses a whole sheet for one cell it cannot parse: a number written with spaces
around it (`<v> 41</v>`, as in readxl's datasets.xlsx, which Excel, LibreOffice and openpyxl
read as 41), a number that is not one under `t="n"`, an unknown error code or cell type; and
python-calamine fails on a number in a date or duration style beyond the last date (-1e300
makes chrono panic, 1e10 overflows Python's timedelta), which Excel shows as ##### and keeps.
Here the sheet's XML is mended the way those programs read it, and calamine reads the mended
copy: spaces around a number are dropped, a `t="n"` value that is still no number is kept
as its text, as are an unknown error code and an unknown type, and a number past the last
date loses its style. Nothing else changes, and a
sheet that still fails is reported as before. (openpyxl would do it too, but is not a runtime
dependency: this is a few substitutions on the one sheet that failed.)
"""

from __future__ import annotations

import io
import re
from typing import Any

from mcp_analysis.errors import IngestError
from mcp_analysis.ingest.formats.base import BoundedZip, Source
from mcp_analysis.ingest.formats.sheet_extent import repack, sheet_parts

# A cell's start tag, an optional formula before its value, and the value: `[^<>]` keeps each match
# to one tag (linear time on any input).
_VALUE = re.compile(
    rb"(<(?:[\w.-]+:)?c(?:\s[^<>]*)?>)"
    rb"((?:<(?:[\w.-]+:)?f(?:\s[^<>]*)?(?:/>|>[^<]*</(?:[\w.-]+:)?f>))?)"
    rb"(<(?P<v>(?:[\w.-]+:)?v)>)([^<]*)(</(?P=v)>)"
)
_TYPE = re.compile(rb"""(\st\s*=\s*)(["'])([^"']*)\2""")
_ERRORS = frozenset(b"#DIV/0! #N/A #NAME? #NULL! #NUM! #REF! #VALUE! #GETTING_DATA".split())
_KNOWN = frozenset({b"n", b"s", b"b", b"e", b"str", b"d", b"inlineStr", b"is"})
_SPACE = b" \t\r\n"
_STYLE = re.compile(rb"""\ss\s*=\s*(["'])[^"']*\1""")
_LAST_DATE = 2_958_466  # 9999-12-31 is day 2,958,465: past it no program shows a date or duration


_NUMBER = re.compile(rb"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|[+-]?(?i:inf|infinity|nan)")


def _mend(match: re.Match[bytes]) -> bytes:
    start, formula, open_v, _name, text, close_v = match.groups()
    kind = _TYPE.search(start)
    t = kind.group(3) if kind else None
    if t in (None, b"n"):
        text = text.strip(_SPACE)
        if not _NUMBER.fullmatch(text):
            start = _TYPE.sub(b"", start, count=1)  # no type: calamine keeps what is not a number as text
        elif abs(float(text)) >= _LAST_DATE:
            start = _STYLE.sub(b"", start, count=1)  # no date or duration: a plain number, as Excel keeps it
    elif (t == b"e" and text not in _ERRORS) or t not in _KNOWN:
        start = _TYPE.sub(rb'\1"str"', start, count=1)
    return start + formula + open_v + text + close_v


def mended(sheet_xml: bytes) -> bytes:
    """The sheet's XML with the values calamine refuses written as the programs above read them."""
    return _VALUE.sub(_mend, sheet_xml)


def reread(source: Source, name: str) -> Any | None:
    """Sheet `name` read by calamine from a mended copy of its part; None if it is not an .xlsx sheet
    or the copy is no different."""
    import python_calamine as calamine

    if not source.data.startswith(b"PK"):
        return None
    try:
        archive = BoundedZip(source)
        part = sheet_parts(archive).get(name)
        if part is None:
            return None
        original = archive.read(part)
        fixed = mended(original)
        if fixed == original:
            return None
        data = repack(archive, {part: fixed})
    except IngestError:
        return None
    book = calamine.CalamineWorkbook.from_filelike(io.BytesIO(data))
    return book.get_sheet_by_name(name)
