"""The built-in agent, driven by a scripted pydantic-ai FunctionModel (no network)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from mcp_analysis import AnalysisClient, create_toolset
from mcp_analysis.config import Settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.errors import ModelConfigError
from mcp_analysis.session.analysis import AnalysisSession
from tests.conftest import SAMPLE_DOCUMENTS, make_settings

pytestmark = pytest.mark.anyio

COUNT_CODE = (
    "from pathlib import Path\n"
    "hits = [d.name for d in Path('/documents').iterdir()\n"
    "        if 'vulnerabilit' in (d / 'content.txt').read_text().lower()]\n"
    "print('documents mentioning vulnerabilities:', len(hits))\n"
    "len(hits)"
)


def returns(messages: list[ModelMessage]) -> list[ToolReturnPart]:
    return [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]


def analyst(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Search, then count with code over /documents, then cite, then answer."""
    done = returns(messages)
    step = len(done)
    if step == 0:
        return ModelResponse(parts=[ToolCallPart("search", {"query": "security vulnerabilities", "limit": 5})])
    if step == 1:
        return ModelResponse(parts=[ToolCallPart("execute_code", {"code": COUNT_CODE})])
    if step == 2:
        hits = done[0].content
        return ModelResponse(parts=[ToolCallPart("cite", {"chunk_ids": [hits[0]["chunk_id"], hits[1]["chunk_id"]]})])
    count = done[1].content["value"]
    return ModelResponse(parts=[TextPart(f"{count} documents mention security vulnerabilities.")])


@pytest.fixture
def agent_settings(sample_db: Path, tmp_path: Path) -> Settings:
    return make_settings(sample_db, sessions={"dir": tmp_path / "s"})


async def test_analyze_answers_with_citations_and_records_programs(agent_settings: Settings) -> None:
    async with AnalysisClient(settings=agent_settings, model=FunctionModel(analyst)) as client:
        result = await client.analyze("How many documents mention security vulnerabilities?")
        assert result.answer == "4 documents mention security vulnerabilities."
        assert len(result.citations) == 2
        assert all(c.document_title and c.document_uri and c.content for c in result.citations)
        assert client.last_state is not None
        [program] = client.last_state.executions
        assert program.code == COUNT_CODE and program.success
        assert "documents mentioning vulnerabilities: 4" in program.stdout
        assert list(client.last_state.searches) == ["security vulnerabilities"]

        # A second question is a new analysis: executions and citations start empty again,
        # the citation index keeps growing.
        again = await client.analyze("Same question again?")
        assert again.answer == result.answer
        assert len(client.last_state.executions) == 1
        assert client.last_state.analysis_number == 2


async def test_filter_limits_what_the_model_sees(agent_settings: Settings) -> None:
    seen: list[Any] = []

    def lister(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = returns(messages)
        if not done:
            return ModelResponse(parts=[ToolCallPart("list_documents", {})])
        if len(done) == 1:
            seen.extend(done[0].content)
            return ModelResponse(parts=[ToolCallPart("execute_code", {"code": "len(await list_documents())"})])
        return ModelResponse(parts=[TextPart(f"{done[1].content['value']} advisories")])

    async with AnalysisClient(settings=agent_settings, model=FunctionModel(lister)) as client:
        result = await client.analyze("How many?", filter="uri LIKE '%advisory%'")
        assert result.answer == "4 advisories"
        assert len(seen) == 4 and all("advisory" in d["uri"] for d in seen)
        assert client.state("uri LIKE '%advisory%'").document_filter == "uri LIKE '%advisory%'"


async def test_execution_cap_and_request_cap_force_an_answer(sample_db: Path, tmp_path: Path) -> None:
    settings = make_settings(sample_db, analysis={"max_executions": 2, "max_requests": 6})
    calls: list[bool] = []

    def stubborn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(bool(info.function_tools))
        if not info.function_tools:
            last = returns(messages)[-1].content
            return ModelResponse(parts=[TextPart(f"final answer; last tool said: {json.dumps(last)[:200]}")])
        return ModelResponse(parts=[ToolCallPart("execute_code", {"code": f"x = {len(calls)}"})])

    async with AnalysisClient(settings=settings, model=FunctionModel(stubborn)) as client:
        result = await client.analyze("Loop forever")
        assert result.answer.startswith("final answer")
        assert "limit of 2 code executions" in result.answer
        assert len(client.last_state.executions) == 2
        assert calls == [True, True, True, True, True, False]  # the 6th request had no tools


SETTING = r"Cannot use the analysis model '{}' \(setting `analysis\.model`, or --model\): "


async def test_model_configuration_errors_name_the_setting_and_the_cause(
    agent_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "")  # set but blank: the OpenAI SDK's own error type
    async with AnalysisClient(settings=agent_settings) as client:
        unknown = SETTING.format("nosuchprovider:model") + "Unknown provider: nosuchprovider"
        with pytest.raises(ModelConfigError, match=unknown):
            await client.analyze("Anything?", model="nosuchprovider:model")
        # The cause, not the fixed help text that follows it (which names ANTHROPIC_API_KEY too).
        anthropic = "anthropic:claude-sonnet-4-20250514"
        with pytest.raises(ModelConfigError, match=SETTING.format(anthropic) + "Set the `ANTHROPIC_API_KEY`"):
            await client.analyze("Anything?", model=anthropic)
        with pytest.raises(ModelConfigError, match=SETTING.format("openai:gpt-4o") + "Missing credentials"):
            await client.analyze("Anything?", model="openai:gpt-4o")


async def test_toolset_inside_a_foreign_agent(kb: KnowledgeBase) -> None:
    calls: list[str] = []

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        names = {t.name for t in info.function_tools}
        assert {"search", "list_documents", "execute_code", "cite", "convert_currency"} <= names
        done = returns(messages)
        if not done:
            return ModelResponse(parts=[ToolCallPart("execute_code", {"code": "n = len(await list_documents())\nn"})])
        if len(done) == 1:
            return ModelResponse(parts=[ToolCallPart("convert_currency", {"usd": int(done[0].content["value"])})])
        return ModelResponse(parts=[TextPart(f"{done[1].content} NOK")])

    async with AnalysisSession(kb) as session:
        agent = Agent(FunctionModel(model), toolsets=[create_toolset(session)])

        @agent.tool_plain
        def convert_currency(usd: int) -> float:
            """Convert USD to NOK."""
            calls.append("convert")
            return usd * 10.5

        result = await agent.run("How many documents, in NOK?")
        assert result.output == f"{SAMPLE_DOCUMENTS * 10.5} NOK"
        assert calls == ["convert"]
        assert session.state.executions[0].value == str(SAMPLE_DOCUMENTS)


async def test_toolset_can_open_its_own_knowledge_base(agent_settings: Settings) -> None:
    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        done = returns(messages)
        if not done:
            return ModelResponse(parts=[ToolCallPart("search", {"query": "Gdansk assembly line", "limit": 1})])
        return ModelResponse(parts=[TextPart(done[0].content[0]["document_title"])])

    toolset = create_toolset(config=agent_settings, filter="uri LIKE '%roadmap%'")
    result = await Agent(FunctionModel(model), toolsets=[toolset]).run("Which document?")
    assert result.output == "Engineering Roadmap 2026"
    assert toolset.session is None  # closed again after the run
