"""Real transports: stdio subprocesses and `serve --http` on loopback, both protocol eras."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.subscriptions import ResourcesListChanged

from tests.conftest import REPO, SAMPLE_DOCUMENTS, run_cli, user_home
from tests.docs_factory import write_markdown
from tests.mcp_helpers import HttpServer, http_server, stdio_params, text

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def server_logs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("logs")


@pytest.fixture(scope="module")
def tokens_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("auth") / "tokens.yaml"
    path.write_text(
        "tokens:\n"
        "  - name: alice\n    token: alice-token-0123456789\n    filter: \"uri LIKE '%advisory%'\"\n"
        "  - name: bob\n    token: bob-token-0123456789\n"
    )
    return path


@pytest.fixture(scope="module")
def http(sample_db: Path, server_logs: Path) -> Iterator[HttpServer]:
    with http_server(sample_db, log_dir=server_logs, env={"XDG_DATA_HOME": str(server_logs / "data")}) as server:
        yield server


# ----------------------------------------------------------------------------- stdio


async def test_stdio_both_eras_and_a_clean_wire(sample_db: Path) -> None:
    noisy = (
        'import sys\nfor i in range(2000):\n    print(\'{"jsonrpc": "2.0", "id": 1}\', i)\n'
        "print('e', file=sys.stderr)\n42"
    )
    for mode in ("auto", "legacy"):
        async with Client(stdio_params(sample_db), mode=mode) as client:
            assert client.protocol_version == ("2026-07-28" if mode == "auto" else "2025-11-25")
            result = await client.call_tool("execute_code", {"code": noisy})
            assert result.structured_content["value"] == "42"
            assert result.structured_content["stderr"] == "e\n"
            # The process is the client: state persists without any session argument.
            await client.call_tool("execute_code", {"code": "kept = 'stdio'"})
            again = await client.call_tool("execute_code", {"code": "kept"})
            assert again.structured_content["value"] == "'stdio'"
            assert (await client.call_tool("list_documents", {})).structured_content["total"] == SAMPLE_DOCUMENTS


async def test_stdio_cancel_stops_the_code_and_keeps_state(sample_db: Path) -> None:
    async with Client(stdio_params(sample_db)) as client:
        await client.call_tool("execute_code", {"code": "before = 1"})
        with anyio.move_on_after(1.5):
            await client.call_tool("execute_code", {"code": "after = 1\nwhile True:\n    pass"})
        probe = (
            "found = []\nfor n in ['before', 'after']:\n    try:\n        eval(n)\n        found.append(n)\n"
            "    except NameError:\n        pass\nfound"
        )
        with anyio.fail_after(20):  # the worker was freed: this does not wait for the loop
            result = await client.call_tool("execute_code", {"code": probe})
        assert result.structured_content["value"] == "['before']"


def test_missing_database_fails_fast_with_a_clear_message(tmp_path: Path) -> None:
    missing = tmp_path / "missing.lancedb"
    run = run_cli("--db", str(missing), "serve", timeout=60)
    assert run.returncode == 1
    assert "No knowledge base at" in run.stderr and f"`mcp-analysis --db {missing} add PATH`" in run.stderr
    assert run.stdout == ""


# ------------------------------------------------------------------------------ HTTP


async def test_http_sessionless_clients_get_a_handle_to_pass_back(http: HttpServer) -> None:
    async with http.client() as client:
        assert client.protocol_version == "2026-07-28"
        first = await client.call_tool("execute_code", {"code": "mine = 'A'"})
        handle = first.structured_content["session"]
        assert f'session="{handle}"' in text(first)
        kept = await client.call_tool("execute_code", {"code": "mine", "session": handle})
        assert kept.structured_content["value"] == "'A'"
        fresh = await client.call_tool("execute_code", {"code": "mine"})
        assert fresh.structured_content["session"] != handle and "NameError" in fresh.structured_content["error"]
        state = json.loads((await client.read_resource(f"analysis://sessions/{handle}/state")).contents[0].text)
        assert [e["code"] for e in state["executions"]] == ["mine = 'A'", "mine"]


async def test_http_legacy_sessions_are_isolated(http: HttpServer) -> None:
    async with http.client(mode="legacy") as one, http.client(mode="legacy") as two:
        assert one.protocol_version == "2025-11-25"
        await one.call_tool("execute_code", {"code": "who = 'one'"})
        await two.call_tool("execute_code", {"code": "who = 'two'"})
        hit = (await one.call_tool("search", {"query": "phishing"})).structured_content["results"][0]
        await one.call_tool("cite", {"chunk_ids": [hit["chunk_id"]]})
        assert (await one.call_tool("execute_code", {"code": "who"})).structured_content["value"] == "'one'"
        assert (await two.call_tool("execute_code", {"code": "who"})).structured_content["value"] == "'two'"
        assert (await two.call_tool("analysis_state", {})).structured_content["citations"] == []
        assert len((await one.call_tool("analysis_state", {})).structured_content["citations"]) == 1


async def test_http_concurrent_modern_clients_are_isolated(http: HttpServer) -> None:
    handles: dict[int, str] = {}

    async def work(n: int) -> None:
        async with http.client() as client:
            first = await client.call_tool("execute_code", {"code": f"value = {n}"})
            handles[n] = first.structured_content["session"]
            await client.call_tool("search", {"query": f"revenue {n}", "session": handles[n]})
            got = await client.call_tool("execute_code", {"code": "value", "session": handles[n]})
            assert got.structured_content["value"] == str(n)

    async with anyio.create_task_group() as tg:
        for n in range(6):
            tg.start_soon(work, n)
    assert len(set(handles.values())) == 6


def test_http_dns_rebinding_is_refused(http: HttpServer) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}
    evil = httpx2.post(http.url, json=body, headers={**headers, "Host": "evil.example:80"}, timeout=10)
    assert evil.status_code in (400, 403, 421)
    origin = httpx2.post(http.url, json=body, headers={**headers, "Origin": "http://evil.example"}, timeout=10)
    assert origin.status_code in (400, 403)
    # /healthz and /metrics alike (they name the knowledge base and count every client's calls); a balancer's
    # or a probe's request by IP address, or without a Host header, is answered.
    base = http.url.rsplit("/", 1)[0]
    for route in ("/healthz", "/metrics"):
        assert httpx2.get(base + route, headers={"Host": "evil.example:80"}, timeout=10).status_code == 421
        rebound = {"Host": "localhost:80", "Origin": "http://evil.example"}
        assert httpx2.get(base + route, headers=rebound, timeout=10).status_code == 403
        for host in ("127.0.0.1:9", "10.1.2.3", "[::1]:8765"):
            assert httpx2.get(base + route, headers={"Host": host}, timeout=10).status_code in (200, 503), host


async def test_http_tokens_map_to_filters(sample_db: Path, server_logs: Path, tokens_file: Path) -> None:
    env = {"XDG_DATA_HOME": str(server_logs / "auth-data")}
    with http_server(sample_db, "--tokens-file", str(tokens_file), log_dir=server_logs, env=env) as server:
        body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
        headers = {"Accept": "application/json, text/event-stream", "MCP-Protocol-Version": "2026-07-28"}
        assert httpx2.post(server.url, json=body, headers=headers, timeout=10).status_code == 401
        wrong = {**headers, "Authorization": "Bearer not-a-token-at-all"}
        assert httpx2.post(server.url, json=body, headers=wrong, timeout=10).status_code == 401

        async with server.client("alice-token-0123456789") as alice, server.client("bob-token-0123456789") as bob:
            assert (await alice.call_tool("list_documents", {})).structured_content["total"] == 4
            assert (await bob.call_tool("list_documents", {})).structured_content["total"] == SAMPLE_DOCUMENTS
            seen = await alice.call_tool("execute_code", {"code": "import os\nlen(os.listdir('/documents'))"})
            assert seen.structured_content["value"] == "4"
            # Authenticated clients are their principal: state persists without a handle.
            assert (await alice.call_tool("execute_code", {"code": "n = 1"})).structured_content["success"]
            assert (await alice.call_tool("execute_code", {"code": "n + 1"})).structured_content["value"] == "2"
            # Bob cannot use Alice's session, even knowing its id.
            alice_session = (await alice.call_tool("analysis_state", {})).structured_content["session"]
            stolen = await bob.call_tool("execute_code", {"code": "n", "session": alice_session})
            assert stolen.is_error and "Unknown or expired" in text(stolen)
            resources = await alice.list_resources()
            assert len(resources.resources) == 20  # 4 documents x 5 files


async def test_clients_hear_when_documents_are_added(sample_db: Path, server_logs: Path, tmp_path: Path) -> None:
    db = tmp_path / "kb.lancedb"
    shutil.copytree(sample_db, db)
    env = {"XDG_DATA_HOME": str(tmp_path / "data"), "MCP_ANALYSIS_SERVER__WATCH_INTERVAL": "0.5"}
    legacy_heard = anyio.Event()

    async def on_message(message: Any) -> None:
        if "resources/list_changed" in repr(message):
            legacy_heard.set()

    with http_server(db, log_dir=server_logs, env=env) as server:
        async with server.client() as modern, server.client(mode="legacy", message_handler=on_message) as legacy:
            await legacy.list_tools()
            assert (await modern.call_tool("list_documents", {})).structured_content["total"] == SAMPLE_DOCUMENTS
            async with modern.listen(resources_list_changed=True) as subscription:
                new_doc = write_markdown(tmp_path / "new.md")
                added = await anyio.run_process(  # another process adds a document
                    [sys.executable, "-m", "mcp_analysis", "--db", str(db), "add", str(new_doc)],
                    cwd=REPO,
                    env={**os.environ, **env},
                    check=False,
                )
                assert added.returncode == 0, added.stderr.decode()
                with anyio.fail_after(30):
                    async for event in subscription:
                        assert isinstance(event, ResourcesListChanged)
                        break
            assert (await modern.call_tool("list_documents", {})).structured_content["total"] == SAMPLE_DOCUMENTS + 1
            with anyio.fail_after(10):
                await legacy_heard.wait()


# ------------------------------------------------------------------------ Inspector


def _inspector(*args: str, db: Path, home: Path, status: int = 0) -> dict[str, Any]:
    binary = os.environ.get("MCP_INSPECTOR_BIN") or shutil.which("mcp-inspector")
    command = [binary] if binary else ["npx", "-y", "@modelcontextprotocol/inspector@2.12.0"]
    run = subprocess.run(
        [*command, "--cli", sys.executable, "-m", "mcp_analysis", "--db", str(db), "serve", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "HOME": str(user_home(home))},
    )
    assert run.returncode == status, run.stderr[-2000:]
    return json.loads(run.stdout)


def test_mcp_inspector_cli_against_the_stdio_server(sample_db: Path, tmp_path: Path) -> None:
    listed = _inspector("--method", "tools/list", db=sample_db, home=tmp_path)
    assert {t["name"] for t in listed["tools"]} >= {"search", "list_documents", "execute_code", "cite"}
    called = _inspector(
        "--method",
        "tools/call",
        "--tool-name",
        "execute_code",
        "--tool-arg",
        "code=len(await list_documents())",
        db=sample_db,
        home=tmp_path,
    )
    assert called["structuredContent"]["value"] == str(SAMPLE_DOCUMENTS)
    resources = _inspector("--method", "resources/list", db=sample_db, home=tmp_path)
    assert len(resources["resources"]) == SAMPLE_DOCUMENTS * 5  # 5 files a document
    prompt = _inspector(
        "--method",
        "prompts/get",
        "--prompt-name",
        "analyze",
        "--prompt-args",
        "question=How many?",
        db=sample_db,
        home=tmp_path,
    )
    assert "How many?" in prompt["messages"][0]["content"]["text"]
    # The README's cite example: chunk_ids is a JSON array; one bare id is told the shape.
    found = _inspector(
        "--method", "tools/call", "--tool-name", "search", "--tool-arg", "query=revenue", "limit=1",
        db=sample_db, home=tmp_path,
    )  # fmt: skip
    chunk = found["structuredContent"]["results"][0]["chunk_id"]
    cited = _inspector(
        "--method", "tools/call", "--tool-name", "cite", "--tool-arg", f'chunk_ids=["{chunk}"]',
        db=sample_db, home=tmp_path,
    )  # fmt: skip
    assert [c["chunk_id"] for c in cited["structuredContent"]["citations"]] == [chunk]
    bare = _inspector(
        "--method", "tools/call", "--tool-name", "cite", "--tool-arg", f"chunk_ids={chunk}",
        db=sample_db, home=tmp_path, status=5,  # the Inspector's exit status for an isError result
    )  # fmt: skip
    assert bare["isError"] and "chunk_ids takes a JSON array of chunk ids" in bare["content"][0]["text"]
    assert "--tool-arg 'chunk_ids=[\"<chunk id>\"]'" in bare["content"][0]["text"]
