"""`exec --charts DIR` and `analyze --charts DIR` write each chart as n.png and n.svg; the agent returns them."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from PIL import Image
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from typer.testing import CliRunner

from mcp_analysis import AnalysisClient
from mcp_analysis.cli.app import app
from tests.conftest import make_settings, run_cli
from tests.mcp_helpers import REVENUE_CHART, REVENUE_ROWS

pytestmark = pytest.mark.anyio


def png_size(path: Path) -> tuple[int, int]:
    image = Image.open(io.BytesIO(path.read_bytes()))
    assert image.format == "PNG"
    return image.size


def test_exec_writes_each_chart_as_png_and_svg_and_says_where(sample_db: Path, tmp_path: Path) -> None:
    charts = tmp_path / "out" / "charts"  # created when missing
    ran = run_cli("--db", str(sample_db), "exec", REVENUE_CHART, "--json", "--charts", str(charts))
    assert ran.returncode == 0, ran.stderr
    assert sorted(p.name for p in charts.iterdir()) == ["1.png", "1.svg"]
    assert "chart 1 (Revenue per quarter, 2025, " in ran.stderr and str(charts / "1.png") in ran.stderr
    assert "Revenue per quarter, 2025" in (charts / "1.svg").read_text()
    out = json.loads(ran.stdout)  # stdout stays the result alone: the files are named on stderr
    assert "Q3 2025" in out["stdout"]
    [listed] = out["charts"]
    assert listed["spec"]["data"]["values"] == REVENUE_ROWS
    assert listed["files"] == [str(charts / "1.png"), str(charts / "1.svg")]
    assert png_size(charts / "1.png") == (listed["width"], listed["height"])


def test_exec_without_charts_dir_says_how_to_write_them(sample_db: Path) -> None:
    # In process (CliRunner): the subprocess run above already covers the real streams.
    unsaved = CliRunner().invoke(app, ["--db", str(sample_db), "exec", REVENUE_CHART])
    assert unsaved.exit_code == 0, unsaved.output
    assert "1 chart drawn; --charts DIR writes them" in unsaved.stderr and "Q3 2025" in unsaved.stdout


def test_exec_says_when_the_charts_directory_cannot_be_written(sample_db: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    ran = CliRunner().invoke(app, ["--db", str(sample_db), "exec", REVENUE_CHART, "--charts", str(blocker / "charts")])
    assert ran.exit_code == 1
    assert "error: Cannot write chart 1 into" in ran.stderr and "(--charts)" in ran.stderr


def charting_analyst(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """Chart revenue per quarter with code, then answer."""
    done = [p for m in messages for p in getattr(m, "parts", []) if isinstance(p, ToolReturnPart)]
    if not done:
        return ModelResponse(parts=[ToolCallPart("execute_code", {"code": REVENUE_CHART})])
    [chart] = done[0].content["charts"]
    return ModelResponse(parts=[TextPart(f"Revenue grew every quarter (chart {chart['chart']}).")])


async def test_analyze_returns_the_charts_with_the_answer(sample_db: Path, tmp_path: Path) -> None:
    settings = make_settings(sample_db, sessions={"dir": tmp_path / "s"})
    async with AnalysisClient(settings=settings, model=FunctionModel(charting_analyst)) as client:
        result = await client.analyze("How did revenue develop in 2025?")
        again = await client.analyze("And now without a chart?", model=FunctionModel(answers_only))
    assert result.answer == "Revenue grew every quarter (chart 1)."
    [chart] = result.charts
    assert chart.title == "Revenue per quarter, 2025" and chart.spec["data"]["values"] == REVENUE_ROWS
    assert Image.open(io.BytesIO(chart.png)).size == (chart.width, chart.height) and "<svg" in chart.svg
    assert again.charts == []  # each analysis returns its own charts


def answers_only(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    return ModelResponse(parts=[TextPart("No chart this time.")])


def test_the_analyze_command_writes_the_agents_charts(
    sample_db: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The one part that is not real here is the model: a scripted pydantic-ai FunctionModel stands in.
    monkeypatch.setattr("mcp_analysis.agent.client.resolve_model", lambda *_: FunctionModel(charting_analyst))
    monkeypatch.setenv("MCP_ANALYSIS_SESSIONS__DIR", str(tmp_path / "s"))
    charts = tmp_path / "charts"
    ran = CliRunner().invoke(app, ["--db", str(sample_db), "analyze", "Revenue?", "--charts", str(charts)])
    assert ran.exit_code == 0, ran.output
    assert "Revenue grew every quarter (chart 1)." in ran.stdout
    assert "chart 1 (Revenue per quarter, 2025, " in ran.stderr and str(charts / "1.svg") in ran.stderr
    assert png_size(charts / "1.png")[0] > 480 and "Q4 2025" in (charts / "1.svg").read_text()
