"""cite's repair of mangled ids: indexed, unambiguous, and off the event loop."""

from __future__ import annotations

import random
import time
import uuid

import anyio
import pytest

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.session.analysis import AnalysisSession
from mcp_analysis.session.citations import SeenIds, repair_ids, resolve_citations
from mcp_analysis.session.state import AnalysisState, CodeExecutionEntry

pytestmark = pytest.mark.anyio


def mangle(chunk_id: str, rng: random.Random) -> str:
    kind = rng.randrange(3)
    position = rng.randrange(len(chunk_id))
    if kind == 0:  # one character changed
        other = "0" if chunk_id[position] != "0" else "1"
        return chunk_id[:position] + other + chunk_id[position + 1 :]
    if kind == 1:  # one character dropped
        return chunk_id[:position] + chunk_id[position + 1 :]
    return chunk_id[: rng.randrange(12, 30)]  # truncated


def seen_from(ids: list[str]) -> SeenIds:
    state = AnalysisState()
    state.executions.append(CodeExecutionEntry(index=1, code="print(ids)", stdout="\n".join(ids), success=True))
    return SeenIds().update(state)


def test_repairs_are_correct_and_never_ambiguous() -> None:
    rng = random.Random(8)
    ids = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(10_000)]
    seen = seen_from(ids)
    assert len(seen) == 10_000
    originals = rng.sample(ids, 500)
    mangled = {mangle(i, rng): i for i in originals}
    repairs = repair_ids(list(mangled), seen)
    wrong = {m: r for m, r in repairs.items() if r != mangled[m]}
    assert not wrong
    assert len(repairs) >= 0.97 * len(mangled)  # the rest were left unrepaired, never mis-repaired

    twin_a = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeee01"
    twin_b = "aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeee02"
    twins = seen_from([twin_a, twin_b])
    assert repair_ids(["aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeee03"], twins) == {}  # equally close: ambiguous
    assert repair_ids(["aaaaaaaa-bbbb"], twins) == {}  # a prefix of both
    assert repair_ids(["aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeee0"], twins) == {}  # truncated: both match
    assert repair_ids([twin_a + "x"], twins) == {twin_a + "x": twin_a}  # over-long: one prefix


async def test_a_large_repair_does_not_stall_other_clients(kb: KnowledgeBase) -> None:
    rng = random.Random(5)
    async with AnalysisSession(kb) as session:
        hits = await session.search("NavCore buffer overflow", limit=3)
        real = hits[0].chunk_id
        noise = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(10_000)]
        session.state.execution_counter += 1
        session.state.executions.append(
            CodeExecutionEntry(index=1, code="print(ids)", stdout="\n".join(noise), success=True)
        )
        mangled_real = real[:-1] + ("0" if real[-1] != "0" else "1")
        requested = [mangled_real] + [mangle(i, rng) for i in rng.sample(noise, 499)]

        gaps: list[float] = []
        done = anyio.Event()

        async def other_client() -> None:
            last = time.monotonic()
            while not done.is_set():
                await anyio.sleep(0.01)
                now = time.monotonic()
                gaps.append(now - last)
                last = now

        async with anyio.create_task_group() as tg:
            tg.start_soon(other_client)
            with anyio.fail_after(60):
                outcome = await session.cite(requested)
            done.set()
        assert outcome.repaired[mangled_real] == real
        assert [c.chunk_id for c in outcome.citations] == [real]
        assert len(outcome.ignored) == 499  # repaired to ids that are not in the store: ignored, not cited
        assert gaps and max(gaps) < 2.0, max(gaps)  # the event loop kept turning (generous bound)


async def test_repair_does_not_depend_on_which_copy_of_the_session_answers(kb: KnowledgeBase) -> None:
    """After new_analysis the last analysis's searches are gone from the state; repair must not remember
    them in memory either, or a live copy and a reloaded one (another replica) would answer differently."""
    async with AnalysisSession(kb) as session:
        hits = await session.search("NavCore buffer overflow", limit=2)
        old = hits[0].chunk_id
        await session.cite([hits[1].chunk_id])  # a cite indexes what the analysis has seen so far
        await session.new_analysis()
        current = (await session.search("quarterly revenue", limit=1))[0].chunk_id
        assert current != old
        mangled = old[:-1] + ("0" if old[-1] != "0" else "1")
        state = session.state.model_copy(deep=True)  # what another replica would load
        live = await session.cite([mangled, current])
    async with AnalysisSession(kb, state=state) as reloaded:
        loaded = await reloaded.cite([mangled, current])
    assert (live.repaired, live.ignored) == (loaded.repaired, loaded.ignored) == ({}, [mangled])


async def test_the_index_a_session_passes_is_kept_between_cites(kb: KnowledgeBase) -> None:
    """cite indexes what the session has seen once, in the SeenIds it is given (not a throw-away copy),
    so the next cite scans only what is new."""
    corpus = await kb.open_corpus(None)
    hits = await corpus.search("NavCore buffer overflow", 2)
    state = AnalysisState()
    state.record_search("NavCore buffer overflow", hits)
    seen = SeenIds()
    await resolve_citations(state, corpus, [hits[0].chunk_id], seen)
    assert {h.chunk_id for h in hits} <= set(seen.choices())
