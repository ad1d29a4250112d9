"""The memory budget for interpreter states (`sessions.max_memory_mb`).

Every live session holds its last interpreter state in this process's memory. A session
kept in the store may always grow: beyond the budget, idle ones leave memory (least
recently used first) and are loaded again on their next call. Sessions that live only in
memory cannot leave it without being lost, so they share the budget, and the call that
would pass it keeps nothing (its result says so; earlier variables stay).
"""

from __future__ import annotations

from mcp_analysis.config import Settings
from mcp_analysis.session.analysis import AnalysisSession
from mcp_analysis.session.live import LiveSessions, busy


def state_size(session: AnalysisSession) -> int:
    state = session.interpreter_state
    return len(state) if state is not None else 0


class MemoryBudget:
    """The budget over the states of `live` sessions, and what it dropped."""

    def __init__(self, settings: Settings, live: LiveSessions) -> None:
        # At least one session's largest state: below it, no session could ever keep one.
        self.budget = max(settings.sessions.max_memory_mb, settings.sandbox.max_state_mb) * 1024 * 1024
        self.live = live
        #: Idle kept sessions dropped from memory to stay within the budget.
        self.evictions = 0

    @property
    def state_bytes(self) -> int:
        """Interpreter state held in memory by the live sessions."""
        return sum(state_size(s) for s in self.live.sessions())

    @property
    def exceeded(self) -> bool:
        return self.state_bytes > self.budget

    def admit(self, session: AnalysisSession, size: int) -> str | None:
        """None if `session` may keep a state of `size` bytes (asked before it is kept), else why not."""
        if session.persistence.in_store:
            return None
        held = sum(state_size(s) for s in self.live.sessions() if s is not session and not s.persistence.stored_copy)
        if held + size <= self.budget:
            return None
        return (
            f"the server's memory for analysis sessions is full ({held / 2**20:,.0f} MB held by sessions that "
            f"live only in memory, this state {size / 2**20:,.0f} MB, budget {self.budget // 2**20} MB, "
            "sessions.max_memory_mb)"
        )

    async def drop_idle_copies(self) -> None:
        """Within the budget again: idle sessions whose state the store has leave memory, oldest first."""
        held = self.state_bytes
        if held <= self.budget:
            return
        for key, session in self.live.least_recent_first():
            if held <= self.budget:
                break
            size = state_size(session)
            if busy(session) or not session.persistence.stored_copy or not size:
                continue
            held -= size
            await self.live.evict(key, session)
            self.evictions += 1
