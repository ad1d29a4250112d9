"""The commands that manage and describe documents: `add`, `rm`, `list`, `info`."""

from __future__ import annotations

import contextlib
import json
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Annotated, Any

import typer

from mcp_analysis.cli.options import (
    ConfigOption,
    DbOption,
    FilterOption,
    JsonOption,
    SampleOption,
    command_options,
    knowledge_base,
)
from mcp_analysis.cli.output import err, escape, escape_line, out, print_json
from mcp_analysis.errors import AnalysisError
from mcp_analysis.paths import is_local_path


class _RichProgress:
    """A progress bar on stderr for long ingests; silent when stderr is not a terminal."""

    def __init__(self) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.progress = Progress(
            TextColumn("[bold]Adding[/bold] {task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TimeElapsedColumn(),
            console=err,
            transient=True,
        )
        self.task: Any = None

    def start(self, total: int) -> None:
        self.progress.start()
        self.task = self.progress.add_task("", total=total)

    def advance(self, label: str) -> None:
        self.progress.update(self.task, advance=1, description=label[:40])

    def phase(self, label: str) -> None:
        self.progress.update(self.task, description=label[:40])

    def finish(self) -> None:
        self.progress.stop()


def parse_meta(pairs: list[str] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise AnalysisError(f"--meta expects key=value, got {pair!r}.")
        meta[key.strip()] = value
    return meta


def add(
    ctx: typer.Context,
    paths: Annotated[
        list[str],
        typer.Argument(
            help="Files or directories (walked recursively), or objects on an object store: s3://bucket/prefix/ "
            "(every object under it) or s3://bucket/key.",
            show_default=False,
        ),
    ],
    title: Annotated[str | None, typer.Option(help="Title for a single file.")] = None,
    meta: Annotated[list[str] | None, typer.Option("--meta", help="key=value metadata (repeatable).")] = None,
    as_json: JsonOption = False,
    ray: Annotated[
        str | None,
        typer.Option(
            "--ray",
            metavar="ADDRESS",
            help="Convert and embed on a Ray cluster: auto, local, HOST:PORT or ray://HOST:PORT "
            "(needs the extra mcp-analysis\\[ray]; files must be at the same path on every node, "
            "s3:// sources readable from every node).",
        ),
    ] = None,
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Add or update documents (.md .html .pdf .docx, .xlsx .xls .ods .csv .tsv, .pptx .odt .odp .epub .eml,
    images (OCR), .txt, source files, text files without an extension).

    Keeps going past files it cannot read, names them, and then exits with code 1.
    """
    options = command_options(ctx, db=db, config=config)

    async def go() -> int:
        metadata = parse_meta(meta)
        if ray is not None:
            from mcp_analysis.ingest.ray_address import preflight

            preflight(ray)  # before the knowledge base is made
        settings = options.settings()
        with _early_pool(settings, ray, paths) as pool:
            from mcp_analysis.corpus import KnowledgeBase
            from mcp_analysis.ingest.sources import as_sources

            kb = await KnowledgeBase.open(settings, create=True)
            progress = _RichProgress() if err.is_terminal and not as_json else None
            try:
                add = _ingestor(kb, progress, ray, pool).add
                report = await add(as_sources(paths), title=title, metadata=metadata)
            finally:
                await kb.close()
        failed = 1 if report.skipped else 0
        if as_json:
            print_json(report.__dict__)
            return failed
        for path, reason in report.skipped:
            err.print(f"[yellow]skipped[/yellow] {escape_line(path)}: {escape_line(reason)}", highlight=False)
        for path, note in report.warnings:
            err.print(f"[yellow]note[/yellow] {escape_line(path)}: {escape_line(note)}", highlight=False)
        out.print(f"{report.summary()} -> {escape_line(str(settings.db))}", highlight=False)
        if failed:
            err.print(f"[red]error:[/red] {len(report.skipped)} path(s) could not be added (listed above).")
        return failed

    raise typer.Exit(options.run(go))


@contextlib.contextmanager
def _early_pool(settings: Any, ray: str | None, paths: list[str]) -> Iterator[Any]:
    """The add's conversion worker, started before anything else so its own start-up runs beside the
    command's, and loading its parsers too (about 2 s of CPU, docling's imports) when a file is sure
    to be converted (`_converts`): otherwise files that turn out unchanged would wait for them
    (`bench/cli_add.py`). None on Ray (its nodes convert)."""
    if ray is not None:
        yield None
        return
    from mcp_analysis.ingest.pool import ConversionPool

    pool = ConversionPool(settings.ingest.limits(), settings.ingest.chunk_tokens)
    try:
        pool.start()
        if _converts(settings.db, paths):
            pool.warm()
        yield pool
    finally:
        pool.close()


def _converts(db: Any, paths: list[str]) -> bool:
    """Whether the add is sure to convert something: a new knowledge base and a path that exists, or a
    named file modified since the knowledge base was last written. A wrong guess costs time only."""
    from mcp_analysis.store.written import last_written

    written = last_written(db)
    if written is None:
        return False
    for path in paths:
        if not is_local_path(path):
            continue
        try:
            found = Path(path).stat()
        except OSError:
            continue
        if written == 0.0 or (stat.S_ISREG(found.st_mode) and found.st_mtime > written):
            return True
    return False


def _ingestor(kb: Any, progress: _RichProgress | None, ray: str | None, pool: Any) -> Any:
    from mcp_analysis.ingest.pipeline import Ingestor

    if ray is None:
        return Ingestor(kb, progress, pool)
    from mcp_analysis.ingest.ray_engine import RayIngestor

    return RayIngestor(kb, ray, progress)


def rm(
    ctx: typer.Context,
    documents: Annotated[
        list[str],
        typer.Argument(
            help="Document ids (or unique prefixes of them, as `list` shows), uris, or the paths they were added "
            "from. All are removed at once, or none when any names no document."
        ),
    ],
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Remove documents."""
    options = command_options(ctx, db=db, config=config)

    async def go() -> None:
        from mcp_analysis.ingest.removal import remove_documents
        from mcp_analysis.sample import forget_build

        async with knowledge_base(options) as kb:
            metas = await remove_documents(kb, documents)
        forget_build(kb.settings.db)  # if this was the sample, the next --sample restores it
        for meta in metas:
            out.print(f"removed {meta.id} ({escape_line(meta.title)})", highlight=False)
        from mcp_analysis.ingest.moves import local_path

        kept = [path for meta in metas if (path := local_path(meta.uri)) and Path(path).is_file()]
        if kept:  # said once, on stderr: `rm` removes documents, never files
            told = (
                f"{escape_line(kept[0])} still exists: a `sync` or `serve --watch` of its folder adds it again; "
                "move or delete the file to keep it out"
                if len(kept) == 1
                else f"{len(kept)} of the files still exist (e.g. {escape_line(kept[0])}): a `sync` or `serve "
                "--watch` of their folders adds them again; move or delete the files to keep them out"
            )
            err.print(f"[yellow]note[/yellow] {told}", highlight=False)

    options.run(go)


def list_documents(
    ctx: typer.Context,
    filter: FilterOption = None,
    as_json: JsonOption = False,
    sample: SampleOption = False,
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """List documents."""
    options = command_options(ctx, sample, db, config)

    async def go() -> None:
        async with knowledge_base(options) as kb:
            docs = await (await kb.open_corpus(filter)).documents()
        if as_json:
            print_json([d.model_dump() for d in docs])
            return
        from rich.table import Table

        from mcp_analysis.text import shared_dir

        short = short_ids([d.id for d in docs])
        prefix = shared_dir([d.uri for d in docs])  # said once: a narrow column then shows what differs
        table = Table(show_lines=False)
        table.add_column("id", no_wrap=True, min_width=max((len(i) for i in short.values()), default=2))
        table.add_column("title")
        table.add_column("uri", overflow="fold")
        given = {d.id: _shown_metadata(d.user_metadata()) for d in docs}
        with_metadata = any(given.values())
        if with_metadata:  # what --meta gave, the column `--filter "metadata LIKE ..."` reads
            table.add_column("metadata", overflow="fold")
        table.add_column("created", no_wrap=True)
        for d in docs:
            shown = [escape_line(given[d.id])] if with_metadata else []
            table.add_row(short[d.id], escape(d.title), escape(d.uri[len(prefix) :]), *shown, d.created_at[:10])
        out.print(table)
        if prefix:
            out.print(f"uri after {escape(prefix)}", highlight=False, soft_wrap=False)  # folded, not cut
        out.print(f"{len(docs)} document(s); ids: shortest unique prefix (--json: whole)", highlight=False)

    options.run(go)


def _shown_metadata(metadata: dict[str, Any]) -> str:
    """The metadata users gave, as they typed it: key=value, comma-separated (values that are not text as JSON)."""
    shown = (f"{k}={v if isinstance(v, str) else json.dumps(v, ensure_ascii=False)}" for k, v in metadata.items())
    return ", ".join(shown)


def short_ids(ids: list[str], minimum: int = 8) -> dict[str, str]:
    """Each id shortened to its shortest unique prefix of at least `minimum` characters (like git)."""
    ordered = sorted(ids)
    short = {}
    for i, full in enumerate(ordered):
        length = minimum
        for neighbour in ordered[max(0, i - 1) : i] + ordered[i + 1 : i + 2]:
            common = next((k for k, (a, b) in enumerate(zip(full, neighbour, strict=False)) if a != b), len(full))
            length = max(length, common + 1)
        short[full] = full[:length]
    return short


def info(
    ctx: typer.Context,
    as_json: JsonOption = False,
    sample: SampleOption = False,
    db: DbOption = None,
    config: ConfigOption = None,
) -> None:
    """Counts, embedder, schema version and indexes of the knowledge base."""
    options = command_options(ctx, sample, db, config)

    async def go() -> None:
        from mcp_analysis.ingest.formats.metadata import ocr_summary

        async with knowledge_base(options) as kb:
            store = kb.store
            data = {
                "db": str(kb.settings.db),
                "documents": await kb.corpus().count(),
                "rows": await store.counts(),
                "embedder": store.settings.embedder if store.settings else kb.embedder_name,
                "vector_dim": store.settings.vector_dim if store.settings else None,
                "schema_version": store.settings.schema_version if store.settings else None,
                "created_at": store.settings.created_at if store.settings else None,
                "written_by": f"{store.settings.origin} {store.settings.origin_version}".strip()
                if store.settings
                else None,
                "read_only": store.read_only,
                "query_embedder": kb.embedder_name,
                "indexes": await store.index_names(),
                "ocr": ocr_summary(await kb.corpus().documents(), kb.settings.ingest.ocr),
            }
        if as_json:
            print_json(data)
            return
        for key, value in data.items():
            out.print(f"[bold]{key}[/bold]: {escape(str(value))}", highlight=False)

    options.run(go)
