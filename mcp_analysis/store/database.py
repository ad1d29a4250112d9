"""The LanceDB database: opening a knowledge base, and the `Store` assembled from its parts.

`Store.open` connects (a directory or an object-store URI), opens the tables it finds,
and asks store/identify.py which kind of database they are; the answer is a layout
(store/layout.py) the `Store` keeps to itself. Reads (reads.py), search candidates
(candidates.py), writes and orphan cleanup (writes.py) and indexes (maintenance.py) are its mixins. The layers above see
one kind of knowledge base: where kinds legitimately differ they ask `read_only`,
`ids_are_immutable`, `check_searchable` or `query_embedder`, never the kind.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import anyio

from mcp_analysis.errors import (
    AnalysisError,
    DatabaseDamagedError,
    DatabaseMismatchError,
    DatabaseNotFoundError,
    EmbedderError,
    StorageUnavailableError,
    damaged_database_message,
    exception_leaves,
    lance_read_failure,
    storage_error_message,
)
from mcp_analysis.paths import is_local_path, make_database_directory, missing_database
from mcp_analysis.store import schema
from mcp_analysis.store.base import object_store_options
from mcp_analysis.store.candidates import StoreCandidates
from mcp_analysis.store.fragments import StoreFragments
from mcp_analysis.store.identify import SUPPORTED, identify
from mcp_analysis.store.lance import lancedb, table_names
from mcp_analysis.store.layout import EmbedderChoice
from mcp_analysis.store.maintenance import StoreMaintenance


@contextmanager
def storage_errors(
    location: str, kinds: tuple[type[Exception], ...] = (OSError, RuntimeError), *, local: bool = True
) -> Iterator[None]:
    """On object storage, a store that fails (down, unreachable) is a clear, retryable error, not a crash;
    on a local disk (`local`), Lance's I/O error is a damaged knowledge base (an emptied or missing data
    file). Opening passes `local=False`: what cannot be opened there is told by `Store.open`.
    Reads run at once (a search's two legs) fail together, as a group: the first failure of a kind is the
    reason. Lance's scanner reports an unreachable store as a ValueError (pyarrow's ArrowInvalid) whose
    text names Lance's I/O error."""
    try:
        yield
    except BaseExceptionGroup as group:
        failure = next((exc for exc in exception_leaves(group) if _unavailable(exc, kinds)), None)
        translated = _translated(location, failure, local) if failure is not None else None
        if translated is None:
            raise
        raise translated from group
    except Exception as exc:
        translated = _translated(location, exc, local) if _unavailable(exc, kinds) else None
        if translated is None:
            raise
        raise translated from exc


def _translated(location: str, exc: BaseException, local: bool) -> AnalysisError | None:
    """The user's error for a storage failure, or None to let it pass as it is (a local error of the caller's)."""
    if not is_local_path(location):
        return StorageUnavailableError(storage_error_message(location, exc))
    if not local or _LANCE_IO not in str(exc):
        return None
    detail = lance_read_failure(exc)
    if "Permission denied" in detail:
        return AnalysisError(
            f"The knowledge base at {location} cannot be read ({detail}). Check that the user running "
            "mcp-analysis may read that folder and every file in it."
        )
    return DatabaseDamagedError(damaged_database_message(location, f"reading it failed ({detail})"))


_LANCE_IO = "LanceError(IO)"

#: How long a listed table that cannot be opened yet is given to appear: another process creating it
#: (its first ingest) makes the table's folder before the table's first version.
CREATING_GRACE = 3.0


async def _open_table(db: lancedb.AsyncConnection, name: str) -> Any:
    """Open a listed table, waiting out another process's creation of it (a folder with no version yet).

    After `CREATING_GRACE` seconds a table that still cannot be opened is reported as it is: a stray
    folder where a table should be is a database LanceDB cannot read."""
    deadline = time.monotonic() + CREATING_GRACE
    while True:
        try:
            return await db.open_table(name)
        except ValueError as exc:
            if "was not found" not in str(exc) or time.monotonic() > deadline:
                raise
        await anyio.sleep(0.05)


def _unavailable(exc: BaseException, kinds: tuple[type[Exception], ...]) -> bool:
    return isinstance(exc, kinds) or (isinstance(exc, ValueError) and _LANCE_IO in str(exc))


