"""The MCP surface through a real in-memory `Client(server)`: tools, resources, prompts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_types import ResourceTemplateReference

from mcp_analysis.config import Settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.server import uris
from mcp_analysis.server.app import create_server
from tests.conftest import SAMPLE_DOCUMENTS, make_settings
from tests.mcp_helpers import text

pytestmark = pytest.mark.anyio


def settings_for(sample_db: Path, tmp_path: Path, **overrides: Any) -> Settings:
    return make_settings(sample_db, sessions={"dir": tmp_path / "sessions"}, **overrides)


@pytest.fixture
def server_settings(sample_db: Path, tmp_path: Path) -> Settings:
    return settings_for(sample_db, tmp_path)


async def test_tools_have_schemas_annotations_and_useful_docs(server_settings: Settings) -> None:
    async with Client(create_server(config=server_settings)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == {"search", "list_documents", "execute_code", "cite", "new_analysis", "analysis_state"}
        assert all(t.output_schema for t in tools.values())
        assert tools["search"].annotations.read_only_hint is True
        assert tools["new_analysis"].annotations.destructive_hint is True
        assert "/documents/{id}/content.txt" in tools["execute_code"].description
        assert "await search(" in tools["execute_code"].description
        assert not tools["search"].description.startswith(" ")
        assert "execute_code" in (client.instructions or "")


async def test_search_code_cite_flow_keeps_state(server_settings: Settings) -> None:
    async with Client(create_server(config=server_settings)) as client:
        found = await client.call_tool("search", {"query": "NavCore buffer overflow AIS", "limit": 3})
        assert not found.is_error
        hits = found.structured_content["results"]
        assert hits and "chunk_id " + hits[0]["chunk_id"] in text(found)

        first = await client.call_tool(
            "execute_code",
            {"code": "from pathlib import Path\nids = sorted(p.name for p in Path('/documents').iterdir())\nlen(ids)"},
        )
        assert first.structured_content["success"] and first.structured_content["value"] == str(SAMPLE_DOCUMENTS)
        second = await client.call_tool("execute_code", {"code": "ids[0] == sorted(ids)[0]"})
        assert second.structured_content["value"] == "True"
        assert "execution 2: ok" in text(second)

        real = hits[0]["chunk_id"]
        mangled = real[:-1] + ("0" if real[-1] != "0" else "1")
        cited = await client.call_tool("cite", {"chunk_ids": [f"[{real}]", mangled, "no-such-chunk"]})
        assert not cited.is_error
        data = cited.structured_content
        assert [c["chunk_id"] for c in data["citations"]] == [real]
        assert data["repaired"] == {mangled: real}
        assert data["ignored"] == ["no-such-chunk"]
        assert data["citations"][0]["document_title"].startswith("Security Advisory HMS-SA-2025-02")
        assert "ignored (not found): 'no-such-chunk'" in text(cited)

        state = await client.call_tool("analysis_state", {})
        summary = state.structured_content
        assert len(summary["executions"]) == 2 and summary["searches"] == ["NavCore buffer overflow AIS"]
        full = await client.read_resource(summary["resource"])
        payload = json.loads(full.contents[0].text)
        assert payload["executions"][0]["code"].startswith("from pathlib import Path")
        assert payload["citations"] == [real]


async def test_cite_edge_cases(server_settings: Settings) -> None:
    async with Client(create_server(config=server_settings)) as client:
        empty = await client.call_tool("cite", {"chunk_ids": []})
        assert empty.structured_content["no_evidence"] is True
        assert "not based on the knowledge base" in text(empty)

        nothing = await client.call_tool("cite", {"chunk_ids": ["totally-unknown", "[also-bad]"]})
        assert nothing.is_error
        assert "cite([])" in text(nothing) and "exactly as returned by search" in text(nothing)

        # An id read from items.jsonl (never seen in a search) is looked up in the store.
        code = (
            "import json\nfrom pathlib import Path\n"
            "d = sorted(Path('/documents').iterdir(), key=str)[0]\n"
            "items = [json.loads(l) for l in (d / 'items.jsonl').read_text().splitlines()]\n"
            "[i['chunk_ids'][0] for i in items[1:] if i['chunk_ids']][0]"  # a heading may have none
        )
        read = await client.call_tool("execute_code", {"code": code})
        chunk_id = read.structured_content["value"].strip("'")
        cited = await client.call_tool("cite", {"chunk_ids": [chunk_id]})
        assert [c["chunk_id"] for c in cited.structured_content["citations"]] == [chunk_id]


async def test_new_analysis_resets_variables_and_citations(server_settings: Settings) -> None:
    async with Client(create_server(config=server_settings)) as client:
        await client.call_tool("execute_code", {"code": "x = 5"})
        hit = (await client.call_tool("search", {"query": "phishing"})).structured_content["results"][0]
        await client.call_tool("cite", {"chunk_ids": [hit["chunk_id"]]})
        reset = await client.call_tool("new_analysis", {})
        assert reset.structured_content["analysis_number"] == 2
        gone = await client.call_tool("execute_code", {"code": "x"})
        assert not gone.structured_content["success"] and "NameError" in gone.structured_content["error"]
        state = (await client.call_tool("analysis_state", {})).structured_content
        assert state["citations"] == [] and state["citation_index_size"] == 1


async def test_large_output_stays_in_budget_and_is_readable_in_full(sample_db: Path, tmp_path: Path) -> None:
    settings = settings_for(sample_db, tmp_path, server={"max_result_chars": 4000})
    async with Client(create_server(config=settings)) as client:
        big = await client.call_tool("execute_code", {"code": "for i in range(3000):\n    print('row', i)"})
        data = big.structured_content
        assert data["truncated"] and data["full_output"] == f"analysis://sessions/{data['session']}/executions/1"
        assert len(text(big)) + len(json.dumps(data, ensure_ascii=False)) <= 4000
        assert data["full_output"] in text(big)
        # The head and the tail are kept; the marker between them names the resource.
        assert data["stdout"].startswith("row 0\nrow 1\n") and data["stdout"].endswith("row 2999\n")
        assert f"the whole output is in resource {data['full_output']}" in data["stdout"]
        full = json.loads((await client.read_resource(data["full_output"])).contents[0].text)
        assert "row 2999" in full["stdout"] and "row 1500" in full["stdout"]

        many = await client.call_tool("search", {"query": "revenue", "limit": 20, "context": 5000})
        assert len(text(many)) + len(json.dumps(many.structured_content, ensure_ascii=False)) <= 4000


async def test_errors_are_actionable_and_the_server_keeps_serving(server_settings: Settings) -> None:
    async with Client(create_server(config=server_settings)) as client:
        syntax = await client.call_tool("execute_code", {"code": "def broken(:\n  pass"})
        assert not syntax.is_error and not syntax.structured_content["success"]
        assert "SyntaxError" in syntax.structured_content["error"] and "line 1" in syntax.structured_content["error"]
        hint = await client.call_tool("execute_code", {"code": "class A:\n    pass\nclass B(A):\n    pass"})
        assert "Hint:" in hint.structured_content["error"]
        empty = await client.call_tool("search", {"query": "  "})
        assert empty.is_error and "non-empty" in text(empty)
        huge = await client.call_tool("search", {"query": "revenue " * 2000})
        assert huge.is_error and "the limit is 4000" in text(huge)
        flood = await client.call_tool("cite", {"chunk_ids": [f"id{i}" for i in range(501)]})
        assert flood.is_error and "at most 500" in text(flood)
        unknown = await client.call_tool("analysis_state", {"session": "s_doesnotexist"})
        assert unknown.is_error and "Unknown or expired analysis session" in text(unknown)
        assert not (await client.call_tool("list_documents", {})).is_error


async def test_resources_paginate_and_read(sample_db: Path, tmp_path: Path) -> None:
    settings = settings_for(sample_db, tmp_path, server={"resource_page_size": 5})
    async with Client(create_server(config=settings)) as client:
        uris: list[str] = []
        cursor = None
        pages = 0
        while True:
            page = await client.list_resources(cursor=cursor)
            assert len(page.resources) <= 5
            uris += [str(r.uri) for r in page.resources]
            pages += 1
            cursor = page.next_cursor
            if cursor is None:
                break
        assert pages == SAMPLE_DOCUMENTS and len(uris) == SAMPLE_DOCUMENTS * 5 == len(set(uris))  # 5 files a document
        content = next(u for u in uris if u.endswith("/content.txt"))
        doc_id = content.split("/")[3]
        read = await client.read_resource(content)
        assert read.contents[0].mime_type == "text/plain" and read.contents[0].text.startswith("# ")
        meta = json.loads((await client.read_resource(f"documents:///{doc_id}/metadata.json")).contents[0].text)
        assert meta["id"] == doc_id
        items = (await client.read_resource(f"documents:///{doc_id}/items.jsonl")).contents[0]
        assert items.mime_type == "application/jsonl"
        assert all("self_ref" in json.loads(line) for line in items.text.splitlines())
        toc = json.loads((await client.read_resource(f"documents:///{doc_id}/toc.json")).contents[0].text)
        assert toc["document_id"] == doc_id and toc["sections"]
        with pytest.raises(MCPError, match="No document"):
            await client.read_resource("documents:///00000000-0000-0000-0000-000000000000/content.txt")
        with pytest.raises(MCPError, match="Invalid cursor"):
            await client.list_resources(cursor="bogus")
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert "documents:///{document_id}/content.txt" in templates
        assert "analysis://sessions/{session_id}/state" in templates


async def test_prompt_and_completion(server_settings: Settings, kb: KnowledgeBase) -> None:
    async with Client(create_server(config=server_settings)) as client:
        prompts = (await client.list_prompts()).prompts
        assert [p.name for p in prompts] == ["analyze"]
        prompt = await client.get_prompt("analyze", {"question": "Average revenue?"})
        body = prompt.messages[0].content.text
        assert "Average revenue?" in body and "execute_code" in body and "cite" in body
        docs = await kb.corpus().documents()
        ref = ResourceTemplateReference(type="ref/resource", uri="documents:///{document_id}/content.txt")
        by_prefix = await client.complete(ref, {"name": "document_id", "value": docs[0].id[:6]})
        assert docs[0].id in by_prefix.completion.values
        by_title = await client.complete(ref, {"name": "document_id", "value": "phishing"})
        assert [next(d.title for d in docs if d.id == v) for v in by_title.completion.values] == [
            "Security Advisory HMS-SA-2025-04: Phishing Campaign Impersonating Halvorsen Support"
        ]


async def test_server_filter_is_enforced_on_every_surface(sample_db: Path, tmp_path: Path, kb: KnowledgeBase) -> None:
    settings = settings_for(sample_db, tmp_path, server={"filter": "uri LIKE '%advisory%'"})
    everything = await kb.corpus().documents()
    hidden = next(d for d in everything if "report" in d.uri)
    hidden_chunk = (await kb.store.chunks(f"document_id = '{hidden.id}'"))[0]["id"]
    async with Client(create_server(config=settings)) as client:
        listed = (await client.call_tool("list_documents", {})).structured_content
        assert listed["total"] == 4 and all("advisory" in d["uri"] for d in listed["documents"])
        hits = (await client.call_tool("search", {"query": "quarterly revenue", "limit": 10})).structured_content
        visible = {d["id"] for d in listed["documents"]}
        assert hits["results"] and all(r["document_id"] in visible for r in hits["results"])
        code = "import os\n(len(os.listdir('/documents')), " + repr(hidden.id) + " in os.listdir('/documents'))"
        assert (await client.call_tool("execute_code", {"code": code})).structured_content["value"] == "(4, False)"
        sneaky = f"open('/documents/{hidden.id}/content.txt').read()"
        assert (
            "FileNotFoundError"
            in (await client.call_tool("execute_code", {"code": sneaky})).structured_content["error"]
        )
        resources = await client.list_resources()
        assert len(resources.resources) == 20  # 4 documents x 5 files
        with pytest.raises(MCPError):
            await client.read_resource(f"documents:///{hidden.id}/content.txt")
        cite = await client.call_tool("cite", {"chunk_ids": [hidden_chunk]})
        assert cite.is_error
        ref = ResourceTemplateReference(type="ref/resource", uri="documents:///{document_id}/content.txt")
        completion = await client.complete(ref, {"name": "document_id", "value": hidden.id[:8]})
        assert hidden.id not in completion.completion.values
        # No tool argument widens it: the session handle cannot carry another filter.
        state = (await client.call_tool("analysis_state", {})).structured_content
        assert state["document_filter"] == "uri LIKE '%advisory%'"


async def test_resources_list_is_the_callers_page_built_once(
    sample_db: Path, tmp_path: Path, kb: KnowledgeBase
) -> None:
    """A filtered caller's resources/list holds its documents' files only, and nothing builds a list to throw away:
    the SDK's own list of static resources is never asked for."""
    settings = settings_for(sample_db, tmp_path, server={"filter": "uri LIKE '%advisory%'", "resource_page_size": 7})
    visible = {d.id for d in await kb.corpus("uri LIKE '%advisory%'").documents()}
    server = create_server(config=settings)
    built: list[int] = []
    sdk_list = server.list_resources

    async def counted() -> Any:
        built.append(1)
        return await sdk_list()

    server.list_resources = counted  # type: ignore[method-assign]  # counts the SDK's own build, runs it
    async with Client(server) as client:
        listed, cursor = [], None
        while True:
            page = await client.list_resources(cursor=cursor)
            listed += page.resources
            cursor = page.next_cursor
            if cursor is None:
                break
    assert len(visible) == 4 and len(listed) == 4 * len(uris.DOCUMENT_FILES)
    assert {str(r.uri).split("/")[3] for r in listed} == visible
    assert {r.name for r in listed} == {f"{d}/{name}" for d in visible for name in uris.DOCUMENT_FILES}
    assert not built, "the SDK built a resources/list that was thrown away"


async def test_bad_server_filter_is_reported_clearly(sample_db: Path, tmp_path: Path) -> None:
    settings = settings_for(sample_db, tmp_path, server={"filter": "nosuch = 1"})
    async with Client(create_server(config=settings)) as client:
        assert len((await client.list_tools()).tools) == 6  # the server still answers
        result = await client.call_tool("list_documents", {})
        assert result.is_error and "unknown column 'nosuch'" in text(result)


async def test_progress_is_reported_for_long_calls(server_settings: Settings) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with Client(create_server(config=server_settings)) as client:
        result = await client.call_tool(
            "execute_code", {"code": "import time\ntime.sleep(2.5)\n'slept'"}, progress_callback=on_progress
        )
        assert result.structured_content["value"] == "'slept'"
    assert len(seen) >= 2
    assert seen[0][1] == server_settings.sandbox.code_timeout and "running for" in (seen[0][2] or "")
    assert [p for p, _, _ in seen] == sorted(p for p, _, _ in seen)
