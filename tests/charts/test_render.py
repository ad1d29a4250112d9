"""The renderer process: real vl-convert in a child, bounded in time, size and reach."""

from __future__ import annotations

import io
import json
import os
import random
import signal
import socket
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from PIL import Image

from mcp_analysis.charts.limits import ChartSettings
from mcp_analysis.charts.render import ChartRenderer, RendererTimeout, RendererUnavailable
from mcp_analysis.charts.spec import CheckedSpec, validate_spec
from mcp_analysis.errors import ChartError

pytestmark = pytest.mark.anyio


def points(n: int, **extra: Any) -> dict[str, Any]:
    rng = random.Random(7)
    rows = [{"x": i, "y": rng.gauss(0, 10) + i * 0.05, "g": "abc"[i % 3]} for i in range(n)]
    return {
        "title": f"{n:,} points",
        "data": {"values": rows},
        "mark": "line",
        "encoding": {
            "x": {"field": "x", "type": "quantitative"},
            "y": {"field": "y", "type": "quantitative"},
            "color": {"field": "g", "type": "nominal"},
        },
        "width": 600,
        "height": 300,
    } | extra


# A catastrophic regular expression: passes validation, and Vega would run it for minutes.
REDOS = {
    "data": {"values": [{"s": "a" * 40 + "!"}]},
    "transform": [{"calculate": "test(regexp('^(a+)+$'), datum.s)", "as": "m"}],
    "mark": "point",
    "encoding": {"x": {"field": "m", "type": "nominal"}},
}
TINY = {"data": {"values": [{"a": 1}]}, "mark": "point", "encoding": {"x": {"field": "a", "type": "quantitative"}}}
BAR = {"data": {"values": [{"a": 1}]}, "mark": "bar", "encoding": {"x": {"field": "a"}}}


@pytest.fixture
def renderer() -> Iterator[ChartRenderer]:
    made = ChartRenderer(ChartSettings(render_timeout=30))
    yield made
    made.close()


def checked(spec: dict[str, Any], settings: ChartSettings | None = None) -> CheckedSpec:
    return validate_spec(spec, settings or ChartSettings())


async def test_a_thousand_point_chart_renders_as_svg_and_a_palette_png_of_the_stated_size(
    renderer: ChartRenderer,
) -> None:
    chart = await renderer.render(checked(points(1000)))
    image = Image.open(io.BytesIO(chart.png))
    assert image.format == "PNG" and image.mode == "P"  # palette: a fraction of RGBA's bytes
    assert image.size == (chart.width, chart.height)
    assert 600 <= chart.width <= 800 and 300 <= chart.height <= 450  # the plot plus axes, title, legend
    colours = image.convert("RGB").getcolors(maxcolors=100_000)
    assert colours is not None and len(colours) > 20  # lines, antialiasing and text, not a blank canvas
    assert chart.svg.startswith("<svg") and f'width="{chart.width}"' in chart.svg
    assert "1,000 points" in chart.svg
    assert len(chart.png) < 100_000


async def test_the_renderer_runs_in_its_own_process_and_the_server_never_loads_it(renderer: ChartRenderer) -> None:
    await renderer.render(checked(TINY))
    assert renderer.pid is not None and renderer.pid != os.getpid()
    assert "vl_convert" not in sys.modules


async def test_one_process_serves_many_charts(renderer: ChartRenderer) -> None:
    for _ in range(3):
        await renderer.render(checked(TINY))
    assert renderer.starts == 1 and renderer.renders == 3


@pytest.fixture
def listener() -> Iterator[socket.socket]:
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    server.settimeout(0.5)
    yield server
    server.close()


async def test_external_data_is_refused_by_the_renderer_too_and_nothing_connects(
    renderer: ChartRenderer, listener: socket.socket
) -> None:
    port = listener.getsockname()[1]
    spec = {"data": {"url": f"http://127.0.0.1:{port}/rows.json"}, "mark": "point"}
    bypass = CheckedSpec(text=json.dumps(spec), spec=spec, rows=0, views=1, title=None)  # as if validation had a hole
    with pytest.raises(ChartError, match=rf"External data url not allowed: http://127.0.0.1:{port}/rows.json"):
        await renderer.render(bypass)
    with pytest.raises(TimeoutError):
        listener.accept()  # nobody tried


async def test_a_render_past_its_time_is_stopped_and_the_next_chart_renders(renderer: ChartRenderer) -> None:
    await renderer.render(checked(TINY))  # started and warm
    renderer.settings = ChartSettings(render_timeout=3)
    first = renderer.pid
    with pytest.raises(RendererTimeout, match=r"longer than 3 s \(charts.render_timeout\) and was stopped"):
        await renderer.render(checked(REDOS))
    assert renderer.pid is None and first is not None
    with pytest.raises(ProcessLookupError):
        os.kill(first, 0)  # killed and reaped
    renderer.settings = ChartSettings(render_timeout=30)
    assert (await renderer.render(checked(TINY))).width > 0
    assert renderer.starts == 2


