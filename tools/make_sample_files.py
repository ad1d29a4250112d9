"""Regenerate the PDF and DOCX files of the built-in sample knowledge base.

The outputs are committed under mcp_analysis/sample/documents/, so nothing at run
time depends on fpdf2; run this only after editing the texts below:

    uv run python tools/make_sample_files.py
"""

from __future__ import annotations

from pathlib import Path

import docx
from fpdf import FPDF

OUT = Path(__file__).resolve().parent.parent / "mcp_analysis" / "sample" / "documents"

Block = tuple[str, object]  # ("h1"|"h2"|"p"|"table"|"list"|"pagebreak", content)

Q3: list[Block] = [
    ("h1", "Halvorsen Marine Systems - Quarterly Financial Report, Q3 2025"),
    ("p", "Reporting period: 1 July 2025 to 30 September 2025. All amounts in US dollars, unaudited."),
    ("h2", "Summary"),
    (
        "p",
        "Third-quarter revenue reached a new record as deliveries under the Skagerrak pilot-boat "
        "programme began and telemetry subscriptions kept growing. The Bergen plant ran a second shift "
        "for eight weeks to meet demand. Gross margin recovered as panel freight costs eased.",
    ),
    (
        "p",
        "Cash from operations was $2.3 million. The company repaid $1.0 million of its equipment loan "
        "and ended the quarter with $9.8 million in cash.",
    ),
    ("pagebreak", None),
    ("h2", "Key Figures"),
    (
        "table",
        [
            ["Metric", "Q3 2025", "Q3 2024", "Change"],
            ["Total revenue", "$14,600,000", "$12,100,000", "+20.7%"],
            ["Gross profit", "$6,570,000", "$5,330,000", "+23.3%"],
            ["Operating income", "$2,050,000", "$1,460,000", "+40.4%"],
            ["Net income", "$1,510,000", "$1,050,000", "+43.8%"],
        ],
    ),
    ("h2", "Revenue by Segment"),
    (
        "table",
        [
            ["Segment", "Revenue"],
            ["Navigation systems", "$7,100,000"],
            ["Telemetry services", "$5,000,000"],
            ["Maintenance contracts", "$2,500,000"],
        ],
    ),
    ("h2", "Outlook"),
    (
        "p",
        "Management expects fourth-quarter revenue between $15.0 million and $15.6 million. The order "
        "backlog rose to $36.2 million.",
    ),
]

Q4: list[Block] = [
    ("h1", "Halvorsen Marine Systems - Quarterly Financial Report, Q4 2025"),
    ("p", "Reporting period: 1 October 2025 to 31 December 2025. All amounts in US dollars, unaudited."),
    ("h2", "Summary"),
    (
        "p",
        "The year closed with the strongest quarter in the company's history. Full-year revenue grew "
        "16.9% to $55.4 million. Telemetry services overtook maintenance contracts as the second "
        "largest segment for the full year.",
    ),
    ("h2", "Key Figures"),
    (
        "table",
        [
            ["Metric", "Q4 2025", "Q4 2024", "Change"],
            ["Total revenue", "$15,300,000", "$13,100,000", "+16.8%"],
            ["Gross profit", "$6,960,000", "$5,830,000", "+19.4%"],
            ["Operating income", "$2,180,000", "$1,620,000", "+34.6%"],
            ["Net income", "$1,640,000", "$1,170,000", "+40.2%"],
        ],
    ),
    ("h2", "Revenue by Segment"),
    (
        "table",
        [
            ["Segment", "Revenue"],
            ["Navigation systems", "$7,400,000"],
            ["Telemetry services", "$5,300,000"],
            ["Maintenance contracts", "$2,600,000"],
        ],
    ),
    ("h2", "Outlook"),
    (
        "p",
        "For 2026, management targets revenue of $63 million to $66 million, with the Gdansk assembly "
        "line contributing from the third quarter.",
    ),
]

REPORT_A: list[Block] = [
    ("h1", "Report A: Fleet Operator Survey 2025"),
    (
        "p",
        "Halvorsen Marine Systems, Customer Insights team. Survey fielded in June and July 2025 among "
        "212 fleet operators in Norway, Denmark, Germany and Poland.",
    ),
    ("h2", "Method"),
    (
        "p",
        "Operators answered a 34-question online survey; 48 of them also took part in a 45-minute "
        "follow-up interview. Results are weighted by fleet size. The margin of error for the full sample "
        "is plus or minus 6.7 percentage points.",
    ),
    ("h2", "Key Findings"),
    (
        "list",
        [
            "Fuel efficiency is the top purchase driver: 64% of operators rank it first, ahead of "
            "crew safety (21%) and regulatory compliance (15%).",
            "Telemetry adoption is broad but shallow: 71% collect engine data, yet only 23% use it to plan "
            "maintenance.",
            "Operators want fewer vendors: 58% would pay a premium of up to 8% for a single supplier of "
            "navigation and telemetry.",
            "Training is the main barrier to new bridge systems, cited by 47% of respondents.",
        ],
    ),
    ("pagebreak", None),
    ("h2", "Satisfaction with Halvorsen"),
    (
        "p",
        "Net promoter score among Halvorsen customers was 41, up from 33 in the 2024 survey. Customers "
        "praised field service response times and criticised the complexity of the FleetLink dashboard.",
    ),
    ("h2", "Recommendations"),
    (
        "list",
        [
            "Bundle NavCore and FleetLink in a single fleet contract.",
            "Add fuel-efficiency reports to the FleetLink dashboard.",
            "Offer on-board training with every NavCore installation.",
        ],
    ),
]

