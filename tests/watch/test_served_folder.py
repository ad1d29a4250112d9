"""A watched folder behind a real server: what a real MCP client sees as files come, change, move and go.

One `serve --http --watch` process serves the whole module; the knowledge base is made by the
real `sync` command first. Every wait is a poll against a deadline, never a fixed sleep.
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.subscriptions import ResourcesListChanged

from tests.conftest import REPO, run_cli, user_home
from tests.mcp_helpers import HttpServer, http_server
from tests.watch.polling import DEADLINE, eventually

# A server, three commands and a stdio host: about a minute on an idle machine; the limit is for loaded ones.
pytestmark = [pytest.mark.anyio, pytest.mark.timeout(900)]


def note(path: Path, title: str, body: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"# {title}\n\n{body}\n")
    return path


@pytest.fixture(scope="module")
def place(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("watched")


@pytest.fixture(scope="module")
def env(place: Path) -> dict[str, str]:
    return {
        "XDG_DATA_HOME": str(place / "data"),
        "MCP_ANALYSIS_WATCH__SETTLE_SECONDS": "1.0",
        "MCP_ANALYSIS_WATCH__IGNORE": '["drafts/"]',
    }


@pytest.fixture(scope="module")
def synced(place: Path, env: dict[str, str]) -> tuple[Path, Path]:
    """A folder mirrored once by `sync` (a file it cannot read included), plus a document from elsewhere."""
    folder, kb = place / "folder", place / "kb.lancedb"
    note(folder / "alpha.md", "Alpha", "The lighthouse keeper counts albatrosses.")
    note(folder / "sub" / "gone.md", "Gone", "Deleted while nobody watched: quokka.")
    note(folder / "drafts" / "wip.md", "Draft", "Ignored by watch.ignore.")
    note(folder / ".hidden.md", "Hidden", "Never followed.")
    (folder / "empty.md").write_text("")
    outside = note(place / "elsewhere" / "keep.md", "Keep", "Added by hand from another folder.")
    result = run_cli("--db", str(kb), "sync", str(folder), env=env)
    assert result.returncode == 1, result.stderr  # empty.md has no text
    assert f"failed {folder / 'empty.md'}: no text could be extracted" in " ".join(result.stderr.split())
    assert "2 added, 0 replaced, 0 unchanged, 0 removed, 1 failed" in result.stdout
    assert run_cli("--db", str(kb), "add", str(outside), env=env).returncode == 0
    (folder / "empty.md").unlink()
    return folder, kb


@pytest.fixture(scope="module")
def server(synced: tuple[Path, Path], place: Path, env: dict[str, str]) -> Iterator[HttpServer]:
    folder, kb = synced
    (folder / "sub" / "gone.md").unlink()  # while no watcher runs
    note(folder / "beta.md", "Beta", "Written while nobody watched: narwhal.")
    with http_server(kb, "--watch", str(folder), env=env, log_dir=place) as running:
        yield running


async def names(client: Client) -> set[str]:
    listed = (await client.call_tool("list_documents", {})).structured_content
    return {Path(d["uri"]).name for d in listed["documents"]}


async def found(client: Client, word: str) -> bool:
    hits = (await client.call_tool("search", {"query": word})).structured_content["results"]
    return any(word in hit["content"] for hit in hits)


async def _ids_by_name(client: Client) -> dict[str, str]:
    listed = (await client.call_tool("list_documents", {})).structured_content
    return {Path(d["uri"]).name: d["id"] for d in listed["documents"]}


async def test_at_start_the_folder_is_mirrored_and_other_documents_stay(server: HttpServer) -> None:
    async with server.client() as client:
        # gone.md removed, beta.md added; the hidden file and the draft never; keep.md (from elsewhere) kept.
        mirrored = {"alpha.md", "beta.md", "keep.md"}
        seen = await eventually(lambda: _moved(client, "gone.md", "beta.md"), "beta.md in and gone.md out")
        assert seen == mirrored
        assert await found(client, "narwhal")


async def test_created_changed_renamed_and_deleted_files_reach_the_client(
    server: HttpServer, synced: tuple[Path, Path]
) -> None:
    folder, _ = synced
    async with server.client() as client:
        await eventually(lambda: _has(client, {"beta.md"}), "the start-up mirror")
        async with client.listen(resources_list_changed=True) as subscription:
            note(folder / "sub" / "gamma.md", "Gamma", "A new note about axolotls.")
            with anyio.fail_after(DEADLINE):
                async for event in subscription:
                    assert isinstance(event, ResourcesListChanged)
                    break
        await eventually(lambda: found(client, "axolotls"), "a created file is searchable")

        note(folder / "alpha.md", "Alpha", "The keeper now counts pangolins instead.")
        await eventually(lambda: found(client, "pangolins"), "a changed file is searchable")
        assert not await found(client, "albatrosses")  # replaced, not added beside

        gamma = await _ids_by_name(client)
        (folder / "sub" / "gamma.md").rename(folder / "delta.md")
        moved = await eventually(lambda: _moved(client, "gamma.md", "delta.md"), "a renamed file changes name")
        assert "keep.md" in moved
        assert await found(client, "axolotls")  # the content followed the file
        assert (await _ids_by_name(client))["delta.md"] == gamma["gamma.md"]  # the same document, moved

        (folder / "beta.md").unlink()
        after = await eventually(lambda: _lacks(client, "beta.md"), "a deleted file's document goes")
        assert "keep.md" in after
        assert not await found(client, "narwhal")

        incoming = note(folder.parent / "incoming" / "box" / "epsilon.md", "Epsilon", "Moved in whole: capybaras.")
        incoming.parent.rename(folder / "box")  # a folder moved in from outside
        await eventually(lambda: found(client, "capybaras"), "the files of a folder moved in are searchable")
        shutil.rmtree(folder / "box")
        after = await eventually(lambda: _lacks(client, "epsilon.md"), "a deleted folder's documents go")
        assert {"alpha.md", "delta.md", "keep.md"} <= after


async def test_a_file_still_being_written_is_only_read_once_complete(
    server: HttpServer, synced: tuple[Path, Path]
) -> None:
    folder, _ = synced
    target = folder / "slow.md"
    async with server.client() as client:
        with target.open("w") as handle:
            handle.write("# Slow\n\nFIRSTPART wombat.\n")
            for line in range(30):  # writes every 0.1 s: never still for the 1 s settle time
                handle.write(f"line {line} of a long copy.\n")
                handle.flush()
                await anyio.sleep(0.1)
                if line % 10 == 9:
                    assert "slow.md" not in await names(client), "a file being written was read"
            handle.write("LASTPART quoll.\n")
        await eventually(lambda: found(client, "quoll"), "the finished file is searchable")
        documents = (await client.call_tool("list_documents", {})).structured_content["documents"]
        slow = next(d for d in documents if d["uri"].endswith("/slow.md"))
        code = f"open('/documents/{slow['id']}/content.txt').read()"
        content = (await client.call_tool("execute_code", {"code": code})).structured_content["value"]
        assert "FIRSTPART" in content and "LASTPART" in content and "line 29" in content


def test_a_second_watcher_of_the_same_knowledge_base_is_refused(
    server: HttpServer, synced: tuple[Path, Path], env: dict[str, str]
) -> None:
    folder, kb = synced
    for args in (("serve", "--watch", str(folder)), ("sync", str(folder))):
        result = run_cli("--db", str(kb), *args, env=env, timeout=120)
        assert result.returncode == 1, result.stderr
        message = " ".join(result.stderr.split())
        assert "Another process already watches folders into" in message and "pid " in message


async def test_claude_desktop_entry_serves_a_live_folder_over_stdio(tmp_path: Path) -> None:
    """The example config's watching entry, paths filled in, on a new knowledge base."""
    import json

    config = json.loads((REPO / "claude_desktop_config.example.json").read_text())
    entry = config["mcpServers"]["documents-live-folder"]
    executable = shutil.which("mcp-analysis", path=str(Path(sys.executable).parent))
    assert executable
    folder = tmp_path / "notes"
    note(folder / "first.md", "First", "Present at start: okapi.")
    fill = {
        "/ABSOLUTE/PATH/TO/mcp-analysis/.venv/bin/mcp-analysis": executable,
        "/ABSOLUTE/PATH/TO/your-kb.lancedb": str(tmp_path / "kb.lancedb"),
        "/ABSOLUTE/PATH/TO/your-folder": str(folder),
    }
    args = [fill.get(a, a) for a in entry["args"]]
    assert "/ABSOLUTE/PATH" not in " ".join(args)
    params = StdioServerParameters(
        command=fill[entry["command"]], args=args, env={"HOME": str(user_home(tmp_path))}, cwd=str(tmp_path)
    )
    async with Client(params) as client:
        await eventually(lambda: _has(client, {"first.md"}), "the folder's file on a new knowledge base")
        note(folder / "second.md", "Second", "Saved while the host was connected: tapir.")
        await eventually(lambda: found(client, "tapir"), "a file saved later is searchable over stdio")


async def _has(client: Client, wanted: set[str]) -> set[str] | None:
    current = await names(client)
    return current if wanted <= current else None


async def _lacks(client: Client, name: str) -> set[str] | None:
    current = await names(client)
    return current if name not in current else None


async def _moved(client: Client, old: str, new: str) -> set[str] | None:
    current = await names(client)
    return current if new in current and old not in current else None
