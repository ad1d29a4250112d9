"""The `server` settings: where it listens, what it exposes, result budgets, logging.

A leaf (pydantic only), like search/settings.py: config.py attaches `ServerSettings` as the
`server` section.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class ServerSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    host: str = "127.0.0.1"
    port: int = Field(8765, ge=0, le=65535)
    path: str = "/mcp"
    filter: str | None = Field(None, description="SQL WHERE scoping everything the server exposes.")
    allowed_hosts: list[str] = Field(default_factory=list, description="Extra Host headers accepted over HTTP.")
    allowed_origins: list[str] = Field(default_factory=list, description="Extra Origin headers accepted.")
    tokens_file: Path | None = Field(None, description="Bearer tokens with per-token filters (HTTP).")
    max_result_chars: int = Field(
        48_000, ge=2000, description="Budget of one tool result (text + structured); fits a 25k-token host limit."
    )
    resource_page_size: int = Field(500, ge=1, le=10_000)
    max_table_resource_chars: int = Field(
        16_000_000,
        ge=1000,
        description="Characters of CSV one read of a documents:///{id}/tables/{n}.csv resource may return; a "
        "larger table is refused (from its stored size, before it is decompressed): read it in execute_code.",
    )
    # How often the server polls the knowledge base's version (server/runtime.py `_poll_versions`);
    # the name predates watch/, which follows folders: the key stays for compatibility.
    watch_interval: float = Field(2.0, gt=0, description="Seconds between checks for added documents.")
    log_level: Literal["DEBUG", "INFO", "WARNING", "ERROR"] = "INFO"
    resume_buffer_mb: int = Field(
        32, ge=0, le=4096, description="Memory for SSE events a reconnecting HTTP client may resume from (0: none)."
    )
    resume_seconds: float = Field(300.0, gt=0, description="How long an SSE event can be resumed from.")
    host_log_per_minute: int = Field(
        30, ge=1, le=10_000, description="notifications/message one client connection is sent per minute at most."
    )
    client_stall_seconds: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="How long an HTTP client may stall (its request not whole, or what it is sent left unread) "
        "before its connection is closed.",
    )
    max_pending_connections: int = Field(
        256,
        ge=1,
        le=100_000,
        description="HTTP connections waiting on their client at once; one more closes the longest idle one.",
    )
