"""The paths the settings make the server's own, which `add`, `sync` and a watcher never read.

Read from the whole settings (the knowledge base, the config and tokens files, the sessions
folder), so this sits above config.py; the check itself is excluded.py's, below the store.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from mcp_analysis.config import Settings
from mcp_analysis.ingest.excluded import Excluded, real_path
from mcp_analysis.paths import data_home, is_local_path

OWN_FOLDER = "the knowledge base's own folder"


def excluded_paths(settings: Settings, db_path: str | os.PathLike[str] | None = None) -> Excluded:
    """The paths `settings` make the server's own: its knowledge base (`db_path`, default `settings.db`),
    configuration file, tokens file and sessions folder."""
    entries: list[tuple[Path, str]] = []
    db = os.fspath(db_path if db_path is not None else settings.db)
    if is_local_path(db):
        entries.append((real_path(db), OWN_FOLDER))
    if settings.config_file is not None:
        entries.append((real_path(settings.config_file), "the configuration file in use (it may hold secrets)"))
    if settings.server.tokens_file is not None:
        entries.append((real_path(settings.server.tokens_file), "the bearer tokens file (server.tokens_file)"))
    sessions = settings.sessions.dir or data_home() / "sessions"
    entries.append((real_path(sessions), "the folder of hibernated sessions (sessions.dir)"))
    files = []
    for where, why in entries:
        try:
            st = where.stat()
        except OSError:
            continue
        if stat.S_ISREG(st.st_mode):
            files.append((st.st_dev, st.st_ino, why))
    return Excluded(tuple(entries), tuple(files))
