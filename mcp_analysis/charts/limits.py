"""The `charts` settings: what one `await chart(spec)` may hold and what rendering may cost.

Kept free of other mcp_analysis imports (pydantic only), like ingest/limits.py: config.py
attaches `ChartSettings` as the `charts` section, and the spec checks and the renderer
read it without loading the settings machinery.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class ChartSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    """Bounds of `await chart(spec)` in the sandbox: what a spec may hold and what rendering may cost."""

    max_rows: int = Field(5000, ge=1, le=1_000_000, description="Data rows one chart may hold, all datasets together.")
    max_values: int = Field(
        200_000, ge=100, description="Values in one spec (numbers, strings, list items, keys), data included."
    )
    max_spec_kb: int = Field(
        2048,
        ge=16,
        description="Size of one spec as JSON (UTF-8), data included, in KB: measured in the sandbox before the spec "
        "leaves it and again on the server, before anything is copied.",
    )
    max_text_chars: int = Field(1000, ge=10, description="Characters of any one string in a spec (a title, a label).")
    max_depth: int = Field(24, ge=4, le=200, description="Nesting depth of a spec (objects and lists).")
    max_views: int = Field(16, ge=1, description="Views in one chart: layers, concatenated and repeated charts.")
    max_size_px: int = Field(2000, ge=100, description="Width and height of a rendered chart, in pixels.")
    max_png_bytes: int = Field(1_000_000, ge=10_000, description="Size of one chart's PNG (palette-compressed).")
    max_per_call: int = Field(10, ge=1, description="Charts one execute_code call may draw.")
    max_kept: int = Field(
        20, ge=1, description="Charts a session keeps as resources (its latest; older ones are dropped)."
    )
    max_kept_mb: int = Field(
        8,
        ge=1,
        description="Size of the charts a session keeps (PNG + SVG + spec), in MB; with its variables at most "
        "sandbox.max_state_mb. The oldest charts are dropped first.",
    )
    render_timeout: float = Field(20.0, gt=0, description="Seconds one chart may take to render.")
    renderer_idle_seconds: float = Field(
        120.0, gt=0, description="The renderer process exits after this long without charts (its memory goes back)."
    )
    renderer_memory_mb: int = Field(
        1536, ge=1024, description="Data-segment limit of the renderer process (its JavaScript engine needs ~1 GB)."
    )
