"""haiku.rag's skill API (`create_skill`) and `analyze` over the haiku.rag fixture, driven by scripted models."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from mcp_analysis import AnalysisClient, create_skill
from tests.conftest import make_settings
from tests.haiku_db import RawDb, copy_fixture, read_raw

pytestmark = pytest.mark.anyio

LICENSES = "uri LIKE 'corpus/license-%'"
COUNT_GPL = (
    "from pathlib import Path\n"
    "texts = [(d / 'content.txt').read_text() for d in Path('/documents').iterdir()]\n"
    "len([t for t in texts if 'GNU General Public License' in t])"
)


@pytest.fixture(scope="module")
def haiku(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, RawDb]:
    db = copy_fixture(tmp_path_factory.mktemp("haiku-skill") / "haiku.rag.lancedb")
    return db, anyio.run(read_raw, db)


def returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]


def analyst(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """search -> count with code -> cite the best hit -> answer."""
    done = returns(messages)
    if not done:
        return ModelResponse(parts=[ToolCallPart("search", {"query": "GNU General Public License", "limit": 3})])
    if len(done) == 1:
        return ModelResponse(parts=[ToolCallPart("execute_code", {"code": COUNT_GPL})])
    if len(done) == 2:
        return ModelResponse(parts=[ToolCallPart("cite", {"chunk_ids": [done[0].content[0]["chunk_id"]]})])
    return ModelResponse(parts=[TextPart(f"{done[1].content['value']} documents are GPL texts.")])


def gpl_count(raw: RawDb, where: set[str] | None = None) -> int:
    return sum(
        1 for d, text in raw.content.items() if "GNU General Public License" in text and (where is None or d in where)
    )


async def test_create_skill_is_a_toolset_with_their_state_semantics(haiku: tuple[Path, RawDb], tmp_path: Path) -> None:
    db, raw = haiku
    skill = create_skill(db_path=db, config=make_settings(tmp_path / "unused", sessions={"dir": tmp_path / "s"}))
    assert skill.name == "analysis" and skill.state.document_filter is None
    agent = Agent(FunctionModel(analyst), toolsets=[skill])

    first = await agent.run("How many documents are GPL texts?")
    assert first.output == f"{gpl_count(raw)} documents are GPL texts." and gpl_count(raw) > 2
    [execution] = skill.state.executions
    assert execution.code == COUNT_GPL and execution.success
    [cited] = skill.state.citations
    assert raw.chunks[cited]["document_id"] == skill.state.citation_index[cited].document_id
    assert list(skill.state.searches) == ["GNU General Public License"]

    # The filter is session configuration: it scopes the next run; working evidence starts empty again.
    skill.state.document_filter = "uri LIKE '%GPL-3%'"
    second = await agent.run("And among GPL-3 texts?")
    gpl3 = {d for d, m in raw.meta.items() if "GPL-3" in m["uri"]}
    assert second.output == f"{gpl_count(raw, gpl3)} documents are GPL texts."
    assert len(skill.state.executions) == 1 and skill.state.analysis_number == 2
    assert cited in skill.state.citation_index  # the citation index accumulates
    assert all(skill.state.citation_index[c].document_id in gpl3 for c in skill.state.citations)
    assert skill.session is None  # closed after each run


def test_db_path_falls_back_to_haiku_rag_db_then_the_config(
    haiku: tuple[Path, RawDb], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db, _ = haiku
    for key in ("HAIKU_RAG_DB", "MCP_ANALYSIS_DB", "MCP_ANALYSIS_CONFIG", "HAIKU_RAG_CONFIG_PATH"):
        monkeypatch.delenv(key, raising=False)
    monkeypatch.chdir(tmp_path)
    config = make_settings(tmp_path / "from-config")
    assert create_skill(db_path=db, config=config)._settings.db == db
    monkeypatch.setenv("HAIKU_RAG_DB", str(tmp_path / "from-env"))
    assert create_skill(config=config)._settings.db == tmp_path / "from-env"
    monkeypatch.delenv("HAIKU_RAG_DB")
    assert create_skill(config=config)._settings.db == tmp_path / "from-config"
    # Without a config, haiku.rag's lookup: ./haiku.rag.yaml (its storage.data_dir names the database).
    (tmp_path / "haiku.rag.yaml").write_text(f"storage:\n  data_dir: {tmp_path / 'data'}\n")
    assert create_skill()._settings.db == tmp_path / "data" / "haiku.rag.lancedb"
    assert create_skill(config=tmp_path / "haiku.rag.yaml")._settings.db == tmp_path / "data" / "haiku.rag.lancedb"


async def test_analyze_over_a_haiku_rag_database(haiku: tuple[Path, RawDb], tmp_path: Path) -> None:
    db, raw = haiku
    settings = make_settings(db, sessions={"dir": tmp_path / "s"})
    async with AnalysisClient(settings=settings, model=FunctionModel(analyst)) as client:
        result = await client.analyze("How many licence texts are GPL?", filter=LICENSES)
    licences = {d for d, m in raw.meta.items() if m["uri"].startswith("corpus/license-")}
    assert result.answer == f"{gpl_count(raw, licences)} documents are GPL texts."
    [citation] = result.citations
    assert citation.document_id in licences
    assert citation.document_uri == raw.meta[citation.document_id]["uri"]
    assert citation.chunk_id in raw.chunks