class Store(StoreFragments, StoreCandidates, StoreMaintenance):
    """Async LanceDB tables of one knowledge base, read through its layout."""

    @classmethod
    async def open(
        cls,
        path: str | Path,
        *,
        create: bool = False,
        read_consistency: timedelta | None = timedelta(seconds=1),
        storage_options: dict[str, str] | None = None,
    ) -> Store:
        """Open the knowledge base at `path` (create the directory and tables if `create`).

        `path` is a directory or an object-store URI (s3://bucket/prefix, gs://, az://).
        Anything LanceDB cannot read at all is a one-line `DatabaseMismatchError`.
        """
        location = str(path)
        try:
            with storage_errors(location, (OSError, RuntimeError, ValueError), local=False):
                return await cls._open(location, create, read_consistency, storage_options)
        except AnalysisError:
            raise
        except Exception as exc:
            reason = " ".join(str(exc).split())[:300] or type(exc).__name__
            raise DatabaseMismatchError(
                f"{location} cannot be read as a LanceDB knowledge base ({reason}). mcp-analysis reads {SUPPORTED}."
            ) from exc

    @classmethod
    async def _open(
        cls,
        location: str,
        create: bool,
        read_consistency: timedelta | None,
        storage_options: dict[str, str] | None,
    ) -> Store:
        if is_local_path(location):
            p = Path(location)
            if not p.exists() and not create:
                raise missing_database(p)
            make_database_directory(p)
        options = object_store_options(location, storage_options)
        db = await lancedb.connect_async(location, read_consistency_interval=read_consistency, storage_options=options)
        names = await table_names(db)
        tables: dict[str, Any] = {}
        for name in schema.TABLES:
            if name in names:
                tables[name] = await _open_table(db, name)
        if not tables and not create:
            raise DatabaseNotFoundError(
                f"{location} holds no knowledge base tables{_found(location)}. mcp-analysis serves {SUPPORTED}. "
                f"Add documents with `mcp-analysis --db {location} add PATH`."
            )
        stored, layout = await identify(location, tables, create)
        return cls(location, db, tables, stored, layout, storage_options)

    def storage_errors(self) -> AbstractContextManager[None]:
        """An object store that fails (down, unreachable) is a clear, retryable error, not a crash."""
        return storage_errors(self.path)

    # ------------------------------------------------------- what kinds differ in

    def query_embedder(self, configured: str, *, explicit: bool, base_url: str | None) -> EmbedderChoice:
        """The embedder for queries (the one that built the vectors, or a configured one that can read them).

        Raises `DatabaseMismatchError` when an explicitly configured embedder cannot read this database.
        """
        return self._layout.query_embedder(
            self.settings, configured, explicit=explicit, base_url=base_url, location=self.path
        )

    def embedder_failure(self, exc: EmbedderError, embedder: str) -> EmbedderError:
        """The error to show when the query embedder cannot run here (it may offer keyword-only search)."""
        return self._layout.embedder_failure(exc, self.path, embedder)

    def check_searchable(self) -> None:
        """Raise an `AnalysisError` when this database lacks what search needs (e.g. a full-text index)."""
        self._layout.check_searchable(self.path)

    async def read_latest(self) -> None:
        """Point every table at its latest version now (each otherwise follows on its own
        read-consistency timer)."""
        for table in list(self.tables.values()):
            await table.checkout_latest()

    async def catch_up(self) -> None:
        """After ``document_meta`` changed: read every table at its latest version, forget derived values."""
        await self._layout.catch_up(self.tables)

    # ------------------------------------------------------------- lifecycle

    async def refresh_tables(self) -> None:
        """Open the tables another process created since we opened (its first ingest)."""
        if schema.DOCUMENT_META in self.tables:
            return
        fresh = await Store.open(
            self.path, create=False, read_consistency=timedelta(seconds=1), storage_options=self.storage_options
        )
        self.tables.update(fresh.tables)
        if self.settings is None:
            self.settings, self._layout = fresh.settings, fresh._layout

    def close(self) -> None:
        self._connection.close()


def _found(location: str) -> str:
    """A short account of what a local directory holds instead of tables (for error messages)."""
    if not is_local_path(location) or not Path(location).is_dir():
        return ""
    entries = sorted(p.name + ("/" if p.is_dir() else "") for p in Path(location).iterdir())
    if not entries:
        return " (the directory is empty)"
    shown = ", ".join(entries[:6]) + (f", ... ({len(entries)} entries)" if len(entries) > 6 else "")
    return f" (found: {shown})"
