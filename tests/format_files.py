"""Real workbooks, decks, ODF files, e-books, e-mails and scans, written with real writers
(xlsxwriter, openpyxl, xlwt, python-pptx, odfdo, ebooklib, stdlib email, Pillow), including
the ugly cases: notes rows, merged cells, formulas with cached values, a part missing from
the archive, password protection, damaged files, images without text."""

from __future__ import annotations

import datetime as dt
import io
import re
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp_analysis.ingest.formats import Converted

SCAN_TEXT = [
    "Quarterly maintenance report",
    "",
    "Crane four was out of service for twelve hours",
    "after a hydraulic failure on the third of March.",
    "The repair cost 4,800 euros and was finished on time.",
]


def write_workbook(path: Path) -> Path:
    """Sheet 'Revenue': a notes row above the table, merged title, dates, a formula with its
    cached value, a notes row below; sheet 'Staff': a plain table; sheet 'Empty'."""
    import xlsxwriter

    book = xlsxwriter.Workbook(str(path))
    revenue = book.add_worksheet("Revenue")
    date = book.add_format({"num_format": "yyyy-mm-dd"})
    revenue.merge_range("A1:D1", "Revenue by region, EUR (notes above the table)")
    revenue.write_row("A3", ["Region", "Q1", "Q2", "Reported"])
    revenue.write_row("A4", ["North", 1200.5, 1300])
    revenue.write_datetime("D4", dt.datetime(2025, 3, 31), date)
    revenue.write_row("A5", ["South", 1_000_000, 0.25])
    revenue.write_datetime("D5", dt.datetime(2025, 4, 1, 14, 5), book.add_format({"num_format": "yyyy-mm-dd hh:mm"}))
    revenue.write("A6", "Total")
    revenue.write_formula("B6", "=SUM(B4:B5)", None, 1_001_200.5)
    revenue.write_formula("C6", "=SUM(C4:C5)", None, 1300.25)
    revenue.write("A8", "Source: finance department, unaudited")
    staff = book.add_worksheet("Staff")
    staff.write_row("A1", ["Name", "Role", "Started"])
    staff.write_row("A2", ["Ana", "Pilot"])
    staff.write_datetime("C2", dt.datetime(2019, 6, 1), date)
    book.add_worksheet("Empty")
    book.close()
    return path


def write_big_workbook(path: Path, rows: int) -> Path:
    """One sheet 'Orders' of `rows` data rows under a header (constant-memory writer)."""
    import xlsxwriter

    book = xlsxwriter.Workbook(str(path), {"constant_memory": True})
    sheet = book.add_worksheet("Orders")
    sheet.write_row(0, 0, ["order_id", "region", "units", "price"])
    regions = ["North", "South", "East", "West"]
    for i in range(1, rows + 1):
        sheet.write_row(i, 0, [i, regions[i % 4], i % 50, round(1 + (i % 997) / 10, 2)])
    book.close()
    return path


def drop_part(source: Path, target: Path, part: str) -> Path:
    """A copy of an Office archive without one of its parts (a workbook Excel may still open)."""
    with zipfile.ZipFile(source) as old, zipfile.ZipFile(target, "w") as new:
        for name in old.namelist():
            if name != part:
                new.writestr(name, old.read(name))
    return target


def encrypt_office(source: Path, target: Path, password: str = "secret") -> Path:
    from msoffcrypto.format.ooxml import OOXMLFile

    with source.open("rb") as handle:
        buffer = io.BytesIO()
        OOXMLFile(handle).encrypt(password, buffer)
    target.write_bytes(buffer.getvalue())
    return target


def write_xls(path: Path) -> Path:
    import xlwt

    book = xlwt.Workbook()
    sheet = book.add_sheet("Tonnage")
    for c, value in enumerate(["Port", "Tons", "Day"]):
        sheet.write(0, c, value)
    sheet.write(1, 0, "Rotterdam")
    sheet.write(1, 1, 1250.75)
    sheet.write(1, 2, dt.date(2025, 2, 3), xlwt.easyxf(num_format_str="YYYY-MM-DD"))
    book.save(str(path))
    return path


def write_ods(path: Path) -> Path:
    from odfdo import Document, Table

    doc = Document("spreadsheet")
    table = Table("Depths")
    for r, row in enumerate([["Berth", "Depth"], ["B1", 14.5], ["B2", 12]]):
        for c, value in enumerate(row):
            table.set_value((c, r), value)
    doc.body.append(table)
    doc.save(str(path))
    return path


def write_deck(path: Path) -> Path:
    """Two slides: bullets and speaker notes; a table and a chart."""
    from pptx import Presentation
    from pptx.chart.data import CategoryChartData
    from pptx.enum.chart import XL_CHART_TYPE
    from pptx.util import Inches

    deck = Presentation()
    first = deck.slides.add_slide(deck.slide_layouts[1])
    first.shapes.title.text = "Fleet results 2025"
    body = first.placeholders[1].text_frame
    body.text = "Revenue grew in every region"
    point = body.add_paragraph()
    point.text = "North up 12 percent"
    point.level = 1
    first.notes_slide.notes_text_frame.text = "Mention the port contract."
    second = deck.slides.add_slide(deck.slide_layouts[5])
    second.shapes.title.text = "Regional table"
    table = second.shapes.add_table(3, 3, Inches(1), Inches(1.5), Inches(6), Inches(1.5)).table
    for r, row in enumerate([["Region", "Q1", "Q2"], ["North", "1,200.50", "1300"], ["South", "900", "950"]]):
        for c, value in enumerate(row):
            table.cell(r, c).text = value
    data = CategoryChartData()
    data.categories = ["Q1", "Q2"]
    data.add_series("Units", (10, 12.5))
    second.shapes.add_chart(XL_CHART_TYPE.COLUMN_CLUSTERED, Inches(1), Inches(3.5), Inches(4), Inches(3), data)
    deck.save(str(path))
    return path


