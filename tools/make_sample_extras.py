"""Regenerate the workbook and the scanned memo of the built-in sample knowledge base.

The outputs are committed under mcp_analysis/sample/documents/, so nothing at run time
depends on xlsxwriter (a development dependency); run this only after editing the data below:

    uv run python tools/make_sample_extras.py

The workbook is written with xlsxwriter because it stores a formula's cached value (which
is what readers such as calamine return); openpyxl writes formulas without one. The memo
is rendered with Pillow's built-in font, slightly rotated, blurred and speckled like an
office scan, and saved without a text layer, so only OCR can read it. The figures here
are the ground truth the sample questions check (tests/sample/test_questions.py).
"""

from __future__ import annotations

import datetime as dt
import random
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "mcp_analysis" / "sample" / "documents"
WORKBOOK = "revenue-and-support-2025.xlsx"
MEMO = "memo-bergen-line-stop-2025.png"

QUARTERS = ("Q1 2025", "Q2 2025", "Q3 2025", "Q4 2025")
# Revenue by region in USD; each quarter adds up to the quarterly reports' total revenue.
REVENUE_BY_REGION: dict[str, tuple[int, int, int, int]] = {
    "Norway": (4_900_000, 5_000_000, 5_300_000, 5_600_000),
    "Denmark": (2_600_000, 2_700_000, 3_600_000, 3_500_000),
    "Germany": (2_300_000, 2_400_000, 2_500_000, 2_700_000),
    "Poland": (1_500_000, 1_900_000, 2_000_000, 2_200_000),
    "Other Europe": (1_100_000, 1_100_000, 1_200_000, 1_300_000),
}

# Support tickets: (ticket, opened, product, region, severity, summary, hours to resolve).
TICKETS: list[tuple[str, dt.date, str, str, str, str, float]] = [
    ("SD-1041", dt.date(2025, 1, 9), "NavCore", "Norway", "Low", "Chart update failed to install", 3.5),
    ("SD-1057", dt.date(2025, 1, 28), "FleetLink", "Denmark", "Medium", "Gateway drops telemetry at sea", 20),
    ("SD-1066", dt.date(2025, 2, 13), "FleetLink", "Norway", "High", "Firmware 4.2.7 rollout questions", 6),
    ("SD-1090", dt.date(2025, 3, 14), "NavCore", "Poland", "Medium", "Display freezes after AIS burst", 31),
    ("SD-1103", dt.date(2025, 4, 2), "NavCore", "Denmark", "Low", "Radar overlay misaligned", 5.5),
    ("SD-1118", dt.date(2025, 4, 24), "NavCore", "Norway", "High", "Controller restarts on NMEA input", 12),
    ("SD-1125", dt.date(2025, 5, 6), "FleetLink", "Germany", "Low", "Dashboard shows wrong fuel units", 4),
    ("SD-1139", dt.date(2025, 6, 3), "Customer portal", "Norway", "Medium", "Password reset mail not received", 1.5),
    ("SD-1151", dt.date(2025, 6, 30), "FleetLink", "Poland", "Medium", "Engine data missing after update", 16),
    ("SD-1164", dt.date(2025, 7, 19), "Customer portal", "Denmark", "Low", "Sign-in fails after maintenance", 2.5),
    (
        "SD-1170",
        dt.date(2025, 7, 21),
        "Customer portal",
        "Other Europe",
        "Medium",
        "API client rejects new certificate",
        7,
    ),
    ("SD-1183", dt.date(2025, 8, 5), "NavCore", "Norway", "Medium", "Compass offset on a pilot boat", 6),
    ("SD-1188", dt.date(2025, 8, 12), "NavCore", "Denmark", "Medium", "Pilot-boat display too bright at night", 9),
    ("SD-1196", dt.date(2025, 9, 2), "Customer portal", "Norway", "High", "Suspicious e-mail asks for password", 1),
    ("SD-1201", dt.date(2025, 9, 4), "Customer portal", "Germany", "High", "Credentials entered on look-alike site", 3),
    ("SD-1214", dt.date(2025, 10, 7), "FleetLink", "Norway", "Low", "Subscription tier not shown", 2),
    ("SD-1229", dt.date(2025, 11, 18), "NavCore", "Germany", "Medium", "Autopilot handover alarm repeats", 14),
    ("SD-1240", dt.date(2025, 12, 9), "FleetLink", "Denmark", "High", "Gateway rejects signed config bundle", 10),
    ("SD-1247", dt.date(2025, 12, 17), "NavCore", "Poland", "Low", "Chart licence expired early", 2.5),
]

