"""`await chart(spec)` inside execute_code, through a real session, real workers and the real renderer."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from PIL import Image

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.session.analysis import AnalysisSession
from tests.conftest import make_settings
from tests.mcp_helpers import HOSTILE_SPECS as HOSTILE
from tests.mcp_helpers import NESTED_SPEC as NESTED
from tests.mcp_helpers import REVENUE_CHART as SHARED_REVENUE_CHART

pytestmark = pytest.mark.anyio

REVENUE_CHART = SHARED_REVENUE_CHART + "print(drawn)\n"  # the test reads the summary it printed


async def test_a_program_charts_revenue_per_quarter_from_the_sample_reports(kb: KnowledgeBase) -> None:
    async with AnalysisSession(kb) as session:
        result = await session.execute(REVENUE_CHART)
    assert result.success, result.error
    [chart] = result.charts
    assert chart.index == 1 and chart.title == "Revenue per quarter, 2025"
    assert [row["quarter"] for row in chart.spec["data"]["values"]] == ["Q1 2025", "Q2 2025", "Q3 2025", "Q4 2025"]
    assert {"quarter": "Q3 2025", "revenue": 14600000} in chart.spec["data"]["values"]
    image = Image.open(io.BytesIO(chart.png))
    assert image.format == "PNG" and image.size == (chart.width, chart.height)
    colours = image.convert("RGB").getcolors(maxcolors=100_000)
    assert colours is not None and len(colours) > 5  # bars, axes and text on white
    assert max(colours)[0] < chart.width * chart.height  # not one flat colour
    assert "Revenue per quarter, 2025" in chart.svg and "Q4 2025" in chart.svg
    # The code got a plain summary back, and printed it.
    assert f"'chart': 1, 'title': 'Revenue per quarter, 2025', 'width': {chart.width}" in result.stdout
    assert "'rows': 4" in result.stdout
    # Charts are not part of the dumped result: every front door shows results exactly as before.
    assert "charts" not in result.model_dump()


async def test_hostile_specs_are_refused_inside_the_code_and_the_session_goes_on(kb: KnowledgeBase) -> None:
    async with AnalysisSession(kb) as session:
        setup = await session.execute(NESTED + "kept = 41")
        assert setup.success, setup.error
        for name, (spec, message) in HOSTILE.items():
            result = await session.execute(
                f"try:\n    await chart({spec})\nexcept ValueError as exc:\n    print('refused:', exc)\n"
            )
            assert result.success, f"{name}: {result.error}"
            assert message in result.stdout, f"{name}: {result.stdout}"
            assert result.charts == []
        after = await session.execute("kept + 1")
    assert after.value == "42"


async def test_a_chart_error_is_a_normal_traceback_and_the_calls_other_output_is_kept(kb: KnowledgeBase) -> None:
    code = (
        "print('before')\n"
        "await chart({'data': {'values': [{'a': 1}]}, 'mark': 'point'})\n"
        "await chart({'data': {'values': [{'a': 1}]}, 'mark': 'image'})\n"
        "print('never')\n"
    )
    async with AnalysisSession(kb) as session:
        result = await session.execute(code)
    assert not result.success
    assert result.stdout == "before\n"
    assert "line 3" in result.error and "ValueError: chart(): mark 'image' at spec.mark is not allowed" in result.error
    assert [c.index for c in result.charts] == [1]  # the chart drawn before the error stays with the result


async def test_charts_belong_to_the_call_that_drew_them(kb: KnowledgeBase) -> None:
    spec = "{'data': {'values': [{'a': 1}, {'a': 2}]}, 'mark': 'point', 'encoding': {'x': {'field': 'a'}}}"
    async with AnalysisSession(kb) as session:
        first = await session.execute(f"await chart({spec})\nawait chart({spec})\nNone")
        second = await session.execute("1 + 1")
    assert first.success, first.error
    assert [c.index for c in first.charts] == [1, 2]
    assert second.charts == []


async def test_a_call_draws_at_most_max_per_call_charts(sample_db: Path, tmp_path: Path) -> None:
    settings = make_settings(sample_db, sessions={"dir": tmp_path / "s"}, charts={"max_per_call": 2})
    kb = await KnowledgeBase.open(settings)
    spec = "{'data': {'values': [{'a': 1}]}, 'mark': 'point'}"
    try:
        async with AnalysisSession(kb) as session:
            result = await session.execute("\n".join([f"await chart({spec})"] * 3))
        async with AnalysisSession(kb) as session:
            calls = ", ".join([f"chart({spec})"] * 3)
            together = await session.execute(f"import asyncio\nawait asyncio.gather({calls})")
    finally:
        await kb.close()
    assert "at most 2 charts (charts.max_per_call)" in result.error
    assert len(result.charts) == 2
    assert "at most 2 charts (charts.max_per_call)" in together.error  # counted before they run
    assert len(together.charts) <= 2


async def test_a_chart_that_renders_too_long_is_a_timeout_error_in_the_code(sample_db: Path, tmp_path: Path) -> None:
    # The ReDoS spins its renderer to the timeout; the chart after it (a fresh renderer started, then a
    # render) takes ~0.5 s, so 5 s still leaves it room on a loaded machine.
    settings = make_settings(sample_db, sessions={"dir": tmp_path / "s"}, charts={"render_timeout": 5})
    kb = await KnowledgeBase.open(settings)
    redos = (
        "{'data': {'values': [{'s': 'a' * 40 + '!'}]}, 'mark': 'point', 'encoding': {'x': {'field': 'm'}},"
        " 'transform': [{'calculate': \"test(regexp('^(a+)+$'), datum.s)\", 'as': 'm'}]}"
    )
    try:
        async with AnalysisSession(kb) as session:
            slow = await session.execute(
                f"try:\n    await chart({redos})\nexcept TimeoutError as exc:\n    print('stopped:', exc)\n"
            )
            fine = await session.execute("await chart({'data': {'values': [{'a': 1}]}, 'mark': 'point'})")
    finally:
        await kb.close()
    assert slow.success, slow.error
    assert "stopped: chart(): rendering took longer than 5 s (charts.render_timeout)" in slow.stdout
    assert fine.success and len(fine.charts) == 1
