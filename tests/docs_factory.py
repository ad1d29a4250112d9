"""Test documents in every supported format, written on the fly with real writers."""

from __future__ import annotations

from pathlib import Path


def write_markdown(path: Path) -> Path:
    path.write_text(
        "# Harbour Log\n\nThe pilot boarded at **dawn** and used `VHF 12`.\n\n## Weather\n\n"
        "| Day | Wind |\n|---|---|\n| Mon | 12 kn |\n\n- calm seas\n- good visibility\n\n"
        "```python\nprint('tide')\n```\n"
    )
    return path


def write_html(path: Path) -> Path:
    path.write_text(
        "<html><head><title>Berth Plan</title></head><body><h1>Berth Plan</h1>"
        "<p>Ships <em>must</em> report 2 hours ahead.</p><h2>Berths</h2>"
        "<table><tr><th>Berth</th><th>Depth</th></tr><tr><td>B1</td><td>14 m</td></tr></table>"
        "<ul><li>Tugs on request</li></ul></body></html>"
    )
    return path


def write_pdf(path: Path, pages: int = 2) -> Path:
    from fpdf import FPDF

    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 18)
    pdf.cell(0, 10, "Dredging Survey", new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 11)
    pdf.multi_cell(0, 6, "The channel depth was measured at forty points. " * 5)
    for number in range(2, pages + 1):
        pdf.add_page()
        pdf.set_font("Helvetica", "B", 14)
        pdf.cell(0, 10, f"Section {number}", new_x="LMARGIN", new_y="NEXT")
        pdf.set_font("Helvetica", "", 11)
        pdf.multi_cell(0, 6, f"Findings on page {number}: sediment build-up near the quay. " * 3)
    pdf.output(str(path))
    return path


def write_docx(path: Path) -> Path:
    import docx

    document = docx.Document()
    document.add_heading("Crew Roster", 0)
    document.add_heading("Deck", 1)
    document.add_paragraph("Bosun Ada Lind leads the deck crew.")
    document.add_paragraph("Mooring lines", style="List Bullet")
    table = document.add_table(rows=2, cols=2)
    table.cell(0, 0).text, table.cell(0, 1).text = "Name", "Role"
    table.cell(1, 0).text, table.cell(1, 1).text = "Ada", "Bosun"
    document.save(str(path))
    return path


def write_text(path: Path) -> Path:
    path.write_text("Notice to Mariners\n\nBuoy 7 is off station.\n\nExpect delays at the lock.\n")
    return path


def write_code(path: Path) -> Path:
    path.write_text("import math\n\n\ndef tide(h):\n    return math.sin(h)\n\n\nclass Port:\n    pass\n")
    return path


def write_all(directory: Path) -> dict[str, Path]:
    directory.mkdir(parents=True, exist_ok=True)
    return {
        "markdown": write_markdown(directory / "log.md"),
        "html": write_html(directory / "berths.html"),
        "pdf": write_pdf(directory / "survey.pdf"),
        "docx": write_docx(directory / "roster.docx"),
        "text": write_text(directory / "notice.txt"),
        "code": write_code(directory / "tide.py"),
    }
