"""What one trivial `execute_code` costs inside the sandbox, piece by piece.

Every call feeds the code to the session's monty worker and then dumps the interpreter's
state: the dump is what rolls a session back after a crash or timeout, what hibernation
keeps, and what the session store saves. This prints, on one warm worker, the p50 of:

- ``feed_run('1')`` alone (the worker round trip; the floor of any call);
- ``dump()`` of an empty interpreter, of one holding the sandbox prelude (the `_Record`
  class and the helpers behind ``search()``, ``list_documents()``, ``chart()``), and of one
  that also keeps 1 MB and then 10 MB of strings (an analysis holding document text);
- ``Interpreter.execute('1')``: our whole sandbox path (lock, liveness check, feed, dump,
  the state budget, the result);

and how many bytes each call adds to the dumped state (monty keeps every fed snippet's
source, so a session's state grows with the code it ran).

    python bench/sandbox_floor.py [--calls 400] [--runs 3]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from pydantic_monty import AsyncMonty

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _machine import describe, machine

from mcp_analysis.sandbox.interpreter import Interpreter
from mcp_analysis.sandbox.pool import WorkerPool
from mcp_analysis.sandbox.presentation import PRELUDE
from mcp_analysis.sandbox.settings import SandboxSettings


def quiet(stream: str, text: str) -> None:
    pass


async def p50_ms(calls: int, step: Callable[[], Awaitable[Any]]) -> float:
    for _ in range(min(50, calls)):
        await step()
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        await step()
        times.append((time.perf_counter() - started) * 1000)
    return statistics.median(times)


async def one_run(calls: int) -> dict[str, float]:
    out: dict[str, float] = {}
    async with (
        AsyncMonty(max_processes=2, min_processes=2) as monty,
        monty.checkout() as empty,
        monty.checkout() as prelude,
    ):
        await empty.feed_run("x = 1", print_callback=quiet)
        await prelude.feed_run(PRELUDE, print_callback=quiet)
        out["feed_ms"] = await p50_ms(calls, lambda: empty.feed_run("1", print_callback=quiet))
        out["dump_empty_ms"] = await p50_ms(calls, empty.dump)
        out["dump_prelude_ms"] = await p50_ms(calls, prelude.dump)
        out["state_prelude_bytes"] = float(len(await prelude.dump() or b""))
        before = len(await empty.dump() or b"")
        code = "total = sum(range(10))  # an ordinary line of code"
        for _ in range(100):
            await empty.feed_run(code, print_callback=quiet)
        out["state_growth_bytes_per_call"] = (len(await empty.dump() or b"") - before) / 100
        out["state_growth_code_chars"] = float(len(code))
        # What the dump costs an analysis that keeps data: every call pays it, whatever it ran.
        for megabytes in (1, 10):
            await prelude.feed_run(f"kept = ['x' * 1000 for _ in range({megabytes * 1000})]", print_callback=quiet)
            out[f"dump_{megabytes}mb_ms"] = await p50_ms(max(5, calls // 40), prelude.dump)
    settings = SandboxSettings(workers=1)
    async with WorkerPool(settings) as pool:
        interpreter = Interpreter(pool, settings, prelude=PRELUDE)
        await interpreter.execute("x = 1")
        out["interpreter_execute_ms"] = await p50_ms(calls, lambda: interpreter.execute("1"))
        await interpreter.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=400)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    runs = [anyio.run(one_run, args.calls) for _ in range(args.runs)]

    def cell(key: str, fmt: str = "{:.3f}") -> str:
        values = sorted(r[key] for r in runs)
        median = statistics.median(values)
        return f"{fmt.format(median)} ({fmt.format(values[0])}-{fmt.format(values[-1])})"

    print(f"p50 over {args.calls} calls, median (min-max) of {args.runs} runs")
    print(f"  feed_run('1') alone, ms                      {cell('feed_ms')}")
    print(f"  dump(), empty interpreter, ms                {cell('dump_empty_ms')}")
    print(f"  dump(), with the sandbox prelude, ms         {cell('dump_prelude_ms')}")
    print(f"  dump() with 1 MB of strings kept, ms         {cell('dump_1mb_ms')}")
    print(f"  dump() with 10 MB of strings kept, ms        {cell('dump_10mb_ms')}")
    print(f"  Interpreter.execute('1') (whole path), ms    {cell('interpreter_execute_ms')}")
    print(f"  state with the prelude, bytes                {cell('state_prelude_bytes', '{:.0f}')}")
    print(
        f"  state growth per call of {runs[0]['state_growth_code_chars']:.0f} chars, bytes  "
        f"{cell('state_growth_bytes_per_call', '{:.0f}')}"
    )
    loads = machine()["load_1_5_15"]
    print(f"{describe()}; load at the end {loads}")
    print(json.dumps({"bench": "sandbox_floor", "machine": machine(), "runs": runs}))


if __name__ == "__main__":
    main()
