"""`--charts DIR` of `exec` and `analyze`: each chart drawn by `await chart(spec)` as DIR/n.png and DIR/n.svg."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mcp_analysis.cli.output import err, escape_line
from mcp_analysis.errors import AnalysisError

if TYPE_CHECKING:
    from mcp_analysis.charts.models import Chart

ChartsOption = Annotated[
    Path | None,
    typer.Option(
        "--charts",
        metavar="DIR",
        help="Write each chart the code draws (`await chart(spec)`) as DIR/n.png and DIR/n.svg "
        "(n: its number in the session); DIR is created when missing.",
    ),
]


def save_charts(charts: Sequence[Chart], directory: Path | None) -> list[dict[str, Any]]:
    """Write `charts` into `directory` (when given) and say where on stderr; what `--json` lists of them."""
    listed = []
    for chart in charts:
        entry: dict[str, Any] = chart.summary() | {"spec": chart.spec}
        if directory is not None:
            entry["files"] = [str(path) for path in write_chart(chart, directory)]
            err.print(f"chart {chart.index}{title(chart)}: {escape_line(', '.join(entry['files']))}", highlight=False)
        listed.append(entry)
    if charts and directory is None:
        drawn = f"{len(charts)} chart{'s' if len(charts) > 1 else ''}"
        err.print(f"[dim]{drawn} drawn; --charts DIR writes them as PNG and SVG files[/dim]", highlight=False)
    return listed


def write_chart(chart: Chart, directory: Path) -> tuple[Path, Path]:
    png, svg = directory / f"{chart.index}.png", directory / f"{chart.index}.svg"
    try:
        directory.mkdir(parents=True, exist_ok=True)
        png.write_bytes(chart.png)
        svg.write_text(chart.svg, encoding="utf-8")
    except OSError as exc:
        raise AnalysisError(f"Cannot write chart {chart.index} into {directory} (--charts): {exc}") from None
    return png, svg


def title(chart: Chart) -> str:
    size = f"{chart.width}×{chart.height}"
    return f" ({escape_line(chart.title)}, {size})" if chart.title else f" ({size})"
