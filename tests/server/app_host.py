"""A real browser hosting the MCP App view: Debian's headless Chromium driven by Playwright.

`chromium()` starts one browser (a module shares it: a launch costs seconds, a page almost
nothing); `hosted_view(browser, read_resource, host_context)` opens app_host.html (the host
side of MCP Apps) in a fresh page with the view inside it under the restrictive default
CSP the extension prescribes, binds `resources/read` to `read_resource` (a real MCP
client's), waits for the view's handshake and yields a `ViewHost` to feed tool results and
look at what a person would see. No browser is downloaded: Chromium comes from the system
(`.ci/install-chromium`).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import Browser, FrameLocator, Page, async_playwright

from mcp_analysis.ui import view_html

HOST_PAGE = Path(__file__).with_name("app_host.html")
# The extension's default when a view declares no domains: nothing from outside, inline code only.
DEFAULT_CSP = (
    "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:; "
    "media-src data:; connect-src 'none'; frame-src 'none'; object-src 'none'; base-uri 'none'"
)
# Offline-safe flags for Debian's Chromium as root (see the machine notes): no background traffic.
CHROMIUM_FLAGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]

ReadResource = Callable[[str], Awaitable[dict[str, Any]]]


def chromium_path() -> str:
    found = os.environ.get("MCP_ANALYSIS_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not found:
        pytest.fail("Chromium is needed for the view's browser tests: run .ci/install-chromium (Debian's chromium).")
    return found


def view_with_csp(html: str) -> str:
    meta = f'<meta http-equiv="Content-Security-Policy" content="{DEFAULT_CSP}">'
    return html.replace("<head>", "<head>\n" + meta, 1)


@dataclass
class ViewHost:
    page: Page
    requests: list[str] = field(default_factory=list)

    @property
    def view(self) -> FrameLocator:
        return self.page.frame_locator("#app")

    async def send(self, method: str, params: dict[str, Any]) -> None:
        await self.page.evaluate("([m, p]) => window.sendToView(m, p)", [method, params])

    async def show(self, arguments: dict[str, Any], result: dict[str, Any]) -> None:
        """What a host does after a tool call: the input, then the result."""
        await self.send("ui/notifications/tool-input", {"arguments": arguments})
        await self.send("ui/notifications/tool-result", result)

    async def messages(self) -> list[dict[str, Any]]:
        return await self.page.evaluate("window.hostLog")

    async def in_view(self, script: str, arg: Any = None) -> Any:
        frame = next(f for f in self.page.frames if f.parent_frame is not None)
        return await frame.evaluate(script, arg)


@asynccontextmanager
async def chromium() -> AsyncIterator[Browser]:
    """Debian's Chromium, headless and offline-safe; closed (with every page) on exit."""
    executable = chromium_path()
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=executable, headless=True, args=CHROMIUM_FLAGS)
        try:
            yield browser
        finally:
            await browser.close()


@asynccontextmanager
async def hosted_view(
    browser: Browser, read_resource: ReadResource, host_context: dict[str, Any]
) -> AsyncIterator[ViewHost]:
    """A fresh page (its own context: no state shared with other tests) hosting the view."""
    context = await browser.new_context(viewport={"width": 800, "height": 2400})
    try:
        page = await context.new_page()
        host = ViewHost(page)
        page.on("request", lambda request: host.requests.append(request.url))
        await page.expose_function("mcpReadResource", read_resource)
        await page.set_content(HOST_PAGE.read_text())
        await page.evaluate(
            "([html, context]) => window.loadView(html, context)", [view_with_csp(view_html()), host_context]
        )
        await page.wait_for_function("window.hostLog.some(m => m.method === 'ui/notifications/initialized')")
        yield host
    finally:
        await context.close()
