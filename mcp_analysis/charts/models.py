"""A drawn chart as the layers above receive and keep it: the checked spec and both renderings."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


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
        return len(self.png) + len(self.svg.encode()) + len(json.dumps(self.spec, ensure_ascii=False).encode())
