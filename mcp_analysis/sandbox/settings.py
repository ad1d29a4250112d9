"""The `sandbox` settings: time, output, memory and call bounds of one interpreter, and the pool.

A leaf (pydantic only), like search/settings.py: config.py attaches `SandboxSettings` as the
`sandbox` section, and the sandbox receives this object, never the whole settings.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class SandboxSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    code_timeout: float = Field(60.0, gt=0, le=3600, description="Wall-clock seconds per execute_code call.")
    max_output_chars: int = Field(50_000, ge=1000, description="stdout+stderr+value kept per call.")
    max_code_chars: int = Field(
        100_000, ge=1000, description="Characters of code one execute_code call may run (it is kept with the session)."
    )
    workers: int = Field(0, ge=0, le=256, description="Interpreter worker processes; 0 = CPU count.")
    max_memory_mb: int = Field(512, ge=16, description="Heap limit of one interpreter.")
    max_state_mb: int = Field(
        64, ge=1, description="Interpreter state (variables) one session keeps between calls, in MB."
    )
    max_recursion_depth: int = Field(1000, ge=50, description="Python call depth limit.")
    max_host_calls: int = Field(
        20_000, ge=100, description="File reads, searches and other host calls allowed per call."
    )
    checkout_timeout: float = Field(30.0, gt=0, description="Seconds to wait for a free worker.")
    keep_worker_for_others: bool = Field(
        True,
        description=(
            "A client running code on a worker may not take the last worker no one runs code on: it is "
            "kept for another client (off: one client may run code on every worker)."
        ),
    )
    idle_release_seconds: float = Field(
        30.0, ge=0, description="An idle session hands its worker back after this long."
    )
