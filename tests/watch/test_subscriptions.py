"""Resource subscriptions on a watched folder: subscribers hear when a document changes or goes.

A file whose content changes becomes a new document; the subscription follows the file (see
server/updates.py): the old URI is reported changed, the subscription moves to the new document's
URI, which is reported too, and a read of the old URI names the new document.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client
from mcp.client.subscriptions import ResourceUpdated
from mcp.shared.exceptions import MCPError
from mcp_types import INVALID_PARAMS, ResourceListChangedNotification, ResourceUpdatedNotification

from tests.conftest import run_cli
from tests.mcp_helpers import http_server, stdio_params
from tests.watch.polling import DEADLINE

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(600)]
#: Files here are written whole: a short settle time and debounce apply each change soon.
PROMPT = {"MCP_ANALYSIS_WATCH__SETTLE_SECONDS": "0.2", "MCP_ANALYSIS_WATCH__DEBOUNCE_SECONDS": "0.1"}


def watched(tmp_path: Path) -> tuple[Path, Path, dict[str, str]]:
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), **PROMPT}
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "first.md").write_text("# First\n\nAbout pangolins, which the keeper counts every spring.\n")
    (folder / "other.md").write_text("# Other\n\nAbout tapirs.\n")
    kb = tmp_path / "kb.lancedb"
    assert run_cli("--db", str(kb), "sync", str(folder), env=env).returncode == 0
    return folder, kb, env


async def ids_by_name(client: Client) -> dict[str, str]:
    listed = (await client.call_tool("list_documents", {})).structured_content
    return {Path(d["uri"]).name: d["id"] for d in listed["documents"]}


async def until(updated: list[str], uri: str) -> None:
    with anyio.fail_after(DEADLINE):
        while True:
            if uri in updated:
                return
            await anyio.sleep(0.1)


async def test_a_legacy_subscriber_hears_its_documents_change_and_go_over_stdio(tmp_path: Path) -> None:
    folder, kb, env = watched(tmp_path)
    updated: list[str] = []

    async def on_message(message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            updated.append(str(message.params.uri))

    params = stdio_params(kb, "--watch", str(folder), env=env)
    async with Client(params, mode="legacy", message_handler=on_message) as client:
        assert client.server_capabilities is not None and client.server_capabilities.resources is not None
        assert client.server_capabilities.resources.subscribe
        ids = await ids_by_name(client)
        first = f"documents:///{ids['first.md']}/content.txt"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # resources/subscribe is deprecated at 2026-07-28, not before
            await client.subscribe_resource(first)
            for uri in ("documents:///no-such-document/content.txt", "analysis://sessions/x/state"):
                with pytest.raises(MCPError) as refused:
                    await client.subscribe_resource(uri)
                assert refused.value.error.code == INVALID_PARAMS

        hit = (await client.call_tool("search", {"query": "pangolins", "limit": 1})).structured_content
        cited = (await client.call_tool("cite", {"chunk_ids": [hit["results"][0]["chunk_id"]]})).structured_content

        (folder / "other.md").write_text("# Other\n\nNow about okapis.\n")  # not subscribed: never told
        (folder / "first.md").write_text("# First\n\nNow about axolotls.\n")
        await until(updated, first)
        now = (await ids_by_name(client))["first.md"]
        assert now != ids["first.md"]  # a changed file is a new document (new chunks, new id) ...
        followed = f"documents:///{now}/content.txt"
        await until(updated, followed)  # ... and the subscription followed the file
        with pytest.raises(MCPError) as old:
            await client.read_resource(first)
        assert f"replaced when its file changed: it is now {now}" in old.value.error.message
        assert "axolotls" in (await client.read_resource(followed)).contents[0].text
        # The citation made before the change still resolves, from the session's citation index.
        state = json.loads(
            (await client.read_resource(f"analysis://sessions/{cited['session']}/state")).contents[0].text
        )
        [chunk] = state["citations"]
        citation = state["citation_index"][chunk]
        assert citation["document_id"] == ids["first.md"] and "pangolins" in citation["content"]

        (folder / "first.md").unlink()
        updated.clear()
        await until(updated, followed)  # removed
        assert all(ids["other.md"] not in uri for uri in updated)


async def test_a_2026_listener_hears_the_uris_it_named(tmp_path: Path) -> None:
    folder, kb, env = watched(tmp_path)
    with http_server(kb, "--watch", str(folder), env=env, log_dir=tmp_path) as server:
        async with server.client() as client:
            ids = await ids_by_name(client)
            first = f"documents:///{ids['first.md']}/content.txt"
            async with client.listen(resource_subscriptions=[first]) as subscription:
                (folder / "first.md").write_text("# First\n\nNow about quokkas.\n")
                with anyio.fail_after(DEADLINE):
                    async for event in subscription:
                        if isinstance(event, ResourceUpdated):
                            assert event.uri == first
                            break


async def test_a_subscription_does_not_follow_into_a_document_outside_the_subscribers_filter(tmp_path: Path) -> None:
    folder, kb, env = watched(tmp_path)
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text("tokens:\n  - name: alice\n    token: alice-token-0123456789\n    filter: \"title = 'First'\"\n")
    heard: list[str] = []  # in order: updated URIs, and "list_changed"

    async def on_message(message: Any) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            heard.append(str(message.params.uri))
        elif isinstance(message, ResourceListChangedNotification):
            heard.append("list_changed")

    with http_server(kb, "--watch", str(folder), "--tokens-file", str(tokens), env=env, log_dir=tmp_path) as server:
        async with server.client("alice-token-0123456789", mode="legacy", message_handler=on_message) as client:
            [(name, old)] = (await ids_by_name(client)).items()
            assert name == "first.md"
            first = f"documents:///{old}/content.txt"
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                await client.subscribe_resource(first)
            (folder / "first.md").write_text("# Renamed\n\nNow outside alice's filter: about quokkas.\n")
            await until(heard, first)  # what alice subscribed to changed (and is gone for her) ...
            (folder / "other.md").write_text("# Other\n\nA later change, told after the first one's.\n")
            with anyio.fail_after(DEADLINE):
                while True:
                    if "list_changed" in heard[heard.index(first) :]:
                        break
                    await anyio.sleep(0.1)
            assert await ids_by_name(client) == {}
    # ... and her subscription did not follow the file into a document her filter does not show.
    assert [h for h in heard if h != "list_changed"] == [first]


async def test_subscriptions_are_bounded_per_connection(sample_db: Path) -> None:
    async with Client(stdio_params(sample_db), mode="legacy") as client:
        document = next(iter((await ids_by_name(client)).values()))
        table = f"documents:///{document}/tables/{{}}.csv"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with pytest.raises(MCPError) as unknown_file:
                await client.subscribe_resource(f"documents:///{document}/secrets.txt")
            assert unknown_file.value.error.code == INVALID_PARAMS
            for n in range(1000):
                await client.subscribe_resource(table.format(n))
            with pytest.raises(MCPError) as full:
                await client.subscribe_resource(table.format(1000))
            assert full.value.error.code == INVALID_PARAMS and "holds 1000 subscriptions" in full.value.error.message
            await client.subscribe_resource(table.format(0))  # one it holds: no new place needed
            await client.unsubscribe_resource(table.format(0))
            await client.subscribe_resource(table.format(1000))  # room again
