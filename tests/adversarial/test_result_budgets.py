"""The result budget against hostile documents and careless clients, through a real stdio client.

A knowledge base whose documents carry what untrusted files can: a 60,000-character title
(`add --title`), 70,000 characters of metadata (`--meta`), a 50,000-character heading. And
clients that echo too much back: a 3,999-character query, a 100,000-character session handle,
thirty 100,000-character chunk ids. Every tool result, errors included, must stay within
`server.max_result_chars` (here its minimum, 2,000) and still answer.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.ingest.pipeline import Ingestor
from tests.conftest import make_settings
from tests.mcp_helpers import stdio_params, text

pytestmark = pytest.mark.anyio

BUDGET = 2000
HUGE_TITLE = "T" * 60_000
HUGE_HEADING = "H" * 50_000


@pytest.fixture(scope="module")
def hostile_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("hostile-docs")
    db = root / "kb.lancedb"
    for name in ("alpha", "beta", "gamma"):
        (root / f"{name}.md").write_text(f"# Plain {name}\n\nA short note about turbines, number {name}.\n")
    (root / "heading.md").write_text(f"# {HUGE_HEADING}\n\nBody text about flywheels under a huge heading.\n")
    (root / "titled.md").write_text("# Small\n\nText about gearboxes.\n")

    async def build() -> None:
        kb = await KnowledgeBase.open(make_settings(db), create=True)
        ingest = Ingestor(kb)
        await ingest.add([root / f"{n}.md" for n in ("alpha", "beta", "heading", "gamma")])
        await ingest.add([root / "titled.md"], title=HUGE_TITLE, metadata={"note": "v" * 70_000, "team": "ops"})
        await kb.close()

    anyio.run(build)
    return db


@pytest.fixture(scope="module")
async def client(hostile_db: Path, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Client]:
    data = tmp_path_factory.mktemp("data")
    env = {"XDG_DATA_HOME": str(data), "MCP_ANALYSIS_SERVER__MAX_RESULT_CHARS": str(BUDGET)}
    async with Client(stdio_params(hostile_db, env=env)) as connected:
        yield connected


def cost(result: Any) -> int:
    return len(text(result)) + len(json.dumps(result.structured_content or {}, ensure_ascii=False))


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> Any:
    result = await client.call_tool(tool, arguments)
    assert cost(result) <= BUDGET, f"{tool}: {cost(result):,} characters: {text(result)[:300]}"
    return result


async def test_every_document_can_be_paged_through(client: Client) -> None:
    # A document whose entry alone exceeds the budget is still listed (shortened): an empty page
    # with next_offset pointing at itself would make a client paging on loop (or stop short).
    seen: list[dict[str, Any]] = []
    offset: int | None = 0
    for _ in range(10):
        page = (await call(client, "list_documents", {"offset": offset, "limit": 3})).structured_content
        seen += page["documents"]
        offset = page["next_offset"]
        if offset is None:
            break
    assert offset is None and len(seen) == 5 and page["total"] == 5
    titled = next(d for d in seen if d["title"].startswith("TTT"))
    assert len(titled["title"]) < 400 and titled["title"].endswith("…")
    assert titled["metadata"]["team"] == "ops" and len(json.dumps(titled["metadata"])) < 1000


async def test_a_document_with_a_huge_heading_cannot_hide_search_results(client: Client) -> None:
    # The hit's 50,000-character heading is shortened so the hit fits the budget: a hit that could
    # not fit would be dropped, and the tool would answer "No results".
    found = await call(client, "search", {"query": "flywheels under a huge heading", "limit": 3})
    hits = found.structured_content["results"]
    assert hits and "No results" not in text(found)
    top = hits[0]
    assert "flywheels" in top["content"] and len(json.dumps(top["headings"])) < 1000, top["headings"][:1]
    assert "flywheels" in text(found)
    cited = await call(client, "cite", {"chunk_ids": [top["chunk_id"]]})
    assert cited.structured_content["citations"][0]["chunk_id"] == top["chunk_id"], text(cited)


async def test_a_long_query_is_answered_within_the_budget(client: Client) -> None:
    query = "turbines " + "x" * 3990
    found = await call(client, "search", {"query": query, "limit": 5})
    assert not found.is_error and found.structured_content["results"]
    assert "turbines" in text(found) and len(text(found)) > 200  # the model still reads an answer
    state = await call(client, "analysis_state", {})
    assert state.structured_content["searches"][-1].startswith("turbines xxx")


@pytest.mark.parametrize(
    "tool, arguments",
    [
        ("search", {"query": "turbines", "session": "x" * 100_000}),
        ("analysis_state", {"session": "s_" + "A" * 100_000}),
        ("cite", {"chunk_ids": ["y" * 100_000] * 30}),
        ("cite", {"chunk_ids": [f"{i:05d}" + "z" * 5_000 for i in range(400)]}),
    ],
)
async def test_errors_stay_within_the_budget(client: Client, tool: str, arguments: dict[str, Any]) -> None:
    # Errors name the client's input by a short label: echoed whole, it would be 1-2 MB of text
    # (and the same in the server log).
    result = await call(client, tool, arguments)
    assert result.is_error
    message = text(result)
    assert "Unknown or expired analysis session" in message or "None of the chunk ids could be resolved" in message
    assert len(message) < 1000, message[:200]


async def test_resource_errors_name_only_a_label_of_what_was_asked(client: Client) -> None:
    # The execution index is named by a short label too, never echoed whole ("has no execution 9999…").
    session = (await call(client, "analysis_state", {})).structured_content["session"]
    for uri in (
        f"documents:///{'d' * 1_000}/content.txt",
        f"analysis://sessions/{session}/executions/{'9' * 1_000}",
    ):
        with pytest.raises(MCPError) as caught:
            await client.read_resource(uri)
        assert len(caught.value.error.message) < 300, caught.value.error.message[:200]
        assert "No document" in caught.value.error.message or "has no execution" in caught.value.error.message
