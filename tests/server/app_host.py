"""A real MCP Apps host for the view: the SDK's own `AppBridge`, in Debian's headless Chromium.

apps_host/ holds the host side as the ext-apps SDK's basic-host example builds it: host.js
(`AppBridge` + `PostMessageTransport` from `@modelcontextprotocol/ext-apps` 2.0.4, pinned in
its package-lock.json, bundled with esbuild into apps_host/build/ on first use, from the npm
registry) on one origin, and sandbox.html, the proxy that writes the view into an inner frame,
on a second origin served with the extension's default CSP. Both origins are answered by
Playwright's routing: nothing listens and nothing leaves the browser.

`chromium()` starts one browser (a module shares it); `hosted_view(...)` opens a fresh page
hosting the view, binds `resources/read` to `read_resource` (a real MCP client's) when the host
declares `serverResources`, waits for the handshake and yields a `ViewHost` to feed tool results
and look at what a person would see. No browser is downloaded: Chromium comes from the system
(`.ci/install-chromium`).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest
from playwright.async_api import Browser, Frame, FrameLocator, Page, Route, async_playwright

from mcp_analysis.ui import view_html

HOST_DIR = Path(__file__).with_name("apps_host")
HOST_ORIGIN = "http://127.0.0.1:9"
SANDBOX_ORIGIN = "http://127.0.0.2:9"
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


def host_script() -> bytes:
    """apps_host/build/host.js, bundled once (npm ci + esbuild) under a lock that parallel workers share."""
    bundle = HOST_DIR / "build" / "host.js"
    with open(HOST_DIR / "package.json", "rb") as manifest:
        fcntl.flock(manifest, fcntl.LOCK_EX)
        if not bundle.exists() or bundle.stat().st_mtime < (HOST_DIR / "host.js").stat().st_mtime:
            npm = shutil.which("npm")
            if npm is None:
                pytest.fail("npm is needed to bundle the MCP Apps host of the view's browser tests (apps_host/).")
            if not (HOST_DIR / "node_modules" / "@modelcontextprotocol" / "ext-apps").is_dir():
                subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=HOST_DIR, check=True, capture_output=True)
            esbuild = HOST_DIR / "node_modules" / ".bin" / "esbuild"
            built = ["host.js", "--bundle", "--minify", "--format=iife", "--outfile=build/host.js"]
            subprocess.run([str(esbuild), *built], cwd=HOST_DIR, check=True, capture_output=True)
    return bundle.read_bytes()


def view_with_csp(html: str) -> str:
    meta = f'<meta http-equiv="Content-Security-Policy" content="{DEFAULT_CSP}">'
    return html.replace("<head>", "<head>\n" + meta, 1)


@dataclass
class ViewHost:
    page: Page
    requests: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    @property
    def view(self) -> FrameLocator:
        return self.page.frame_locator("#app").frame_locator("iframe")

    @property
    def frame(self) -> Frame:
        """The view's own frame (inside the sandbox proxy's)."""
        return next(f for f in self.page.frames if f.parent_frame is not None and f.parent_frame.parent_frame)

    async def send(self, method: str, params: dict[str, Any]) -> None:
        """A notification from the host, through the bridge's own methods."""
        call = {
            "ui/notifications/tool-input": "sendToolInput",
            "ui/notifications/tool-result": "sendToolResult",
            "ui/notifications/host-context-changed": "sendHostContextChange",
        }[method]
        await self.page.evaluate("([c, p]) => window.bridge[c](p)", [call, params])

    async def show(self, arguments: dict[str, Any], result: dict[str, Any]) -> None:
        """What a host does after a tool call: the input, then the result."""
        await self.send("ui/notifications/tool-input", {"arguments": arguments})
        await self.send("ui/notifications/tool-result", result)

    async def messages(self) -> list[dict[str, Any]]:
        return await self.page.evaluate("window.hostLog")

    async def in_view(self, script: str, arg: Any = None) -> Any:
        return await self.frame.evaluate(script, arg)


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


def _server(script: bytes) -> Callable[[Route], Awaitable[None]]:
    """The two origins' pages: the host (page and bundle) and the sandbox proxy, under the CSP."""

    async def serve(route: Route) -> None:
        url = route.request.url
        if url == f"{HOST_ORIGIN}/host.html":
            await route.fulfill(body=(HOST_DIR / "host.html").read_bytes(), content_type="text/html")
        elif url == f"{HOST_ORIGIN}/host.js":
            await route.fulfill(body=script, content_type="text/javascript")
        elif url == f"{SANDBOX_ORIGIN}/sandbox.html":
            page = (HOST_DIR / "sandbox.html").read_bytes()
            await route.fulfill(body=page, content_type="text/html", headers={"Content-Security-Policy": DEFAULT_CSP})
        else:
            await route.abort()

    return serve


@asynccontextmanager
async def hosted_view(
    browser: Browser,
    read_resource: ReadResource,
    host_context: dict[str, Any],
    *,
    server_resources: bool = True,
    width: int = 800,
    height: int = 2400,
    below_fold: bool = False,
) -> AsyncIterator[ViewHost]:
    """A fresh page (its own context: no state shared with other tests) hosting the view.

    `below_fold` puts the view's frame under a spacer taller than the window: off-screen."""
    script = await anyio.to_thread.run_sync(host_script)  # built before the page waits for it
    context = await browser.new_context(viewport={"width": width, "height": height})
    try:
        await context.route("**/*", _server(script))
        page = await context.new_page()
        host = ViewHost(page)
        page.on("request", lambda request: host.requests.append(request.url))
        page.on("console", lambda m: host.errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda error: host.errors.append(str(error)))
        await page.expose_function("mcpReadResource", read_resource)
        await page.goto(f"{HOST_ORIGIN}/host.html")
        if below_fold:
            await page.evaluate("(h) => { document.getElementById('spacer').style.height = h + 'px'; }", height * 2)
        options = {
            "sandboxUrl": f"{SANDBOX_ORIGIN}/sandbox.html",
            "html": view_with_csp(view_html()),
            "hostContext": host_context,
            "serverResources": server_resources,
        }
        await page.evaluate("(options) => window.startHost(options)", options)
        yield host
    finally:
        await context.close()
