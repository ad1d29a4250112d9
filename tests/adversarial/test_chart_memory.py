"""Charts cannot exhaust the server's memory: specs are bounded in bytes, kept charts are counted.

Found by the fourth hostile round: `chart()` specs were bounded in values, not bytes (5,000 rows
x 36 fields of 1,000-character strings passed; two such calls at once took the server from 347 MB
to 1.6 GB, and the renderer died saying only "exit -6"), and the charts sessions keep were not
counted in `sessions.max_memory_mb` (30 sessions x ~5.5 MB of charts under a 64 MB budget:
+190 MB, none refused). Through real MCP clients, with small settings: a 64 KB spec bound, a 16 MB
memory budget. What the bound saves in RSS is measured by `bench/chart.py --attack`.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client

from mcp_analysis.server.app import create_server
from tests.conftest import make_settings
from tests.mcp_helpers import HttpServer, http_server, metric_samples, text

pytestmark = pytest.mark.anyio

MB = 1024 * 1024

# The attack's shape, smaller: 500 rows sharing one dict of 36 fields of 100 characters (1.9 MB as
# JSON, a few KB in the sandbox). `href` would be refused by the server before it walked the rows.
WIDE_ROWS = "row = {('k' + str(j)): 'x' * 99 + str(j % 10) for j in range(36)}\nrows = [row] * 500\n"
SPEC_KB = 64


def outcome(result: Any) -> str:
    out = result.structured_content
    return f"{out['stdout']}{out.get('error') or ''}"


async def test_a_spec_past_max_spec_kb_is_refused_in_the_sandbox_and_again_on_the_server(
    sample_db: Path, tmp_path: Path
) -> None:
    settings = make_settings(sample_db, sessions={"dir": tmp_path / "sessions"}, charts={"max_spec_kb": SPEC_KB})
    refused = f"more than {SPEC_KB} KB as JSON, data included (charts.max_spec_kb)"
    async with Client(create_server(config=settings)) as client:
        assert not (await client.call_tool("execute_code", {"code": WIDE_ROWS + "kept = 41"})).is_error
        # In the sandbox, before the spec leaves it: the server would have named `href` first.
        sandbox = await client.call_tool(
            "execute_code", {"code": "await chart({'data': {'values': rows}, 'href': 'x'})"}
        )
        # On the server: the host function as a state saved without the prelude calls it.
        server = await client.call_tool(
            "execute_code", {"code": "await _mcp_chart({'data': {'values': rows}, 'mark': 'point'})"}
        )
        within = await client.call_tool(
            "execute_code", {"code": "await chart({'data': {'values': rows[:10]}, 'mark': 'point'})\nkept + 1"}
        )
    for result in (sandbox, server):
        out = result.structured_content
        assert not out["success"] and f"ValueError: chart(): the spec is {refused}" in out["error"], outcome(result)
        assert "charts" not in out and not out["state_restored"]
    assert within.structured_content["value"] == "42" and len(within.structured_content["charts"]) == 1


async def test_a_renderer_that_runs_out_of_memory_says_so_and_names_its_setting(
    sample_db: Path, tmp_path: Path
) -> None:
    # A small spec whose render needs more than the renderer may use: a 20-million-character string
    # in a tooltip. Its JavaScript engine ends the process (SIGTRAP; the allocator's SIGABRT said
    # "exit -6"); the next chart starts a new renderer.
    charts = {"renderer_memory_mb": 1024, "renderer_idle_seconds": 5}
    settings = make_settings(sample_db, sessions={"dir": tmp_path / "sessions"}, charts=charts)
    huge = (
        "await chart({'data': {'values': [{'a': 1}]}, 'mark': 'point',"
        " 'transform': [{'calculate': \"pad('', 20000000, 'x')\", 'as': 's'}],"
        " 'encoding': {'x': {'field': 'a', 'type': 'quantitative'}, 'tooltip': {'field': 's'}}})"
    )
    async with Client(create_server(config=settings)) as client:
        died = await client.call_tool("execute_code", {"code": huge})
        after = await client.call_tool(
            "execute_code", {"code": "await chart({'data': {'values': [{'a': 1}]}, 'mark': 'point'})"}
        )
    error = died.structured_content["error"]
    assert "RuntimeError: chart(): the chart renderer ran out of memory" in error, error
    assert "it may use 1,024 MB, charts.renderer_memory_mb" in error and "exit -" not in error
    assert after.structured_content["success"] and len(after.structured_content["charts"]) == 1


# A chart that holds ~4.8 MB in the server (5,000 rows of 20 numbers as dicts; 1.4 MB as JSON) and
# renders at once (one bar: their mean).
HEAVY_CHART = (
    "rows = [{'f' + str(j): i + j / 8 for j in range(20)} for i in range(5000)]\n"
    "await chart({'data': {'values': rows}, 'mark': 'bar',\n"
    "             'transform': [{'aggregate': [{'op': 'mean', 'field': 'f0', 'as': 'm'}]}],\n"
    "             'encoding': {'y': {'field': 'm', 'type': 'quantitative'}}})\n"
    "rows = None"
)
CLIENTS = 5
BUDGET_MB = 16  # the least sessions.max_memory_mb: three such sessions
BUDGET = {"MCP_ANALYSIS_SESSIONS__MAX_MEMORY_MB": str(BUDGET_MB), "MCP_ANALYSIS_SANDBOX__MAX_STATE_MB": "4"}


async def draw_in_new_sessions(server: HttpServer) -> list[Any]:
    results = []
    for _ in range(CLIENTS):  # anonymous clients, one session each
        async with server.client() as client:
            result = await client.call_tool("execute_code", {"code": HEAVY_CHART})
            assert not result.is_error and result.structured_content["success"], text(result)
            results.append(result)
    return results


async def metrics(server: HttpServer) -> dict[str, float]:
    def fetch() -> str:
        return httpx2.get(f"http://127.0.0.1:{server.port}/metrics", timeout=10).text

    return metric_samples(await anyio.to_thread.run_sync(fetch))


async def test_kept_charts_of_sessions_that_live_only_in_memory_are_refused_past_the_budget(
    sample_db: Path, tmp_path: Path
) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "MCP_ANALYSIS_SESSIONS__PERSIST": "false", **BUDGET}
    with http_server(sample_db, env=env, log_dir=tmp_path) as server:
        results = await draw_in_new_sessions(server)
        held = (await metrics(server))["mcp_analysis_sessions_state_bytes"]
        first = results[0].structured_content["charts"][0]
        async with server.client() as client:  # what was kept is still there
            png = await client.read_resource(first["png_uri"])
    lines = [next(line for line in text(r).splitlines() if line.startswith("chart 1")) for r in results]
    kept = [r.structured_content["charts"][0]["png_uri"] is not None for r in results]
    assert kept[0] and not kept[-1], lines  # the first sessions keep theirs, the later ones are refused...
    refused = [line for line, k in zip(lines, kept, strict=True) if not k]
    assert all("not kept by the session (the server's memory for analysis sessions is full, sessions.max_memory_mb)"
               in line for line in refused), refused  # fmt: skip
    assert all(len(r.content) == 2 and r.content[1].type == "image" for r in results)  # ...but every PNG came back
    assert BUDGET_MB * MB / 2 < held <= BUDGET_MB * MB  # charts are counted, and within the budget
    assert base64.b64decode(png.contents[0].blob)[:4] == b"\x89PNG"


async def test_kept_charts_count_in_the_budget_so_idle_kept_sessions_leave_memory(
    sample_db: Path, tmp_path: Path
) -> None:
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "MCP_ANALYSIS_SESSIONS__DIR": str(tmp_path / "sessions"), **BUDGET}
    with http_server(sample_db, env=env, log_dir=tmp_path) as server:
        results = await draw_in_new_sessions(server)
        after = await metrics(server)
        async with server.client() as client:  # every chart was kept, and comes back from the store
            pngs = [await client.read_resource(r.structured_content["charts"][0]["png_uri"]) for r in results]
    assert after["mcp_analysis_session_memory_evictions_total"] >= CLIENTS - 3
    assert 0 < after["mcp_analysis_sessions_state_bytes"] <= BUDGET_MB * MB
    assert [base64.b64decode(p.contents[0].blob) for p in pngs] == [
        base64.b64decode(r.content[1].data) for r in results
    ]
