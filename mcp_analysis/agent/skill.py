"""haiku.rag's skill API: ``create_skill(db_path=None, config=None)``.

    from mcp_analysis.agent.skill import create_skill     # or: from mcp_analysis import create_skill
    skill = create_skill(db_path="~/.local/share/haiku.rag/haiku.rag.lancedb")
    agent = Agent("openai:gpt-4o", toolsets=[skill])
    await agent.run("How many documents mention 'security'?")
    skill.state.executions, skill.state.citations        # what the last run did

Semantics of haiku.rag's analysis skill:
- ``db_path`` falls back to ``HAIKU_RAG_DB``, then the config's database;
- ``config`` is our `Settings` or a config file path (ours or a haiku.rag.yaml); without
  one, haiku.rag's own lookup is followed: ``$HAIKU_RAG_CONFIG_PATH``,
  ``./haiku.rag.yaml``, haiku.rag's data directory, else our usual sources;
- tools: search, list_documents, execute_code, cite;
- ``state`` (an `AnalysisState`) persists across runs: ``document_filter`` (set it to
  scope every later run) and ``citation_index`` accumulate; ``executions``,
  ``citations`` and ``searches`` are cleared when a run starts; each run gets a fresh
  interpreter (variables persist within a run).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from mcp_analysis.agent.toolset import AnalysisToolset
from mcp_analysis.config import CONFIG_ENV, DEFAULT_CONFIG_FILE, Settings, load_settings, with_db
from mcp_analysis.haiku.config_file import find_config_file
from mcp_analysis.session.state import AnalysisState

SKILL_NAME = "analysis"
SKILL_DESCRIPTION = (
    "Computational analysis of the knowledge base: writes and runs Python in a sandbox over the documents "
    "(/documents/{id}/content.txt, items.jsonl, ...), with search, citations and charts (`await chart(spec)`, "
    "Vega-Lite). For counting, aggregation, multi-document comparison, data extraction and charts of the results."
)


class AnalysisSkill(AnalysisToolset):
    """The analysis tools as a pydantic-ai toolset, with haiku.rag's skill state semantics."""

    name = SKILL_NAME
    description = SKILL_DESCRIPTION

    def __init__(self, settings: Settings, *, document_filter: str | None = None) -> None:
        super().__init__(settings=settings, document_filter=document_filter)
        self.state = AnalysisState(document_filter=document_filter)

    async def __aenter__(self) -> AnalysisSkill:
        self._entered += 1
        if self._entered == 1 and self.session is None:
            from mcp_analysis.corpus import KnowledgeBase
            from mcp_analysis.session.analysis import AnalysisSession

            kb = await KnowledgeBase.open(self._settings or load_settings())
            try:
                state = self.state
                if state.executions or state.citations or state.searches:
                    state.start_new_analysis()
                session = await AnalysisSession(kb, state=state).start()
            except BaseException:
                await kb.close()
                self._entered -= 1
                raise
            self._owned = (kb, session)
            self.session = session
        return self


def _settings(config: Settings | str | Path | None) -> Settings:
    if isinstance(config, Settings):
        return config
    if config is not None:
        return load_settings(Path(config))
    ours = os.environ.get(CONFIG_ENV) or (Path.cwd() / DEFAULT_CONFIG_FILE).exists()
    theirs = None if ours else find_config_file()
    return load_settings(theirs)


def create_skill(
    db_path: str | Path | None = None,
    config: Settings | str | Path | None = None,
    *,
    filter: str | None = None,
) -> AnalysisSkill:
    """The analysis skill for a pydantic-ai ``Agent(toolsets=[skill])`` (see module docs)."""
    settings = _settings(config)
    chosen: Any = db_path or os.environ.get("HAIKU_RAG_DB") or None
    if chosen is not None:
        settings = with_db(settings, str(chosen))
    return AnalysisSkill(settings, document_filter=filter)
