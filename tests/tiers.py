"""Test tiers: which tests are `slow`, and a guard that proves the fast tier is pure.

A test is `slow` when it needs the sample knowledge base (or another built one), a service
(redis, moto, Ray), a subprocess (the CLI, a server, a monty or conversion worker, Chromium,
Node) or a listening server. The marks are given here, not in each file: by fixture (anything
built on `sample_db` and the other built knowledge bases) and by module or test
(`SLOW_MODULES`, `SLOW_TESTS`). Finer marks sit beside `slow` (declared in pyproject.toml):
`sample_kb`, `service`, `subprocess`.

The guard proves the marks in the fast tier (`-m "not slow"`, or MCP_ANALYSIS_TEST_GUARD=1):
there, a test fails if it starts a process (subprocess, multiprocessing, fork, posix_spawn) or
listens on a socket, in its setup, call or teardown, even when the code under test catches the
error, or if a child process native code started (a monty worker) is alive when a step ends.
A full run leaves it off: slow tests' background work (a worker restarting) may then fall in a
pure test's window, which says nothing about that test.
"""

from __future__ import annotations

import _posixsubprocess
import contextlib
import importlib.util
import multiprocessing.process
import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from _pytest.mark.expression import Expression

# Fixtures that build a knowledge base (ingest workers, the embedding model), and that start a server.
SAMPLE_FIXTURES = frozenset({"sample_db", "licences_db"})
SERVER_FIXTURES = frozenset({"two_worker_http"})

