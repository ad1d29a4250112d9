"""`await chart(spec)` inside execute_code: validate, render, and keep the chart for the call's result.

A refused spec or a failed render is an ordinary exception in the sandboxed code's
traceback (ValueError for a spec to fix, TimeoutError or RuntimeError for the renderer),
so the code can catch it and the call's other output is kept. Charts drawn by one call
are collected here until the session takes them for that call's result; the sandbox
gets back a small dict describing the chart (monty passes plain values only).

`CHART_PRELUDE` (fed to every fresh interpreter with the presentation prelude) defines
`chart()` in the sandbox: it counts the spec's data rows there, so ten million points are
refused at once instead of being copied to the server first (1 M rows took 1.4 s to copy;
10 M exhausted the interpreter's memory on the way), then calls the host's `_mcp_chart`.
The host validates everything again: an interpreter state saved without the prelude calls
the host's `chart` directly.
"""

from __future__ import annotations

from typing import Any

import anyio

from mcp_analysis.charts.limits import ChartSettings
from mcp_analysis.charts.models import Chart
from mcp_analysis.charts.render import RendererTimeout, RendererUnavailable, shared_renderer
from mcp_analysis.charts.spec import validate_spec
from mcp_analysis.errors import ChartError

CHART_PRELUDE = '''

async def chart(spec):
    """chart(spec) -> dict: draw a Vega-Lite chart (rows inline in data.values) into this call's result."""
    most = (await _mcp_chart_limits())["max_rows"]
    rows = _chart_rows(spec)
    if rows > most:
        raise ValueError("chart(): the data holds " + format(rows, ",") + " rows; a chart takes at most "
                         + format(most, ",") + " (charts.max_rows). Aggregate first (a sum or mean per group "
                         + "in Python), or sample the rows.")
    return await _mcp_chart(spec)


def _chart_rows(spec):
    rows = 0
    views = [spec]
    seen = 0
    while views and seen < 1000:
        view = views.pop()
        seen += 1
        if not isinstance(view, dict):
            continue
        data = view.get("data")
        if isinstance(data, dict) and isinstance(data.get("values"), list):
            rows += len(data["values"])
        datasets = view.get("datasets")
        if isinstance(datasets, dict):
            for values in datasets.values():
                if isinstance(values, list):
                    rows += len(values)
        for key in ("layer", "concat", "hconcat", "vconcat"):
            if isinstance(view.get(key), list):
                views.extend(view[key])
        if isinstance(view.get("spec"), dict):
            views.append(view["spec"])
    return rows
'''


class ChartDrawer:
    def __init__(self, settings: ChartSettings) -> None:
        self.settings = settings
        self._drawn: list[Chart] = []
        self._asked = 0  # chart() calls in this execute_code call, counted before they run (gather)
        self._first = 1  # the number the call's first chart gets (charts are numbered per session)

    async def chart(self, spec: Any = None) -> dict[str, Any]:
        """chart(spec: dict) -> dict: draw a Vega-Lite chart (inline data) into this call's result."""
        self._asked += 1
        if self._asked > self.settings.max_per_call:
            raise ValueError(
                f"chart(): one execute_code call may draw at most {self.settings.max_per_call} charts "
                "(charts.max_per_call); draw the rest in the next call."
            )
        try:
            checked = await anyio.to_thread.run_sync(validate_spec, spec, self.settings)
            rendered = await shared_renderer(self.settings).render(checked)
        except RendererTimeout as exc:
            raise TimeoutError(str(exc)) from None
        except RendererUnavailable as exc:
            raise RuntimeError(str(exc)) from None
        except ChartError as exc:
            raise ValueError(str(exc)) from None
        chart = Chart(
            index=self._first + len(self._drawn),
            title=checked.title,
            spec=checked.spec,
            rows=checked.rows,
            width=rendered.width,
            height=rendered.height,
            png=rendered.png,
            svg=rendered.svg,
            render_ms=rendered.render_ms,
        )
        self._drawn.append(chart)
        return chart.summary()

    async def limits(self) -> dict[str, Any]:
        """What the prelude's chart() checks before the spec leaves the sandbox."""
        return {"max_rows": self.settings.max_rows}

    def functions(self) -> dict[str, Any]:
        """The host functions: `_mcp_*` for the prelude, `chart` for a state saved without it."""
        return {"_mcp_chart": self.chart, "_mcp_chart_limits": self.limits, "chart": self.chart}

    def begin_call(self, first: int = 1) -> None:
        """Forget charts a cancelled call left behind: what follows belongs to a new call, whose
        first chart is number `first` (the session's next)."""
        self._drawn = []
        self._asked = 0
        self._first = first

    def take(self) -> list[Chart]:
        """The charts drawn since `begin_call`, in order (and forget them)."""
        charts, self._drawn, self._asked = self._drawn, [], 0
        return charts
