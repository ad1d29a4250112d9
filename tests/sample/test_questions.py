"""The questions the product exists for, answered with sandbox code over the sample KB.

The expected numbers are facts of the sample documents (see mcp_analysis/sample):
4 documents mention security vulnerabilities; the four quarterly reports average
$13,850,000 of revenue; Report A and Report B each list four key findings.
"""

from __future__ import annotations

import json

import pytest

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.session.analysis import AnalysisSession

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
