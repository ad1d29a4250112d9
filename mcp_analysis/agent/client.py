"""`AnalysisClient.analyze`: a question in, an answer with citations out.

    async with AnalysisClient("kb.lancedb") as client:
        result = await client.analyze("How many documents mention 'security'?", filter="title LIKE '%Advisory%'")
        result.answer, result.citations, result.charts   # charts: PNG and SVG of each `await chart(spec)`
        client.last_state.executions     # the programs that were run

A pydantic-ai agent drives the very same tools the MCP server exposes (see toolset.py).
Guard rails: at most `analysis.max_executions` code runs per analysis, and at most
`analysis.max_requests` model requests — the last one has no tools, so the model has
to answer with what it has. The filter is the caller's; the model cannot change it.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field
from pydantic_ai import Agent, RunContext
from pydantic_ai.exceptions import ModelHTTPError, UnexpectedModelBehavior, UsageLimitExceeded
from pydantic_ai.models import Model
from pydantic_ai.tools import ToolDefinition
from pydantic_ai.usage import UsageLimits

from mcp_analysis.agent.toolset import AnalysisToolset
from mcp_analysis.charts.models import Chart
from mcp_analysis.config import Settings, load_settings, with_db
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.errors import ModelConfigError
from mcp_analysis.sandbox.pool import WorkerPool
from mcp_analysis.session.analysis import AnalysisSession
from mcp_analysis.session.state import AnalysisState, Citation
from mcp_analysis.tooling.descriptions import INSTRUCTIONS

log = logging.getLogger(__name__)

AGENT_INSTRUCTIONS = (
    INSTRUCTIONS
    + """
Answer the user's question from the knowledge base only. Prefer computing over guessing:
when the question needs counting, totals or comparison, run code and report its result.
Before answering, call `cite` with the chunk_ids that support the answer. Keep the final
answer short and name the documents it relies on."""
)


class AnalysisResult(BaseModel):
    answer: str
    citations: list[Citation] = Field(default_factory=list)
    charts: list[Chart] = Field(
        default_factory=list, description="Charts the analysis drew (its latest charts.max_kept), PNG and SVG."
    )


def resolve_model(model: str | Model, base_url: str | None = None) -> Model:
    """A pydantic-ai model, or a ModelConfigError that names the setting to fix.

    `base_url` (``analysis.base_url``) points an Ollama / vLLM / OpenAI-compatible model at its server.
    """
    if isinstance(model, Model):
        return model
    from pydantic_ai.models import infer_model

    from mcp_analysis.embed.providers import provider_factory

    try:
        return infer_model(model, provider_factory=provider_factory(base_url))
    except Exception as exc:  # provider SDKs raise their own types (e.g. openai.OpenAIError for a blank key)
        raise ModelConfigError(
            f"Cannot use the analysis model {model!r} (setting `analysis.model`, or --model): {_cause(exc)}. "
            "Choose a model you have access to, e.g. anthropic:claude-sonnet-4-20250514 with ANTHROPIC_API_KEY "
            "set, openai:gpt-4o with OPENAI_API_KEY, or ollama:qwen3 with OLLAMA_BASE_URL (other providers: "
            "`pip install 'mcp-analysis[google]'`, `[cohere]`, `[bedrock]`)."
        ) from None


# pydantic-ai's advice for its own Python API (a provider object, its test model), which is not
# how the user of a setting or of --model fixes it; left in, it pushes our advice past the line's end.
_API_ADVICE = (
    re.compile(r" or pass it via `\w+\([^`]*\)`"),
    re.compile(r"\s*To try Pydantic AI without an API key.*$", re.DOTALL),
)


def _cause(exc: Exception) -> str:
    text = str(exc)
    for advice in _API_ADVICE:
        text = advice.sub("", text)
    return text.strip().rstrip(".")


class AnalysisClient:
    """Question answering over a knowledge base with the built-in agent."""

    def __init__(
        self,
        db_path: str | Path | None = None,
        *,
        settings: Settings | None = None,
        model: str | Model | None = None,
    ) -> None:
        base = settings or load_settings()
        if db_path is not None:
            base = with_db(base, db_path)
        self.settings = base
        self.model = model
        self.kb: KnowledgeBase | None = None
        self._pool: WorkerPool | None = None
        self._sessions: dict[str | None, AnalysisSession] = {}
        self.last_state: AnalysisState | None = None

    async def __aenter__(self) -> AnalysisClient:
        self.kb = await KnowledgeBase.open(self.settings)
        self._pool = WorkerPool(self.settings.sandbox)
        await self._pool.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        for session in self._sessions.values():
            await session.close()
        self._sessions.clear()
        if self._pool is not None:
            await self._pool.__aexit__(None, None, None)
        if self.kb is not None:
            await self.kb.close()

    async def session(self, filter: str | None = None) -> AnalysisSession:
        """The session behind analyses with this filter (its state holds the executions)."""
        if self.kb is None or self._pool is None:
            raise RuntimeError("Use `async with AnalysisClient(...) as client:`.")
        if filter not in self._sessions:
            self._sessions[filter] = await AnalysisSession(self.kb, filter=filter, pool=self._pool).start()
        return self._sessions[filter]

    def state(self, filter: str | None = None) -> AnalysisState | None:
        session = self._sessions.get(filter)
        return session.state if session else None

    async def analyze(
        self, question: str, *, filter: str | None = None, model: str | Model | None = None
    ) -> AnalysisResult:
        """Answer `question`; the model can only see documents matching `filter`."""
        session = await self.session(filter)
        limits = self.settings.analysis
        chosen = model or self.model
        llm = resolve_model(chosen) if chosen else resolve_model(limits.model, limits.base_url)
        toolset = AnalysisToolset(session, max_executions=limits.max_executions)

        def last_request_answers(ctx: RunContext[Any], tools: list[ToolDefinition]) -> list[ToolDefinition]:
            return [] if ctx.usage.requests >= limits.max_requests - 1 else tools

        agent = Agent(llm, instructions=AGENT_INSTRUCTIONS, toolsets=[toolset.prepared(last_request_answers)])
        self.last_state = session.state
        try:
            run = await agent.run(question, usage_limits=UsageLimits(request_limit=limits.max_requests))
        except UsageLimitExceeded as exc:
            raise ModelConfigError(f"The analysis stopped: {exc}. Raise analysis.max_requests.") from None
        except ModelHTTPError as exc:
            raise ModelConfigError(
                f"The analysis model failed (HTTP {exc.status_code}): {exc.body or exc}. Check `analysis.model` "
                "and its API key."
            ) from None
        except (UnexpectedModelBehavior, OSError) as exc:
            raise ModelConfigError(f"The analysis model could not be used: {exc}. Check `analysis.model`.") from None
        except Exception as exc:
            if "connect" in type(exc).__name__.lower() or "connection" in str(exc).lower():
                url = getattr(llm, "base_url", None)
                raise ModelConfigError(
                    f"Cannot reach the analysis model {model or self.settings.analysis.model!r}"
                    f"{f' at {url}' if url else ''}: {_cause(exc)}. Check the network, and for a model you host "
                    "its server's address (`analysis.base_url`, or OLLAMA_BASE_URL / OPENAI_BASE_URL)."
                ) from None
            raise
        state = session.state
        citations = [state.citation_index[c] for c in state.citations if c in state.citation_index]
        return AnalysisResult(answer=str(run.output), citations=citations, charts=list(state.charts))
