"""The view as a notebook cell, in a real MCP Apps host (the SDK's AppBridge) and Debian's Chromium.

Each test feeds results of a real server (the sample knowledge base, or a small one of its own
with a CSV passage and a markdown table) and looks at what a person would see, at 1,200 and
400 px, light and dark, with hosts that do and do not relay resources. The screenshots of
`test_what_a_person_sees` are kept in build/view-shots/ (or $MCP_ANALYSIS_VIEW_SHOTS) to look at.
"""

from __future__ import annotations

import io
import os
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.client.extension import advertise
from PIL import Image, ImageChops
from playwright.async_api import Browser

from mcp_analysis.config import Settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.ingest.pipeline import Ingestor
from mcp_analysis.server.app import create_server
from mcp_analysis.ui import VIEW_MIME
from tests.conftest import make_settings
from tests.mcp_helpers import REVENUE_CHART
from tests.server.app_host import ViewHost, chromium, hosted_view

pytestmark = pytest.mark.anyio

RENDERS_VIEW = advertise("io.modelcontextprotocol/ui", {"mimeTypes": [VIEW_MIME]})
SHOTS = Path(os.environ.get("MCP_ANALYSIS_VIEW_SHOTS") or Path(__file__).parents[2] / "build" / "view-shots")
SIZES = "window.hostLog.filter(m => m.method === 'ui/notifications/size-changed')"
# The host's frame has the height the view last asked for.
SETTLED = (
    f"() => {{ const s = {SIZES}; const frame = document.getElementById('app'); "
    "return s.length > 0 && frame.clientHeight === s[s.length - 1].params.height; }"
)
UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
LIGHT: dict[str, Any] = {"theme": "light"}
DARK: dict[str, Any] = {"theme": "dark", "styles": {"variables": {"--color-background-primary": "rgb(24, 24, 27)"}}}
FUEL_LOG = (
    "Fleet fuel log\n\nThe fuel log of the coastal fleet for 2025, as exported from the bunkering system.\n\n"
    "Vessel,Fuel (t),Cost (USD),Port\nAurora,1240,812000,Bergen\nBorealis,980,655500,Tromso\n"
    "Cassiopeia,1515,1009750,Stavanger\n"
)
CREW_BUDGET = """# Crew budget 2026

## Training days per vessel

Planned training days for the deck crews, by vessel and quarter.

| Vessel | Q1 | Q2 | Total days |
|---|---|---|---|
| Aurora | 12 | 8 | 20 |
| Borealis | 6 | 10 | 16 |

- simulator hours are counted separately
- days include travel
"""
LONG_OUTPUT = "for i in range(1500):\n    print('line', i, 'of the long listing', '=' * 30)\n"
RECORDS = """rows = [{'vessel': 'Aurora', 'fuel_t': 1240, 'cost': 812000.5},
        {'vessel': 'Borealis', 'fuel_t': 980, 'cost': 655500.0}]
print('| vessel | fuel_t |')
print('|---|---|')
for r in rows:
    print('| ' + r['vessel'] + ' | ' + str(r['fuel_t']) + ' |')
rows
"""


def narrow_chart(width: int) -> str:
    return (
        "await chart({'data': {'values': [{'k': c, 'v': i + 1} for i, c in enumerate('ABCDE')]}, "
        f"'mark': 'bar', 'width': {width}, 'height': 120, "
        "'encoding': {'x': {'field': 'k', 'type': 'nominal'}, 'y': {'field': 'v', 'type': 'quantitative'}}})"
    )


def as_json(model: Any) -> dict[str, Any]:
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


@pytest.fixture(scope="module")
async def browser() -> AsyncIterator[Browser]:
    async with chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
