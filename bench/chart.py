"""Charts: render time, sizes and memory of `await chart(spec)`, and the renderer choice measured.

Renders a 1,000-point line chart (3 series, 600x300) through `ChartRenderer` (vl-convert in a
child process, as the server does) and, as the baseline doing the same work, with vl-convert
loaded into this process; prints p50/p95, the PNG's bytes (palette) against vl-convert's RGBA
PNG, the SVG's size, the memory each way costs, and how many of a set of specs written the
way models write them each renderer draws. With matplotlib importable
(`uv run --with matplotlib python bench/chart.py`) it is measured too: the same chart drawn
directly, and its fidelity through the simple Vega-Lite translation a server would have to
write for it. `--server` also starts a real server (`--sample serve --http`) and reports its
RSS idle, after a chart, and after the renderer's idle exit. Then the view's size.

    .venv/bin/python bench/chart.py [--renders 30] [--server]
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
import os
import random
import socket
import statistics
import sys
import tempfile
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import anyio
import psutil
from _machine import describe, machine

from mcp_analysis.charts.limits import ChartSettings
from mcp_analysis.charts.render import ChartRenderer
from mcp_analysis.charts.spec import validate_spec
from mcp_analysis.ui import view_html

MB = 1024 * 1024
REVENUE = [12.4, 13.1, 14.6, 15.3]
Q = [{"quarter": f"Q{i} 2025", "revenue": r, "segment": s} for i, r in enumerate(REVENUE, 1) for s in "ab"]
X_Y = {"x": {"field": "quarter", "type": "nominal"}, "y": {"field": "revenue", "type": "quantitative"}}
MODEL_SPECS: dict[str, dict[str, Any]] = {
    "bar": {"data": {"values": Q}, "mark": "bar", "encoding": X_Y},
    "line by series": {"data": {"values": Q}, "mark": "line", "encoding": X_Y | {"color": {"field": "segment"}}},
    "points": {"data": {"values": Q}, "mark": "point", "encoding": X_Y},
    "bars with labels (layer)": {
        "data": {"values": Q}, "encoding": X_Y,
        "layer": [{"mark": "bar"}, {"mark": {"type": "text", "dy": -6}, "encoding": {"text": {"field": "revenue"}}}],
    },
    "sum per quarter (aggregate)": {
        "data": {"values": Q}, "mark": "bar",
        "encoding": {"x": X_Y["x"], "y": {"aggregate": "sum", "field": "revenue", "type": "quantitative"}},
    },
    "stacked bars": {"data": {"values": Q}, "mark": "bar", "encoding": X_Y | {"color": {"field": "segment"}}},
    "pie": {"data": {"values": Q}, "mark": "arc",
            "encoding": {"theta": {"field": "revenue", "type": "quantitative"}, "color": {"field": "quarter"}}},
    "side by side (hconcat)": {"data": {"values": Q}, "hconcat": [{"mark": "bar", "encoding": X_Y},
                                                                  {"mark": "line", "encoding": X_Y}]},
    "small multiples (facet)": {"data": {"values": Q}, "facet": {"field": "segment"},
                                "spec": {"mark": "bar", "encoding": X_Y}},
    "filtered (transform)": {"data": {"values": Q}, "transform": [{"filter": "datum.revenue > 13"}],
                             "mark": "bar", "encoding": X_Y},
    "heatmap": {"data": {"values": Q}, "mark": "rect",
                "encoding": {"x": X_Y["x"], "y": {"field": "segment"}, "color": {"field": "revenue"}}},
    "box plot": {"data": {"values": Q}, "mark": "boxplot", "encoding": {"x": {"field": "segment"}, "y": X_Y["y"]}},
}  # fmt: skip


def thousand_points() -> dict[str, Any]:
    rng = random.Random(1)
    rows = [{"x": i, "y": rng.gauss(0, 10) + i * 0.05, "g": "abc"[i % 3]} for i in range(1000)]
    return {
        "title": "1,000 points",
        "data": {"values": rows},
        "mark": "line",
        "encoding": {
            "x": {"field": "x", "type": "quantitative"},
            "y": {"field": "y", "type": "quantitative"},
            "color": {"field": "g", "type": "nominal"},
        },
        "width": 600,
        "height": 300,
    }


def rss_mb(pid: int | None = None) -> float:
    return psutil.Process(pid or os.getpid()).memory_info().rss / MB


def quantiles(samples: list[float]) -> tuple[float, float]:
    ordered = sorted(samples)
    return statistics.median(ordered), ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def installed_mb(*names: str) -> float:
    total = 0
    for name in names:
        try:
            total += sum(f.size or 0 for f in metadata.distribution(name).files or [])
        except metadata.PackageNotFoundError:
            return float("nan")
    return total / MB


async def measure_child(renders: int) -> dict[str, Any]:
    settings = ChartSettings()
    renderer = ChartRenderer(settings)
    checked = validate_spec(thousand_points(), settings)
    before = rss_mb()
    started = time.perf_counter()
    first = await renderer.render(checked)
    cold = (time.perf_counter() - started) * 1000
    times = []
    for _ in range(renders):
        started = time.perf_counter()
        chart = await renderer.render(checked)
        times.append((time.perf_counter() - started) * 1000)
    drawn = 0
    for spec in MODEL_SPECS.values():
        try:
            await renderer.render(validate_spec(spec, settings))
            drawn += 1
        except Exception as exc:
            print(f"  vl-convert could not draw a spec: {exc}", file=sys.stderr)
    out = {
        "cold_ms": round(cold),
        "p50_ms": round(quantiles(times)[0]),
        "p95_ms": round(quantiles(times)[1]),
        "png_bytes": len(chart.png),
        "svg_bytes": len(chart.svg.encode()),
        "size": f"{first.width}x{first.height}",
        "child_rss_mb": round(rss_mb(renderer.pid)),
        "this_process_rss_delta_mb": round(rss_mb() - before, 1),
        "model_specs_drawn": drawn,
    }
    renderer.close()
    return out


def measure_in_process(renders: int) -> dict[str, Any]:
    """The baseline: the very same work (charts/worker.py's render: SVG, size check, palette PNG)
    with vl-convert loaded into this process instead of a child."""
    from mcp_analysis.charts import worker

    before = rss_mb()
    settings = ChartSettings()
    request = {"spec": thousand_points(), "max_size_px": settings.max_size_px, "max_png_bytes": settings.max_png_bytes}
    started = time.perf_counter()
    worker.render(request)
    cold = (time.perf_counter() - started) * 1000
    times = []
    for _ in range(renders):
        started = time.perf_counter()
        _, svg, _ = worker.render(request)
        times.append((time.perf_counter() - started) * 1000)
    import vl_convert

    return {
        "cold_ms": round(cold),
        "p50_ms": round(quantiles(times)[0]),
        "p95_ms": round(quantiles(times)[1]),
        "rgba_png_bytes": len(vl_convert.svg_to_png(svg.decode())),
        "rss_delta_mb": round(rss_mb() - before),
        "install_mb": round(installed_mb("vl-convert-python")),
    }


def measure_matplotlib(renders: int) -> dict[str, Any] | None:
    try:
        before = rss_mb()
        started = time.perf_counter()
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    imported = (time.perf_counter() - started) * 1000
    rows = thousand_points()["data"]["values"]

    def once() -> tuple[bytes, str]:
        figure, axes = plt.subplots(figsize=(600 / 72 * 1.15, 300 / 72 * 1.2), dpi=72)
        for group in "abc":
            picked = [r for r in rows if r["g"] == group]
            axes.plot([r["x"] for r in picked], [r["y"] for r in picked], label=group)
        axes.set_title("1,000 points")
        axes.legend()
        png, svg = io.BytesIO(), io.StringIO()
        figure.savefig(png, format="png")
        figure.savefig(svg, format="svg")
        plt.close(figure)
        return png.getvalue(), svg.getvalue()

    times = []
    for _ in range(renders):
        started = time.perf_counter()
        png, svg = once()
        times.append((time.perf_counter() - started) * 1000)
    drawn = sum(1 for spec in MODEL_SPECS.values() if _matplotlib_translates(spec, plt))
    stack = ("matplotlib", "contourpy", "kiwisolver", "fonttools", "cycler", "pyparsing")
    return {
        "import_ms": round(imported),
        "p50_ms": round(quantiles(times)[0]),
        "p95_ms": round(quantiles(times)[1]),
        "png_bytes": len(png),
        "svg_bytes": len(svg.encode()),
        "rss_delta_mb": round(rss_mb() - before),
        "install_mb": round(installed_mb(*stack)),
        "model_specs_drawn": drawn,
    }


def _matplotlib_translates(spec: dict[str, Any], plt: Any) -> bool:
    """The translation a server would write for matplotlib: one view, bar/line/point/area, x and y
    fields (+ colour), no transforms, aggregates or composition. Whether this spec fits it."""
    if any(key in spec for key in ("layer", "hconcat", "vconcat", "concat", "facet", "repeat", "transform")):
        return False
    mark = spec.get("mark")
    mark = mark.get("type") if isinstance(mark, dict) else mark
    encoding = spec.get("encoding", {})
    if mark not in ("bar", "line", "point", "area") or set(encoding) - {"x", "y", "color"}:
        return False
    if any("aggregate" in channel for channel in encoding.values()):
        return False
    if mark == "bar" and "color" in encoding:
        return False  # Vega-Lite stacks coloured bars; a plain translation would overdraw them
    figure, axes = plt.subplots()
    rows = spec["data"]["values"]
    draw = {"bar": axes.bar, "line": axes.plot, "point": axes.scatter, "area": axes.fill_between}[mark]
    draw([r[encoding["x"]["field"]] for r in rows], [r[encoding["y"]["field"]] for r in rows])
    plt.close(figure)
    return True


async def measure_server(idle_seconds: float) -> dict[str, Any]:
    sys.path.insert(0, str(Path(__file__).parent))
    from reliability import Server, client_for

    os.environ["MCP_ANALYSIS_CHARTS__RENDERER_IDLE_SECONDS"] = str(idle_seconds)
    workdir = Path(tempfile.mkdtemp(prefix="mcp-analysis-chart-bench-"))
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    server = Server(None, workdir / "data", port, workdir / "server.log")
    server.start()
    try:
        assert server.process is not None
        await anyio.sleep(3)  # the background load of LanceDB, the embedder and monty
        idle = server.rss()[0] / MB
        code = f"await chart({json.dumps(thousand_points())})"
        async with client_for(server.url, "legacy") as client:
            result = await client.call_tool("execute_code", {"code": code})
            assert result.structured_content["success"], result.structured_content
            after = server.rss()[0] / MB
            children = psutil.Process(server.process.pid).children()
            renderer = [c for c in children if "charts.worker" in " ".join(c.cmdline())]
            child = renderer[0].memory_info().rss / MB if renderer else float("nan")
            await anyio.sleep(idle_seconds + 2)
            gone = not any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in renderer)
        return {
            "idle_rss_mb": round(idle),
            "rss_after_chart_mb": round(after),
            "renderer_child_rss_mb": round(child),
            "renderer_exited_when_idle": gone,
        }
    finally:
        server.stop()


def report(child: dict[str, Any], baseline: dict[str, Any], mpl: dict[str, Any] | None, renders: int) -> float:
    ratio = child["p50_ms"] / max(1, baseline["p50_ms"])
    rows = [
        ("vl-convert, child process (what the server runs)", child),
        ("vl-convert in this process (baseline, same work)", baseline),
    ]
    print(f"\n1,000-point line chart, {renders} renders (ms)          cold    p50    p95")
    for name, row in rows:
        print(f"  {name:<50} {row['cold_ms']:>6} {row['p50_ms']:>6} {row['p95_ms']:>6}")
    print(f"  child / in-process p50: {ratio:.2f}")
    print(
        f"  PNG {child['png_bytes']:,} bytes as a palette (RGBA {baseline['rgba_png_bytes']:,}); "
        f"SVG {child['svg_bytes']:,} bytes; {child['size']} px"
    )
    print(
        f"  memory: renderer child {child['child_rss_mb']} MB; this process "
        f"+{child['this_process_rss_delta_mb']} MB with the child, +{baseline['rss_delta_mb']} MB with it loaded here"
    )
    print(f"  specs as models write them, drawn: {child['model_specs_drawn']}/{len(MODEL_SPECS)}")
    print(f"  install: {baseline['install_mb']} MB")
    if mpl is None:
        print("matplotlib: not installed (run with `uv run --with matplotlib` to compare)")
        return ratio
    print(
        f"matplotlib, the same chart drawn directly: import {mpl['import_ms']} ms, p50 {mpl['p50_ms']} ms, "
        f"p95 {mpl['p95_ms']} ms, PNG {mpl['png_bytes']:,} bytes, +{mpl['rss_delta_mb']} MB in process, "
        f"install {mpl['install_mb']} MB; specs drawn through a simple Vega-Lite translation: "
        f"{mpl['model_specs_drawn']}/{len(MODEL_SPECS)}"
    )
    return ratio


async def main(args: argparse.Namespace) -> dict[str, Any]:
    print(describe(), f"· load {machine()['load_1_5_15']}")
    child = await measure_child(args.renders)
    baseline = measure_in_process(args.renders)
    mpl = measure_matplotlib(args.renders)
    ratio = report(child, baseline, mpl, args.renders)
    server = await measure_server(args.idle_seconds) if args.server else None
    if server is not None:
        print(
            f"server: idle {server['idle_rss_mb']} MB, after a chart {server['rss_after_chart_mb']} MB "
            f"(renderer child {server['renderer_child_rss_mb']} MB; exited when idle: "
            f"{server['renderer_exited_when_idle']})"
        )
    html = view_html().encode()
    view = {"bytes": len(html), "gzip_bytes": len(gzip.compress(html))}
    print(f"view: {view['bytes']:,} bytes ({view['gzip_bytes']:,} gzipped)")
    return {
        "machine": machine(),
        "renders": args.renders,
        "child": child,
        "in_process": baseline,
        "child_over_in_process_p50": round(ratio, 2),
        "matplotlib": mpl,
        "server": server,
        "view": view,
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--renders", type=int, default=30)
    parser.add_argument("--server", action="store_true", help="also measure a real server's memory")
    parser.add_argument("--idle-seconds", type=float, default=5.0, help="renderer idle exit in the --server run")
    print(json.dumps(anyio.run(main, parser.parse_args())))
