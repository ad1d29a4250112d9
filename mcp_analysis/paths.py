"""Where mcp-analysis keeps files by default, and how a location is told local from remote.

Next to a leaf: it imports only our errors, so the settings, the embedder's model cache, the
watcher's lock and the store can all ask it without pulling each other in.
"""

from __future__ import annotations

import os
from pathlib import Path

from mcp_analysis.errors import DatabaseNotFoundError


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


def not_a_folder(path: Path) -> str | None:
    """Why `path` can never be a knowledge base folder (a file, a link to nothing), or None."""
    if path.exists() and not path.is_dir():
        return f"{path} is a file, not a LanceDB knowledge base directory. Point --db / MCP_ANALYSIS_DB at a folder."
    if not path.exists() and path.is_symlink():  # exists() follows the link: its target is missing
        return (
            f"{path} is a symbolic link to {path.readlink()}, which does not exist. Create that folder, or "
            "point --db / MCP_ANALYSIS_DB at another one."
        )
    return None


def missing_database(path: Path) -> DatabaseNotFoundError:
    """The error for a local knowledge base that is not there: what the path is when it can never be
    one (`not_a_folder`), else how to make one (the CLI's commands and `serve` say the same)."""
    return DatabaseNotFoundError(
        not_a_folder(path)
        or f"No knowledge base at {path}. Create one with `mcp-analysis add PATH --db {path}`, point --db / "
        "MCP_ANALYSIS_DB at an existing one, or try `mcp-analysis serve --sample`."
    )


def make_database_directory(path: Path) -> None:
    """Create a local knowledge base's directory, or say clearly why it cannot be one.

    Every command that may create a knowledge base (`add`, `sync`, `serve --watch`) comes here
    first, so a `--db` naming a file, or a path under one, reads the same from each."""
    if path.is_dir():
        return  # never touched: a knowledge base that is only read stays as it is
    unusable = not_a_folder(path)
    if unusable is not None:
        raise DatabaseNotFoundError(unusable)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise DatabaseNotFoundError(
            f"Cannot create the knowledge base directory {path}: {exc.strerror or exc}. "
            "Point --db / MCP_ANALYSIS_DB at a folder that can be made."
        ) from None
