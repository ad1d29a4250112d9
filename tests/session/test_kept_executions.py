"""The executions a session keeps stay within MAX_EXECUTIONS_KEPT and MAX_EXECUTION_CHARS_KEPT, also
across a reload of the state and a new analysis (the kept size is carried, not re-summed per call)."""

from __future__ import annotations

import pytest

from mcp_analysis.session import state as state_module
from mcp_analysis.session.state import AnalysisState, CodeExecutionEntry


def entry(n: int, chars: int) -> CodeExecutionEntry:
    return CodeExecutionEntry(index=n, code="x" * chars, success=True)


def kept_chars(state: AnalysisState) -> int:
    return sum(len(e.code) for e in state.executions)


def test_the_oldest_executions_go_first_past_the_count(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_module, "MAX_EXECUTIONS_KEPT", 5)
    state = AnalysisState()
    for n in range(1, 13):
        state.record_execution(entry(n, 3))
    assert [e.index for e in state.executions] == [8, 9, 10, 11, 12]


def test_the_size_bound_holds_across_a_reload_and_a_new_analysis(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(state_module, "MAX_EXECUTION_CHARS_KEPT", 1000)
    state = AnalysisState()
    for n in range(1, 8):
        state.record_execution(entry(n, 300))
    assert kept_chars(state) <= 1000 and [e.index for e in state.executions] == [5, 6, 7]
    reloaded = AnalysisState.model_validate(state.model_dump())  # as a session store gives it back
    reloaded.record_execution(entry(8, 300))
    assert [e.index for e in reloaded.executions] == [6, 7, 8]
    reloaded.record_execution(entry(9, 900))
    assert [e.index for e in reloaded.executions] == [9]
    reloaded.start_new_analysis()
    for n in range(10, 13):
        reloaded.record_execution(entry(n, 300))
    assert [e.index for e in reloaded.executions] == [10, 11, 12]  # nothing of before counts
    reloaded.record_execution(entry(13, 300))
    assert [e.index for e in reloaded.executions] == [11, 12, 13]
