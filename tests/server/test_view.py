"""The MCP App view in a real browser, hosted by a test page that speaks the MCP Apps messages."""

from __future__ import annotations

import json
import re
import urllib.parse
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from mcp_analysis.charts.render import shared_renderer
from mcp_analysis.charts.spec import validate_spec
from mcp_analysis.config import Settings
from mcp_analysis.server.app import create_server
from mcp_analysis.ui import VIEW_MIME, VIEW_URI, view_html
from tests.conftest import make_settings
from tests.server.app_host import ViewHost, hosted_view

pytestmark = pytest.mark.anyio

REVENUE_ROWS = """
import re, json
from pathlib import Path
rows = []
for doc in await list_documents():
    if 'Quarterly Financial Report' in doc['title']:
        text = Path('/documents/' + doc['id'] + '/content.txt').read_text()
        m = re.search(r'Total revenue\\s*\\|\\s*\\$([\\d,]+)', text)
        rows.append({'quarter': doc['title'][-7:], 'revenue': int(m.group(1).replace(',', ''))})
rows.sort(key=lambda r: r['quarter'])
print(json.dumps(rows))
"""
DARK = {"theme": "dark", "styles": {"variables": {"--color-background-primary": "rgb(12, 20, 32)"}}}


def test_the_view_is_one_small_file_that_reaches_for_nothing_outside() -> None:
    html = view_html()
    assert VIEW_URI == "ui://mcp-analysis/analysis" and VIEW_MIME == "text/html;profile=mcp-app"
    assert len(html.encode()) < 40_000
    assert not re.search(r"<(script|link|img|iframe)[^>]*\s(src|href)=", html)  # no external code or styles
    assert not re.search(r"https?://", html)
    for api in ("fetch(", "XMLHttpRequest", "WebSocket", "innerHTML", "eval(", "@import"):
        assert api not in html, api


