"""Charts through a real MCP client: image content, spec, resources that outlive the server, the budget."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from PIL import Image

from mcp_analysis.config import Settings
from mcp_analysis.server.app import create_server
from mcp_analysis.tooling.fitting import cost
from tests.conftest import make_settings
from tests.mcp_helpers import HOSTILE_SPECS as HOSTILE
from tests.mcp_helpers import NESTED_SPEC as NESTED
from tests.mcp_helpers import REVENUE_CHART, REVENUE_ROWS, http_server, text

pytestmark = pytest.mark.anyio


def decoded(png: bytes) -> Image.Image:
    image = Image.open(io.BytesIO(png))
    image.load()
    return image


def blank(image: Image.Image) -> bool:
    colours = image.convert("RGB").getcolors(maxcolors=1_000_000)
    return colours is None or len(colours) < 3 or max(colours)[0] > 0.99 * image.width * image.height


def images(result: Any) -> list[bytes]:
    return [base64.b64decode(c.data) for c in result.content if c.type == "image" and c.mime_type == "image/png"]


def result_cost(result: Any) -> int:
    return cost(result.structured_content, text(result)) + sum(len(c.data) for c in result.content if c.type == "image")


async def test_revenue_per_quarter_comes_back_as_a_png_and_a_spec_and_its_resource_outlives_the_server(
    sample_db: Path, tmp_path: Path
) -> None:
    env = {"MCP_ANALYSIS_SESSIONS__DIR": str(tmp_path / "sessions")}
    with http_server(sample_db, env=env, log_dir=tmp_path) as server:
        async with server.client() as client:
            ran = await client.call_tool("execute_code", {"code": REVENUE_CHART})
            assert not ran.is_error and ran.structured_content["success"], text(ran)
            [chart] = ran.structured_content["charts"]
            [png] = images(ran)
            handle = ran.structured_content["session"]
            first_read = await client.read_resource(chart["png_uri"])
    # The PNG: decodable, the size the result states, not a blank canvas.
    image = decoded(png)
    assert image.format == "PNG" and image.size == (chart["width"], chart["height"])
    assert chart["width"] > 480 and chart["height"] > 300  # the plot area plus its axes and title
    assert not blank(image)
    # The spec as rendered, with the rows the program found.
    assert chart["spec"]["data"]["values"] == REVENUE_ROWS and chart["spec"]["mark"] == "bar"
    assert chart["index"] == 1 and chart["title"] == "Revenue per quarter, 2025" and chart["image"] is True
    assert chart["png_uri"] == f"analysis://sessions/{handle}/charts/1.png"
    assert f"chart 1: Revenue per quarter, 2025 · {chart['width']}×{chart['height']} · PNG attached" in text(ran)
    assert base64.b64decode(first_read.contents[0].blob) == png

    # A new server process over the same sessions directory: the chart is read back byte for byte.
    with http_server(sample_db, env=env, log_dir=tmp_path) as server:
        async with server.client() as client:
            again = await client.read_resource(chart["png_uri"])
            svg = await client.read_resource(chart["svg_uri"])
            spec = await client.read_resource(chart["spec_uri"])
            state = json.loads((await client.read_resource(f"analysis://sessions/{handle}/state")).contents[0].text)
            more = await client.call_tool("execute_code", {"code": LINE_CHART, "session": handle})
    assert again.contents[0].mime_type == "image/png" and base64.b64decode(again.contents[0].blob) == png
    assert svg.contents[0].mime_type == "image/svg+xml" and "Revenue per quarter, 2025" in svg.contents[0].text
    assert json.loads(spec.contents[0].text)["data"]["values"] == REVENUE_ROWS
    assert [c["index"] for c in state["charts"]] == [1] and "png" not in state["charts"][0]  # listed, not inlined
    assert state["charts"][0]["resources"][0] == chart["png_uri"]
    # The variables came back too, and the next chart gets the session's next number.
    assert more.structured_content["stdout"] == "1\n", text(more)
    assert [c["index"] for c in more.structured_content["charts"]] == [2]


LINE_CHART = """
print(drawn['chart'])
await chart({'data': {'values': revenue}, 'mark': 'line', 'encoding': {
    'x': {'field': 'quarter', 'type': 'nominal'}, 'y': {'field': 'revenue', 'type': 'quantitative'}}})
