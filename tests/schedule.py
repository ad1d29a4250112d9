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

import re
import time
from collections import defaultdict

import pytest

#: The 30 longest modules of a full run on three processes (`CI=true PYTEST_ADDOPTS="-n 3" bash .ci/run` on a fresh
#: clone at 99b5795, 2 cores, nothing else running, 2026-12-04: the summary at its end), longest first. A module's
#: total there includes the sample knowledge base's build when it is the first to need it.
LONGEST_FIRST: tuple[str, ...] = (
    "tests/ingest/ray/test_ray_ingest.py",
    "tests/server/test_scaleout.py",
    "tests/watch/test_escapes.py",
    "tests/cli/test_commands.py",
    "tests/session/test_memory.py",
    "tests/server/test_transports.py",
    "tests/watch/test_served_folder.py",
    "tests/server/test_view_cell.py",
    "tests/watch/test_deferred_compaction.py",
    "tests/adversarial/test_ingest_files.py",
    "tests/adversarial/test_http_connections.py",
    "tests/adversarial/test_chart_memory.py",
    "tests/adversarial/test_sessions_dir.py",
    "tests/watch/test_deep_trees_and_mounts.py",
    "tests/watch/test_host_log.py",
    "tests/watch/test_subscriptions.py",
    "tests/adversarial/test_fair_share.py",
    "tests/ingest/test_pipeline.py",
    "tests/charts/test_render.py",
    "tests/ingest/test_object_sources.py",
    "tests/server/test_table_exports.py",
    "tests/session/test_state_chunks.py",
    "tests/cli/test_batch_removal.py",
    "tests/adversarial/test_hostile_workbooks.py",
    "tests/cli/test_vector_segments_cli.py",
    "tests/adversarial/test_wire.py",
    "tests/adversarial/test_legacy_http_flood.py",
    "tests/adversarial/test_sandbox_escape.py",
    "tests/adversarial/test_redis_store.py",
    "tests/adversarial/test_hostile_formats.py",
)


def processes(cores: int, markexpr: str) -> int:
    """How many xdist processes `-n auto` (pyproject.toml) starts: one more than the cores when the
    run has slow tests, whose waits on servers, workers and leases a further process fills (the runs
    on two and three processes are in docs/development.md); the cores alone for the fast tier
    (`-m "not slow"`), which waits on nothing."""
    pure = re.search(r"\bnot\s+slow\b", markexpr) is not None
    return max(1, cores) + (0 if pure else 1)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Move the listed modules to the front, longest first; a module's own tests keep their order."""
    rank = {module: place for place, module in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::", 1)[0], len(rank)))


SHOWN = 30  # the longest modules the summary names


class Timeline:
    """Where a run's time went: each module's setups, calls and teardowns, and each process's."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.modules: defaultdict[str, float] = defaultdict(float)
        self.workers: defaultdict[str, float] = defaultdict(float)
        self.last: dict[str, float] = {}  # each process's last report, seconds after the start

    def add(self, report: pytest.TestReport) -> None:
        gateway = getattr(getattr(report, "node", None), "gateway", None)  # xdist: the worker it ran on
        worker = str(getattr(gateway, "id", "main"))
        self.modules[report.nodeid.split("::", 1)[0]] += report.duration
        self.workers[worker] += report.duration
        self.last[worker] = time.monotonic() - self.started

    def lines(self, shown: int = SHOWN) -> list[str]:
        longest = sorted(self.modules.items(), key=lambda kv: -kv[1])[:shown]
        processes = [
            f"{worker}: its tests took {seconds:.1f}s, its last ended {self.last[worker]:.1f}s after the start"
            for worker, seconds in sorted(self.workers.items())
        ]
        return [f"{seconds:8.1f}s {module}" for module, seconds in longest] + processes


_timeline = Timeline()


def pytest_sessionstart(session: pytest.Session) -> None:
    _timeline.started = time.monotonic()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _timeline.add(report)  # in the controller too: xdist hands it every worker's reports


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter, config: pytest.Config) -> None:
    if hasattr(config, "workerinput") or len(_timeline.modules) < 2:  # an xdist worker, or one module
        return
    terminalreporter.write_sep("=", f"the {SHOWN} longest modules (setups, calls and teardowns)")
    for line in _timeline.lines():
        terminalreporter.write_line(line)
