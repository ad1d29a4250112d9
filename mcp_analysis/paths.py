"""Where mcp-analysis keeps files by default, and how a location is told local from remote.

A leaf: it imports nothing of ours, so the settings, the embedder's model cache and the
store can all ask it without pulling each other in.
"""

from __future__ import annotations

import os
from pathlib import Path


def is_local_path(path: str | Path) -> bool:
    """False for object-store URIs such as s3://bucket/kb."""
    return "://" not in str(path)


def data_home() -> Path:
    """Where we keep knowledge bases and session state by default (XDG)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "mcp-analysis"


def cache_home() -> Path:
    """Where derived, re-creatable files (the quantized embedder) live (XDG)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "mcp-analysis"
