"""The built-in sample knowledge base: 12 documents of a fictional marine-electronics firm.

Quarterly financial reports (Q1-Q4 2025; revenue in tables; md, html, pdf, docx),
security advisories (two mention vulnerabilities, two do not), and longer
multi-section reports (an annual security review, an engineering roadmap, and
two customer-research reports, "Report A" and "Report B", with Key Findings).

Exact answers (checked by tests/test_sample_questions.py):
- documents mentioning security vulnerabilities: 4
- average quarterly revenue: $13,850,000 (12.4 + 13.1 + 14.6 + 15.3 million / 4)
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

from mcp_analysis.config import Settings, data_home


def documents_dir() -> Path:
    return Path(str(resources.files("mcp_analysis.sample") / "documents"))


def default_sample_db() -> Path:
    return data_home() / "sample.lancedb"


async def ensure_sample_kb(settings: Settings) -> Settings:
    """Build (or complete) the sample knowledge base at settings.db; idempotent and quick when done."""
    from mcp_analysis.corpus import KnowledgeBase
    from mcp_analysis.ingest.pipeline import Ingestor

    kb = await KnowledgeBase.open(settings, create=True)
    try:
        await Ingestor(kb).add([documents_dir()])
    finally:
        await kb.close()
    return settings
