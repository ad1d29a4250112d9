"""cite's repair of mangled ids: indexed rapidfuzz repair vs a difflib scan of every seen id.

500 mangled ids against 10,000 seen ids. The baseline (difflib against every seen id, the
unindexed repair) is measured on a sample of the same candidates in the same run and extrapolated
per candidate. Also reports the longest event-loop stall seen by a 10 ms ticker while the
repair runs through `resolve_citations`' off-loop path.

    .venv/bin/python bench/cite.py [--seen 10000] [--mangled 500] [--baseline-sample 10]
"""

from __future__ import annotations

import argparse
import difflib
import json
import random
import time
import uuid

import anyio
from _machine import describe, machine

from mcp_analysis.session.citations import SeenIds, repair_ids
from mcp_analysis.session.state import AnalysisState, CodeExecutionEntry


def old_repair(candidate: str, known: list[str]) -> str | None:
    """The previous algorithm (difflib against every seen id), for the baseline."""
    if len(candidate) >= 8:
        prefixed = [k for k in known if k.startswith(candidate) or candidate.startswith(k)]
        if len(prefixed) == 1:
            return prefixed[0]
    scored = sorted(((difflib.SequenceMatcher(None, candidate, k).ratio(), k) for k in known), reverse=True)
    if scored and scored[0][0] >= 0.85 and (len(scored) == 1 or scored[0][0] - scored[1][0] >= 0.05):
        return scored[0][1]
    return None


def mangle(chunk_id: str, rng: random.Random) -> str:
    position = rng.randrange(len(chunk_id))
    return chunk_id[:position] + ("0" if chunk_id[position] != "0" else "1") + chunk_id[position + 1 :]


async def measure(args: argparse.Namespace) -> dict[str, float]:
    rng = random.Random(1)
    ids = [str(uuid.UUID(int=rng.getrandbits(128))) for _ in range(args.seen)]
    state = AnalysisState()
    state.executions.append(CodeExecutionEntry(index=1, code="", stdout="\n".join(ids), success=True))
    originals = rng.sample(ids, args.mangled)
    mangled = [mangle(i, rng) for i in originals]

    started = time.perf_counter()
    seen = SeenIds().update(state)
    index_s = time.perf_counter() - started

    started = time.perf_counter()
    repairs = repair_ids(mangled, seen)
    repair_s = time.perf_counter() - started
    correct = sum(repairs.get(m) == o for m, o in zip(mangled, originals, strict=True))

    gaps: list[float] = []
    done = anyio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await anyio.sleep(0.01)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    async with anyio.create_task_group() as tg:
        tg.start_soon(ticker)
        await anyio.to_thread.run_sync(repair_ids, mangled, SeenIds().update(state))
        done.set()

    sample = mangled[: args.baseline_sample]
    started = time.perf_counter()
    for candidate in sample:
        old_repair(candidate, ids)
    baseline_per = (time.perf_counter() - started) / len(sample)
    return {
        "seen": args.seen,
        "mangled": args.mangled,
        "index_s": round(index_s, 3),
        "repair_s": round(repair_s, 3),
        "repaired_correctly": correct,
        "max_loop_stall_ms": round(max(gaps) * 1000, 1) if gaps else 0.0,
        "baseline_difflib_s_extrapolated": round(baseline_per * args.mangled, 1),
        "baseline_sample": len(sample),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seen", type=int, default=10_000)
    parser.add_argument("--mangled", type=int, default=500)
    parser.add_argument("--baseline-sample", type=int, default=10)
    host = machine()
    result = anyio.run(measure, parser.parse_args())
    width = max(len(k) for k in result)
    for key, value in result.items():
        print(f"{key:<{width}}  {value}")
    print(f"{describe()}; load at the end {machine()['load_1_5_15']}")
    print(json.dumps({"bench": "cite", "machine": host, **result}))


if __name__ == "__main__":
    main()
