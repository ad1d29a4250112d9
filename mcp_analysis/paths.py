"""Where mcp-analysis keeps files by default, and how a location is told local from remote.

Next to a leaf: it imports only our errors, so the settings, the embedder's model cache, the
watcher's lock and the store can all ask it without pulling each other in.
"""

from __future__ import annotations

import errno
import os
import shlex
from pathlib import Path

from mcp_analysis.errors import DatabaseNotFoundError, IngestError

_SHOWN = 5  # entries named in the message for a folder of other files


_RACES = 8  # resolutions tried while an entry keeps changing between a link and a file


def resolve_links(path: str | os.PathLike[str]) -> str:
    """`os.path.realpath`, safe from an entry swapped between a link and a file while it resolves.

    Python 3.11's realpath finds a component is a link, then reads the link, and raises when it has
    become a file (EINVAL) or gone (ENOENT) in between: a folder's writer could stop every `sync`
    with an unexpected error. Resolved again; an entry that keeps changing is an IngestError."""
    for _ in range(_RACES):
        try:
            return os.path.realpath(path)
        except OSError as exc:
            if exc.errno not in (errno.EINVAL, errno.ENOENT):
                raise
    raise IngestError(f"{os.fspath(path)!r} kept changing between a symbolic link and a file while it was resolved")


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


def foreign_folder(path: Path) -> str | None:
    """Why the existing folder `path` cannot hold a knowledge base, or None: it holds the user's own
    files and no table (most often `--db` was given the documents meant to be added). Hidden entries
    (a lock a failed first add left, `.DS_Store`) and LanceDB tables (`*.lance`) never count."""
    try:
        with os.scandir(path) as scan:
            entries = sorted((entry for entry in scan if not entry.name.startswith(".")), key=lambda entry: entry.name)
    except (NotADirectoryError, FileNotFoundError):
        return None
    except OSError as exc:
        reason = exc.strerror or exc
        return f"{path} cannot be listed ({reason}). Point --db / MCP_ANALYSIS_DB at a folder this user can read."
    if not entries or any(entry.name.endswith(".lance") for entry in entries):
        return None
    shown = [entry.name + ("/" if entry.is_dir() else "") for entry in entries[:_SHOWN]]
    more = f" and {len(entries) - _SHOWN} more" if len(entries) > _SHOWN else ""
    plain = str(path if path.name not in ("", ".", "..") else path.resolve()).rstrip("/") or "/"
    add = f"mcp-analysis --db {shlex.quote((plain.rstrip('/') or '/kb') + '.lancedb')} add {shlex.quote(plain)}"
    return (
        f"{path} holds other files ({', '.join(shown)}{more}) and no knowledge base: a knowledge base needs a "
        f"folder of its own, or its tables would be mixed with them. To add these files, run `{add}`; otherwise "
        "point --db / MCP_ANALYSIS_DB at a knowledge base or at a new or empty folder."
    )


def missing_database(path: Path) -> DatabaseNotFoundError:
    """The error for a local knowledge base that is not there: what the path is when it can never be
    one (`not_a_folder`, `foreign_folder`), else how to make one (the CLI's commands and `serve` say the same)."""
    return DatabaseNotFoundError(
        not_a_folder(path)
        or foreign_folder(path)
        or f"No knowledge base at {path}. Create one with `mcp-analysis --db {path} add PATH`, point --db / "
        "MCP_ANALYSIS_DB at an existing one, or try `mcp-analysis serve --sample`."
    )


def make_database_directory(path: Path) -> None:
    """Create a local knowledge base's directory, or say clearly why it cannot be one.

    Every command that may create a knowledge base (`add`, `sync`, `serve --watch`) comes here
    first, so a `--db` naming a file, or a path under one, reads the same from each."""
    if path.is_dir():
        foreign = foreign_folder(path)
        if foreign is not None:
            raise DatabaseNotFoundError(foreign)
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
