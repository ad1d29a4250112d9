"""The renderer process: Vega-Lite JSON in, SVG and a palette PNG out (`python -m mcp_analysis.charts.worker`).

vl-convert runs Vega in an embedded JavaScript engine (~85 MB when loaded, and it keeps
what a large chart made it allocate), so it lives here rather than in the server: the
server starts this process on the first chart, kills it when a render overruns, and
lets it exit when idle (charts/render.py). Its data segment is capped
(`charts.renderer_memory_mb`), external data is refused by vl-convert as well as by the
validator (`allowed_base_urls=[]`), and the raster size is checked from the SVG before a
PNG is made, so a spec that grows with its data cannot allocate a gigapixel image.

Frames on stdin/stdout are a 4-byte big-endian length and a body. A request body is JSON
``{"spec": ..., "max_size_px": n, "max_png_bytes": n}``; a reply is a JSON header frame
(``{"ok": true, "width", "height"}`` or ``{"ok": false, "error": "..."}``) followed, when
ok, by an SVG frame and a PNG frame. Anything else the process prints goes to stderr.
"""

from __future__ import annotations

import io
import json
import math
import os
import re
import sys
from typing import Any, BinaryIO

HEADER = 4
# Vega writes 1e21 and past as 1e+21, and NaN or Infinity for a size it cannot compute (a step of 1e308)
_NUMBER = rb"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|[-+]?Infinity|NaN"
_SIZE = re.compile(rb'<svg[^>]*?\swidth="(' + _NUMBER + rb')"[^>]*?\sheight="(' + _NUMBER + rb')"', re.S)
PNG_COLORS = 256  # charts use few colours: a palette keeps antialiasing and is ~8x smaller than RGBA


def read_frame(stream: BinaryIO) -> bytes | None:
    head = stream.read(HEADER)
    if len(head) < HEADER:
        return None
    size = int.from_bytes(head, "big")
    body = stream.read(size)
    return body if len(body) == size else None


def write_frame(stream: BinaryIO, body: bytes) -> None:
    stream.write(len(body).to_bytes(HEADER, "big") + body)


def svg_size(svg: str) -> tuple[float, float]:
    match = _SIZE.search(svg[:2000].encode())
    if match is None:
        raise ValueError("the renderer produced an SVG without a size")
    return float(match.group(1).replace(b"Infinity", b"inf")), float(match.group(2).replace(b"Infinity", b"inf"))


def _pixels(size: float) -> str:
    return str(round(size)) if abs(size) < 1e9 else f"{size:.3g}"


Reply = tuple[dict[str, Any], bytes, bytes]


def render(request: dict[str, Any]) -> Reply:
    import vl_convert  # here, not at import: the process starts before its first chart

    try:
        svg = vl_convert.vegalite_to_svg(request["spec"], allowed_base_urls=[], show_warnings=False)
    except ValueError as exc:
        return refusal(_first_line(exc))
    width, height = svg_size(svg)
    most = request["max_size_px"]
    if not (width <= most and height <= most):  # also NaN
        if math.isfinite(width) and math.isfinite(height):
            size = f"would be {_pixels(width)}x{_pixels(height)} pixels"
        else:
            size = f"has no finite size (Vega computed {width:g} x {height:g} pixels)"
        return refusal(
            f"the chart {size}; at most {most}x{most} (charts.max_size_px). Set a smaller width/height "
            "(or step), or show fewer categories or facets."
        )
    png = _palette_png(vl_convert.svg_to_png(svg))
    if len(png) > request["max_png_bytes"]:
        return refusal(
            f"the chart's PNG is {len(png):,} bytes; at most {request['max_png_bytes']:,} (charts.max_png_bytes). "
            "Draw fewer points or a smaller chart."
        )
    return {"ok": True, "width": round(width), "height": round(height)}, svg.encode(), png


def refusal(error: str) -> Reply:
    return {"ok": False, "error": error}, b"", b""


def _palette_png(png: bytes) -> bytes:
    from PIL import Image

    with Image.open(io.BytesIO(png)) as image:
        # Flattened onto white first: a transparent background would otherwise turn black in
        # viewers that ignore a palette's transparency, and images for models need no alpha.
        opaque = Image.alpha_composite(Image.new("RGBA", image.size, "white"), image.convert("RGBA"))
        paletted = opaque.convert("RGB").quantize(colors=PNG_COLORS, method=Image.Quantize.FASTOCTREE)
    out = io.BytesIO()
    paletted.save(out, format="PNG", optimize=True)
    return out.getvalue()


def _first_line(exc: BaseException) -> str:
    """vl-convert's message without its JavaScript stack."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip() and not line.strip().startswith("at ")]
    text = " ".join(lines[:3])
    return text[:1000] or type(exc).__name__


def serve(requests: BinaryIO, replies: BinaryIO, memory_mb: int = 0) -> None:
    while (body := read_frame(requests)) is not None:
        try:
            header, svg, png = render(json.loads(body))
        except MemoryError:
            header, svg, png = refusal(
                f"the chart renderer ran out of memory (it may use {memory_mb:,} MB, charts.renderer_memory_mb); "
                "draw fewer points, shorter labels or simpler transforms"
            )
        except Exception as exc:  # a reply, never a dead renderer, for anything a spec can provoke
            header, svg, png = refusal(f"{type(exc).__name__}: {exc}"[:1000])
        write_frame(replies, json.dumps(header).encode())
        if header["ok"]:
            write_frame(replies, svg)
            write_frame(replies, png)
        replies.flush()


def main() -> None:
    memory_mb = int(sys.argv[1]) if len(sys.argv) > 1 else 0
    if memory_mb and sys.platform != "win32":
        import resource

        resource.setrlimit(resource.RLIMIT_DATA, (memory_mb * 1024 * 1024, memory_mb * 1024 * 1024))
    # The frames own the original stdout; anything printed (by us or native code) goes to stderr.
    replies = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)
    serve(sys.stdin.buffer, replies, memory_mb)


if __name__ == "__main__":
    main()
