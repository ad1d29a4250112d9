"""When a local knowledge base was last written, read off its folders without opening it.

Lance commits each table version as a new manifest under ``<table>.lance/_versions``, so that
folder's modification time is the table's last commit. A hint for work that starts before the
database is opened (`add` warms its conversion worker when a file it names is newer), never a
reason to read or skip a file: stdlib only, so asking costs no import of LanceDB.
"""

from __future__ import annotations

from pathlib import Path

from mcp_analysis.paths import is_local_path


def last_written(location: str | Path) -> float | None:
    """The newest commit time of the knowledge base's tables: 0.0 where none was made yet (any file
    is newer), None where it cannot be told (an object store, a folder that cannot be read)."""
    if not is_local_path(location):
        return None
    try:
        return max((p.stat().st_mtime for p in Path(location).glob("*.lance/_versions")), default=0.0)
    except OSError:
        return None
