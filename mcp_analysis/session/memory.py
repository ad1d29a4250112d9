"""The memory budget for sessions' interpreter states and charts (`sessions.max_memory_mb`).

Every live session holds its last interpreter state and the charts it keeps (PNG, SVG, spec;
`Chart.held_bytes`) in this process's memory, between calls and during them: both count (charts
were not counted: 30 sessions of ~5.5 MB of charts under a 64 MB budget took +190 MB, none
refused). A session kept in the store may always grow: beyond the budget, idle ones leave
memory (least recently used first) and are loaded again on their next call. Sessions that
live only in memory cannot leave it without being lost, so they share the budget, and the
call that would pass it keeps nothing (its result says so; earlier variables stay), nor the
charts that would (their lines say so; `room_for_charts`).

A session a call uses cannot leave memory either, so calls at once could load far more than
the budget (20 calls on 20 kept 40 MB sessions: 800 MB). A call whose session must be loaded
first *reserves* its size (`reserve`): while states held, reservations and other overheads
(open legacy HTTP sessions, `overheads`) leave no room even after idle copies leave memory,
it waits for a call to end, at most `sessions.memory_wait_seconds`, then it is refused with a
retryable error. The size is the store's figure when it has one, else the last size this
process saw, else `sandbox.max_state_mb` (corrected once loaded).
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

import anyio

from mcp_analysis.config import Settings
from mcp_analysis.errors import SessionBusyError
from mcp_analysis.session.analysis import AnalysisSession
from mcp_analysis.session.keys import SessionKey
from mcp_analysis.session.live import LiveSessions, busy

_SIZES_REMEMBERED = 10_000  # last state sizes of sessions that left memory (for `size_of`)


def state_size(session: AnalysisSession) -> int:
    state = session.interpreter_state
    return len(state) if state is not None else 0


def held_size(session: AnalysisSession) -> int:
    """What the budget counts of a session: its interpreter state and the charts it keeps."""
    return state_size(session) + session.state.charts_held


class MemoryBudget:
    """The budget over the states of `live` sessions, and what it dropped."""

    def __init__(self, settings: Settings, live: LiveSessions) -> None:
        # At least one session's largest state: below it, no session could ever keep one.
        self.budget = max(settings.sessions.max_memory_mb, settings.sandbox.max_state_mb) * 1024 * 1024
        self.largest_state = settings.sandbox.max_state_mb * 1024 * 1024
        self.wait_seconds = settings.sessions.memory_wait_seconds
        self.live = live
        #: Memory other parts of the server hold for sessions, by what (bytes, asked when needed).
        self.overheads: dict[str, Callable[[], int]] = {}
        #: Bytes reserved by calls loading a session now.
        self.reserved = 0
        #: Idle kept sessions dropped from memory to stay within the budget.
        self.evictions = 0
        #: Calls refused because the budget had no room for their session within the wait.
        self.refusals = 0
        self._sizes: OrderedDict[SessionKey, int] = OrderedDict()
        self._room: anyio.Event | None = None

    @property
    def state_bytes(self) -> int:
        """Interpreter states and kept charts held in memory by the live sessions."""
        return sum(held_size(s) for s in self.live.sessions())

    @property
    def used(self) -> int:
        """What counts against the budget: states held, reservations and overheads."""
        return self.state_bytes + self.reserved + sum(count() for count in self.overheads.values())

    @property
    def exceeded(self) -> bool:
        return self.used > self.budget

    def admit(self, session: AnalysisSession, size: int) -> str | None:
        """None if `session` may keep a state of `size` bytes (asked before it is kept), else why not."""
        if session.persistence.in_store:
            return None
        held = self._held_by_others(session) + session.state.charts_held
        if held + size <= self.budget:
            return None
        return (
            f"the server's memory for analysis sessions is full ({held / 2**20:,.0f} MB held by sessions that "
            f"live only in memory, this state {size / 2**20:,.0f} MB, budget {self.budget // 2**20} MB, "
            "sessions.max_memory_mb)"
        )

    def room_for_charts(self, session: AnalysisSession) -> int | None:
        """Bytes `session` may hold in charts next to its state (None: no bound, it may leave memory)."""
        if session.persistence.in_store:
            return None
        return max(0, self.budget - self._held_by_others(session) - state_size(session))

    def _held_by_others(self, session: AnalysisSession) -> int:
        """What the sessions that live only in memory hold, but `session`."""
        return sum(held_size(s) for s in self.live.sessions() if s is not session and not s.persistence.stored_copy)

    # ------------------------------------------------------------ admission

    def size_of(self, key: SessionKey, stored: int | None) -> int:
        """What to reserve to load `key`: the store's figure, else the last seen, else the largest state."""
        if stored is not None:
            return stored
        return self._sizes.get(key, self.largest_state)

    def remember(self, key: SessionKey, session: AnalysisSession) -> None:
        """`session` leaves memory: its size is what loading it again will take."""
        self._sizes[key] = held_size(session)
        self._sizes.move_to_end(key)
        while len(self._sizes) > _SIZES_REMEMBERED:
            self._sizes.popitem(last=False)

    async def room_for(self, size: int) -> bool:
        """Whether `size` more bytes fit (after idle copies left memory); reserves nothing."""
        if self.used + size <= self.budget:
            return True
        await self.drop_idle_copies(room=size)
        return self.used + size <= self.budget

    async def reserve(self, size: int) -> None:
        """Hold `size` bytes of the budget (until `release`), waiting for room; SessionBusyError when none comes."""
        size = min(size, self.budget)  # one session's state always fits an otherwise empty budget
        deadline = anyio.current_time() + self.wait_seconds
        while not await self.room_for(size):
            remaining = deadline - anyio.current_time()
            if remaining <= 0:
                self.refusals += 1
                raise SessionBusyError(
                    f"The server's memory for analysis sessions is taken by other calls right now "
                    f"({self.used / 2**20:,.0f} MB of {self.budget // 2**20} MB, sessions.max_memory_mb; this "
                    f"session needs {size / 2**20:,.1f} MB more); this call waited {self.wait_seconds:g} s "
                    "(sessions.memory_wait_seconds) and was not run. Retry shortly."
                )
            if self._room is None:
                self._room = anyio.Event()
            with anyio.move_on_after(remaining):
                await self._room.wait()
        self.reserved += size

    def release(self, size: int) -> None:
        self.reserved -= min(size, self.budget)
        self.wake()

    def wake(self) -> None:
        """Room may have come (a call ended, a reservation went): waiting calls look again."""
        if self._room is not None:
            self._room.set()
            self._room = None

    # ------------------------------------------------------------- dropping

    async def drop_idle_copies(self, room: int = 0) -> None:
        """Within the budget (with `room` to spare) again: idle sessions whose state the store has
        leave memory, oldest first."""
        over = self.used + room - self.budget
        if over <= 0:
            return
        for key, session in self.live.least_recent_first():
            if over <= 0:
                break
            size = held_size(session)
            if busy(session) or not session.persistence.stored_copy or not size:
                continue
            over -= size
            self.remember(key, session)
            await self.live.evict(key, session)
            self.evictions += 1
