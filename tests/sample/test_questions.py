"""The questions the product exists for, answered with sandbox code over the sample KB.

The expected numbers are facts of the sample documents (see mcp_analysis/sample):
4 documents mention security vulnerabilities; the four quarterly reports average
$13,850,000 of revenue; Report A and Report B each list four key findings. The workbook's
and the scanned memo's answers are computed here from the data that wrote those files
(tools/make_sample_extras.py), so the files and the questions cannot drift apart.
"""

from __future__ import annotations

import ast
import datetime as dt
import json
from collections import Counter

import pytest

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.session.analysis import AnalysisSession
from tools.make_sample_extras import (
    LINE_STOP_HOURS,
    MEMO,
    QUARTERS,
    REPAIR_COST_NOK,
    REVENUE_BY_REGION,
    TICKETS,
)

pytestmark = pytest.mark.anyio


async def test_how_many_documents_mention_security_vulnerabilities(kb: KnowledgeBase) -> None:
    async with AnalysisSession(kb) as session:
        result = await session.execute(
            "import json\nfrom pathlib import Path\n"
            "hits = []\n"
            "for d in Path('/documents').iterdir():\n"
            "    text = (d / 'content.txt').read_text().lower()\n"
            "    if 'vulnerabilit' in text:\n"
            "        hits.append(json.loads((d / 'metadata.json').read_text())['title'])\n"
            "len(hits)"
        )
        assert result.success, result.error
        assert result.value == "4"
        titles = await session.execute("sorted(hits)")
        assert "Report B: Port Authority Interviews 2025" in titles.value
        assert "Scheduled Maintenance" not in titles.value  # an advisory without vulnerabilities


async def test_average_revenue_across_quarterly_reports(kb: KnowledgeBase) -> None:
    code = """
import re
revenues = {}
for doc in await list_documents():
    if 'Quarterly Financial Report' not in doc['title']:
        continue
    text = Path('/documents/' + doc['id'] + '/content.txt').read_text()
    m = re.search(r'Total revenue\\s*\\|\\s*\\$([\\d,]+)', text)
    revenues[doc['title'][-7:]] = int(m.group(1).replace(',', ''))
average = sum(revenues.values()) / len(revenues)
print(sorted(revenues.items()))
average
"""
    async with AnalysisSession(kb) as session:
        result = await session.execute("from pathlib import Path\n" + code)
        assert result.success, result.error
        assert float(result.value) == 13_850_000.0
        assert "('Q3 2025', 14600000)" in result.stdout


async def test_compare_key_findings_of_report_a_and_b(kb: KnowledgeBase) -> None:
    code = """
import json
from pathlib import Path
def findings(title_part):
    for d in Path('/documents').iterdir():
        meta = json.loads((d / 'metadata.json').read_text())
        if title_part in meta['title']:
            toc = json.loads((d / 'toc.json').read_text())
            items = [json.loads(l) for l in (d / 'items.jsonl').read_text().splitlines()]
            def walk(nodes):
                for n in nodes:
                    if n['heading'] == 'Key Findings':
                        lo, hi = n['item_range']
                        return [i['text'] for i in items[lo:hi + 1] if i['label'] == 'list_item']
                    found = walk(n['sections'])
                    if found:
                        return found
            return walk(toc['sections'])
a = findings('Report A')
b = findings('Report B')
{'a': a, 'b': b}
"""
    async with AnalysisSession(kb) as session:
        result = await session.execute(code)
        assert result.success, result.error
        counts = await session.execute("(len(a), len(b))")
        assert counts.value == "(4, 4)"
        assert "Fuel efficiency is the top purchase driver" in result.value
        assert "Safety outweighs efficiency" in result.value


async def test_search_inside_the_sandbox_is_recorded_and_citable(kb: KnowledgeBase) -> None:
    async with AnalysisSession(kb) as session:
        result = await session.execute("r = await search('NavCore buffer overflow', limit=3)\nr[0]['chunk_id']")
        assert result.success, result.error
        chunk_id = json.loads(result.value.replace("'", '"'))
        assert "NavCore buffer overflow" in session.state.searches
        outcome = await session.cite([f"[{chunk_id}]"])
        assert [c.chunk_id for c in outcome.citations] == [chunk_id]
        assert session.state.citations == [chunk_id]


# The workbook's sheets have a title and notes above the header and a note below the data:
# tables.json keeps them apart, so the CSV reads with csv.DictReader as it is.
READ_TABLE = """
import csv
import json
from pathlib import Path
def sheet(name):
    for d in Path('/documents').iterdir():
        for t in json.loads((d / 'tables.json').read_text()):
            if t['name'] == name:
                return t, list(csv.DictReader(Path(t['path']).read_text().splitlines()))
"""


