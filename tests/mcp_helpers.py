"""Real MCP servers for tests: stdio subprocesses and `serve --http` on loopback."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.conftest import REPO
from tests.services import free_port, stop, wait_for_port


def stdio_params(db: Path, *args: str, env: dict[str, str] | None = None) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=["-m", "mcp_analysis", "--db", str(db), "serve", *args],
        env={**os.environ, **(env or {})},
        cwd=str(REPO),
    )


@dataclass
class HttpServer:
    url: str
    port: int
    process: subprocess.Popen[bytes]
    log: Path

    def client(self, token: str | None = None, **kwargs: Any) -> Client:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        http = httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(60.0))
        return Client(streamable_http_client(self.url, http_client=http), **kwargs)


@contextlib.contextmanager
def http_server(
    db: Path | str, *args: str, env: dict[str, str] | None = None, log_dir: Path, open_files: int | None = None
) -> Iterator[HttpServer]:
    """`serve --http` on a port of its own, stopped on the way out. `open_files`: the server's limit of
    open files, soft and hard, set by its own interpreter before it becomes the server (a preexec_fn
    would fork this process, which may have LanceDB loaded)."""
    port = free_port()
    log = log_dir / f"server-{port}.log"
    limited = (
        ["-c", "import os, resource, sys; resource.setrlimit(resource.RLIMIT_NOFILE, "
         f"({open_files}, {open_files})); os.execv(sys.executable, [sys.executable, *sys.argv[1:]])"]
        if open_files is not None
        else []
    )  # fmt: skip
    serve = ["-m", "mcp_analysis", "--db", str(db), "serve", "--http", "--port", str(port), *args]
    with open(log, "wb") as sink:
        process = subprocess.Popen(
            [sys.executable, *limited, *serve],
            cwd=REPO,
            env={**os.environ, **(env or {})},
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    try:
        try:
            wait_for_port(port, process, 60, "server")
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}:\n{log.read_text()}") from None
        yield HttpServer(f"http://127.0.0.1:{port}/mcp", port, process, log)
    finally:
        stop(process, timeout=15)


def text(result: Any) -> str:
    return "\n".join(getattr(block, "text", "") for block in result.content)


def metric_samples(body: str) -> dict[str, float]:
    """Prometheus text format -> {sample name with labels: value}."""
    out = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, _, value = line.rpartition(" ")
            out[name] = float(value)
    return out


#: A program that charts revenue per quarter from the sample's four quarterly reports.
REVENUE_CHART = """
import re
from pathlib import Path
revenue = []
for doc in await list_documents():
    if 'Quarterly Financial Report' not in doc['title']:
        continue
    text = Path('/documents/' + doc['id'] + '/content.txt').read_text()
    m = re.search(r'Total revenue\\s*\\|\\s*\\$([\\d,]+)', text)
    revenue.append({'quarter': doc['title'][-7:], 'revenue': int(m.group(1).replace(',', ''))})
revenue.sort(key=lambda r: r['quarter'])
print(revenue)
drawn = await chart({
    'title': 'Revenue per quarter, 2025',
    'data': {'values': revenue},
    'mark': 'bar',
    'width': 480,
    'height': 300,
    'encoding': {
        'x': {'field': 'quarter', 'type': 'nominal', 'sort': None},
        'y': {'field': 'revenue', 'type': 'quantitative', 'title': 'Revenue (USD)'},
    },
})
"""
#: What REVENUE_CHART finds in the sample reports.
REVENUE_ROWS = [
    {"quarter": "Q1 2025", "revenue": 12400000},
    {"quarter": "Q2 2025", "revenue": 13100000},
    {"quarter": "Q3 2025", "revenue": 14600000},
    {"quarter": "Q4 2025", "revenue": 15300000},
]


#: Chart specs a hostile program may pass to `chart()` (as code), and what the refusal says.
HOSTILE_SPECS = {
    "a URL data source": ("{'data': {'url': 'https://example.com/rows.csv'}, 'mark': 'bar'}", "spec.data.url"),
    "ten million points": (
        "{'data': {'values': [0] * 10_000_000}, 'mark': 'point'}",
        "holds 10,000,000 rows; a chart takes at most 5,000",
    ),
    "a 50 MB title": (
        "{'title': 'x' * 50_000_000, 'data': {'values': [{'a': 1}]}, 'mark': 'point'}",
        "spec.title is 50,000,000 characters",
    ),
    "deeply nested layers": ("nested(10_000)", "nested deeper than 24 levels"),
}
#: Defines `nested(depth)`, a spec nested `depth` layers deep, used by HOSTILE_SPECS.
NESTED_SPEC = """
def nested(depth):
    spec = {'mark': 'point', 'data': {'values': [{'a': 1}]}}
    for _ in range(depth):
        spec = {'layer': [spec]}
    return spec
"""
