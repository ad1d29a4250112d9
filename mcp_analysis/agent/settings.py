"""The `analysis` settings: the pydantic-ai model `analyze` runs and its bounds.

A leaf (pydantic only), like search/settings.py: config.py attaches `AnalysisSettings` as the
`analysis` section.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class AnalysisSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    model: str = Field("anthropic:claude-sonnet-4-20250514", description="pydantic-ai model for `analyze`.")
    max_executions: int = Field(15, ge=1, le=200, description="execute_code calls per analysis.")
    max_requests: int = Field(40, ge=2, le=500, description="Model requests per analysis.")
    base_url: str | None = Field(None, description="Server of an Ollama / vLLM / OpenAI-compatible analysis model.")
