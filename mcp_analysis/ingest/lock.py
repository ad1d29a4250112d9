"""One writer at a time per local knowledge base: an advisory lock file, awaited without blocking.

`add`, `rm`, `sync` and a server's watcher may write to one directory from several processes.
Each takes `.ingest.lock` in the knowledge base directory first. Waiting for it polls instead of
blocking in `flock`: a server that watches a folder keeps answering its clients while an `add`
in another process finishes, and a cancelled wait leaves no thread behind holding the lock.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path

import anyio

from mcp_analysis.errors import ReadOnlyDatabaseError
from mcp_analysis.paths import is_local_path

log = logging.getLogger(__name__)

LOCK_FILE = ".ingest.lock"
POLL_SECONDS = 0.2


@contextlib.asynccontextmanager
async def ingest_lock(db_path: str) -> AsyncIterator[None]:
    """Hold the knowledge base's exclusive ingest lock (local paths, POSIX) while the block runs.

    Object stores get none: ingests from several machines may run at once there, which LanceDB's
    atomic commits allow; leftovers of a killed ingest are removed only once settled
    (`Store.orphan_ids`), so one ingest never removes another's uncommitted batch."""
    if not is_local_path(db_path):
        yield
        return
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    try:
        lock_file = open(Path(db_path) / LOCK_FILE, "a+")  # noqa: SIM115 - held by the `with` below
    except OSError as exc:
        raise ReadOnlyDatabaseError(
            f"Cannot write to the knowledge base at {db_path} ({exc.strerror or exc}): adding, removing and "
            "syncing documents need write access to its folder. Searching and serving work read-only; to "
            "change it, copy it to a writable place and point --db / MCP_ANALYSIS_DB there."
        ) from None
    with lock_file as handle:
        warned = False
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if not warned:
                    log.warning("Another ingest is writing to %s; waiting for it to finish...", db_path)
                    warned = True
                await anyio.sleep(POLL_SECONDS)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
