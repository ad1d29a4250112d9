"""What every part of the `Store` shares: its tables, its settings row and its layout.

The store is split by concern into mixins over this base (reads.py, writes.py,
maintenance.py; database.py opens and assembles them). The layout (store/layout.py)
is private: callers ask the properties below, never which kind of database it is.
"""

from __future__ import annotations

from typing import Any

from mcp_analysis.paths import is_local_path
from mcp_analysis.store import schema
from mcp_analysis.store.layout import Layout
from mcp_analysis.store.settings_row import StoredSettings

# Object stores: fail within seconds, not after object_store's default 3 minutes of retries, so a
# store outage reaches clients (and /healthz) as a clear error. Settings in `storage_options` win.
OBJECT_STORE_DEFAULTS = {
    "connect_timeout": "5s",
    "timeout": "60s",
    "client_max_retries": "3",
    "client_retry_timeout": "15",
}


def object_store_options(location: str, configured: dict[str, str] | None) -> dict[str, str] | None:
    """LanceDB storage options for `location`: none for local paths (AWS_* variables are read by LanceDB)."""
    if is_local_path(location):
        return dict(configured) if configured else None
    return {**OBJECT_STORE_DEFAULTS, **(configured or {})}


class StoreBase:
    """The tables of one knowledge base, and what its layout says about them."""

    def __init__(
        self,
        path: str,
        connection: Any,
        tables: dict[str, Any],
        settings: StoredSettings | None,
        layout: Layout,
        storage_options: dict[str, str] | None = None,
    ) -> None:
        self.path = path
        self.tables = tables
        self.settings = settings
        self.storage_options = storage_options
        self._connection = connection
        self._layout = layout

    def lance_options(self) -> dict[str, str] | None:
        """The storage options Lance is given for this knowledge base (pylance writes fragments with them)."""
        return object_store_options(self.path, self.storage_options)

    @property
    def read_only(self) -> bool:
        """We never write to this database (another application owns it)."""
        return self._layout.read_only

    @property
    def ids_are_immutable(self) -> bool:
        """A document id always names the same content: per-id caches never go stale."""
        return self._layout.ids_are_immutable

    def describe(self) -> str:
        """What this database is, for messages and `info`."""
        return self._layout.describe()

    def check_writable(self) -> None:
        """Raise before anything is written to a database we only read."""
        self._layout.refuse_writes(self.path)

    @property
    def ready(self) -> bool:
        return all(name in self.tables for name in schema.REQUIRED_TABLES) and self.settings is not None

    def has_table(self, name: str) -> bool:
        return name in self.tables

    def table(self, name: str) -> Any:
        return self.tables[name]
