"""A drawn chart as the layers above receive and keep it: the checked spec and both renderings."""

from __future__ import annotations

import json
import sys
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr


class Chart(BaseModel):
    # Bytes as base64 in JSON: a session's stored record keeps its charts this way.
    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    index: int = Field(description="The chart's number in its session (1, 2, ... in the order drawn).")
    execution: int = Field(0, description="The execute_code call that drew it (0 until the session records it).")
    title: str | None = None
    spec: dict[str, Any] = Field(description="The Vega-Lite spec as checked and rendered (plain JSON).")
    rows: int = Field(0, description="Data rows in the spec.")
    width: int = Field(description="PNG width in pixels (the SVG's size too).")
    height: int
    png: bytes = Field(repr=False, description="Palette PNG.")
    svg: str = Field(repr=False)
    render_ms: float = 0.0
    # Measured once (the spec does not change once drawn): walking it costs up to ~50 ms.
    _kept: int | None = PrivateAttr(None)
    _held: int | None = PrivateAttr(None)

    def summary(self) -> dict[str, Any]:
        """What `await chart(spec)` returns to the sandboxed code: plain values only."""
        return {
            "chart": self.index,
            "title": self.title,
            "width": self.width,
            "height": self.height,
            "rows": self.rows,
            "png_bytes": len(self.png),
        }

    @property
    def kept_bytes(self) -> int:
        """What keeping this chart costs a session: its PNG, its SVG and its spec as JSON."""
        if self._kept is None:
            spec = len(json.dumps(self.spec, ensure_ascii=False).encode())
            self._kept = len(self.png) + len(self.svg.encode()) + spec
        return self._kept

    @property
    def held_bytes(self) -> int:
        """What this chart holds in this process's memory (PNG, SVG and the spec as Python objects),
        counted against sessions.max_memory_mb. The spec as objects is ~5x its JSON (5,000 rows of
        five fields: 0.36 MB of JSON, 1.8 MB of dicts), so its JSON size would undercount it."""
        if self._held is None:
            self._held = sys.getsizeof(self.png) + sys.getsizeof(self.svg) + held_size(self.spec)
        return self._held

    def measure(self) -> Chart:
        """Measure `kept_bytes` and `held_bytes` now (in a worker thread: not on the event loop)."""
        _ = self.kept_bytes, self.held_bytes
        return self


def held_size(value: Any) -> int:
    """Bytes of a tree of plain JSON values as objects. Keys are counted once per object (json.loads
    and pydantic share equal keys between rows); True, False and None are shared by everything."""
    total = 0
    keys: set[int] = set()
    stack = [value]
    while stack:
        node = stack.pop()
        if node is None or node is True or node is False:
            continue
        total += sys.getsizeof(node)
        if isinstance(node, dict):
            for key in node:
                if id(key) not in keys:
                    keys.add(id(key))
                    total += sys.getsizeof(key)
            stack.extend(node.values())
        elif isinstance(node, list):
            stack.extend(node)
    return total