REPORT_B: list[Block] = [
    ("h1", "Report B: Port Authority Interviews 2025"),
    (
        "p",
        "Halvorsen Marine Systems, Customer Insights team. Structured interviews with 19 port "
        "authorities and vessel traffic services along the North Sea and Baltic coasts, August to "
        "October 2025.",
    ),
    ("h2", "Method"),
    (
        "p",
        "Each interview followed a guide of twelve topics and lasted about an hour. Two analysts coded "
        "the transcripts independently and reconciled differences.",
    ),
    ("h2", "Key Findings"),
    (
        "list",
        [
            "Safety outweighs efficiency: 15 of 19 authorities put collision avoidance in confined "
            "waters first, and only 2 mentioned fuel consumption.",
            "Authorities worry about vulnerabilities in AIS data links; 11 of 19 have seen spoofed "
            "vessel positions in the past year.",
            "Data sharing is wanted but blocked by contracts: 13 authorities would use live vessel "
            "telemetry if operators agreed to share it.",
            "Regulation drives budgets: new equipment is bought when rules change, not when technology improves.",
        ],
    ),
    ("h2", "Implications for Halvorsen"),
    (
        "p",
        "Port authorities are an indirect but influential customer. Features that authenticate AIS "
        "messages and share telemetry with traffic services, with the operator's consent, would make "
        "Halvorsen-equipped vessels preferred in busy ports.",
    ),
    ("h2", "Recommendations"),
    (
        "list",
        [
            "Prototype signed AIS position reports with two port partners.",
            "Publish a data-sharing agreement template for operators and ports.",
        ],
    ),
]


def write_pdf(blocks: list[Block], path: Path) -> None:
    pdf = FPDF()
    pdf.set_auto_page_break(auto=True, margin=15)
    pdf.set_title(str(blocks[0][1]))
    pdf.add_page()
    for kind, content in blocks:
        if kind == "h1":
            pdf.set_font("Helvetica", "B", 18)
            pdf.multi_cell(0, 10, str(content), new_x="LMARGIN", new_y="NEXT")
            pdf.ln(3)
        elif kind == "h2":
            pdf.ln(3)
            pdf.set_font("Helvetica", "B", 14)
            pdf.multi_cell(0, 8, str(content), new_x="LMARGIN", new_y="NEXT")
            pdf.ln(1)
        elif kind == "p":
            pdf.set_font("Helvetica", "", 11)
            pdf.multi_cell(0, 6, str(content), new_x="LMARGIN", new_y="NEXT")
            pdf.ln(3)
        elif kind == "list":
            pdf.set_font("Helvetica", "", 11)
            for entry in content:  # type: ignore[union-attr]
                pdf.multi_cell(0, 6, f"- {entry}", new_x="LMARGIN", new_y="NEXT")
                pdf.ln(2)
        elif kind == "table":
            pdf.set_font("Helvetica", "", 11)
            with pdf.table() as table:
                for row in content:  # type: ignore[union-attr]
                    cells = table.row()
                    for cell in row:
                        cells.cell(cell)
            pdf.ln(3)
        elif kind == "pagebreak":
            pdf.add_page()
    pdf.output(str(path))


def write_docx(blocks: list[Block], path: Path) -> None:
    document = docx.Document()
    document.core_properties.title = str(blocks[0][1])
    for kind, content in blocks:
        if kind == "h1":
            document.add_heading(str(content), 0)
        elif kind == "h2":
            document.add_heading(str(content), 1)
        elif kind == "p":
            document.add_paragraph(str(content))
        elif kind == "list":
            for entry in content:  # type: ignore[union-attr]
                document.add_paragraph(entry, style="List Number")
        elif kind == "table":
            rows = content  # type: ignore[assignment]
            table = document.add_table(rows=len(rows), cols=len(rows[0]))
            table.style = "Table Grid"
            for r, row in enumerate(rows):
                for c, cell in enumerate(row):
                    table.cell(r, c).text = cell
        elif kind == "pagebreak":
            document.add_page_break()
    document.save(str(path))


def main() -> None:
    write_pdf(Q3, OUT / "q3-2025-financial-report.pdf")
    write_docx(Q4, OUT / "q4-2025-financial-report.docx")
    write_pdf(REPORT_A, OUT / "report-a-fleet-operator-survey.pdf")
    write_docx(REPORT_B, OUT / "report-b-port-authority-interviews.docx")
    print(f"wrote sample files to {OUT}")


if __name__ == "__main__":
    main()
