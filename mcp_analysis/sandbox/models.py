"""What one execute_code call returns."""

from __future__ import annotations

from pydantic import BaseModel, Field

from mcp_analysis.charts.models import Chart


class ExecutionResult(BaseModel):
    success: bool = Field(description="False when the code raised or was stopped.")
    stdout: str = ""
    stderr: str = ""
    value: str | None = Field(None, description="repr() of the trailing expression, REPL style.")
    error: str | None = Field(None, description="Traceback (line numbers of your code) and a hint.")
    duration_ms: float = 0.0
    truncated: bool = Field(False, description="Output exceeded sandbox.max_output_chars and was cut.")
    output_chars: int = Field(0, description="Size of the full output before truncation.")
    state_restored: bool = Field(
        False, description="The call was stopped and the interpreter rolled back to its state before it."
    )
    # Left out of model_dump(): each front door decides how a chart reaches its client.
    charts: list[Chart] = Field(default_factory=list, exclude=True, description="Drawn by `await chart(spec)`.")
    charts_not_kept: str | None = Field(
        None, exclude=True, description="Why the session did not keep charts of this call, when not its chart limits."
    )