def as_json(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


@pytest.fixture
def server_settings(sample_db: Path, tmp_path: Path) -> Settings:
    return make_settings(sample_db, sessions={"dir": tmp_path / "sessions"})


async def test_a_person_sees_hits_citations_a_chart_and_opens_a_passage_from_a_real_server(
    server_settings: Settings, tmp_path: Path
) -> None:
    async with Client(create_server(config=server_settings)) as client:

        async def read_resource(uri: str) -> dict[str, Any]:
            return as_json(await client.read_resource(uri))

        async with hosted_view(read_resource, DARK) as host:
            # A search: each hit's document, section and passage.
            query = "total revenue in the quarter"
            found = await client.call_tool("search", {"query": query, "limit": 3})
            hits = found.structured_content["results"]
            await host.show({"query": query, "limit": 3}, as_json(found))
            await host.view.locator("ol.items li.hit").first.wait_for()
            assert await host.view.locator("#view h2").inner_text() == f"3 hits for “{query}”"
            first = host.view.locator("li.hit").first
            assert hits[0]["document_title"] in await first.locator(".where").inner_text()
            assert hits[0]["content"][:80] in await first.locator("blockquote").inner_text()

            # Opening the passage reads the document through the host (resources/read) and marks it.
            await first.get_by_role("button", name="Open passage").click()
            marked = host.view.locator("#reader mark")
            await marked.wait_for()
            document = (await client.read_resource(f"documents:///{hits[0]['document_id']}/content.txt")).contents[0]
            assert (await marked.inner_text()) in document.text
            assert await host.view.locator("#reader-title").inner_text() == hits[0]["document_title"]
            reads = [m for m in await host.messages() if m.get("method") == "resources/read"]
            assert reads[0]["params"]["uri"] == f"documents:///{hits[0]['document_id']}/content.txt"

            # A citation: title, section and pages as cite returned them.
            cited = await client.call_tool("cite", {"chunk_ids": [hits[0]["chunk_id"]]})
            await host.show({"chunk_ids": [hits[0]["chunk_id"]]}, as_json(cited))
            citation = cited.structured_content["citations"][0]
            where = host.view.locator("li.citation .where")
            await where.wait_for()
            assert await host.view.locator("#view h2").inner_text() == "Cited 1 passage"
            shown = await where.inner_text()
            assert citation["document_title"] in shown and citation["section"] in shown
            assert citation["chunk_id"] in await host.view.locator("li.citation").inner_text()

            # An execution and its chart (the server's SVG).
            ran = await client.call_tool("execute_code", {"code": REVENUE_ROWS})
            rows = json.loads(ran.structured_content["stdout"])
            chart = await draw_revenue_chart(rows, server_settings)
            result = as_json(ran)
            result["structuredContent"]["charts"] = [chart]
            await host.show({"code": REVENUE_ROWS}, result)
            picture = host.view.locator("figure.chart img")
            await picture.wait_for()
            await host.in_view("() => document.querySelector('figure.chart img').decode()")
            size = await host.in_view("() => { const i = document.querySelector('figure.chart img'); "
                                      "return [i.naturalWidth, i.naturalHeight, i.src]; }")  # fmt: skip
            assert size[:2] == [chart["width"], chart["height"]]
            svg = urllib.parse.unquote(size[2].split(",", 1)[1])
            assert svg == chart["svg"] and "Revenue per quarter" in svg
            assert await host.view.locator("figcaption").inner_text() == "Revenue per quarter"
            assert "Q3 2025" in await host.view.locator("[data-part=Printed] pre").inner_text()
            assert (await host.view.locator("#view h2").inner_text()).startswith("Execution 1 · ok · ")
            assert await host.view.locator("#reader").is_hidden()  # the previous result's document is closed

            await host.page.locator("#app").screenshot(path=tmp_path / "view.png")
            assert (tmp_path / "view.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
            assert not [url for url in host.requests if url.split(":", 1)[0] in ("http", "https", "ws", "file")]


async def draw_revenue_chart(rows: list[dict[str, Any]], settings: Settings) -> dict[str, Any]:
    spec = {
        "title": "Revenue per quarter",
        "data": {"values": rows},
        "mark": "bar",
        "encoding": {
            "x": {"field": "quarter", "type": "nominal", "sort": None},
            "y": {"field": "revenue", "type": "quantitative"},
        },
    }
    checked = validate_spec(spec, settings.charts)
    drawn = await shared_renderer(settings.charts).render(checked)
    return {"index": 1, "title": checked.title, "width": drawn.width, "height": drawn.height, "svg": drawn.svg}


async def background(host: ViewHost) -> str:
    return await host.in_view("() => getComputedStyle(document.body).backgroundColor")


async def no_resources(uri: str) -> dict[str, Any]:
    raise AssertionError(f"nothing should be read here ({uri})")


async def test_the_view_follows_the_host_theme_and_its_changes() -> None:
    async with hosted_view(no_resources, DARK) as host:
        assert await background(host) == "rgb(12, 20, 32)"  # the host's own variable
        await host.send(
            "ui/notifications/host-context-changed",
            {"styles": {"variables": {"--color-background-primary": "rgb(250, 250, 240)"}}},
        )
        assert await background(host) == "rgb(250, 250, 240)"
    async with hosted_view(no_resources, {"theme": "dark"}) as host:
        assert await background(host) == "rgb(26, 26, 26)"  # its own dark fallback
        await host.send("ui/notifications/host-context-changed", {"theme": "light"})
        assert await background(host) == "rgb(255, 255, 255)"


async def test_the_view_speaks_the_extension_handshake_and_answers_host_requests() -> None:
    async with hosted_view(no_resources, {"theme": "light"}) as host:
        sent = await host.messages()
        initialize = sent[0]
        assert initialize["method"] == "ui/initialize"
        assert initialize["params"]["protocolVersion"] == "2026-01-26"
        assert initialize["params"]["appInfo"]["name"] == "mcp-analysis"
        assert initialize["params"]["appCapabilities"] == {"availableDisplayModes": ["inline"]}
        methods = [m.get("method") for m in sent]
        assert methods.index("ui/notifications/initialized") > 0
        for request_id, method in (("t-ping", "ping"), ("t-down", "ui/resource-teardown"), ("t-x", "ui/unknown")):
            await host.page.evaluate(
                "([id, method]) => document.getElementById('app').contentWindow.postMessage("
                "{jsonrpc: '2.0', id, method, params: {}}, '*')",
                [request_id, method],
            )
        await host.page.wait_for_function("window.hostLog.some(m => m.id === 't-x')")
        replies = {m["id"]: m for m in await host.messages() if m.get("id") in ("t-ping", "t-down", "t-x")}
        assert replies["t-ping"]["result"] == {} and replies["t-down"]["result"] == {}
        assert replies["t-x"]["error"]["code"] == -32601
        assert any(m.get("method") == "ui/notifications/size-changed" for m in await host.messages())

        await host.show({}, {"content": [{"type": "text", "text": "Unknown tool: nope"}], "isError": True})
        await host.view.locator("h2.failed").wait_for()
        assert await host.view.locator("pre.error").inner_text() == "Unknown tool: nope"