async def test_revenue_by_region_from_the_workbook_adds_up_to_the_quarterly_reports(kb: KnowledgeBase) -> None:
    code = """
table, rows = sheet('Revenue by region')
regions = [r for i, r in enumerate(rows) if i not in table['total_rows']]
quarters = ['Q1 2025', 'Q2 2025', 'Q3 2025', 'Q4 2025']
growth = {r['Region']: float(r['Q4 2025']) / float(r['Q1 2025']) - 1 for r in regions}
fastest = max(growth, key=lambda region: growth[region])
top_q3 = max(regions, key=lambda r: float(r['Q3 2025']))['Region']
by_quarter = {q: sum(float(r[q]) for r in regions) for q in quarters}
(total_row,) = [rows[i] for i in table['total_rows']]
sheet_title, footer = table['title'], table['footer']
reported = {}
for d in Path('/documents').iterdir():
    title = json.loads((d / 'metadata.json').read_text())['title']
    if 'Quarterly Financial Report' in title:
        for t in json.loads((d / 'tables.json').read_text()):
            for line in csv.reader(Path(t['path']).read_text().splitlines()):
                if line and line[0] == 'Total revenue':
                    reported[title[-7:]] = float(line[1].replace('$', '').replace(',', ''))
"""
    expected_growth = {region: q[3] / q[0] - 1 for region, q in REVENUE_BY_REGION.items()}
    expected_sums = {
        quarter: float(sum(q[i] for q in REVENUE_BY_REGION.values())) for i, quarter in enumerate(QUARTERS)
    }
    async with AnalysisSession(kb) as session:
        result = await session.execute(READ_TABLE + code)
        assert result.success, result.error
        answers = await session.execute("[fastest, top_q3, by_quarter, reported, total_row, sheet_title, footer]")
        assert answers.success, answers.error
        fastest, top_q3, by_quarter, reported, total_row, title, footer = ast.literal_eval(answers.value)
    assert title.startswith("Halvorsen Marine Systems - revenue by region") and footer[0].startswith("Source:")
    assert fastest == max(expected_growth, key=expected_growth.__getitem__)
    assert top_q3 == max(REVENUE_BY_REGION, key=lambda region: REVENUE_BY_REGION[region][2])
    assert by_quarter == expected_sums == reported  # the workbook agrees with the four reports
    # The Total row holds SUM formulas: their cached values reach the CSV.
    assert [float(total_row[q]) for q in QUARTERS] == list(expected_sums.values())
    assert float(total_row["Full year"]) == sum(expected_sums.values())


async def test_support_tickets_per_product_and_per_quarter_from_the_workbook(kb: KnowledgeBase) -> None:
    code = """
_, tickets = sheet('Support tickets')
per_product = {}
hours = {}
for t in tickets:
    per_product[t['Product']] = per_product.get(t['Product'], 0) + 1
    hours[t['Product']] = hours.get(t['Product'], 0) + float(t['Hours to resolve'])
mean_hours = {p: round(hours[p] / per_product[p], 2) for p in per_product}
in_q3 = [t for t in tickets if '2025-07-01' <= t['Opened'] <= '2025-09-30']
q3_high = sorted(t['Ticket'] for t in in_q3 if t['Severity'] == 'High')
"""
    expected_count = Counter(t[2] for t in TICKETS)
    expected_mean = {p: round(sum(t[6] for t in TICKETS if t[2] == p) / n, 2) for p, n in expected_count.items()}
    q3 = (dt.date(2025, 7, 1), dt.date(2025, 9, 30))
    expected_q3_high = sorted(t[0] for t in TICKETS if q3[0] <= t[1] <= q3[1] and t[4] == "High")
    async with AnalysisSession(kb) as session:
        result = await session.execute(READ_TABLE + code)
        assert result.success, result.error
        answers = await session.execute("[per_product, mean_hours, q3_high]")
        assert answers.success, answers.error
        per_product, mean_hours, q3_high = ast.literal_eval(answers.value)
    assert per_product == dict(expected_count)
    assert mean_hours == expected_mean
    assert q3_high == expected_q3_high and q3_high  # dates compare as ISO 8601 text


async def test_the_scanned_memo_is_found_by_search_and_its_figures_read_by_code(kb: KnowledgeBase) -> None:
    code = """
import json
import re
from pathlib import Path
hits = await search('Bergen assembly line stopped conveyor drive failed', limit=3)
memo = hits[0]['document_id']
meta = json.loads(Path('/documents/' + memo + '/metadata.json').read_text())
text = Path('/documents/' + memo + '/content.txt').read_text()
hours = int(re.search(r'stopped\\s+for (\\d+) hours', text).group(1))
cost = int(re.search(r'NOK ([\\d,]+)', text).group(1).replace(',', ''))
[meta['uri'].rsplit('/', 1)[-1], meta['metadata']['ocr_pages'], hours, cost]
"""
    async with AnalysisSession(kb) as session:
        result = await session.execute(code)
        assert result.success, result.error
    file_name, ocr_pages, hours, cost = ast.literal_eval(result.value)
    assert file_name == MEMO  # the only document that tells of the line stop is the scan
    assert ocr_pages == [1]
    assert (hours, cost) == (LINE_STOP_HOURS, REPAIR_COST_NOK)
