"""Collection paused during a served process's start-up imports, their objects frozen once per phase.

Each case runs in a fresh interpreter: a freeze cannot be undone in the test process.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

PROGRAM = """
import gc, json, sys, weakref
from mcp_analysis import process_gc

class Node:
    pass

def dead_cycles(n):
    refs = []
    for _ in range(n):
        node = Node()
        node.self = node  # only the collector can free it
        refs.append(weakref.ref(node))
    return refs

report = {}
with process_gc.imports_paused("server"):  # not an owned process: nothing happens
    report["library_paused"] = not gc.isenabled()
report["library_frozen"] = gc.get_freeze_count()

process_gc.own_process()
with process_gc.imports_paused("server"):
    report["owned_paused"] = not gc.isenabled()
    import json.decoder, email.parser  # a start-up import
    died = dead_cycles(1000)
    kept = [[i] for i in range(1000)]
report["owned_enabled_after"] = gc.isenabled()
report["owned_frozen"] = gc.get_freeze_count()
report["dead_cycles_left"] = sum(ref() is not None for ref in died)  # freed before the freeze, not frozen
report["kept_frozen"] = not gc.is_tracked(kept) or not any(kept is o for o in gc.get_objects())

with process_gc.imports_paused("server"):  # the same phase again (a runtime started anew): untouched
    report["again_paused"] = not gc.isenabled()
    again = [[i] for i in range(1000)]
report["again_frozen"] = gc.get_freeze_count()

try:
    with process_gc.imports_paused("runtime"):
        more = [[i] for i in range(1000)]
        raise ImportError("a library that fails to import")
except ImportError:
    pass
report["after_failure_enabled"] = gc.isenabled()
report["after_failure_frozen"] = gc.get_freeze_count()

gc.disable()  # someone else turned collection off: the phase is spent, nothing frozen
process_gc.own_process()
with process_gc.imports_paused("runtime"):
    report["off_paused_by_us"] = gc.isenabled()
gc.enable()
with process_gc.imports_paused("runtime"):
    report["off_then_again_paused"] = not gc.isenabled()
print(json.dumps(report))
"""


def test_only_an_owned_process_pauses_and_freezes_each_phase_once() -> None:
    run = subprocess.run([sys.executable, "-c", PROGRAM], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["library_paused"] is False and report["library_frozen"] == 0
    assert report["owned_paused"] is True and report["owned_enabled_after"] is True
    assert report["owned_frozen"] > 10_000  # the interpreter's and the imports' objects
    assert report["dead_cycles_left"] == 0
    assert report["kept_frozen"] is True  # gc.get_objects() no longer lists frozen objects
    assert report["again_paused"] is False and report["again_frozen"] == report["owned_frozen"]
    assert report["after_failure_enabled"] is True
    assert report["after_failure_frozen"] > report["again_frozen"]  # the failed phase froze what it made
    assert report["off_paused_by_us"] is False and report["off_then_again_paused"] is False


RUNTIME_PROGRAM = """
import gc, json, sys
import anyio
from mcp.server.subscriptions import InMemorySubscriptionBus
from mcp_analysis import process_gc
from mcp_analysis.config import load_settings
from mcp_analysis.server.runtime import Runtime

async def main():
    process_gc.own_process()
    runtime = Runtime(load_settings(db=sys.argv[1]), InMemorySubscriptionBus())
    counts = [gc.get_freeze_count()]
    kept = []
    for _ in range(2):  # the second start is a runtime started anew after its last user left
        async with runtime.use():
            await runtime.ready()
        counts.append(gc.get_freeze_count())
        kept.extend([i] for i in range(5000))  # made since: a later start must not freeze them
    print(json.dumps(counts))

anyio.run(main)
"""


def test_the_runtime_freezes_its_imports_once_not_what_later_starts_made(sample_db: Path) -> None:
    run = subprocess.run(
        [sys.executable, "-c", RUNTIME_PROGRAM, str(sample_db)], cwd=REPO, capture_output=True, text=True, timeout=180
    )
    assert run.returncode == 0, run.stderr
    before, first, second = json.loads(run.stdout.splitlines()[-1])
    assert before == 0
    assert first > 20_000  # LanceDB, pyarrow, numpy, search, sessions
    # Frozen objects come and go a little as they are freed or re-tracked; a second freeze would
    # add the 5,000 lists made between the starts and everything the second start made.
    assert abs(second - first) < 1000
