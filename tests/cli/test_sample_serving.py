"""`serve --sample` on a sample that is up to date serves without the conversion stack.

The parsers (docling, pdfium, calamine, OCR) and the ingest pipeline take ~100 MB of a server's
memory once imported; a sample already built needs none of them: its freshness is a stamp and a
few file sizes; and files of the same content elsewhere (another clone sharing the data
directory) only move the documents' uris. A real stdio server, its imports recorded by Python itself (-X importtime).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from pathlib import Path

import lancedb
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from mcp_analysis.sample import STAMP_FILE, documents_dir, is_built
from tests.conftest import REPO

pytestmark = pytest.mark.anyio

#: Modules of the conversion stack; none may be imported to serve a built sample.
CONVERSION = ("docling", "docling_core", "pypdfium2", "python_calamine", "tesserocr", "pptx", "cv2")
INGEST = ("mcp_analysis.ingest.pipeline", "mcp_analysis.ingest.pool", "mcp_analysis.ingest.formats")


ELSEWHERE = "/elsewhere/mcp_analysis/sample/documents"


async def built_elsewhere(db: Path) -> None:
    """The sample as another clone built it: its uris and stamp name that clone's files, other times."""
    stamp = json.loads((db / STAMP_FILE).read_text())
    here = stamp["documents_dir"]
    stamp["documents_dir"] = ELSEWHERE
    stamp["files"] = {name: [size, mtime + 1] for name, (size, mtime) in stamp["files"].items()}
    (db / STAMP_FILE).write_text(json.dumps(stamp))
    connection = await lancedb.connect_async(str(db))
    table = await connection.open_table("document_meta")
    await table.update(updates_sql={"uri": f"replace(uri, '{Path(here).as_uri()}', 'file://{ELSEWHERE}')"})
    table.close()


@pytest.mark.parametrize("where", ["here", "elsewhere"])
async def test_a_built_sample_is_served_without_importing_the_parsers(
    sample_db: Path, tmp_path: Path, where: str
) -> None:
    data = tmp_path / "data"
    db = data / "mcp-analysis" / "sample.lancedb"
    shutil.copytree(sample_db, db)  # built, with its stamp
    if where == "elsewhere":
        await built_elsewhere(db)
        assert not is_built(db)
    params = StdioServerParameters(
        command=sys.executable,
        args=["-X", "importtime", "-m", "mcp_analysis", "serve", "--sample"],
        env={**os.environ, "XDG_DATA_HOME": str(data)},
        cwd=str(REPO),
    )
    stderr = tmp_path / "stderr.txt"
    with stderr.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            found = await client.call_tool("search", {"query": "average quarterly revenue", "limit": 3})
            listed = await client.call_tool("list_documents", {})
    assert not found.is_error and found.structured_content["results"], found
    assert not listed.is_error
    said = stderr.read_text()
    assert "Building the sample knowledge base" not in said  # up to date: not rebuilt
    imported = set(re.findall(r"^import time:\s+\d+ \|\s+\d+ \|\s+(\S+)", said, flags=re.MULTILINE))
    assert "mcp_analysis.sample" in imported and "lancedb" in imported  # the record is the server's own
    loaded = sorted(m for m in imported if m.split(".")[0] in CONVERSION or m.startswith(INGEST))
    assert not loaded, loaded
    uris = {d["uri"] for d in listed.structured_content["documents"]}
    assert uris == {p.resolve().as_uri() for p in documents_dir().iterdir() if not p.name.startswith(".")}
    assert is_built(db)
