"""The order the suite's modules are handed to the xdist workers: the longest first.

`--dist loadfile` pins a module to one worker, and `--no-loadscope-reorder` (pyproject.toml)
makes xdist hand the modules out in collection order (its default orders them by test count,
which says little: one conformance test outlasts a hundred sandbox cases). A long module handed
out last keeps one worker busy while the other idles; started first, the short modules fill the
other worker around it. So the modules below, longest first, go before all others, which keep
their order. A module missing from the list costs only balance, never a result.

Every run with more than one module prints, at its end, where its time went: each module's
setups, calls and teardowns summed (the list is re-derived from these), and for each xdist
process the time its tests took and when its last one ended (two far apart: the schedule left
one process idle at the end).
"""

from __future__ import annotations

import time
from collections import defaultdict

import pytest

#: The modules over ~60 s alone on one process at load average 6-21 (2 cores, 2026-12-01), longest first.
LONGEST_FIRST: tuple[str, ...] = (
    "tests/ingest/ray/test_ray_ingest.py",
    "tests/adversarial/test_ingest_files.py",
    "tests/ingest/test_moves.py",
    "tests/watch/test_escapes.py",
    "tests/adversarial/test_hostile_workbooks.py",
    "tests/server/test_transports.py",
    "tests/agent/test_agent.py",
    "tests/session/test_memory.py",
    "tests/session/test_state_chunks.py",
    "tests/adversarial/test_hostile_formats.py",
    "tests/ingest/test_pipeline.py",
    "tests/watch/test_subscriptions.py",
    "tests/cli/test_commands.py",
    "tests/watch/test_served_folder.py",
    "tests/cli/test_batch_removal.py",
    "tests/server/test_scaleout.py",
    "tests/agent/test_model_errors.py",
    "tests/server/test_table_exports.py",
    "tests/adversarial/test_chart_memory.py",
    "tests/ingest/test_formats_cli.py",
    "tests/adversarial/test_legacy_http_flood.py",
    "tests/watch/test_host_log.py",
    "tests/ingest/test_object_sources.py",
    "tests/ingest/test_pool.py",
    "tests/adversarial/test_redis_store.py",
    "tests/test_logging_setup.py",
    "tests/adversarial/test_host_calls.py",
    "tests/watch/test_deferred_compaction.py",
    "tests/server/test_view_cell.py",
    "tests/haiku/test_mcp.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the listed modules to the front, longest first; a module's own tests keep their order."""
    rank = {module: place for place, module in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


SHOWN = 30  # the longest modules the summary names
_started = time.monotonic()
_module_seconds: defaultdict[str, float] = defaultdict(float)
_worker_seconds: defaultdict[str, float] = defaultdict(float)
_worker_last: dict[str, float] = {}


def pytest_sessionstart(session: pytest.Session) -> None:
    global _started
    _started = time.monotonic()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add up each module's and each process's time (in the controller: the xdist reports name their worker)."""
    gateway = getattr(getattr(report, "node", None), "gateway", None)
    worker = str(getattr(gateway, "id", "main"))
    _module_seconds[report.nodeid.split("::", 1)[0]] += report.duration
    _worker_seconds[worker] += report.duration
    _worker_last[worker] = time.monotonic() - _started


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or len(_module_seconds) < 2:  # an xdist worker, or one module
        return
    write = terminalreporter.write_line
    terminalreporter.write_sep("=", f"the {SHOWN} longest modules (setups, calls and teardowns)")
    for module, seconds in sorted(_module_seconds.items(), key=lambda kv: -kv[1])[:SHOWN]:
        write(f"{seconds:8.1f}s {module}")
    for worker in sorted(_worker_seconds):
        tests, last = _worker_seconds[worker], _worker_last[worker]
        write(f"{worker}: its tests took {tests:.1f}s, its last ended {last:.1f}s after the start")
