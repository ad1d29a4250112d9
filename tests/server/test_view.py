"""The MCP App view in a real browser, hosted by a test page that speaks the MCP Apps messages."""

from __future__ import annotations

import gzip
import re
import urllib.parse
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.extension import advertise
from PIL import Image
from playwright.async_api import Browser

from mcp_analysis.config import Settings
from mcp_analysis.server.app import create_server
from mcp_analysis.ui import VIEW_MIME, VIEW_URI, view_html
from tests.conftest import make_settings
from tests.mcp_helpers import REVENUE_CHART
from tests.server.app_host import HOST_ORIGIN, SANDBOX_ORIGIN, ViewHost, chromium, hosted_view

RENDERS_VIEW = advertise("io.modelcontextprotocol/ui", {"mimeTypes": [VIEW_MIME]})
SVG_SHOWN = """() => new Promise((done) => {
  const picture = document.querySelector('figure.chart img');
  const check = () => picture.src.startsWith('data:image/svg') ? picture.decode().then(done) : setTimeout(check, 50);
  check();
})"""

pytestmark = pytest.mark.anyio
HOST_PAGES = (HOST_ORIGIN + "/", SANDBOX_ORIGIN + "/")  # the test host's own pages, answered by routing
WEB = ("http", "https", "ws", "file")

DARK = {"theme": "dark", "styles": {"variables": {"--color-background-primary": "rgb(12, 20, 32)"}}}


def test_the_view_is_one_small_file_that_reaches_for_nothing_outside() -> None:
    html = view_html()
    assert VIEW_URI == "ui://mcp-analysis/analysis" and VIEW_MIME == "text/html;profile=mcp-app"
    assert len(gzip.compress(html.encode(), 9)) < 40_000  # the budget: 40 KB gzipped
    assert not re.search(r"<(script|link|img|iframe)[^>]*\s(src|href)=", html)  # no external code or styles
    assert not re.search(r"https?://", html)
    for api in ("fetch(", "XMLHttpRequest", "WebSocket", "innerHTML", "eval(", "@import"):
        assert api not in html, api


