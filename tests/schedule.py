"""The order the suite's modules are handed to the xdist workers: the longest first.

`--dist loadfile` pins a module to one worker, and `--no-loadscope-reorder` (pyproject.toml)
makes xdist hand the modules out in collection order (its default orders them by test count,
which says little: one conformance test outlasts a hundred sandbox cases). A long module handed
out last keeps one worker busy while the other idles; started first, the short modules fill the
other worker around it. So the modules below, longest first, go before all others, which keep
their order. The list comes from `--durations` (each module's setup, calls and teardowns, alone
on one worker); a module missing from it costs only balance, never a result.
"""

from __future__ import annotations

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
