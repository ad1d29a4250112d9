"""Folders kept in sync: `mcp-analysis sync DIR...` and the watcher `serve --watch DIR` runs beside the server."""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import anyio
import typer

from mcp_analysis.cli.options import ConfigOption, DbOption, JsonOption, command_options
from mcp_analysis.cli.output import err, escape_line, out, print_json
from mcp_analysis.errors import AnalysisError

if TYPE_CHECKING:
    from mcp_analysis.config import Settings
    from mcp_analysis.corpus import KnowledgeBase
    from mcp_analysis.server.runtime import Runtime
    from mcp_analysis.watch.lock import WatchLease

log = logging.getLogger(__name__)

WatchOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--watch",
        help="Keep this folder in sync while serving: new, changed, renamed and deleted files (repeatable; "
        "default watch.directories).",
    ),
]


def sync(
    ctx: typer.Context,
    folders: Annotated[
        list[Path] | None, typer.Argument(help="Folders to mirror (default watch.directories).", show_default=False)
    ] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Mirror folders into the knowledge base once, then exit (for cron or CI).

    Adds new and changed files and removes the documents of files gone from those folders (only
    those); follows watch.include and watch.ignore. Exits 1 when any file could not be added.
    """
    options = command_options(ctx, db=db, config=config)

    async def go() -> int:
        from mcp_analysis.watch.lock import watcher_lock
        from mcp_analysis.watch.rules import check_folders

        settings = options.settings()
        chosen = check_folders(watch_arguments(folders, settings))
        async with watcher_lock(settings) as lease:  # before the heavy imports: a refusal is immediate
            from mcp_analysis.watch.run import sync_once

            report = await sync_once(settings, chosen, lease)
        if as_json:
            print_json(report.__dict__)
        else:
            for path, reason in report.failed:
                err.print(f"[red]failed[/red] {escape_line(path)}: {escape_line(reason)}", highlight=False)
            out.print(f"{report.summary()} -> {escape_line(str(settings.db))}", highlight=False)
        return 1 if report.failed else 0

    raise typer.Exit(options.run(go))


def watch_arguments(given: list[Path] | None, settings: Settings) -> list[Path]:
    """The folders named on the command line, else watch.directories."""
    return list(given or ()) or list(settings.watch.directories)


class _OpenedByWatcher:
    """The server's way of opening the knowledge base: once the watcher has it ready (a new
    knowledge base gets its tables first), so the server answers while that happens."""

    def __init__(self) -> None:
        self.ready = anyio.Event()
        self.failure: AnalysisError | None = None

    async def open(self, settings: Settings) -> KnowledgeBase:
        await self.ready.wait()
        if self.failure is not None:
            raise self.failure
        from mcp_analysis.corpus import KnowledgeBase

        return await KnowledgeBase.open(settings)


async def _keep_in_sync(
    settings: Settings, folders: list[Path], opener: _OpenedByWatcher, runtimes: list[Runtime], lease: WatchLease
) -> None:
    try:
        # Heavy imports (LanceDB, docling) in a thread: the server keeps answering meanwhile.
        await anyio.to_thread.run_sync(importlib.import_module, "mcp_analysis.watch.run")
        from mcp_analysis.watch.follow import FolderWatcher
        from mcp_analysis.watch.run import close_mirror, open_mirror

        mirror = await open_mirror(settings, folders, lease)
    except Exception as exc:
        opener.failure = exc if isinstance(exc, AnalysisError) else AnalysisError(f"The folder watcher failed: {exc}")
        log.error("%s", opener.failure)
        opener.ready.set()
        return
    opener.ready.set()

    def changed() -> None:
        for runtime in runtimes:
            runtime.documents_changed()

    try:
        await FolderWatcher(mirror, settings.watch, changed, lease).run()
    finally:
        with anyio.CancelScope(shield=True):
            await close_mirror(mirror)


async def serve_watching(settings: Settings, folders: list[Path], *, http: bool) -> None:
    """Serve while a watcher keeps `folders` in sync and tells the server of each change at once.

    The watcher lock is taken before serving (a second watcher fails at start, clearly); the
    knowledge base is opened and mirrored in the background while the server already answers.
    """
    from mcp_analysis.server.runner import run_server
    from mcp_analysis.watch.lock import watcher_lock
    from mcp_analysis.watch.rules import check_folders

    folders = check_folders(folders)
    runtimes: list[Runtime] = []
    opener = _OpenedByWatcher()
    async with watcher_lock(settings) as lease, anyio.create_task_group() as tg:
        tg.start_soon(_keep_in_sync, settings, folders, opener, runtimes, lease)
        await run_server(settings, http=http, opener=opener, on_runtime=runtimes.append)
        tg.cancel_scope.cancel()