def as_json(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    """One Chromium for the module; each test opens its own page in a fresh context."""
    async with chromium() as launched:
        yield launched


@pytest.fixture
def server_settings(sample_db: Path, tmp_path: Path) -> Settings:
    return make_settings(sample_db, sessions={"dir": tmp_path / "sessions"})


async def test_a_person_sees_hits_citations_a_chart_and_opens_a_passage_from_a_real_server(
    browser: Browser, server_settings: Settings, tmp_path: Path
) -> None:
    async with Client(create_server(config=server_settings), extensions=[RENDERS_VIEW]) as client:

        async def read_resource(uri: str) -> dict[str, Any]:
            return as_json(await client.read_resource(uri))

        async with hosted_view(browser, read_resource, DARK) as host:
            # A search: each hit's document, section and passage.
            query = "total revenue in the quarter"
            found = await client.call_tool("search", {"query": query, "limit": 3})
            hits = found.structured_content["results"]
            await host.show({"query": query, "limit": 3}, as_json(found))
            await host.view.locator("ol.items li.hit").first.wait_for()
            assert await host.view.locator("#view h2").inner_text() == f"3 hits for “{query}”"
            first = host.view.locator("li.hit").first
            assert hits[0]["document_title"] in await first.locator(".where").inner_text()
            words = re.findall(r"[\w.,$-]+", await first.locator(".passage").inner_text())  # laid out: no markdown
            assert words[:5] == re.findall(r"[\w.,$-]+", hits[0]["content"])[:5]

            # Opening the passage reads the document through the host (resources/read) and marks it.
            await first.get_by_role("button", name="Open passage").click()
            marked = host.view.locator("#reader mark")
            await marked.wait_for()
            document = (await client.read_resource(f"documents:///{hits[0]['document_id']}/content.txt")).contents[0]
            assert (await marked.inner_text()) in document.text
            assert await host.view.locator("#reader-title").inner_text() == hits[0]["document_title"]
            reads = [m["params"]["uri"] for m in await host.messages() if m.get("method") == "resources/read"]
            assert f"documents:///{hits[0]['document_id']}/content.txt" in reads

            # A citation: title, section, pages and the cited passage, which opens in its document.
            cited = await client.call_tool("cite", {"chunk_ids": [hits[1]["chunk_id"]]})
            await host.show({"chunk_ids": [hits[1]["chunk_id"]]}, as_json(cited))
            citation = cited.structured_content["citations"][0]
            item = host.view.locator("li.citation")
            await item.locator(".where").wait_for()
            assert await host.view.locator("#reader").is_hidden()  # the previous result's document is closed
            assert await host.view.locator("#view h2").inner_text() == "Cited 1 passage"
            shown = await item.locator(".where").inner_text()
            assert citation["document_title"] in shown and citation["section"] in shown
            assert citation["chunk_id"] not in await item.inner_text()  # no raw id: [1] and the file name
            assert shown.startswith("[1]") and citation["document_uri"].rsplit("/", 1)[-1] in shown
            quoted = await item.locator(".passage").inner_text()
            assert re.findall(r"[\w.,$-]+", quoted)[:8] == re.findall(r"[\w.,$-]+", citation["passage"])[:8]
            await item.get_by_role("button", name="Open passage").click()
            await marked.wait_for()
            cited_document = await client.read_resource(f"documents:///{citation['document_id']}/content.txt")
            assert (await marked.inner_text()) in cited_document.contents[0].text
            assert await host.view.locator("#reader-title").inner_text() == citation["document_title"]

            # An execution that draws revenue per quarter: the view shows the server's own SVG.
            ran = await client.call_tool("execute_code", {"code": REVENUE_CHART})
            [chart] = ran.structured_content["charts"]
            svg = (await client.read_resource(chart["svg_uri"])).contents[0].text
            await host.show({"code": REVENUE_CHART}, as_json(ran))
            picture = host.view.locator("figure.chart img")
            await picture.wait_for()
            await host.in_view(SVG_SHOWN)  # read through the host, then decoded
            size = await host.in_view("() => { const i = document.querySelector('figure.chart img'); "
                                      "return [i.naturalWidth, i.naturalHeight, i.src]; }")  # fmt: skip
            assert size[:2] == [chart["width"], chart["height"]]
            shown_svg = urllib.parse.unquote(size[2].split(",", 1)[1])  # the server's own SVG, in the host's colours
            assert "Revenue per quarter, 2025" in shown_svg and shown_svg.count("<path") == svg.count("<path")
            reads = [m["params"]["uri"] for m in await host.messages() if m.get("method") == "resources/read"]
            assert reads[-1] == chart["svg_uri"]
            assert await picture.get_attribute("alt") == "Revenue per quarter, 2025"
            assert "Revenue per quarter" not in await host.view.locator("figcaption").inner_text()  # not twice
            assert "Q3 2025" in await host.view.locator("[data-part=Printed]").inner_text()
            assert (await host.view.locator("#view h2").inner_text()).startswith("Execution 1 · ok · ")

            await host.page.locator("#app").screenshot(path=tmp_path / "view.png")
            shot = Image.open(tmp_path / "view.png")
            assert shot.format == "PNG" and shot.width > 700
            assert not [url for url in host.requests if not url.startswith(HOST_PAGES) and url.split(":", 1)[0] in WEB]


async def background(host: ViewHost) -> str:
    return await host.in_view("() => getComputedStyle(document.body).backgroundColor")


async def background_turns(host: ViewHost, colour: str) -> str:
    """The background once the view has handled what the host posted (postMessage is asynchronous)."""
    await host.frame.wait_for_function("(c) => getComputedStyle(document.body).backgroundColor === c", arg=colour)
    return await background(host)


async def no_resources(uri: str) -> dict[str, Any]:
    raise AssertionError(f"nothing should be read here ({uri})")


async def test_the_view_follows_the_host_theme_and_its_changes(browser: Browser) -> None:
    async with hosted_view(browser, no_resources, DARK) as host:
        assert await background(host) == "rgb(12, 20, 32)"  # the host's own variable
        await host.send(
            "ui/notifications/host-context-changed",
            {"styles": {"variables": {"--color-background-primary": "rgb(250, 250, 240)"}}},
        )
        assert await background_turns(host, "rgb(250, 250, 240)") == "rgb(250, 250, 240)"
    async with hosted_view(browser, no_resources, {"theme": "dark"}) as host:
        assert await background(host) == "rgb(26, 26, 26)"  # its own dark fallback
        await host.send("ui/notifications/host-context-changed", {"theme": "light"})
        assert await background_turns(host, "rgb(255, 255, 255)") == "rgb(255, 255, 255)"


async def test_the_view_speaks_the_extension_handshake_and_answers_host_requests(browser: Browser) -> None:
    async with hosted_view(browser, no_resources, {"theme": "light"}) as host:
        sent = await host.messages()
        initialize = sent[0]
        assert initialize["method"] == "ui/initialize"
        assert initialize["params"]["protocolVersion"] == "2026-01-26"
        assert initialize["params"]["appInfo"]["name"] == "mcp-analysis"
        assert initialize["params"]["appCapabilities"] == {"availableDisplayModes": ["inline", "fullscreen"]}
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
