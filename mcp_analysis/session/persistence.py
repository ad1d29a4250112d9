"""What a session manager keeps about one session: its key, the version it holds, who holds it.

A session created by a `SessionManager` owns one `Persistence`; a standalone session (the
CLI, the pydantic-ai toolset, the Python API) has none and is kept nowhere. The session
asks its keeper to write it through after every call that changed it (`commit`), whether
it may keep a larger interpreter state (`admit_state`) and how much of its charts memory may
hold (`room_for_charts`); the manager updates the record through the methods below, which say
what happened.
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

import anyio

from mcp_analysis.session.keys import SessionKey
from mcp_analysis.session.stores.chunks import DumpMemo

S = TypeVar("S", contravariant=True)


class Keeper(Protocol[S]):
    """Who keeps a session (the manager): written through after each change, asked before a state grows."""

    async def commit(self, session: S) -> None:
        """Keep `session` after a call changed it; raises (failing the call) when it cannot."""

    def admit_state(self, session: S, size: int) -> str | None:
        """None if `session` may keep an interpreter state of `size` bytes, else why not."""

    def room_for_charts(self, session: S) -> int | None:
        """Bytes of charts `session` may keep in memory next to its state (None: no bound)."""


class Persistence(Generic[S]):
    """One session's place in a manager: key, kept version, and the calls holding it in memory."""

    def __init__(self, key: SessionKey, keeper: Keeper[S], *, in_store: bool) -> None:
        self.key = key
        self.keeper = keeper
        #: The manager keeps this key in its store (so memory holds only a copy once kept).
        self.in_store = in_store
        #: Serializes this session's saves: a save must not interleave with another call's.
        self.commit_lock = anyio.Lock(fast_acquire=True)  # uncontended: no trip through the event loop
        #: The dump's chunks as the store last held them: a save writes only the chunks that changed.
        self.dump = DumpMemo()
        self._version = 0
        self._kept = False
        self._calls = 0

    @property
    def version(self) -> int:
        """The store's version this copy is at (0: none stored yet); the next save expects it."""
        return self._version

    @property
    def kept(self) -> bool:
        """Whether the manager keeps this session (it held something worth keeping once)."""
        return self._kept

    @property
    def stored_copy(self) -> bool:
        """Memory holds only a copy of what the store has: the session may leave memory when idle."""
        return self._kept and self.in_store

    @property
    def held(self) -> bool:
        """A request holds the session or a save of it runs: it must stay in memory."""
        return self._calls > 0 or self.commit_lock.locked()

    def loaded(self, version: int) -> None:
        """This copy was read from the store at `version`."""
        self._version, self._kept = version, True

    def saved(self, version: int) -> None:
        """This copy was written to the store, which now holds `version`."""
        self._version, self._kept = version, True

    def kept_in_memory(self) -> None:
        """The manager keeps this session in memory only (its key ends with its connection)."""
        self._kept = True

    def replaces(self, version: int) -> None:
        """The first save overwrites an unusable stored record at `version` (new, not yet kept)."""
        self._version = version

    def hold(self) -> None:
        """A request uses the session: it stays in memory until `let_go`."""
        self._calls += 1

    def let_go(self) -> bool:
        """A request is done with the session; True when no request holds it any more."""
        self._calls -= 1
        return self._calls == 0