# Module -> the finer marks its tests get beside `slow`, for what the module starts at its
# top level or in most of its tests (helpers: run_cli, tests.mcp_helpers, tests.services).
SUBPROCESS = ("subprocess",)
SERVICE = ("service", "subprocess")
SLOW_MODULES: dict[str, tuple[str, ...]] = {
    "tests/adversarial/test_chart_memory.py": SUBPROCESS,
    "tests/adversarial/test_concurrent_memory.py": SUBPROCESS,
    "tests/adversarial/test_config_files.py": SUBPROCESS,
    "tests/adversarial/test_document_filter.py": SUBPROCESS,
    "tests/adversarial/test_fair_share.py": SUBPROCESS,
    "tests/adversarial/test_host_calls.py": SUBPROCESS,
    "tests/adversarial/test_hostile_formats.py": SUBPROCESS,
    "tests/adversarial/test_hostile_workbooks.py": SUBPROCESS,
    "tests/adversarial/test_http_auth.py": SUBPROCESS,
    "tests/adversarial/test_http_connections.py": SUBPROCESS,
    "tests/adversarial/test_ingest_files.py": SUBPROCESS,
    "tests/adversarial/test_legacy_http_flood.py": SUBPROCESS,
    "tests/adversarial/test_redis_store.py": SERVICE,
    "tests/adversarial/test_result_budgets.py": SUBPROCESS,
    "tests/adversarial/test_sandbox_escape.py": SUBPROCESS,
    "tests/adversarial/test_sandbox_workers.py": SUBPROCESS,
    "tests/adversarial/test_session_capacity.py": SUBPROCESS,
    "tests/adversarial/test_sessions.py": SERVICE,
    "tests/adversarial/test_sessions_dir.py": SUBPROCESS,
    "tests/adversarial/test_tool_arguments.py": SUBPROCESS,
    "tests/adversarial/test_value_rendering.py": SUBPROCESS,
    "tests/adversarial/test_wire.py": SUBPROCESS,
    "tests/agent/test_agent.py": SUBPROCESS,
    "tests/agent/test_front_doors.py": SUBPROCESS,
    "tests/agent/test_model_errors.py": SUBPROCESS,
    "tests/charts/test_render.py": SUBPROCESS,
    "tests/cli/test_batch_removal.py": SUBPROCESS,
    "tests/cli/test_chart_files.py": SUBPROCESS,
    "tests/cli/test_commands.py": SUBPROCESS,
    "tests/cli/test_first_contact.py": SUBPROCESS,
    "tests/cli/test_output.py": SUBPROCESS,
    "tests/cli/test_sample_serving.py": SUBPROCESS,
    "tests/cli/test_vector_segments_cli.py": SUBPROCESS,
    "tests/embed/test_telemetry.py": SUBPROCESS,
    "tests/haiku/test_mcp.py": SUBPROCESS,
    "tests/haiku/test_skill.py": SUBPROCESS,
    "tests/ingest/ray/test_ray_ingest.py": SERVICE,
    "tests/ingest/test_driver_imports.py": SUBPROCESS,
    "tests/ingest/test_formats_cli.py": SUBPROCESS,
    "tests/ingest/test_html_cli.py": SUBPROCESS,
    "tests/ingest/test_lock.py": SUBPROCESS,
    "tests/ingest/test_object_sources.py": SERVICE,
    "tests/ingest/test_pool.py": SUBPROCESS,
    "tests/search/test_manual_pages.py": SUBPROCESS,
    "tests/sample/test_build.py": SUBPROCESS,
    "tests/sandbox/test_chart.py": SUBPROCESS,
    "tests/sandbox/test_interpreter.py": SUBPROCESS,
    "tests/sandbox/test_liveness.py": SUBPROCESS,
    "tests/server/test_chart_results.py": SUBPROCESS,
    "tests/server/test_conformance.py": SUBPROCESS,
    "tests/server/test_protocol.py": SUBPROCESS,
    "tests/server/test_resume.py": SUBPROCESS,
    "tests/server/test_scaleout.py": SERVICE,
    "tests/server/test_server_modules.py": SUBPROCESS,
    "tests/server/test_start_path.py": SUBPROCESS,
    "tests/server/test_stdio_drain.py": SUBPROCESS,
    "tests/server/test_table_exports.py": SUBPROCESS,
    "tests/server/test_table_resources.py": SUBPROCESS,
    "tests/server/test_tools.py": SUBPROCESS,
    "tests/server/test_transports.py": SUBPROCESS,
    "tests/server/test_view_cell.py": SUBPROCESS,
    "tests/server/test_view_links.py": SUBPROCESS,
    "tests/session/test_chart_keeping.py": SERVICE,
    "tests/session/test_kept_sessions.py": SUBPROCESS,
    "tests/session/test_memory.py": SUBPROCESS,
    "tests/session/test_redis_sealing.py": SERVICE,
    "tests/session/test_state_chunks.py": SERVICE,
    "tests/store/test_storage_outage.py": SERVICE,
    "tests/test_logging_setup.py": SUBPROCESS,
    "tests/test_process_gc.py": SUBPROCESS,
    "tests/tooling/test_context.py": SUBPROCESS,
    "tests/watch/test_db_path.py": SUBPROCESS,
    "tests/watch/test_deep_trees_and_mounts.py": SUBPROCESS,
    "tests/watch/test_deferred_compaction.py": SUBPROCESS,
    "tests/watch/test_host_log.py": SUBPROCESS,
    "tests/watch/test_kept_worker.py": SUBPROCESS,
    "tests/watch/test_lease.py": SERVICE,
    "tests/watch/test_meta_reads.py": SUBPROCESS,
    "tests/watch/test_retry.py": SUBPROCESS,
    "tests/watch/test_served_folder.py": SUBPROCESS,
    "tests/watch/test_subscriptions.py": SUBPROCESS,
    "tests/watch/test_visibility.py": SUBPROCESS,
}