async def notes_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A knowledge base of two notes: a text file with CSV lines and a markdown table."""
    docs = tmp_path_factory.mktemp("notes")
    (docs / "fleet-fuel.txt").write_text(FUEL_LOG)
    (docs / "crew-budget.md").write_text(CREW_BUDGET)
    db = tmp_path_factory.mktemp("notes-db") / "notes.lancedb"
    kb = await KnowledgeBase.open(make_settings(db), create=True)
    try:
        await Ingestor(kb).add([docs])
    finally:
        await kb.close()
    return db


@asynccontextmanager
async def served(db: Path, tmp_path: Path) -> AsyncIterator[tuple[Client, Any]]:
    """A real server's client (declaring the view's extension) and its resources/read for the host."""
    settings: Settings = make_settings(db, sessions={"dir": tmp_path / "sessions"})
    async with Client(create_server(config=settings), extensions=[RENDERS_VIEW]) as client:

        async def read_resource(uri: str) -> dict[str, Any]:
            return as_json(await client.read_resource(uri))

        yield client, read_resource


async def call(client: Client, host: ViewHost, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """Call a tool and show its result in the view, as a host does; the structured result."""
    result = await client.call_tool(tool, arguments)
    await host.show(arguments, as_json(result))
    return result.structured_content or {}


async def sizes(host: ViewHost) -> list[int]:
    return [m["params"]["height"] for m in await host.messages() if m.get("method") == "ui/notifications/size-changed"]


async def reads(host: ViewHost) -> list[str]:
    return [m["params"]["uri"] for m in await host.messages() if m.get("method") == "resources/read"]


async def test_an_off_screen_view_reports_its_height_at_once(browser: Browser, sample_db: Path, tmp_path: Path) -> None:
    async with (
        served(sample_db, tmp_path) as (client, read),
        hosted_view(browser, read, LIGHT, width=1200, height=700, below_fold=True) as host,
    ):
        top = await host.page.evaluate("document.getElementById('app').getBoundingClientRect().top")
        assert top > 700  # below the fold: the browser runs no ResizeObserver in it
        await call(client, host, "execute_code", {"code": "for i in range(60):\n    print('row', i)"})
        # Waited for from the host's page only: touching the view's frame may make the browser render it.
        await host.page.wait_for_function(f"{SIZES}.some(m => m.params.height > 300)", timeout=2000)
        content = await host.in_view("() => document.body.getBoundingClientRect().height")
        assert content > 300  # more than the waiting line it started with
        assert abs((await sizes(host))[-1] - content) <= 0.1 * content
        assert not host.errors


async def test_the_view_stays_within_the_host_max_height_and_scrolls_inside(
    browser: Browser, sample_db: Path, tmp_path: Path
) -> None:
    limited = {**LIGHT, "containerDimensions": {"maxHeight": 480, "maxWidth": 900}}
    async with served(sample_db, tmp_path) as (client, read), hosted_view(browser, read, limited) as host:
        found = await call(client, host, "search", {"query": "revenue", "limit": 12})
        assert len(found["results"]) >= 10
        await host.view.locator("li.hit").nth(len(found["results"]) - 1).wait_for()
        await host.page.wait_for_function(f"{SIZES}.some(m => m.params.height === 480)")
        assert max(await sizes(host)) <= 480
        assert await host.page.evaluate("document.getElementById('app').clientHeight") <= 480
        assert await host.in_view("() => document.documentElement.scrollHeight") > 1000  # it scrolls inside
        assert not host.errors


async def test_a_host_without_server_resources_is_offered_nothing_it_cannot_do(
    browser: Browser, sample_db: Path, tmp_path: Path
) -> None:
    async with (
        served(sample_db, tmp_path) as (client, read),
        hosted_view(browser, read, LIGHT, server_resources=False) as host,
    ):
        found = await call(client, host, "search", {"query": "total revenue in the quarter", "limit": 3})
        await host.view.locator("li.hit").nth(2).wait_for()
        assert await host.view.get_by_role("button", name="Open passage").count() == 0
        await call(client, host, "cite", {"chunk_ids": [found["results"][0]["chunk_id"]]})
        await host.view.locator("li.citation").wait_for()
        assert await host.view.get_by_role("button", name="Open passage").count() == 0
        await call(client, host, "execute_code", {"code": REVENUE_CHART})
        picture = host.view.locator("figure.chart img")
        await picture.wait_for()
        assert (await picture.get_attribute("src") or "").startswith("data:image/png")  # the attached PNG
        assert await reads(host) == []  # nothing asked of a host that relays no resources
        assert not host.errors


async def test_a_shortened_output_says_so_above_it_and_opens_the_whole_output(
    browser: Browser, sample_db: Path, tmp_path: Path
) -> None:
    async with served(sample_db, tmp_path) as (client, read), hosted_view(browser, read, LIGHT) as host:
        ran = await call(client, host, "execute_code", {"code": LONG_OUTPUT})
        assert ran["truncated"] and ran["full_output"]
        notice = host.view.locator(".notice")
        await notice.wait_for()
        assert "shortened" in await notice.inner_text()
        order = await host.in_view(
            "() => [...document.querySelectorAll('.notice, [data-part=Printed]')].map(e => e.className || 'printed')"
        )
        assert order == ["notice", "printed"]  # above the output, not buried in it
        await notice.get_by_role("button", name="Show the full output").click()
        reader = host.view.locator("#reader-text")
        await host.frame.wait_for_function("() => document.getElementById('reader-text').textContent.length > 0")
        assert "line 1499 of the long listing" in await reader.inner_text()
        assert ran["full_output"] in await reads(host)
        assert not host.errors


async def test_citations_are_numbered_with_their_file_and_no_raw_id(
    browser: Browser, sample_db: Path, tmp_path: Path
) -> None:
    async with served(sample_db, tmp_path) as (client, read), hosted_view(browser, read, DARK) as host:
        found = await client.call_tool("search", {"query": "revenue growth", "limit": 3})
        ids = [hit["chunk_id"] for hit in found.structured_content["results"][:2]]
        cited = await call(client, host, "cite", {"chunk_ids": ids})
        items = host.view.locator("li.citation")
        await items.nth(1).wait_for()
        for n, citation in enumerate(cited["citations"], start=1):
            shown = await items.nth(n - 1).inner_text()
            assert shown.startswith(f"[{n}]")
            assert citation["document_uri"].rsplit("/", 1)[-1] in shown  # the file name
            assert not UUID.search(shown)
        assert not host.errors


async def test_passages_show_csv_and_pipe_tables_as_tables_with_the_query_terms_marked(
    browser: Browser, notes_db: Path, tmp_path: Path
) -> None:
    async with served(notes_db, tmp_path) as (client, read), hosted_view(browser, read, LIGHT) as host:
        await call(client, host, "search", {"query": "fuel log vessel cost", "limit": 1})
        hit = host.view.locator("li.hit")
        await hit.locator("table").wait_for()
        assert await hit.locator("th").all_inner_texts() == ["Vessel", "Fuel (t)", "Cost (USD)", "Port"]
        cost = hit.locator("tbody tr").first.locator("td").nth(2)
        assert await cost.inner_text() == "812000"
        assert await cost.evaluate("(td) => getComputedStyle(td).textAlign") == "right"
        assert await hit.locator("tbody td").first.evaluate("(td) => getComputedStyle(td).textAlign") == "left"
        marked = {m.lower() for m in await hit.locator("mark").all_inner_texts()}
        assert {"fuel", "vessel", "cost"} <= marked
        assert "fleet-fuel.txt" in await hit.locator(".where").inner_text()  # read through the host

        await call(client, host, "search", {"query": "training days per vessel", "limit": 1})
        await host.view.locator("li.hit th").first.wait_for()
        assert await host.view.locator("li.hit th").all_inner_texts() == ["Vessel", "Q1", "Q2", "Total days"]
        passage = host.view.locator("li.hit .passage")
        assert "|" not in await passage.inner_text() and "##" not in await passage.inner_text()
        assert await passage.locator("li").count() == 2  # the list as a list
        more = host.view.get_by_role("button", name="more")
        await more.click()
        assert "full" in (await passage.get_attribute("class") or "")
        assert not host.errors


async def test_values_printed_tables_and_code_read_like_a_notebook_cell(
    browser: Browser, sample_db: Path, tmp_path: Path
) -> None:
    async with served(sample_db, tmp_path) as (client, read), hosted_view(browser, read, LIGHT) as host:
        await call(client, host, "execute_code", {"code": RECORDS})
        value = host.view.locator("[data-part=Value]")
        await value.locator("table").wait_for()
        assert await value.locator("th").all_inner_texts() == ["vessel", "fuel_t", "cost"]
        assert await value.locator("td").nth(2).inner_text() == "812000.5"
        assert await value.locator("td").nth(2).evaluate("(td) => getComputedStyle(td).textAlign") == "right"
        printed = host.view.locator("[data-part=Printed] table")
        assert await printed.locator("th").all_inner_texts() == ["vessel", "fuel_t"]
        code = host.view.locator("details")
        assert await code.get_attribute("open") is not None  # shown, not collapsed
        assert "for" in await code.locator("pre.code span.k").all_inner_texts()  # highlighted
        assert not host.errors


async def chart_width(host: ViewHost) -> tuple[float, float]:
    """The chart's drawn width and the column's (the view's content box)."""
    await host.frame.wait_for_function("() => { const i = document.querySelector('figure.chart img'); "
                                       "return i && i.complete && i.naturalWidth > 0; }")  # fmt: skip
    return await host.in_view(
        "() => [document.querySelector('figure.chart img').getBoundingClientRect().width, "
        "document.getElementById('view').clientWidth]"
    )


async def test_charts_fit_the_column_in_the_host_colours_and_open_full_screen(
    browser: Browser, sample_db: Path, tmp_path: Path
) -> None:
    offered = {**DARK, "availableDisplayModes": ["inline", "fullscreen"], "displayMode": "inline"}
    async with served(sample_db, tmp_path) as (client, read), hosted_view(browser, read, offered) as host:
        await call(client, host, "execute_code", {"code": narrow_chart(120)})
        drawn, column = await chart_width(host)
        assert drawn >= 0.8 * column
        shot = Image.open(io.BytesIO(await host.view.locator("figure.chart img").screenshot())).convert("RGB")
        red, green, blue = shot.split()
        darkest = ImageChops.darker(ImageChops.darker(red, green), blue)  # each pixel's lowest channel
        white = sum(darkest.histogram()[236:])
        assert white / (shot.width * shot.height) < 0.02  # no white box in a dark host

        await host.view.get_by_role("button", name="Full screen").click()
        await host.page.wait_for_function("document.getElementById('app').classList.contains('fullscreen')")
        modes = [m["params"] for m in await host.messages() if m.get("method") == "ui/request-display-mode"]
        assert modes == [{"mode": "fullscreen"}]
        await host.frame.wait_for_function(
            "(w) => document.querySelector('figure.chart img').getBoundingClientRect().width > w", arg=drawn
        )

        await call(client, host, "execute_code", {"code": narrow_chart(1400)})
        await host.view.get_by_role("button", name="Full screen").click()  # back inline
        await host.page.wait_for_function("!document.getElementById('app').classList.contains('fullscreen')")
        drawn, column = await chart_width(host)
        assert drawn >= 0.6 * 1400 * 0.75  # a wide chart keeps readable text and scrolls, not shrunk to fit
        assert not host.errors
    async with served(sample_db, tmp_path) as (client, read), hosted_view(browser, read, LIGHT) as host:
        await call(client, host, "execute_code", {"code": narrow_chart(120)})
        await chart_width(host)
        assert await host.view.get_by_role("button", name="Full screen").count() == 0  # not offered


async def test_a_workbook_passage_reads_as_one_title_and_a_compact_table(
    browser: Browser, sample_db: Path, tmp_path: Path
) -> None:
    async with served(sample_db, tmp_path) as (client, read), hosted_view(browser, read, LIGHT) as host:
        found = await call(client, host, "search", {"query": "revenue by region Norway Denmark", "limit": 5})
        rank = next(i for i, h in enumerate(found["results"]) if h["document_title"] == "revenue-and-support-2025")
        hit = found["results"][rank]
        text = (await client.read_resource(f"documents:///{hit['document_id']}/content.txt")).contents[0].text
        title = "Halvorsen Marine Systems - revenue by region, 2025 (USD, unaudited)"
        assert text.count(title) == 1  # the merged title, once
        assert "| Region | Q1 2025 | Q2 2025 | Q3 2025 | Q4 2025 | Full year |" in text
        assert not re.search(r"\S {3,}\S|\S {2,}\|", text)  # no padded cells
        item = host.view.locator("li.hit").nth(rank)
        await item.locator("table").first.wait_for()
        await item.get_by_role("button", name="Open passage").click()
        marked = host.view.locator("#reader mark")
        await marked.wait_for()
        assert len(await marked.inner_text()) <= len(hit["content"]) + 10  # the passage, not the whole sheet
        assert not host.errors


@pytest.mark.parametrize("width", [1200, 400])
@pytest.mark.parametrize("theme", ["light", "dark"])
async def test_what_a_person_sees(browser: Browser, sample_db: Path, tmp_path: Path, width: int, theme: str) -> None:
    context = LIGHT if theme == "light" else DARK
    SHOTS.mkdir(parents=True, exist_ok=True)
    async with (
        served(sample_db, tmp_path) as (client, read),
        hosted_view(browser, read, context, width=width, height=1600) as host,
    ):
        shown = [
            ("search", {"query": "total revenue in the quarter", "limit": 3}, "li.hit table"),
            ("execute_code", {"code": REVENUE_CHART}, "figure.chart img"),
        ]
        for tool, arguments, ready in shown:
            await call(client, host, tool, arguments)
            await host.view.locator(ready).first.wait_for()
            await host.page.wait_for_function(SETTLED)  # the frame has the height the view asked for
            frame = host.page.locator("#app")
            await frame.screenshot(path=SHOTS / f"{tool}-{width}-{theme}.png")
            overflow = await host.in_view("() => document.body.scrollWidth - document.body.clientWidth")
            assert overflow <= 0  # nothing wider than the column: wide tables scroll in their own box
        assert not host.errors


HOSTILE = """print('| a | <img src=x onerror=alert(1)> |')
print('|---|---|')
print('| 1 | <script>alert(2)</script> |')
nested = []
for i in range(400):
    nested = [nested]
print('# <b>not a heading</b>')
nested
"""


async def test_hostile_output_is_only_ever_text(browser: Browser, sample_db: Path, tmp_path: Path) -> None:
    async with served(sample_db, tmp_path) as (client, read), hosted_view(browser, read, LIGHT) as host:
        ran = await call(client, host, "execute_code", {"code": HOSTILE})
        assert ran["success"], ran
        await host.view.locator("[data-part=Value]").wait_for()
        printed = host.view.locator("[data-part=Printed]")
        assert await printed.locator("th").all_inner_texts() == ["a", "<img src=x onerror=alert(1)>"]
        assert "<script>alert(2)</script>" in await printed.inner_text()
        assert await host.in_view("() => document.querySelectorAll('#view img, #view script, #view b').length") == 0
        assert (await host.view.locator("[data-part=Value] pre").inner_text()).startswith("[[[[")  # no table: as text
        assert not host.errors
