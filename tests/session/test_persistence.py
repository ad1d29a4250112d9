"""What a manager keeps about one session changes only through methods that say what happened."""

from __future__ import annotations

import pytest

from mcp_analysis.session.keys import SessionKey
from mcp_analysis.session.persistence import Persistence

pytestmark = pytest.mark.anyio


class _Keeper:
    async def commit(self, session: object) -> None:
        return None

    def admit_state(self, session: object, size: int) -> str | None:
        return None

    def room_for_charts(self, session: object) -> int | None:
        return None


def test_a_store_backed_session_is_a_droppable_copy_only_once_saved_or_loaded() -> None:
    kept = Persistence(SessionKey.handle("s_x"), _Keeper(), in_store=True)
    assert (kept.version, kept.kept, kept.stored_copy) == (0, False, False)
    kept.replaces(3)  # a new session that will overwrite an unusable record at version 3
    assert (kept.version, kept.kept, kept.stored_copy) == (3, False, False)
    kept.saved(4)
    assert (kept.version, kept.kept, kept.stored_copy) == (4, True, True)
    loaded = Persistence(SessionKey.principal("alice"), _Keeper(), in_store=True)
    loaded.loaded(7)
    assert (loaded.version, loaded.stored_copy) == (7, True)


def test_a_memory_only_session_is_kept_but_never_a_droppable_copy() -> None:
    kept = Persistence(SessionKey.http("conn"), _Keeper(), in_store=False)
    kept.kept_in_memory()
    assert kept.kept and not kept.stored_copy and kept.version == 0


async def test_a_session_is_held_while_any_request_or_save_uses_it() -> None:
    kept = Persistence(SessionKey.local(), _Keeper(), in_store=False)
    assert not kept.held
    kept.hold()
    kept.hold()
    assert kept.held
    assert kept.let_go() is False and kept.held  # one request still holds it
    assert kept.let_go() is True and not kept.held
    async with kept.commit_lock:
        assert kept.held  # a save in progress
    assert not kept.held
