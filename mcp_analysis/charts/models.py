"""A drawn chart as the layers above receive it: the checked spec and both renderings."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Chart(BaseModel):
    model_config = ConfigDict(ser_json_bytes="base64", val_json_bytes="base64")

    index: int = Field(description="1-based, in the order one execute_code call drew its charts.")
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
