"""The `watch` settings: which folders `serve --watch` and `sync` follow, and how patiently.

Kept free of other mcp_analysis imports (pydantic only), like ingest/limits.py: config.py
attaches `WatchSettings` as the `watch` section.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator


class WatchSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    directories: list[Path] = Field(
        default_factory=list, description="Folders `serve` keeps in sync (as `serve --watch DIR`) and `sync` mirrors."
    )
    include: list[str] = Field(
        default_factory=list,
        description="Gitignore-style patterns of the files to follow (relative to the folder); empty = every file.",
    )
    ignore: list[str] = Field(
        default_factory=list,
        description="Gitignore-style patterns of files never followed, besides hidden and editor temp files.",
    )
    hidden: bool = Field(False, description="Follow hidden files and folders (names starting with a dot) too.")
    debounce_seconds: float = Field(
        0.3, gt=0, le=60, description="Quiet time after the last file event before changes are applied."
    )
    settle_seconds: float = Field(
        0.5, gt=0, le=600, description="A file is read once its size and mtime held still this long (not mid-write)."
    )
    keep_worker_seconds: float = Field(
        120,
        ge=0,
        le=86_400,
        description="How long the conversion worker (a process with the parsers loaded) stays up after the last "
        "change, so the next change is read at once instead of after its start of seconds; 0 ends it each time.",
    )
    optimize_idle_seconds: float = Field(
        10,
        ge=0,
        le=86_400,
        description="Quiet time after the last applied change before the tables are compacted and the new rows "
        "folded into the indexes (search reads the rows written meanwhile unindexed; in a folder that never goes quiet "
        "compaction runs after 30 such periods anyway); `sync` compacts at its end.",
    )
    root_poll_seconds: float = Field(
        2.0,
        ge=0.1,
        le=600,
        description="How often the watched folders themselves are checked: one gone (deleted, unmounted) is "
        "noticed, and one back or replaced is mirrored whole, within this long.",
    )
    lease_seconds: float = Field(
        30,
        ge=1,
        le=3_600,
        description="Object-store knowledge bases: how long the watcher's lease in Redis lasts without renewal "
        "(renewed every third of it). A killed watcher's place is free after this; a watcher that lost its lease "
        "finds out within a third of it, and checks it again before every batch of changes.",
    )

    @field_validator("directories", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str | Path) else value
