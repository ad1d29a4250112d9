"""`await chart(spec)` inside execute_code: validate, render, and keep the chart for the call's result.

A refused spec or a failed render is an ordinary exception in the sandboxed code's
traceback (ValueError for a spec to fix, TimeoutError or RuntimeError for the renderer),
so the code can catch it and the call's other output is kept. Charts drawn by one call
are collected here until the session takes them for that call's result; the sandbox
gets back a small dict describing the chart (monty passes plain values only).

`CHART_PRELUDE` (fed to every fresh interpreter with the presentation prelude) defines
`chart()` in the sandbox: it counts the spec's data rows there, so ten million points are
refused at once instead of being copied to the server first (1 M rows took 1.4 s to copy;
10 M exhausted the interpreter's memory on the way), then its size as JSON, value by value
and stopping at `charts.max_spec_kb` (5,000 rows of 36 fields of 1,000 characters, shared in
the sandbox, were 180 MB on the server: two at once took it from 347 MB to 1.6 GB), then
calls the host's `_mcp_chart`. The sandbox's count is a lower bound (a character counts one
byte), so it never refuses what the host accepts. The host validates everything again,
exactly: an interpreter state saved without the prelude calls the host's `chart` directly.
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
    limits = await _mcp_chart_limits()
    most = limits["max_rows"]
    rows = _chart_rows(spec)
    if rows > most:
        raise ValueError("chart(): the data holds " + format(rows, ",") + " rows; a chart takes at most "
                         + format(most, ",") + " (charts.max_rows). Aggregate first (a sum or mean per group "
                         + "in Python), or sample the rows.")
    _chart_size(spec, limits)
    return await _mcp_chart(spec)


def _chart_size(spec, limits):
    most = limits["max_spec_kb"] * 1024
    longest = limits["max_text_chars"]
    size = 0
    stack = [spec]
    while stack:
        node = stack.pop()
        if isinstance(node, str):
            if len(node) > longest:
                raise ValueError("chart(): the text at " + _chart_where(spec, node) + " is " + format(len(node), ",")
                                 + " characters; at most " + format(longest, ",")
                                 + " (charts.max_text_chars). Shorten titles and labels.")
            size += len(node) + 2
        elif isinstance(node, (dict, list, tuple)):
            size += len(node) + 1 if node else 2
            if size + len(node) > most:
                size += len(node)
            elif isinstance(node, dict):
                for key, value in node.items():
                    size += len(key) + 3 if isinstance(key, str) else 3
                    stack.append(value)
            else:
                stack.extend(node)
        elif isinstance(node, bool) or node is None:
            size += 4
        elif isinstance(node, (int, float)):
            size += len(str(node))
        else:
            size += 1
        if size > most:
            raise ValueError("chart(): the spec is more than " + format(most // 1024, ",") + " KB as JSON, data "
                             + "included (charts.max_spec_kb). Draw fewer rows or shorter values: aggregate or "
                             + "sample first, and keep only the fields the chart uses.")


def _chart_where(spec, target):
    stack = [(spec, "spec")]
    while stack:
        node, path = stack.pop()
        if node is target:
            return path
        if isinstance(node, dict):
            for key, value in node.items():
                stack.append((value, path + "." + str(key)))
        elif isinstance(node, (list, tuple)):
            for i, item in enumerate(node):
                stack.append((item, path + "[" + str(i) + "]"))
    return "spec"


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
    def __init__(self, settings: ChartSettings, party: str = "") -> None:
        self.settings = settings
        self.party = party  # whose turn at the shared renderer this drawer's charts take (charts/turns.py)
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
            rendered = await shared_renderer(self.settings).render(checked, self.party)
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
        await anyio.to_thread.run_sync(chart.measure)  # what keeping it costs, measured off the event loop
        self._drawn.append(chart)
        return chart.summary()

    async def limits(self) -> dict[str, Any]:
        """What the prelude's chart() checks before the spec leaves the sandbox."""
        settings = self.settings
        return {
            "max_rows": settings.max_rows,
            "max_spec_kb": settings.max_spec_kb,
            "max_text_chars": settings.max_text_chars,
        }

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
