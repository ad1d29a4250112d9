"""Context economy and the result budget.

Every tool result — text and structured content together — stays within
`server.max_result_chars` and names where the rest is; search shows a passage around each
match instead of whole sections; inside the sandbox, hits and documents print as one short
line each while every field stays one attribute or key away.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_analysis.config import Settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.sandbox.output import NOT_KEPT, OutputCollector
from mcp_analysis.search.excerpt import excerpt
from mcp_analysis.search.models import SearchResult
from mcp_analysis.server.app import create_server
from mcp_analysis.server.calls import session_note
from mcp_analysis.session.analysis import AnalysisSession
from mcp_analysis.text import clip
from mcp_analysis.tooling.document_list import DocumentInfo, documents_result
from mcp_analysis.tooling.fitting import size
from mcp_analysis.tooling.search_hits import search_result
from tests.conftest import SAMPLE_DOCUMENTS, make_settings
from tests.mcp_helpers import text

pytestmark = pytest.mark.anyio

TOOLS_LIST_BEFORE = 13_943  # characters of tools/list at fcb295f (bench/context.py measures it)


def cost(result: Any) -> int:
    """What a result costs the model: its text plus its structured content as JSON."""
    return len(text(result)) + len(json.dumps(result.structured_content, ensure_ascii=False))


def settings_for(sample_db: Path, tmp_path: Path, **server: Any) -> Settings:
    return make_settings(sample_db, sessions={"dir": tmp_path / "sessions"}, server=server)


# ----------------------------------------------------------------------------- budgets, through a client


async def test_every_tool_result_fits_a_small_budget_and_names_where_the_rest_is(
    sample_db: Path, tmp_path: Path, kb: KnowledgeBase
) -> None:
    budget = 2000
    async with Client(create_server(config=settings_for(sample_db, tmp_path, max_result_chars=budget))) as client:
        listed = await client.call_tool("list_documents", {})
        assert cost(listed) <= budget
        page = listed.structured_content
        assert 0 < len(page["documents"]) < page["total"] == SAMPLE_DOCUMENTS
        assert page["next_offset"] == len(page["documents"])
        assert f"list_documents(offset={page['next_offset']})" in text(listed)
        ids = [d["id"] for d in page["documents"]]
        while page["next_offset"] is not None:  # paging reaches every document, each page in budget
            more = await client.call_tool("list_documents", {"offset": page["next_offset"]})
            assert cost(more) <= budget
            page = more.structured_content
            ids += [d["id"] for d in page["documents"]]
        assert len(set(ids)) == SAMPLE_DOCUMENTS

        found = await client.call_tool("search", {"query": "revenue security findings", "limit": 20, "context": 5000})
        assert cost(found) <= budget and not found.is_error
        hits = found.structured_content
        assert hits["results"] and (hits["context"] < 5000 or hits["omitted"] > 0)

        session = hits["session"]
        state_uri = f"analysis://sessions/{session}/state"
        chunk_ids = [row["id"] for row in await kb.store.chunks("order >= 0", ["id"])][:47]
        assert len(chunk_ids) == 47
        cited = await client.call_tool("cite", {"chunk_ids": [*chunk_ids, "no-such-id"]})
        assert cost(cited) <= budget
        data = cited.structured_content
        assert data["total_cited"] == 47 and data["omitted"] > 0
        assert len(data["citations"]) + data["omitted"] == 47
        assert data["resource"] == state_uri and state_uri in text(cited)

        big = await client.call_tool("execute_code", {"code": "for i in range(5000):\n    print('row', i)\n'x' * 9000"})
        assert cost(big) <= budget
        execution_uri = f"analysis://sessions/{session}/executions/1"
        assert big.structured_content["full_output"] == execution_uri and execution_uri in text(big)
        for i in range(25):
            await client.call_tool("execute_code", {"code": f"value_{i} = {i}  # a program with a comment " + "x" * 80})
            await client.call_tool("search", {"query": f"quarterly revenue {i}", "limit": 1})
        state = await client.call_tool("analysis_state", {})
        assert cost(state) <= budget
        summary = state.structured_content
        assert summary["executions_total"] == 26 and summary["resource"] == state_uri and state_uri in text(state)
        assert summary["searches_total"] == 26 and summary["citations_total"] == 47
        assert 0 < len(summary["executions"]) < 26 and summary["executions"][-1]["index"] == 26  # the latest
        assert "citations: 47 for this answer (the last" in text(state)
        full = json.loads((await client.read_resource(state_uri)).contents[0].text)
        assert len(full["executions"]) == 26 and len(full["citations"]) == 47

        reset = await client.call_tool("new_analysis", {})
        assert cost(reset) <= budget and reset.structured_content["analysis_number"] == 2


async def test_fitting_counts_the_session_note_and_holds_for_every_budget() -> None:
    results = [
        SearchResult(
            chunk_id=f"c{i}",
            content=("word " * 400) + f"needle {i} " + ("more " * 400),
            document_id=f"d{i}",
            document_title=f"Document {i} " + "t" * 60,
            document_uri=f"file:///docs/{i}.md",
            score=0.1,
            rank=i + 1,
            headings=["A heading", "A subheading"],
        )
        for i in range(30)
    ]
    note = session_note("s_" + "x" * 24, must_pass=True)
    for budget in (2000, 2345, 3000, 7000, 48_000):
        model, rendered = search_result("s_x", "needle", results, 5000, 5000, note, budget)
        assert size(model, rendered) <= budget and rendered.endswith(note)
        assert model.results, "at least one hit always fits"
        docs = [DocumentInfo(id=f"{i:036d}", title=f"Title {i}", uri=f"file:///x/{i}.md") for i in range(300)]
        model, rendered = documents_result("s_x", docs, 300, 0, note, budget)
        assert size(model, rendered) <= budget and model.next_offset == len(model.documents)


def test_a_page_of_documents_moves_on_when_one_document_alone_is_over_the_budget() -> None:
    """A document whose metadata alone exceeds the budget must not stop paging (next_offset == offset)."""
    huge = DocumentInfo(id="a" * 36, title="Huge", uri="file:///docs/huge.md", metadata={"note": "y" * 3000})
    small = DocumentInfo(id="b" * 36, title="Small", uri="file:///docs/small.md")
    model, rendered = documents_result("s_x", [huge, small], 2, 0, "", 2000)
    assert size(model, rendered) <= 2000
    assert [d.id for d in model.documents] == [huge.id] and model.next_offset == 1
    assert f"/documents/{huge.id}/metadata.json" in rendered  # where its metadata is


async def test_search_is_compact_and_both_channels_carry_the_same_hits(sample_db: Path, tmp_path: Path) -> None:
    async with Client(create_server(config=settings_for(sample_db, tmp_path))) as client:
        found = await client.call_tool("search", {"query": "Report B port authority key findings"})
        rendered = text(found)
        assert len(rendered) <= 6000 and cost(found) <= 12_000
        hits = found.structured_content["results"]
        # 900 characters per hit on average; the best-ranked get more (search/budget.py).
        assert len(hits) == 5 and sum(len(h["content"]) for h in hits) <= 5 * 900
        for hit in hits:  # a host showing only the text or only the structured content sees the same hits
            assert f"chunk_id {hit['chunk_id']} · document {hit['document_id']}" in rendered
            assert hit["content"] in rendered and hit["document_title"] in rendered
        wide = await client.call_tool("search", {"query": "Report B port authority key findings", "context": 4000})
        for hit in wide.structured_content["results"]:  # the whole passage when it fits in 4,000
            if hit["full_chars"] <= 4000:
                assert len(hit["content"]) == hit["full_chars"]
        assert sum(len(h["content"]) for h in wide.structured_content["results"]) <= 5 * 4000
        narrow = await client.call_tool("search", {"query": "Report B port authority key findings", "context": 100})
        assert sum(len(h["content"]) for h in narrow.structured_content["results"]) <= 5 * 100
        # A larger context shows more of the same passages.
        assert [h["chunk_id"] for h in narrow.structured_content["results"]] == [h["chunk_id"] for h in hits]
        shown = {h["chunk_id"]: len(h["content"]) for h in narrow.structured_content["results"]}
        assert any(len(h["content"]) > shown[h["chunk_id"]] for h in wide.structured_content["results"])


async def test_list_documents_is_one_line_per_document(sample_db: Path, tmp_path: Path) -> None:
    async with Client(create_server(config=settings_for(sample_db, tmp_path))) as client:
        listed = await client.call_tool("list_documents", {})
        rendered = text(listed).splitlines()
        documents = listed.structured_content["documents"]
        n = SAMPLE_DOCUMENTS
        prefix = re.match(rf"Documents 1-{n} of {n} \(id \| title \| uri after (\S+)\):", rendered[0])
        assert prefix, rendered[0]
        for doc in documents:  # the shared uri prefix is stated once, each line has the rest
            assert f"{doc['id']} | {doc['title']} | {doc['uri'][len(prefix.group(1)) :]}" in rendered
            assert doc["metadata"] == {}  # format and file_name, which the uri shows, are left out
        assert cost(listed) <= 12_000


async def test_tool_descriptions_are_short_with_an_example_and_tools_list_did_not_grow(
    sample_db: Path, tmp_path: Path
) -> None:
    async with Client(create_server(config=settings_for(sample_db, tmp_path))) as client:
        listed = await client.list_tools()
    size = len(json.dumps(listed.model_dump(mode="json", by_alias=True, exclude_none=True)["tools"]))
    assert size <= TOOLS_LIST_BEFORE * 1.10
    for tool in listed.tools:
        assert "Example" in (tool.description or ""), tool.name
        assert len(tool.description or "") <= 2000, tool.name


# ----------------------------------------------------------------------------- excerpts and output


def test_excerpt_shows_the_window_with_the_query_words() -> None:
    filler = "\n\n".join(f"Paragraph {i} talks about shipping schedules and harbour fees." for i in range(40))
    text_ = filler + "\n\nThe warranty period is 24 months from delivery.\n\n" + filler
    shown = excerpt(text_, "how long is the warranty period", 200)
    assert "warranty period is 24 months" in shown and len(shown) <= 200
    assert shown.startswith("…") and shown.endswith("…")
    assert excerpt("short text\n\n\nwith blank lines", "x", 200) == "short text\nwith blank lines"


def test_excerpt_falls_back_to_the_matched_chunk() -> None:
    text_ = "".join(f"sentence number {i:03d}. " for i in range(200))
    anchor = (text_.index("sentence number 120"), text_.index("sentence number 125"))
    shown = excerpt(text_, "zebra", 120, anchor)
    assert "sentence number 120" in shown and len(shown) <= 120


def test_clip_keeps_head_and_tail_within_the_limit() -> None:
    lines = "".join(f"line {i}\n" for i in range(10_000))
    for limit in (300, 1000, 5000):
        cut, was_cut = clip(lines, limit, "in resource analysis://x")
        assert was_cut and len(cut) <= limit
        assert cut.startswith("line 0\n") and cut.endswith("line 9999\n")
        dropped = int(re.search(r"output truncated: ([\d,]+) characters", cut).group(1).replace(",", ""))
        assert dropped == len(lines) - len(cut) + len(re.search(r"\n… \[.*\] …\n", cut).group(0))
    assert clip("short", 10, NOT_KEPT) == ("short", False)


def test_output_collector_keeps_head_and_tail() -> None:
    collector = OutputCollector(1200)
    for i in range(5000):
        collector("stdout", f"row {i}\n")
    stdout, stderr = collector.render()
    assert collector.truncated and stderr == ""
    assert stdout.startswith("row 0\n") and stdout.endswith("row 4999\n")
    assert "characters not kept (sandbox.max_output_chars)" in stdout
    assert len(stdout) <= 1200 + 120


# ----------------------------------------------------------------------------- inside the sandbox


async def test_sandbox_hits_print_compactly_with_every_field_one_step_away(kb: KnowledgeBase) -> None:
    async with AnalysisSession(kb) as session:
        printed = await session.execute("hits = await search('security vulnerability', limit=5)\nprint(hits)")
        assert printed.success, printed.error
        assert printed.stdout.startswith("[Hit(rank=1, chunk_id=") and printed.stdout.count("Hit(") == 5
        assert len(printed.stdout) < 5 * 700  # a passage is up to 5,000 characters; its summary is short
        assert "chars: .content>" in printed.stdout

        fields = await session.execute(
            "h = hits[0]\n"
            "(h['content'] == h.content, len(h.content) > len(h.excerpt), h.get('nope', 7), 'score' in h,\n"
            " sorted(h.to_dict()) == sorted(h.keys()))"
        )
        assert fields.value == "(True, True, 7, True, True)", fields.error
        whole = await session.execute("import json\nlen(json.dumps([x.to_dict() for x in hits])) > 5 * 300")
        assert whole.value == "True"

        # The value of an execution is rendered exactly as the sandbox prints it.
        value = await session.execute("hits")
        assert value.value == printed.stdout.rstrip("\n")

        documents = await session.execute(
            "docs = await list_documents()\nprint(docs[0])\ndocs[0]['title'] == docs[0].title"
        )
        assert documents.stdout.startswith("Document(id='") and documents.value == "True"
        # What ingest records itself (format, file_name) is left out, in the sandbox and as a value.
        recorded = await session.execute("docs[0].metadata['file_name']")
        assert recorded.value is not None and recorded.value.endswith(".md'")  # kept, one key away
        assert "file_name" not in documents.stdout and "file_name" not in (await session.execute("docs[0]")).value

        mistake = await session.execute("json.dumps(hits[0])")
        assert "not JSON serializable" in mistake.error and ".to_dict()" in mistake.error


async def test_sandbox_presentation_survives_hibernation_and_new_analysis(kb: KnowledgeBase) -> None:
    async with AnalysisSession(kb) as session:
        await session.execute("hits = await search('phishing', limit=2)")
        assert session.interpreter is not None
        await session.interpreter.hibernate()
        again = await session.execute("print(hits[0])\nlen(hits[0].content)")
        assert again.stdout.startswith("Hit(rank=1") and int(again.value) > 0

        await session.new_analysis()
        fresh = await session.execute("hits")
        assert "NameError" in fresh.error
        renewed = await session.execute("repr((await search('phishing', limit=1))[0])[:8]")
        assert renewed.value == "'Hit(rank'"

        # An interpreter without the prelude (a state saved before it existed): the host function answers.
        session.interpreter.prelude = None
        await session.new_analysis()
        plain = await session.execute("type((await search('phishing', limit=1))[0]).__name__")
        assert plain.value == "'dict'", plain.error


async def test_agent_toolset_returns_compact_hits(kb: KnowledgeBase) -> None:
    from mcp_analysis.agent.toolset import create_toolset

    async with AnalysisSession(kb) as session:
        toolset = create_toolset(session)
        hits = await toolset.search("Report A key findings", limit=3)
        assert len(hits) == 3 and all(len(h["content"]) <= 900 and h["chunk_id"] for h in hits)
        documents = await toolset.list_documents()
        assert len(documents) == SAMPLE_DOCUMENTS and set(documents[0]) == {"id", "title", "uri"}