"""


async def test_hostile_specs_are_refused_through_the_tool_with_a_clear_error_before_any_limit(
    sample_db: Path, tmp_path: Path
) -> None:
    settings = make_settings(sample_db, sessions={"dir": tmp_path / "sessions"})
    async with Client(create_server(config=settings)) as client:
        assert not (await client.call_tool("execute_code", {"code": NESTED + "kept = 41"})).is_error
        for name, (spec, message) in HOSTILE.items():
            result = await client.call_tool("execute_code", {"code": f"print('before')\nawait chart({spec})"})
            out = result.structured_content
            # A refusal is the code's own ValueError — not a stopped call (time, memory) and not a failed call.
            assert not result.is_error and not out["success"], name
            assert "ValueError: chart():" in out["error"] and message in out["error"], (name, out["error"])
            assert "TimeoutError" not in out["error"] and not out["state_restored"], name
            assert out["stdout"] == "before\n" and "charts" not in out and images(result) == [], name
        after = await client.call_tool("execute_code", {"code": "kept + 1"})
    assert after.structured_content["value"] == "42"


def charts_program(count: int, rows: int, printed: int = 0) -> str:
    return (
        f"print('x' * {printed})\n"
        f"data = [{{'day': i, 'value': (i * 37) % 101}} for i in range({rows})]\n"
        f"for n in range({count}):\n"
        "    await chart({'title': 'Series ' + str(n), 'data': {'values': data}, 'mark': 'point',\n"
        "                 'encoding': {'x': {'field': 'day', 'type': 'quantitative'},\n"
        "                              'y': {'field': 'value', 'type': 'quantitative'}}})\n"
    )


async def test_charts_fit_the_result_budget_rows_first_then_pngs_last_chart_first(
    sample_db: Path, tmp_path: Path
) -> None:
    budget = 30_000
    settings = make_settings(sample_db, sessions={"dir": tmp_path / "s"}, server={"max_result_chars": budget})
    async with Client(create_server(config=settings)) as client:
        # 1,000 rows per spec do not fit, the PNGs without them do: the rows leave, named by resource.
        rows = await client.call_tool("execute_code", {"code": charts_program(2, 1000)})
        # Three charts whose PNGs do not fit together: the last ones go first, each named by resource.
        pngs = await client.call_tool("execute_code", {"code": charts_program(3, 1000)})
        spec = await client.read_resource(pngs.structured_content["charts"][2]["spec_uri"])
        dropped = await client.read_resource(pngs.structured_content["charts"][2]["png_uri"])
    for result in (rows, pngs):
        assert not result.is_error and result_cost(result) <= budget
    charts = rows.structured_content["charts"]
    assert [c["rows_omitted"] for c in charts] == [True, True] and [c["image"] for c in charts] == [True, True]
    assert all(c["spec"]["data"]["values"] == [] and c["spec"]["mark"] == "point" for c in charts)
    assert len(images(rows)) == 2
    assert "1,000 data rows in the spec resource, not here" in text(rows)

    charts = pngs.structured_content["charts"]
    attached = [c["image"] for c in charts]
    assert attached[0] and attached == sorted(attached, reverse=True) and not attached[-1]  # last ones dropped
    assert len(images(pngs)) == attached.count(True)
    line = next(line for line in text(pngs).splitlines() if line.startswith("chart 5: Series 2"))
    assert "PNG not attached (result budget)" in line and charts[2]["png_uri"] in line
    assert len(json.loads(spec.contents[0].text)["data"]["values"]) == 1000  # the rows are in the resource
    assert decoded(base64.b64decode(dropped.contents[0].blob)).size == (charts[2]["width"], charts[2]["height"])


async def test_long_output_and_a_chart_share_the_budget(sample_db: Path, tmp_path: Path) -> None:
    budget = 40_000
    settings = make_settings(sample_db, sessions={"dir": tmp_path / "s"}, server={"max_result_chars": budget})
    async with Client(create_server(config=settings)) as client:
        result = await client.call_tool("execute_code", {"code": charts_program(1, 10, printed=45_000)})
    out = result.structured_content
    assert result_cost(result) <= budget
    assert out["truncated"] and out["full_output"] == f"analysis://sessions/{out['session']}/executions/1"
    assert out["charts"][0]["image"] and len(images(result)) == 1  # a small chart keeps its image
    assert len(out["stdout"]) > budget // 8  # and the output still shows its head and tail


async def test_a_session_keeps_its_latest_charts_and_says_what_became_of_older_ones(
    sample_db: Path, tmp_path: Path
) -> None:
    settings = make_settings(sample_db, sessions={"dir": tmp_path / "s"}, charts={"max_kept": 2})
    async with Client(create_server(config=settings)) as client:
        first = await client.call_tool("execute_code", {"code": charts_program(3, 5)})
        session = first.structured_content["session"]
        with pytest.raises(MCPError, match=r"keeps no chart 1: it keeps the latest 2 charts .*charts.max_kept"):
            await client.read_resource(f"analysis://sessions/{session}/charts/1.png")
        kept = await client.read_resource(f"analysis://sessions/{session}/charts/3.svg")
        await client.call_tool("new_analysis", {})
        with pytest.raises(MCPError, match="keeps no chart 3"):
            await client.read_resource(f"analysis://sessions/{session}/charts/3.png")
        later = await client.call_tool("execute_code", {"code": charts_program(1, 5)})
    assert [c["index"] for c in first.structured_content["charts"]] == [1, 2, 3]
    # The result still shows chart 1, which the session could not keep: it says so.
    assert first.structured_content["charts"][0]["png_uri"] is None and len(images(first)) == 3
    assert "chart 1: Series 0 · " in text(first) and "not kept by the session" in text(first)
    assert "Series 2" in kept.contents[0].text
    assert [c["index"] for c in later.structured_content["charts"]] == [4]  # numbered per session


async def test_variables_and_charts_together_stay_within_max_state_mb(sample_db: Path, tmp_path: Path) -> None:
    settings = make_settings(sample_db, sessions={"dir": tmp_path / "s"}, sandbox={"max_state_mb": 1})
    async with Client(create_server(config=settings)) as client:
        small = await client.call_tool("execute_code", {"code": charts_program(1, 20)})
        code = "big = 'x' * 850_000\n" + charts_program(1, 3000) + "data = None\n"  # `big` alone stays within 1 MB
        crowded = await client.call_tool("execute_code", {"code": code})
        held = await client.call_tool("execute_code", {"code": "len(big)"})
    assert small.structured_content["charts"][0]["png_uri"] is not None
    chart = crowded.structured_content["charts"][0]
    assert chart["png_uri"] is None and "not kept by the session" in text(crowded)  # no room next to `big`
    assert held.structured_content["value"] == "850000"  # the variables were kept, not the chart


def settings_with(sample_db: Path, tmp_path: Path) -> Settings:
    return make_settings(sample_db, sessions={"dir": tmp_path / "sessions"})


async def test_a_program_without_charts_returns_what_it_always_did(sample_db: Path, tmp_path: Path) -> None:
    async with Client(create_server(config=settings_with(sample_db, tmp_path))) as client:
        result = await client.call_tool("execute_code", {"code": "print('hi')\n6 * 7"})
        listed = await client.list_tools()
    assert [c.type for c in result.content] == ["text"] and "charts" not in result.structured_content
    schema = next(t for t in listed.tools if t.name == "execute_code").output_schema
    assert "charts" not in schema["properties"]  # tools/list stays as small as it was
