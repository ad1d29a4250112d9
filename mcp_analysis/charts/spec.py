"""Which Vega-Lite specs may be drawn: inline data only, bounded in everything that costs.

A spec comes from code the server does not trust. Nothing in it may make the renderer
reach the network or a file (`url` and `href` are refused wherever they appear, and so
are data generators), and nothing may make validation or rendering cost more than the
limits allow: the walk is iterative, checks sizes before it walks them (a list of ten
million rows is refused by its length, a 50 MB title by its length) and stops at the
first value past `charts.max_values` or past `charts.max_spec_kb` of JSON (counted as it
walks, so 5,000 rows of 36 fields of 1,000 characters, 180 MB, are refused after ~2 MB of
them, before anything is copied). What passes is re-encoded as plain JSON, so the
renderer gets exactly what was checked. Rendered size and time are bounded again where
they are known: in the renderer process (charts/worker.py, charts/render.py).
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from json.encoder import encode_basestring
from typing import Any

from mcp_analysis.charts.limits import ChartSettings
from mcp_analysis.errors import ChartError

MARKS = frozenset(
    {"arc", "area", "bar", "boxplot", "circle", "errorband", "errorbar", "line", "point", "rect", "rule",
     "square", "text", "tick", "trail"}
)  # fmt: skip
CHANNELS = frozenset(
    {"x", "y", "x2", "y2", "xOffset", "yOffset", "xError", "xError2", "yError", "yError2", "theta", "theta2",
     "radius", "radius2", "color", "fill", "stroke", "opacity", "fillOpacity", "strokeOpacity", "strokeWidth",
     "strokeDash", "size", "angle", "shape", "text", "tooltip", "detail", "order", "facet", "row", "column",
     "description", "key"}
)  # fmt: skip
_GENERATED = "data generators are not allowed: build the rows in Python and pass them as data.values"
REFUSED_KEYS = {
    "url": "charts take inline data only (nothing is fetched): put the rows in data.values, a list of dicts",
    "href": "charts cannot carry links",
    "sequence": _GENERATED,
    "sphere": _GENERATED,
    "graticule": _GENERATED,
}
COMPOSITIONS = ("layer", "concat", "hconcat", "vconcat")
MAX_KEY_CHARS = 200
MAX_INT_BITS = 63  # JSON numbers are doubles in the renderer; a huge int is also costly to convert

Path = tuple[Any, ...] | None  # a linked list (parent path, key): cheap to build for every value


@dataclass(frozen=True)
class CheckedSpec:
    """A spec that passed validation, as the JSON text the renderer gets."""

    text: str
    spec: dict[str, Any]
    rows: int
    views: int
    title: str | None
    size: int = 0  # bytes of `text` in UTF-8


def validate_spec(spec: Any, limits: ChartSettings) -> CheckedSpec:
    """Check `spec` against `limits`; raise ChartError saying what to change."""
    if not isinstance(spec, Mapping):
        raise ChartError(f"chart(spec): spec must be a dict (a Vega-Lite specification), not {type(spec).__name__}.")
    rows, size = _walk(spec, limits)
    try:
        text = json.dumps(spec, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except ValueError as exc:  # NaN or infinity: not JSON; the walk has excluded everything else
        raise ChartError(f"chart(): the spec is not valid JSON ({exc}); replace NaN and infinite numbers.") from None
    checked: dict[str, Any] = json.loads(text)
    views = _views(checked, None, limits)
    if views > limits.max_views:
        raise ChartError(
            f"chart(): the spec draws {views} views (layers, concatenated or repeated charts); at most "
            f"{limits.max_views} (charts.max_views). Split it into several charts."
        )
    return CheckedSpec(text=text, spec=checked, rows=rows, views=views, title=spec_title(checked), size=size)


def spec_title(spec: Mapping[str, Any]) -> str | None:
    title = spec.get("title")
    if isinstance(title, Mapping):
        title = title.get("text")
    if isinstance(title, list):
        title = " ".join(str(line) for line in title)
    return title if isinstance(title, str) and title else None


def where(path: Path) -> str:
    """`spec.data.values[3].x` for a path built by the walk."""
    keys: list[Any] = []
    while path is not None:
        path, key = path
        keys.append(key)
    text = "spec"
    for key in reversed(keys):
        text += f"[{key}]" if isinstance(key, int) else f".{key}"
    return text


def _walk(spec: Mapping[str, Any], limits: ChartSettings) -> tuple[int, int]:
    """Check every value's type and size; return the number of data rows and the spec's size as
    JSON. Sizes are checked before a container is walked, so the cost is bounded by the limits,
    not by what was sent. The size is counted as `json.dumps` writes the spec (compact, UTF-8),
    value by value, so a spec past `charts.max_spec_kb` is refused before any copy of it is made."""
    rows = 0
    count = 0
    size = 0
    most = limits.max_spec_kb * 1024
    stack: list[tuple[Any, Path, int]] = [(spec, None, 1)]
    while stack:
        node, path, depth = stack.pop()
        count += 1
        if isinstance(node, str):
            if len(node) > limits.max_text_chars:
                raise ChartError(
                    f"chart(): the text at {where(path)} is {len(node):,} characters; at most "
                    f"{limits.max_text_chars:,} (charts.max_text_chars). Shorten titles and labels."
                )
            size += text_bytes(node)
        elif isinstance(node, bool) or node is None:
            size += 5 if node is False else 4  # false, true, null
        elif isinstance(node, int):
            if node.bit_length() > MAX_INT_BITS:
                raise ChartError(f"chart(): the number at {where(path)} is too large for a chart (beyond 2**63).")
            size += len(int.__repr__(node))
        elif isinstance(node, float):
            if not math.isfinite(node):
                raise ChartError(f"chart(): {node} at {where(path)} is not a number a chart can show.")
            size += len(float.__repr__(node))
        elif isinstance(node, Mapping | list | tuple):
            if depth >= limits.max_depth:
                raise ChartError(
                    f"chart(): the spec is nested deeper than {limits.max_depth} levels at {where(path)} "
                    "(charts.max_depth)."
                )
            _check_count(count + len(node), limits)
            size += 1 + len(node) if node else 2  # brackets and commas
            _check_size(size + len(node), most)  # each item is at least one byte more
            if isinstance(node, Mapping):
                held, keys = _push_items(node, path, depth, stack)
                rows += held
                size += keys
                if rows > limits.max_rows:
                    raise ChartError(
                        f"chart(): the data holds {rows:,} rows; a chart takes at most {limits.max_rows:,} "
                        "(charts.max_rows). Aggregate first (a sum or mean per group in Python), or sample the rows."
                    )
            else:
                stack.extend((item, (path, i), depth + 1) for i, item in enumerate(node))
        else:
            raise ChartError(
                f"chart(): {type(node).__name__} at {where(path)} cannot be in a spec; a spec holds dicts, lists, "
                "strings, numbers, booleans and None."
            )
        _check_size(size, most)
    return rows, size


def text_bytes(text: str) -> int:
    """Bytes of `text` as a JSON string in UTF-8 (`json.dumps(..., ensure_ascii=False)`): quotes,
    escapes and multi-byte characters included."""
    quoted = encode_basestring(text)
    return len(quoted) if quoted.isascii() else len(quoted.encode("utf-8", "surrogatepass"))


def _push_items(node: Mapping[Any, Any], path: Path, depth: int, stack: list[tuple[Any, Path, int]]) -> tuple[int, int]:
    """Queue a dict's values; return the data rows it holds directly (data.values, datasets) and
    the bytes of its keys as JSON (each with its colon)."""
    rows = 0
    keys = 0
    is_datasets = path is not None and path[1] == "datasets"
    for key, value in node.items():
        if not isinstance(key, str):
            raise ChartError(f"chart(): the key {key!r} at {where(path)} is not a string.")
        if len(key) > MAX_KEY_CHARS:
            raise ChartError(f"chart(): a key at {where(path)} is {len(key):,} characters; at most {MAX_KEY_CHARS}.")
        reason = REFUSED_KEYS.get(key)
        if reason is not None:
            raise ChartError(f"chart(): {where((path, key))} is not allowed: {reason}.")
        if key == "values" and isinstance(value, str) and path is not None and path[1] == "data":
            raise ChartError(
                f"chart(): {where((path, key))} is text; give the rows as a list of dicts "
                '(e.g. [{"quarter": "Q1", "revenue": 12.5}, ...]).'
            )
        if (key == "values" or is_datasets) and isinstance(value, list | tuple):
            rows += len(value)
        keys += text_bytes(key) + 1
        stack.append((value, (path, key), depth + 1))
    return rows, keys


def _check_count(count: int, limits: ChartSettings) -> None:
    if count > limits.max_values:
        raise ChartError(
            f"chart(): the spec holds more than {limits.max_values:,} values (charts.max_values). Draw fewer "
            "points: aggregate or sample the rows first."
        )


def _check_size(size: int, most: int) -> None:
    if size > most:
        raise ChartError(
            f"chart(): the spec is more than {most // 1024:,} KB as JSON, data included (charts.max_spec_kb). "
            "Draw fewer rows or shorter values: aggregate or sample first, and keep only the fields the chart uses."
        )


def _views(node: Any, path: Path, limits: ChartSettings) -> int:
    """How many unit views `node` draws; checks each one's mark and channels on the way."""
    if not isinstance(node, dict):
        raise ChartError(f"chart(): {where(path)} must be a view (a dict with a mark, layer, concat, ...).")
    total = 0
    for key in COMPOSITIONS:
        if key in node:
            children = node[key]
            if not isinstance(children, list) or not children:
                raise ChartError(f"chart(): {where((path, key))} must be a non-empty list of views.")
            total += sum(_views(child, ((path, key), i), limits) for i, child in enumerate(children))
    if "spec" in node and ("facet" in node or "repeat" in node):
        total += _repeats(node.get("repeat"), path) * _views(node["spec"], (path, "spec"), limits)
    if "mark" in node:
        _check_mark(node["mark"], (path, "mark"))
        _check_encoding(node.get("encoding"), (path, "encoding"))
        total += 1
    if total == 0:
        raise ChartError(
            f'chart(): {where(path)} draws nothing: give it a mark (e.g. "mark": "bar") and an encoding, '
            "or a layer/concat/facet/repeat of such views."
        )
    return total


