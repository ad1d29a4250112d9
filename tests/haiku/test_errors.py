"""Databases we cannot read (or cannot embed queries for): one line naming what was found, never a traceback."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest

from mcp_analysis.config import load_settings
from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.errors import EmbedderError
from tests.conftest import run_cli
from tests.haiku_db import copy_fixture, haiku_settings, make_variant

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_fixture(tmp_path_factory.mktemp("haiku-src") / "db")


def cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real command line, in a subprocess (proves no traceback reaches the terminal)."""
    return run_cli(*args, env=env, timeout=120)


def cli_inline(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The same command line in this process (the same code path, without a 3-5 s interpreter start)."""
    from typer.testing import CliRunner

    from mcp_analysis.cli.app import app

    result = CliRunner().invoke(app, list(args), env=env)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    return subprocess.CompletedProcess(list(args), result.exit_code, result.stdout, result.stderr)


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result
    assert "Traceback" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def variants(source: Path, root: Path) -> dict[str, Path]:
    """One broken or foreign database per case (built with LanceDB from the fixture copy's rows)."""

    async def build() -> dict[str, Path]:
        made = {
            "old version": await make_variant(source, root / "old", settings=haiku_settings(version="0.40.0")),
            "missing table": await make_variant(source, root / "missing", drop=("document_items",)),
            "no settings row": await make_variant(source, root / "nosettings", drop=("settings",)),
            "dimension mismatch": await make_variant(source, root / "dims", vector_dim=768),
            "unknown settings": await make_variant(source, root / "unknown", settings='{"schema": 7, "owner": "x"}'),
            "768-dim ollama": await make_variant(
                source,
                root / "ollama",
                settings=haiku_settings(provider="ollama", name="nomic-embed-text", dim=768),
                vector_dim=768,
            ),
        }
        not_db = root / "not-a-db"
        (not_db / "notes").mkdir(parents=True)
        (not_db / "readme.txt").write_text("hello")
        made["not a database"] = not_db
        broken = copy_fixture(root / "broken")
        for manifest in (broken / "chunks.lance" / "_versions").glob("*.manifest"):
            manifest.write_bytes(b"garbage")
        made["corrupt table"] = broken
        return made

    return anyio.run(build)


def test_unreadable_databases_are_one_line_errors(source: Path, tmp_path: Path) -> None:
    made = variants(source, tmp_path)
    expected = {
        "old version": [r"haiku.rag 0.40.0", "predates 0.64", "haiku-rag migrate", "tested with 0.101.1"],
        "missing table": ["haiku.rag 0.101.1", "lacks the table(s) document_items"],
        "no settings row": ["haiku.rag's tables but no settings row", "haiku-rag rebuild"],
        "dimension mismatch": ["record 384-dim vectors but the chunks table holds 768"],
        "unknown settings": ["neither mcp-analysis nor haiku.rag wrote", '"schema": 7'],
        "not a database": ["holds other files (notes/, readme.txt) and no knowledge base", "not-a-db.lancedb add "],
        "corrupt table": ["cannot be read as a LanceDB knowledge base", "haiku.rag databases"],
    }
    for case, needles in expected.items():
        run = cli if case == "old version" else cli_inline  # one real process is enough to prove "no traceback"
        line = one_line_error(run("--db", str(made[case]), "list"))
        for needle in needles:
            assert needle in line, (case, line)
    # An explicit embedder of another dimension is refused up front, naming both.
    line = one_line_error(
        cli_inline("--db", str(made["768-dim ollama"]), "list", env={"MCP_ANALYSIS_EMBEDDER": "onnx:all-MiniLM-L6-v2"})
    )
    assert "ollama 'nomic-embed-text' (768-dim vectors)" in line and "384-dim" in line


def test_search_without_a_usable_embedder_offers_keyword_mode(source: Path, tmp_path: Path) -> None:
    db = anyio.run(
        lambda: make_variant(source, tmp_path / "st", settings=haiku_settings(name="BAAI/bge-small-en-v1.5", dim=384))
    )
    line = one_line_error(cli_inline("--db", str(db), "search", "licence"))
    assert "built by haiku.rag with sentence-transformers 'BAAI/bge-small-en-v1.5' (384-dim vectors)" in line
    assert "sentence-transformers" in line and "search.mode: keyword" in line
    # Everything that needs no vectors still works: listing, and search in keyword mode.
    listed = cli_inline("--db", str(db), "list", "--json")
    assert listed.returncode == 0 and len(json.loads(listed.stdout)) == 36
    keyword = cli_inline("--db", str(db), "search", "Mozilla", "--json", env={"MCP_ANALYSIS_SEARCH__MODE": "keyword"})
    assert keyword.returncode == 0, keyword.stderr
    assert "MPL" in json.loads(keyword.stdout)[0]["document_uri"]


async def test_unreachable_remote_embedder_is_named_with_the_database(source: Path, tmp_path: Path) -> None:
    db = await make_variant(
        source,
        tmp_path / "ollama",
        settings=haiku_settings(provider="ollama", name="nomic-embed-text", dim=768),
        vector_dim=768,
    )
    settings = load_settings(db=db, embedder_base_url="http://127.0.0.1:9")  # nothing listens on port 9
    kb = await KnowledgeBase.open(settings)
    try:
        assert kb.embedder_name == "ollama:nomic-embed-text"
        assert [d.title for d in await kb.corpus().documents()]  # reading needs no embedder
        with pytest.raises(EmbedderError) as caught:
            await kb.corpus().search("licence")
        message = str(caught.value)
        assert "\n" not in message
        assert "built by haiku.rag with ollama 'nomic-embed-text' (768-dim vectors)" in message
        assert "search.mode: keyword" in message
    finally:
        await kb.close()


async def test_a_newer_haiku_rag_version_with_the_same_columns_is_served_with_a_warning(
    source: Path, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    db = await make_variant(source, tmp_path / "newer", settings=haiku_settings(version="0.150.2"))
    with caplog.at_level("WARNING"):
        kb = await KnowledgeBase.open(load_settings(db=db))
    try:
        assert kb.store.read_only and len(await kb.corpus().documents()) == 36
        assert any("haiku.rag 0.150.2, newer than the 0.101.1" in r.getMessage() for r in caplog.records)
    finally:
        await kb.close()
