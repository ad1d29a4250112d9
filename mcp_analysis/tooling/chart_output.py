"""The charts of an `execute_code` result: each as a PNG image, its spec, and the resources that keep it.

A chart costs the result budget three ways: its PNG as image content (counted by its base64
length, what travels), its entry in the structured content (the spec with its inline rows)
and one line of text. When a result does not fit, `chart_forms` gives ever smaller forms of
the charts, in this order: the specs lose their inline rows (kept in the chart's `.json`
resource), then the PNGs are left out, last chart first (kept in its `.png` resource), then
the specs, last chart first. Title, size and the resource URIs always stay.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel, Field

from mcp_analysis.charts.models import Chart

PNG = "image/png"
NOT_KEPT = "charts.max_kept, charts.max_kept_mb"  # why a session drops charts, unless the server's memory is why

#: A chart's resource URI by extension ("png", "svg", "json"); None when the session did not keep it.
ChartResource = Callable[[str], str] | None


class ChartOut(BaseModel):
    index: int = Field(description="The chart's number in its session.")
    title: str | None = None
    width: int = Field(description="Pixels (PNG and SVG).")
    height: int
    rows: int = Field(0, description="Data rows in the spec.")
    image: bool = Field(True, description="The PNG is attached to this result as image content.")
    png_uri: str | None = Field(None, description="Resource with the PNG (none when the session did not keep it).")
    svg_uri: str | None = Field(None, description="Resource with the SVG.")
    spec_uri: str | None = Field(None, description="Resource with the whole spec, rows included.")
    spec: dict[str, Any] | None = Field(None, description="The Vega-Lite spec as rendered.")
    rows_omitted: bool = Field(False, description="The spec's inline rows were left out here (see spec_uri).")
    # Why the session did not keep it (its line says so); not part of the structured content.
    not_kept: str = Field(NOT_KEPT, exclude=True)

    @classmethod
    def of(cls, chart: Chart, resource: ChartResource, not_kept: str | None = None) -> ChartOut:
        return cls(
            **chart.model_dump(include={"index", "title", "width", "height", "rows"}),
            png_uri=resource("png") if resource else None,
            svg_uri=resource("svg") if resource else None,
            spec_uri=resource("json") if resource else None,
            spec=chart.spec,
            not_kept=not_kept or NOT_KEPT,
        )

    def line(self) -> str:
        """The chart as the model reads it: what it shows, whether it is attached, where it is kept."""
        name = f"chart {self.index}" + (f": {self.title}" if self.title else "")
        parts = [name, f"{self.width}×{self.height}"]
        if self.image:
            parts.append("PNG attached")
        elif self.png_uri:
            parts.append("PNG not attached (result budget)")
        if self.png_uri:
            parts.append(f"{self.png_uri} (also .svg, .json for the spec)")
        else:
            parts.append(f"not kept by the session ({self.not_kept})")
        if self.rows_omitted or (self.spec is None and self.rows):
            parts.append(f"{self.rows:,} data rows in the spec resource, not here")
        return " · ".join(parts)


def png_data(chart: Chart) -> str:
    """The PNG as image content carries it (base64): what it costs the budget."""
    return base64.b64encode(chart.png).decode("ascii")


def chart_forms(charts: list[ChartOut]) -> Iterator[list[ChartOut]]:
    """The charts, then ever smaller forms of them (see module docs); the last is the smallest."""
    current = list(charts)
    yield current
    if any(c.rows and c.spec is not None for c in current):
        current = [c.model_copy(update={"spec": without_rows(c.spec), "rows_omitted": bool(c.rows)}) for c in current]
        yield current
    for field, empty in (("image", False), ("spec", None)):
        for i in reversed(range(len(current))):
            if getattr(current[i], field) != empty:
                current = [*current[:i], current[i].model_copy(update={field: empty}), *current[i + 1 :]]
                yield current


def without_rows(spec: dict[str, Any] | None) -> dict[str, Any] | None:
    """`spec` with every inline dataset (`data.values`, `datasets`) emptied: its marks and encodings stay."""
    if spec is None:
        return None

    def strip(node: Any, key: str | None = None) -> Any:
        if isinstance(node, dict):
            if key == "data" and isinstance(node.get("values"), list):
                return {**node, "values": []}
            if key == "datasets":
                return {name: [] if isinstance(rows, list) else rows for name, rows in node.items()}
            return {k: strip(v, k) for k, v in node.items()}
        if isinstance(node, list):
            return [strip(item) for item in node]
        return node

    return strip(spec)
