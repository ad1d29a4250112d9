"""Write-through: each call that changed a kept session saves it, compare-and-set on its version.

A copy that another call (maybe on another replica) has overtaken cannot overwrite newer
state: its save fails as a conflict and the call's effects are discarded. The store's
bounds (`sessions.max_stored`, `max_per_principal`, `max_stored_mb`) are checked in the same
atomic step; each refusal becomes a message naming the setting and what to do.
"""

from __future__ import annotations

import time

from mcp_analysis.config import Settings
from mcp_analysis.errors import SessionBusyError, SessionLimitError, SessionStoreError
from mcp_analysis.session.analysis import AnalysisSession
from mcp_analysis.session.stores.base import (
    Limits,
    SessionRecord,
    SessionStore,
    StoreFull,
    StoreOutOfMemory,
    StoreReset,
    StoreUnavailable,
    VersionConflict,
)
from mcp_analysis.session.upkeep import store_full_message

#: What a failed save raises; the copy that tried is stale then and must leave memory.
SaveRefused = (SessionBusyError, SessionLimitError, SessionStoreError)


class WriteThrough:
    """Saves sessions to `store` under the configured bounds."""

    def __init__(self, store: SessionStore, settings: Settings) -> None:
        self.store = store
        self.settings = settings

    def limits(self, owner: str | None) -> Limits:
        # Anonymous clients are not one principal: without tokens the server cannot tell
        # them apart (and with tokens there are none), so only the total bounds them.
        s = self.settings.sessions
        per_principal = s.max_per_principal if owner is not None else s.max_stored
        # At least one session's largest state: below it, "the store is full" would never clear.
        stored_mb = max(s.max_stored_mb, self.settings.sandbox.max_state_mb)
        return Limits(s.ttl_seconds, s.max_stored, per_principal, stored_mb * 1024 * 1024)

    async def save(self, session: AnalysisSession) -> int:
        """Store `session` if the store still holds the version it was loaded at; the new version.

        Raises one of `SaveRefused` (a conflict, a bound, the store down)."""
        kept = session.persistence
        record = SessionRecord(
            key=kept.key.storage,
            session_id=session.id,
            owner=session.owner,
            document_filter=session.state.document_filter,
            state=session.state,
            last_used=time.time(),
        )
        try:
            return await self.store.save(
                record,
                session.interpreter_state,
                expected=kept.version,
                limits=self.limits(session.owner),
                memo=kept.dump,
            )
        except VersionConflict:
            raise SessionBusyError(
                f"Analysis session {session.id!r} was changed by another call (maybe on another server "
                "replica) while this one ran; this call's effects were discarded. Retry the call."
            ) from None
        except StoreFull as full:
            raise SessionLimitError(self._full_message(full, session.owner)) from None
        except StoreReset:
            raise SessionStoreError(
                f"Analysis session {session.id!r} is gone: the session store lost what it kept (Redis restarted "
                "without persistence, or was emptied) while this call ran, so its effects were not kept. Call "
                "new_analysis (or omit `session`) to start a new one."
            ) from None
        except StoreOutOfMemory:
            raise SessionLimitError(store_full_message(self.store.description, call_discarded=True)) from None
        except StoreUnavailable as exc:
            raise SessionStoreError(
                f"This call's effects could not be saved: the session store "
                f"({self.store.description}) cannot be reached ({exc}). The session is as it was before "
                "this call; retry shortly."
            ) from None

    def _full_message(self, full: StoreFull, owner: str | None) -> str:
        ttl = self.settings.sessions.ttl_seconds
        if full.scope == "principal":
            return (
                f"Too many analysis sessions kept for principal {owner!r} (limit {full.limit}, "
                "sessions.max_per_principal); this call's effects were not kept. Continue an existing session "
                f"(pass its `session` handle) or wait for idle ones to expire (sessions.ttl_seconds = {ttl:g})."
            )
        if full.scope == "bytes":
            return (
                f"The session store is full: the sessions it keeps would take more than {full.limit // 2**20:,} MB "
                "(sessions.max_stored_mb) with this call's state; this call's effects were not kept. Keep less in "
                "variables (del the large ones), start a new analysis, or retry after idle sessions expire "
                f"(sessions.ttl_seconds = {ttl:g})."
            )
        return (
            f"The server keeps too many analysis sessions (limit {full.limit}, sessions.max_stored); this call's "
            "effects were not kept. Continue an existing session (pass its `session` handle) or retry after idle "
            f"sessions expire (sessions.ttl_seconds = {ttl:g})."
        )