@pytest.mark.parametrize(
    ("sig", "said"),
    [
        # What the kernel's OOM killer sends, or anyone else.
        (signal.SIGKILL, r"was killed \(SIGKILL: the machine ran out of memory, or it was stopped from outside; "
         r"its own limit is charts.renderer_memory_mb, 1,536 MB\); the chart was not drawn"),
        # How the renderer ends when an allocation fails under its cap (it said "exit -6").
        (signal.SIGABRT, r"ran out of memory \(SIGABRT: it may use 1,536 MB, charts.renderer_memory_mb\)"),
        (signal.SIGSEGV, r"crashed \(SIGSEGV\); the chart was not drawn"),
    ],
)  # fmt: skip
async def test_a_renderer_that_dies_mid_render_says_why_and_is_replaced(
    renderer: ChartRenderer, sig: signal.Signals, said: str
) -> None:
    await renderer.render(checked(TINY))
    pid = renderer.pid
    assert pid is not None

    async def kill_soon() -> None:
        await anyio.sleep(0.5)
        os.kill(pid, sig)

    async with anyio.create_task_group() as tg:
        tg.start_soon(kill_soon)
        with pytest.raises(RendererUnavailable, match=said) as failed:
            await renderer.render(checked(REDOS))
    assert "exit -" not in str(failed.value)
    assert (await renderer.render(checked(TINY))).width > 0


async def test_a_chart_larger_than_allowed_is_refused_before_it_is_rasterized(renderer: ChartRenderer) -> None:
    with pytest.raises(ChartError, match=r"would be \d+x\d+ pixels; at most 2000x2000 \(charts.max_size_px\)"):
        await renderer.render(checked(points(10, width=5000)))
    many = {"data": {"values": [{"c": f"category {i}"} for i in range(150)]}, "mark": "bar"}
    many["encoding"] = {"x": {"field": "c", "type": "nominal"}}  # 150 bands of 20 px each: the data decides
    with pytest.raises(ChartError, match=r"pixels; at most 2000x2000"):
        await renderer.render(checked(many))
    # Past 1e21 Vega writes the size in exponent notation ("1e+21"): the same refusal, not "an SVG
    # without a size" (eighth hostile round).
    for huge, shown in ((1e21, "1e+21x"), (1e300, "1e+300x")):
        with pytest.raises(ChartError, match=r"at most 2000x2000 \(charts.max_size_px\)") as refused:
            await renderer.render(checked({**BAR, "width": huge}))
        assert f"would be {shown}" in str(refused.value), refused.value
    # Steps so large that Vega writes a size in exponent notation, NaN or Infinity: still refused
    # by the setting (NaN and Infinity as a size that is not finite).
    messages = []
    for step in (1e308, -1e308, 1e300):
        with pytest.raises(ChartError, match=r"at most 2000x2000 \(charts.max_size_px\)") as refused:
            await renderer.render(checked({**BAR, "width": {"step": step}}))
        messages.append(str(refused.value))
    assert any("has no finite size" in m for m in messages), messages
    assert (await renderer.render(checked(TINY))).width > 0


async def test_a_png_over_its_byte_limit_is_refused() -> None:
    settings = ChartSettings(max_png_bytes=10_000)
    small = ChartRenderer(settings)
    try:
        with pytest.raises(ChartError, match=r"PNG is [\d,]+ bytes; at most 10,000 \(charts.max_png_bytes\)"):
            await small.render(checked(points(1000), settings))
    finally:
        small.close()


async def test_a_spec_vega_lite_rejects_comes_back_as_one_clean_line(renderer: ChartRenderer) -> None:
    spec = {"data": {"values": [{"a": 1}]}, "mark": "bar", "encoding": {"x": {"field": "a", "type": "bogus"}}}
    with pytest.raises(ChartError, match=r"could not be drawn: .*Invalid field type") as failed:
        await renderer.render(checked(spec))
    assert "\n" not in str(failed.value) and " at " not in str(failed.value).split("drawn:")[1]


async def test_an_idle_renderer_exits_and_gives_its_memory_back() -> None:
    idle = ChartRenderer(ChartSettings(renderer_idle_seconds=0.5))
    try:
        await idle.render(checked(TINY))
        pid = idle.pid
        assert pid is not None
        for _ in range(200):  # wait for the idle timer (bounded)
            if idle.pid is None:
                break
            await anyio.sleep(0.1)
        assert idle.pid is None
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
        assert (await idle.render(checked(TINY))).width > 0  # and starts again when needed
        assert idle.starts == 2
    finally:
        idle.close()


async def test_the_renderer_process_runs_under_its_memory_cap(renderer: ChartRenderer) -> None:
    await renderer.render(checked(TINY))
    limits = Path(f"/proc/{renderer.pid}/limits").read_text()
    line = next(row for row in limits.splitlines() if row.startswith("Max data size"))
    assert line.split()[3:5] == [str(1536 * 1024 * 1024)] * 2  # charts.renderer_memory_mb, soft and hard
