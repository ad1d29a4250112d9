"""Workbooks written part by part with zipfile (a few hundred bytes each), as an attacker or an odd
exporter writes them: far cell references in every spelling calamine reads, repeated ODS cells,
an .xls record past the BIFF grid (in xlwt's sectors or in the mini stream), numbers written with
spaces around them."""

from __future__ import annotations

import struct
import zipfile
from pathlib import Path

import olefile

from tests.ingest.compound_files import Entry, compound

_MAIN = "http://schemas.openxmlformats.org/spreadsheetml/2006/main"
_RELS = "http://schemas.openxmlformats.org/package/2006/relationships"
_DOC_RELS = "http://schemas.openxmlformats.org/officeDocument/2006/relationships"
_SHEET_TYPE = "application/vnd.openxmlformats-officedocument.spreadsheetml.worksheet+xml"
# The sheet every hostile workbook also holds: it must go in whatever the others do.
GOOD_ROWS = (
    '<row r="1"><c r="A1" t="inlineStr"><is><t>region</t></is></c><c r="B1" t="inlineStr"><is><t>revenue</t></is></c>'
    '</row><row r="2"><c r="A2" t="inlineStr"><is><t>north</t></is></c><c r="B2"><v>120</v></c></row>'
)


def xlsx(path: Path, sheets: list[tuple[str, str]], compression: int = zipfile.ZIP_DEFLATED) -> Path:
    """A workbook of `sheets` (name, the XML inside <sheetData>), nothing more than calamine and Excel need."""
    overrides = "".join(
        f'<Override PartName="/xl/worksheets/sheet{i}.xml" ContentType="{_SHEET_TYPE}"/>'
        for i in range(1, len(sheets) + 1)
    )
    types = (
        '<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
        f'<Default Extension="rels" ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
        '<Default Extension="xml" ContentType="application/xml"/><Override PartName="/xl/workbook.xml" '
        'ContentType="application/vnd.openxmlformats-officedocument.spreadsheetml.sheet.main+xml"/>'
        f"{overrides}</Types>"
    )
    root = (
        f'<Relationships xmlns="{_RELS}"><Relationship Id="rId1" Target="xl/workbook.xml" '
        f'Type="{_DOC_RELS}/officeDocument"/></Relationships>'
    )
    listed = "".join(
        f'<sheet name="{name}" sheetId="{i}" r:id="rId{i}"/>' for i, (name, _) in enumerate(sheets, start=1)
    )
    book = f'<workbook xmlns="{_MAIN}" xmlns:r="{_DOC_RELS}"><sheets>{listed}</sheets></workbook>'
    links = "".join(
        f'<Relationship Id="rId{i}" Type="{_DOC_RELS}/worksheet" Target="worksheets/sheet{i}.xml"/>'
        for i in range(1, len(sheets) + 1)
    )
    with zipfile.ZipFile(path, "w", compression) as packed:
        packed.writestr("[Content_Types].xml", types)
        packed.writestr("_rels/.rels", root)
        packed.writestr("xl/workbook.xml", book)
        packed.writestr("xl/_rels/workbook.xml.rels", f'<Relationships xmlns="{_RELS}">{links}</Relationships>')
        for i, (_, rows) in enumerate(sheets, start=1):
            packed.writestr(
                f"xl/worksheets/sheet{i}.xml", f'<worksheet xmlns="{_MAIN}"><sheetData>{rows}</sheetData></worksheet>'
            )
    return path


def one_far_cell(ref: str) -> str:
    """A sheet with a value in A1 and one at `ref`."""
    return f'<row r="1"><c r="A1"><v>1</v></c></row><row r="2"><c r="{ref}"><v>2</v></c></row>'


def spaced_numbers(rows: int) -> str:
    """A sheet like readxl's datasets.xlsx `quakes`: numbers typed `t="n"` written `<v> 41</v>`."""
    head = '<row r="1"><c r="A1" t="inlineStr"><is><t>lat</t></is></c><c r="B1" t="inlineStr"><is><t>mag</t></is></c>'
    body = "".join(
        f'<row r="{r}"><c r="A{r}" t="n"><v> -20.{r}</v></c><c r="B{r}" t="n"><v> 4.{r}</v></c></row>'
        for r in range(2, rows + 2)
    )
    return head + "</row>" + body


_ODS_NS = (
    'xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
    'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
    'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0"'
)


def _ods_cell(text: str) -> str:
    return f'<table:table-cell office:value-type="string"><text:p>{text}</text:p></table:table-cell>'


ODS_GOOD = (
    f"<table:table-row>{_ods_cell('region')}{_ods_cell('revenue')}</table:table-row>"
    f'<table:table-row>{_ods_cell("north")}<table:table-cell office:value-type="float" office:value="120">'
    "<text:p>120</text:p></table:table-cell></table:table-row>"
)