# Tests of otherwise pure modules that start a process or a server each (by function name).
SLOW_TESTS: dict[str, set[str]] = {
    "tests/embed/test_embedder.py": {
        "test_loading_the_exact_model_leaves_no_freed_heap_behind",
        "test_local_model_serves_without_importing_pydantic_ai",
        "test_remote_embedder_goes_through_pydantic_ai_in_batches_and_learns_its_dimension",
    },
    "tests/haiku/test_config.py": {
        "test_reading_their_config_loads_no_model_library",
        "test_the_command_line_reads_their_config_and_database",
    },
    "tests/haiku/test_errors.py": {
        "test_unreachable_remote_embedder_is_named_with_the_database",
        "test_unreadable_databases_are_one_line_errors",
    },
    "tests/haiku/test_store.py": {
        "test_writes_are_refused_and_leave_the_files_untouched",
    },
    "tests/ingest/test_documents_formats.py": {
        "test_an_epub_is_read_chapter_by_chapter_with_its_tables",
        "test_opendocument_text_and_presentation",
    },
    "tests/ingest/test_table_text.py": {
        "test_a_workbook_reads_as_its_title_once_then_a_compact_table_through_the_cli",
        "test_tables_of_other_formats_are_compact_pipe_tables_too",  # a bounded conversion child
    },
    "tests/ingest/test_format_bounds.py": {
        "test_a_converter_registered_by_module_name_is_imported_when_first_used",
    },
    "tests/ingest/test_moves.py": {
        "test_a_copy_whose_original_is_still_there_is_a_new_document",
        "test_a_document_named_after_its_file_is_read_again_when_renamed",
        "test_a_passage_found_before_its_file_moved_is_cited_at_its_new_place",
        "test_a_rename_to_another_suffix_is_read_again",
        "test_a_renamed_file_keeps_its_document_id_chunks_and_vectors",
        "test_a_renamed_folder_in_a_watched_folder_is_moved_not_removed_and_added",
        "test_a_watched_folder_does_not_take_over_a_document_added_from_elsewhere",
        "test_add_does_not_hand_a_document_from_another_folder_to_a_file_with_its_bytes",
        "test_an_old_path_met_again_after_its_document_moved_is_a_new_document",
        "test_files_with_the_same_bytes_keep_their_own_documents_when_their_folder_is_renamed",
        "test_one_moved_document_is_claimed_by_one_new_file_only",
    },
    "tests/ingest/test_pipeline.py": {
        "test_a_folder_holding_the_knowledge_base_is_added_without_the_knowledge_base",
        "test_bad_files_are_reported_and_the_rest_goes_in",
        "test_every_format_yields_docling_items",
        "test_files_without_an_extension_are_text_when_their_content_is",
        "test_a_file_that_is_a_private_key_is_refused_whatever_its_name",
        "test_killed_ingest_leaves_no_half_document_and_rerun_completes",
        "test_readd_is_idempotent_and_changes_replace",
        "test_the_report_lists_the_documents_as_written_after_several_batches",
        "test_a_file_changed_then_moved_away_mid_add_stays_in_the_report",
        "test_a_changed_file_keeps_given_metadata_but_not_what_its_old_version_recorded",
    },
    "tests/sandbox/test_tables_vfs.py": {
        "test_tables_are_visible_only_through_the_document_filter",
    },
    "tests/server/test_sdk_compat.py": {
        "test_a_tool_knows_whether_its_caller_listens_for_progress",
    },
    "tests/server/test_stdio_wire.py": {
        "test_while_serving_fd_1_points_at_stderr_and_only_messages_reach_the_wire",
    },
    "tests/server/test_view.py": {
        "test_the_view_follows_the_host_theme_and_its_changes",
        "test_the_view_speaks_the_extension_handshake_and_answers_host_requests",
    },
    "tests/store/test_lance_legs.py": {
        "test_a_store_below_the_bound_never_imports_pylance",
    },
    "tests/store/test_lance_import.py": {
        "test_lancedb_is_imported_as_on_python_312_and_the_overrides_package_stays_real",
        "test_store_leaves_pandas_and_the_namespace_client_unloaded_and_both_still_work_when_used",
    },
    "tests/test_tiers.py": {
        "test_a_live_child_process_is_seen",
    },
    "tests/test_redact.py": {
        "test_a_refused_store_url_is_named_without_its_password",
    },
    "tests/watch/test_escapes.py": {
        "test_a_document_an_earlier_version_made_through_a_link_is_named",
        "test_a_folder_that_cannot_be_listed_keeps_its_documents",
        "test_a_hard_link_to_a_file_in_the_sessions_folder_is_never_a_document",
        "test_a_hard_link_to_the_config_or_tokens_file_is_never_a_document",
        "test_a_link_named_on_the_add_command_line_is_followed",
        "test_a_watched_folder_deleted_and_made_again_is_followed_again",
        "test_a_watched_folder_gone_for_a_while_keeps_its_documents",
        "test_an_unmounted_share_keeps_its_documents",
        "test_links_made_while_watching_are_refused_and_named",
        "test_sync_refuses_links_out_of_the_folder_and_names_them",
        "test_the_servers_own_files_in_the_folder_are_never_documents",
    },
    "tests/watch/test_hostile_folder.py": {
        "test_a_hostile_folder_with_the_knowledge_base_inside_is_followed_without_its_own_files",
        "test_a_file_that_became_a_private_key_loses_its_document_and_keys_are_never_followed",
        "test_a_document_added_by_hand_from_a_path_the_rules_leave_out_stays_until_its_file_goes",
    },
    "tests/watch/test_lock.py": {
        "test_an_object_store_knowledge_base_is_guarded_by_a_redis_lease",
    },
}
# Of those, the ones that start a service.
SERVICE_TESTS = {
    "tests/server/test_sdk_compat.py::test_a_tool_knows_whether_its_caller_listens_for_progress",
    "tests/watch/test_lock.py::test_an_object_store_knowledge_base_is_guarded_by_a_redis_lease",
}


