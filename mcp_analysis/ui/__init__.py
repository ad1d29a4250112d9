"""The MCP App view shipped with the package: one self-contained HTML file, no network.

`ui://mcp-analysis/analysis` is what execute_code, search and cite point hosts at
(`_meta.ui.resourceUri`) when they declare the MCP Apps extension; `view_html()` is its
text, served by `resources/read` as `text/html;profile=mcp-app`. analysis.html states
the result shapes it renders and the messages it exchanges with the host.
"""

from __future__ import annotations

from functools import cache
from importlib import resources

VIEW_URI = "ui://mcp-analysis/analysis"
VIEW_MIME = "text/html;profile=mcp-app"
VIEW_FILE = "analysis.html"


@cache
def view_html() -> str:
    return resources.files(__package__).joinpath(VIEW_FILE).read_text(encoding="utf-8")