# The memo: facts that only this scanned page holds.
LINE_STOP_HOURS = 14
REPAIR_COST_NOK = 86_500
MEMO_LINES = [
    "HALVORSEN MARINE SYSTEMS - INTERNAL MEMO",
    "",
    "To: Ingrid Solberg, VP Engineering",
    "From: Tor Aasen, Bergen plant manager",
    "Date: 6 October 2025",
    "Subject: Line stop at the Bergen assembly line",
    "",
    "On 23 September 2025 the Bergen assembly line stopped",
    f"for {LINE_STOP_HOURS} hours after the conveyor drive of station 7 failed.",
    "A spare drive was flown in from Stavanger. The repair",
    f"cost NOK {REPAIR_COST_NOK:,}. No customer deliveries were late.",
    "From November we keep a spare drive on site.",
    "",
    "Signed: Tor Aasen",
]


def write_workbook(path: Path) -> None:
    """Sheet 'Revenue by region' (title and notes rows above the header, SUM formulas with
    cached values, a source line below) and sheet 'Support tickets' (a date column)."""
    import xlsxwriter

    book = xlsxwriter.Workbook(str(path))
    title = "Halvorsen Marine Systems - revenue by region and support tickets, 2025"
    book.set_properties({"title": title, "created": dt.datetime(2026, 1, 12)})  # the same bytes every run
    money = book.add_format({"num_format": "#,##0"})
    bold = book.add_format({"bold": True})
    revenue = book.add_worksheet("Revenue by region")
    revenue.merge_range("A1:F1", "Halvorsen Marine Systems - revenue by region, 2025 (USD, unaudited)", bold)
    revenue.write("A2", "Regions as booked by the sales offices; quarter totals agree with the quarterly reports.")
    revenue.write_row("A4", ["Region", *QUARTERS, "Full year"], bold)
    first, last = 5, 4 + len(REVENUE_BY_REGION)
    for row, (region, amounts) in enumerate(REVENUE_BY_REGION.items(), start=first):
        revenue.write(f"A{row}", region)
        revenue.write_row(f"B{row}", list(amounts), money)
        revenue.write_formula(f"F{row}", f"=SUM(B{row}:E{row})", money, sum(amounts))
    total = last + 1
    revenue.write(f"A{total}", "Total", bold)
    for column, letter in enumerate("BCDEF"):
        cached = sum(a[column] for a in REVENUE_BY_REGION.values()) if column < 4 else _full_year()
        revenue.write_formula(f"{letter}{total}", f"=SUM({letter}{first}:{letter}{last})", money, cached)
    revenue.write(f"A{total + 2}", "Source: Finance, consolidated 12 January 2026.")
    revenue.set_column("A:A", 16)
    revenue.set_column("B:F", 12)

    date = book.add_format({"num_format": "yyyy-mm-dd"})
    support = book.add_worksheet("Support tickets")
    support.write("A1", "Support tickets 2025, exported from the service desk on 5 January 2026", bold)
    header = ["Ticket", "Opened", "Product", "Region", "Severity", "Summary", "Hours to resolve"]
    support.write_row("A3", header, bold)
    for row, (ticket, opened, *rest) in enumerate(TICKETS, start=4):
        support.write(f"A{row}", ticket)
        support.write_datetime(f"B{row}", dt.datetime.combine(opened, dt.time()), date)
        support.write_row(f"C{row}", rest)
    support.write(f"A{4 + len(TICKETS) + 1}", "Hours to resolve: working hours from opening to closing.")
    support.set_column("B:B", 11)
    support.set_column("F:F", 38)
    book.close()


def _full_year() -> int:
    return sum(sum(amounts) for amounts in REVENUE_BY_REGION.values())


def write_memo(path: Path) -> None:
    """The memo as a grey page image: built-in font, a pen signature, 0.8 degrees of skew,
    a little blur and speckle (seeded, so the file is the same every run)."""
    from PIL import Image, ImageDraw, ImageFilter, ImageFont

    size, step, margin = 26, 40, 70
    font = ImageFont.load_default(size=size)
    page = Image.new("L", (1100, 2 * margin + (len(MEMO_LINES) + 2) * step), 250)
    draw = ImageDraw.Draw(page)
    for number, line in enumerate(MEMO_LINES):
        draw.text((margin, margin + number * step), line, fill=20, font=font)
    top = margin + len(MEMO_LINES) * step + 6
    signature = [(margin + 20 + 14 * i, top + (12 if i % 2 else -4) + i) for i in range(14)]
    draw.line(signature, fill=40, width=3, joint="curve")
    rng = random.Random(2025)
    for _ in range(400):
        x, y = rng.randrange(page.width), rng.randrange(page.height)
        draw.point((x, y), fill=rng.randrange(60, 200))
    page = page.rotate(0.8, resample=Image.Resampling.BICUBIC, expand=True, fillcolor=250)
    page = page.filter(ImageFilter.GaussianBlur(0.6))
    page = page.point(lambda value: value // 16 * 16 + 8)  # 16 grey levels, as a scanner's PNG export
    page.save(path, optimize=True)


def main() -> None:
    write_workbook(OUT / WORKBOOK)
    write_memo(OUT / MEMO)
    print(f"wrote {WORKBOOK} and {MEMO} to {OUT}")


if __name__ == "__main__":
    main()
