"""The Claude Desktop example config works once its paths are filled in."""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import pytest
from mcp import Client, StdioServerParameters

from tests.conftest import REPO, SAMPLE_DOCUMENTS, user_home

pytestmark = pytest.mark.anyio


async def test_claude_desktop_example_config_launches_the_server(sample_db: Path, tmp_path: Path) -> None:
    config = json.loads((REPO / "claude_desktop_config.example.json").read_text())
    entry = config["mcpServers"]["documents"]
    executable = shutil.which("mcp-analysis", path=str(Path(sys.executable).parent))
    assert executable, "the mcp-analysis console script is installed next to the interpreter"
    command = entry["command"].replace("/ABSOLUTE/PATH/TO/mcp-analysis/.venv/bin/mcp-analysis", executable)
    args = [a.replace("/ABSOLUTE/PATH/TO/your-kb.lancedb", str(sample_db)) for a in entry["args"]]
    assert "/ABSOLUTE/PATH" not in command + " ".join(args)
    # Claude Desktop starts servers with a minimal environment and an unrelated working directory.
    home = str(user_home(tmp_path))
    params = StdioServerParameters(command=command, args=args, env={"HOME": home}, cwd=str(tmp_path))
    async with Client(params) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"search", "list_documents", "execute_code", "cite"} <= names
        result = await client.call_tool("execute_code", {"code": "len(await list_documents())"})
        assert result.structured_content["value"] == str(SAMPLE_DOCUMENTS)