def repeated_rows(rows: int, columns: int) -> str:
    """One number repeated `columns` times in a row repeated `rows` times."""
    return (
        f'<table:table-row table:number-rows-repeated="{rows}"><table:table-cell office:value-type="float" '
        f'office:value="1" table:number-columns-repeated="{columns}"/></table:table-row>'
    )


def repeated_spaces(spaces: int, columns: int) -> str:
    """A string cell of `spaces` spaces (one <text:s/>), repeated `columns` times."""
    return (
        f'<table:table-row><table:table-cell office:value-type="string" table:number-columns-repeated="{columns}">'
        f'<text:p><text:s text:c="{spaces}"/></text:p></table:table-cell></table:table-row>'
    )


def ods(path: Path, tables: list[tuple[str, str]]) -> Path:
    """An OpenDocument spreadsheet of `tables` (name, the rows' XML)."""
    body = "".join(f'<table:table table:name="{name}">{rows}</table:table>' for name, rows in tables)
    content = (
        f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {_ODS_NS} office:version="1.2">'
        f"<office:body><office:spreadsheet>{body}</office:spreadsheet></office:body></office:document-content>"
    )
    manifest = (
        '<manifest:manifest xmlns:manifest="urn:oasis:names:tc:opendocument:xmlns:manifest:1.0">'
        '<manifest:file-entry manifest:full-path="/" '
        'manifest:media-type="application/vnd.oasis.opendocument.spreadsheet"/>'
        '<manifest:file-entry manifest:full-path="content.xml" manifest:media-type="text/xml"/></manifest:manifest>'
    )
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as packed:
        packed.writestr(zipfile.ZipInfo("mimetype"), "application/vnd.oasis.opendocument.spreadsheet")
        packed.writestr("content.xml", content)
        packed.writestr("META-INF/manifest.xml", manifest)
    return path


def xls_far_record(path: Path, row: int = 0xFFFF, column: int = 0xFFFF) -> Path:
    """An .xls (xlwt) whose second sheet's NUMBER record is moved to (`row`, `column`): BIFF8 keeps both in
    16 bits and calamine trusts them, so its grid is 65,536 x 65,536 cells (137 GB)."""
    import xlwt

    book = xlwt.Workbook()
    good = book.add_sheet("Data")
    for r, values in enumerate((("region", "revenue"), ("north", 120))):
        for c, value in enumerate(values):
            good.write(r, c, value)
    far = book.add_sheet("Far")
    far.write(0, 0, 1.5)
    far.write(1, 1, 98765.4321)
    book.save(str(path))
    data = bytearray(path.read_bytes())
    at = data.index(struct.pack("<d", 98765.4321))
    assert data[at - 10 : at - 6] == b"\x03\x02\x0e\x00"  # the NUMBER record's id and length
    data[at - 6 : at - 2] = struct.pack("<HH", row, column)
    path.write_bytes(bytes(data))
    return path


def xls_in_mini_stream(path: Path, extra: list[Entry] | None = None) -> Path:
    """`xls_far_record`'s workbook with its Workbook stream cut to its records (1,767 bytes, not xlwt's 4,096):
    under 4,096 bytes, it lies in 64-byte sectors of the mini stream, as small workbooks from other writers do.
    `extra` directory entries go beside it."""
    with olefile.OleFileIO(str(xls_far_record(path))) as ole:
        stream = ole.openstream("Workbook").read()
    records = stream[: len(stream.rstrip(b"\0")) + 3]  # to the last EOF record: 0A 00 00 00
    path.write_bytes(compound([("Workbook", records)], extra))
    return path


def dates_past_the_last_day(path: Path) -> Path:
    """A workbook (xlsxwriter) whose `Dates` sheet holds a real date and two numbers in date and duration
    styles beyond 9999-12-31: -1e300 makes python-calamine's date conversion panic (chrono), 1e10
    overflows Python's timedelta. Excel shows both as #####."""
    import xlsxwriter

    book = xlsxwriter.Workbook(str(path))
    data = book.add_worksheet("Data")
    data.write_row(0, 0, ["region", "revenue"])
    data.write_row(1, 0, ["north", 120])
    dates = book.add_worksheet("Dates")
    dates.write(0, 0, "when")
    dates.write_number(1, 0, 45_000, book.add_format({"num_format": "yyyy-mm-dd"}))
    dates.write_number(2, 0, -1e300, book.add_format({"num_format": "yyyy-mm-dd"}))
    dates.write_number(3, 0, 1e10, book.add_format({"num_format": "[h]:mm:ss"}))
    book.close()
    return path
