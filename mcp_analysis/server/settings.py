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