def write_odt(path: Path) -> Path:
    from odfdo import Document, Header, List, Paragraph, Table

    doc = Document("text")
    doc.body.append(Header(1, "Port authority interviews"))
    doc.body.append(Paragraph("Twelve interviews were held in March 2025."))
    doc.body.append(List(["Berth delays", "Crane downtime"]))
    table = Table("Delays")
    for r, row in enumerate([["Port", "Delay (h)"], ["Rotterdam", "12.5"], ["Hamburg", "8"]]):
        for c, value in enumerate(row):
            table.set_value((c, r), value)
    doc.body.append(table)
    doc.save(str(path))
    return path


def write_odp(path: Path) -> Path:
    from odfdo import Document, DrawPage, Frame

    doc = Document("presentation")
    for number, (title, line) in enumerate([("Overview", "Fleet overview"), ("Outlook", "Ferry service in autumn")]):
        page = DrawPage(f"page{number + 1}", name=title)
        page.append(Frame.text_frame([line], size=("20cm", "5cm"), position=("1cm", "1cm")))
        doc.body.append(page)
    doc.save(str(path))
    return path


def write_epub(path: Path) -> Path:
    from ebooklib import epub

    book = epub.EpubBook()
    book.set_identifier("harbour-tales")
    book.set_title("Harbour Tales")
    book.set_language("en")
    chapters = []
    for number, body in enumerate(
        [
            "<p>The ship Aurora arrived at dawn.</p><table><tr><th>Ship</th><th>Tons</th></tr>"
            "<tr><td>Aurora</td><td>1,200,000</td></tr></table>",
            "<p>Cranes stood idle through the night.</p>",
        ],
        start=1,
    ):
        chapter = epub.EpubHtml(title=f"Chapter {number}", file_name=f"c{number}.xhtml", lang="en")
        chapter.content = f"<h1>Chapter {number}</h1>{body}"
        book.add_item(chapter)
        chapters.append(chapter)
    book.toc = tuple(chapters)
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = chapters
    epub.write_epub(str(path), book)
    return path


def write_eml(path: Path) -> Path:
    from email.message import EmailMessage

    message = EmailMessage()
    message["From"] = "Ana Lima <ana@example.org>"
    message["To"] = "ops@example.org"
    message["Subject"] = "Crane downtime in March"
    message["Date"] = "Tue, 01 Apr 2025 09:30:00 +0200"
    message.set_content("Hello team,\n\nCrane four was down twelve hours.\n\nRegards, Ana")
    message.add_alternative("<p>Hello team,</p><p>Crane four was down <b>twelve hours</b>.</p>", subtype="html")
    message.add_attachment("port,delay\nRotterdam,12.5\n", subtype="csv", filename="delays.csv")
    message.add_attachment(b"%PDF-1.4 not really", maintype="application", subtype="pdf", filename="scan.pdf")
    path.write_bytes(bytes(message))
    return path


def render_scan(lines: list[str] = SCAN_TEXT, *, size: int = 34, mode: str = "L") -> object:
    """A page image of `lines`, slightly rotated and blurred like an office scan."""
    from PIL import Image, ImageDraw, ImageFilter, ImageFont

    font = ImageFont.load_default(size=size)
    image = Image.new("L", (1700, 120 + len(lines) * int(size * 1.6)), 255)
    draw = ImageDraw.Draw(image)
    for number, line in enumerate(lines):
        draw.text((80, 60 + number * int(size * 1.6)), line, fill=0, font=font)
    image = image.rotate(0.7, expand=True, fillcolor=255).filter(ImageFilter.GaussianBlur(0.7))
    return image.convert(mode)


def write_scan(path: Path, lines: list[str] = SCAN_TEXT, mode: str = "L") -> Path:
    render_scan(lines, mode=mode).save(path)  # type: ignore[attr-defined]
    return path


def write_scanned_pdf(path: Path, scan: Path) -> Path:
    """Page 1 has a text layer; page 2 is only the scan's image; page 3 is blank."""
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    pdf.multi_cell(0, 8, "Page one has a real text layer about harbour cranes.")
    pdf.add_page()
    pdf.image(str(scan), x=10, y=20, w=190)
    pdf.add_page()
    pdf.output(str(path))
    return path


def words(text: str) -> list[str]:
    return [w for w in (re.sub(r"[^\w]", "", t.lower()) for t in text.split()) if w]


def convert_file(path: Path, **limits: Any) -> Converted:
    """`path` through the converter the registry picks for it, under `Limits(**limits)`, as a
    conversion worker runs it (without the worker: the converters are plain functions)."""
    from mcp_analysis.ingest import formats
    from mcp_analysis.ingest.formats.base import SNIFF_BYTES, Source
    from mcp_analysis.ingest.limits import Limits

    data = path.read_bytes()
    return formats.for_file(path.name, data[:SNIFF_BYTES]).convert(Source(data, path.name, Limits(**limits)))
