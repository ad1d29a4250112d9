"""A real MCP client over stdio reads a document's tables as resources, within the server's filter."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp import Client

from mcp_analysis.corpus import KnowledgeBase
from mcp_analysis.ingest.pipeline import Ingestor
from tests.conftest import make_settings
from tests.mcp_helpers import stdio_params

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def tables_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("resources")
    docs = root / "docs"
    docs.mkdir()
    (docs / "export.csv").write_text("region,amount\nNorth,10\nSouth,30\n", encoding="utf-8")
    (docs / "notes.md").write_text("# Notes\n\n| Berth | Depth |\n|---|---|\n| B1 | 14 m |\n", encoding="utf-8")
    db = root / "kb.lancedb"

    async def build() -> dict[str, str]:
        kb = await KnowledgeBase.open(make_settings(db), create=True)
        try:
            await Ingestor(kb).add([docs])
            return {m.metadata["file_name"]: m.id for m in await kb.corpus().documents()}
        finally:
            await kb.close()

    return db, anyio.run(build)


async def test_tables_json_and_csv_are_resources(tables_db: tuple[Path, dict[str, str]], tmp_path: Path) -> None:
    db, ids = tables_db
    env = {"XDG_DATA_HOME": str(tmp_path / "data")}
    async with Client(stdio_params(db, env=env)) as client:
        templates = {t.uri_template for t in (await client.list_resource_templates()).resource_templates}
        assert "documents:///{document_id}/tables/{index}.csv" in templates
        listed = {r.uri for r in (await client.list_resources()).resources}
        assert f"documents:///{ids['export.csv']}/tables.json" in listed
        entries = json.loads(
            (await client.read_resource(f"documents:///{ids['export.csv']}/tables.json")).contents[0].text
        )
        assert [(e["name"], e["rows"], e["header"]) for e in entries] == [("export", 3, ["region", "amount"])]
        table = await client.read_resource(f"documents:///{ids['notes.md']}/tables/0.csv")
        assert table.contents[0].text == "Berth,Depth\r\nB1,14 m\r\n"
        with pytest.raises(Exception, match="no table"):
            await client.read_resource(f"documents:///{ids['notes.md']}/tables/1.csv")


async def test_a_filtered_server_serves_no_tables_outside_its_filter(
    tables_db: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    db, ids = tables_db
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "MCP_ANALYSIS_SERVER__FILTER": "uri LIKE '%notes.md'"}
    async with Client(stdio_params(db, env=env)) as client:
        assert (await client.read_resource(f"documents:///{ids['notes.md']}/tables.json")).contents
        for name in ("tables.json", "tables/0.csv"):
            with pytest.raises(Exception, match="outside your filter"):
                await client.read_resource(f"documents:///{ids['export.csv']}/{name}")
