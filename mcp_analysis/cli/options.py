"""The global options every command shares, and the knowledge base they name."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from mcp_analysis.cli.errors import run_async
from mcp_analysis.config import Settings, load_settings

if TYPE_CHECKING:
    from mcp_analysis.corpus import KnowledgeBase

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

FilterOption = Annotated[
    str | None, typer.Option("--filter", help="SQL WHERE over document metadata, e.g. \"uri LIKE '%report%'\".")
]
JsonOption = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
SampleOption = Annotated[
    bool, typer.Option("--sample", help="Use the built-in sample knowledge base (built on first use).")
]
LogLevelOption = Annotated[str | None, typer.Option("--log-level", help="DEBUG, INFO, WARNING or ERROR.")]
DB_HELP = "Knowledge base path or s3://BUCKET/PREFIX (or MCP_ANALYSIS_DB / HAIKU_RAG_DB)."
CONFIG_HELP = "YAML config file (default ./mcp-analysis.yaml)."
# The same two options once more after the command name (`add notes --db kb`, as haiku.rag's CLI takes
# them): parsed by the command itself, so an argument that merely looks like one is never taken for it.
DbOption = Annotated[str | None, typer.Option("--db", help=DB_HELP)]
ConfigOption = Annotated[Path | None, typer.Option("--config", "-c", help=CONFIG_HELP)]


@dataclass
class Options:
    config: Path | None
    db: str | None  # text, not Path: Path("s3://b/kb") would mangle a URI into "s3:/b/kb"
    sample: bool
    debug: bool
    log_level: str | None

    def settings(self, **overrides: Any) -> Settings:
        db = self.db
        if self.sample and db is None:
            from mcp_analysis.sample import default_sample_db

            db = str(default_sample_db())
        return load_settings(self.config, db=db, **overrides)

    def run(self, func: Any, *args: Any) -> Any:
        """Run the async part of a command; an error ends it as one line on stderr."""
        return run_async(self.debug, func, *args)


def command_options(
    ctx: typer.Context, sample: bool = False, db: str | None = None, config: Path | None = None
) -> Options:
    """The global options; `--sample`, `--db` and `--config` may also be given after the command name
    (given on both sides, they must agree)."""
    options: Options = ctx.obj
    if sample:
        options.sample = True
    options.db = _once("--db", options.db, db)
    options.config = _once("--config", options.config, config)
    return options


def _once(name: str, before: Any, after: Any) -> Any:
    if before is not None and after is not None and before != after:
        raise typer.BadParameter(
            f"given before the command as {before} and after it as {after}; give it once", param_hint=name
        )
    return after if after is not None else before


async def ensure_sample(options: Options, settings: Settings) -> None:
    if options.sample:
        from mcp_analysis.sample import ensure_sample_kb

        await ensure_sample_kb(settings)


@asynccontextmanager
async def knowledge_base(options: Options) -> AsyncIterator[KnowledgeBase]:
    """The configured knowledge base (the sample one built first if --sample), closed after use."""
    settings = options.settings()
    await ensure_sample(options, settings)
    from mcp_analysis.corpus import KnowledgeBase

    kb = await KnowledgeBase.open(settings)
    try:
        yield kb
    finally:
        await kb.close()