def _repeats(repeat: Any, path: Path) -> int:
    if repeat is None:
        return 1
    if isinstance(repeat, list):
        return max(1, len(repeat))
    if isinstance(repeat, dict):
        product = 1
        for value in repeat.values():
            if isinstance(value, list):
                product *= max(1, len(value))
        return product
    raise ChartError(f"chart(): {where((path, 'repeat'))} must be a list of fields or a dict of lists.")


def _check_mark(mark: Any, path: Path) -> None:
    kind = mark.get("type") if isinstance(mark, dict) else mark
    if kind not in MARKS:
        shown = repr(kind) if isinstance(kind, str) else type(kind).__name__
        allowed = ", ".join(sorted(MARKS))
        raise ChartError(f"chart(): mark {shown} at {where(path)} is not allowed; use one of: {allowed}.")


def _check_encoding(encoding: Any, path: Path) -> None:
    if encoding is None:
        return
    if not isinstance(encoding, dict):
        raise ChartError(f"chart(): {where(path)} must be a dict of channels (x, y, color, ...).")
    for channel in encoding:
        if channel not in CHANNELS:
            raise ChartError(
                f"chart(): encoding channel '{channel}' at {where(path)} is not allowed; use: "
                f"{', '.join(sorted(CHANNELS))}."
            )