class SpawnInFastTier(RuntimeError):
    """Raised where a test outside the slow tier starts a process or a server."""


RAY_TESTS = Path(__file__).resolve().parent / "ingest" / "ray"


def pytest_ignore_collect(collection_path: Path, config: pytest.Config) -> bool | None:
    """tests/ingest/ray needs Ray, an optional extra, at import: a run that may select its tests
    fails there, saying what to install. A run that selects no test marked as they are (the fast
    tier, `-m "not slow"`) would deselect them all anyway, so there they are not collected, and the
    fast tier runs without the extra."""
    if collection_path != RAY_TESTS or importlib.util.find_spec("ray") is not None:
        return None
    expression = config.option.markexpr
    if not expression:
        return None
    marks = ("slow", *SLOW_MODULES["tests/ingest/ray/test_ray_ingest.py"])
    return None if Expression.compile(expression).evaluate(lambda name, /, **_: name in marks) else True


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        module = item.nodeid.split("::", 1)[0]
        marks = set(SLOW_MODULES.get(module, ()))
        name = item.nodeid.split("[", 1)[0]
        if name.split("::")[-1] in SLOW_TESTS.get(module, ()):
            marks.update(SERVICE if name in SERVICE_TESTS else SUBPROCESS)
        fixtures = set(getattr(item, "fixturenames", ()))
        if SAMPLE_FIXTURES & fixtures:
            marks.add("sample_kb")
        if SERVER_FIXTURES & fixtures:
            marks.update(SUBPROCESS)
        if marks:
            marks.add("slow")
        for mark in sorted(marks):
            item.add_marker(mark)


def _targets() -> list[tuple[Any, str]]:
    return [
        (subprocess.Popen, "_execute_child"),
        (multiprocessing.process.BaseProcess, "start"),
        (os, "fork"),
        (os, "forkpty"),
        (os, "posix_spawn"),
        (os, "posix_spawnp"),
        (os, "system"),
        (_posixsubprocess, "fork_exec"),
        (socket.socket, "listen"),
    ]


@contextmanager
def refuse_spawning(nodeid: str) -> Iterator[list[str]]:
    """While inside: starting a process or listening raises, and is recorded even if caught."""
    seen: list[str] = []
    saved = [(owner, name, getattr(owner, name)) for owner, name in _targets() if hasattr(owner, name)]

    def refuse(what: str) -> Callable[..., Any]:
        def refused(*args: Any, **kwargs: Any) -> Any:
            seen.append(what)
            raise SpawnInFastTier(f"{nodeid} calls {what} but is not marked slow: add it to tests/tiers.py")

        return refused

    for owner, name, _ in saved:
        setattr(owner, name, refuse(f"{getattr(owner, '__name__', owner)}.{name}"))
    try:
        yield seen
    finally:
        for owner, name, original in saved:
            setattr(owner, name, original)


def children() -> set[int]:
    """This process's live child processes (Linux): sees those native code starts too. Plain `os`
    calls, no pathlib: a test may have set `os.name` to "nt" (pathlib would then refuse)."""
    found: set[int] = set()
    with contextlib.suppress(OSError):
        for task in os.listdir("/proc/self/task"):  # noqa: PTH208 - pathlib may be refused here (above)
            with contextlib.suppress(OSError), open(f"/proc/self/task/{task}/children", encoding="ascii") as file:
                found.update(int(pid) for pid in file.read().split())
    return found


def guarding(config: pytest.Config) -> bool:
    """Whether this run is the fast tier: slow tests deselected, or the guard asked for."""
    return "not slow" in (config.option.markexpr or "") or os.environ.get("MCP_ANALYSIS_TEST_GUARD") == "1"


@contextmanager
def _guarded(item: pytest.Item) -> Iterator[None]:
    if item.get_closest_marker("slow") is not None or not guarding(item.config):
        yield
        return
    before = children()
    with refuse_spawning(item.nodeid) as seen:
        yield
    if children() - before:
        seen.append("a child process (started by native code)")
    if seen:
        pytest.fail(f"{item.nodeid} is not marked slow but starts {', '.join(sorted(set(seen)))} (tests/tiers.py)")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    with _guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _guarded(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    with _guarded(item):
        return (yield)
