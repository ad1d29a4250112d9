"""The object-store watch lease: a watcher that lost it (Redis flushed, restarted, the key evicted)
writes nothing until it holds it again, then applies what waited.

A real `serve --http --watch` over a knowledge base on S3 (moto) with the lease in a real
redis-server; the lease is taken away the way Redis loses it (FLUSHALL) and held meanwhile by
"another watcher" (the key set to another holder, as a second `sync` would).
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
import redis as redis_client
from mcp import Client

from mcp_analysis.config import Settings
from mcp_analysis.watch.lock import WatchLeaseLost, watcher_lock
from tests.mcp_helpers import http_server
from tests.services import moto_s3, redis
from tests.watch.polling import DEADLINE, eventually

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(600)]

SECRET = "a-secret-of-32-characters-or-more-0123"
LEASE = 2.0  # watch.lease_seconds: renewed every 2/3 s


async def _names(client: Client) -> set[str]:
    listed = (await client.call_tool("list_documents", {})).structured_content
    return {Path(d["uri"]).name for d in listed["documents"]}


def _logged(log: Path, words: str) -> bool:
    return words in log.read_text(errors="replace")


async def test_a_watcher_whose_lease_is_gone_writes_nothing_until_it_holds_it_again(tmp_path: Path) -> None:
    folder = tmp_path / "folder"
    folder.mkdir()
    (folder / "alpha.md").write_text("# Alpha\n\nThe lighthouse keeper counts albatrosses.\n")
    with moto_s3(tmp_path) as s3, redis(tmp_path) as port:
        db = f"s3://{s3.bucket}/kb"
        env = {
            **s3.env(),
            "XDG_DATA_HOME": str(tmp_path / "data"),
            "MCP_ANALYSIS_SESSIONS__STORE": f"redis://127.0.0.1:{port}/0",
            "MCP_ANALYSIS_SESSIONS__SECRET": SECRET,
            "MCP_ANALYSIS_WATCH__LEASE_SECONDS": str(LEASE),
            "MCP_ANALYSIS_WATCH__SETTLE_SECONDS": "0.3",
            "MCP_ANALYSIS_SERVER__WATCH_INTERVAL": "0.5",
        }
        keeper = redis_client.Redis(port=port)
        key = f"mcpa:watch:{db}"
        with http_server(db, "--watch", str(folder), env=env, log_dir=tmp_path) as server:
            async with server.client() as client:

                async def mirrored() -> bool:
                    return "alpha.md" in await _names(client)

                await eventually(mirrored, "the start-up mirror")
                assert f"pid {server.process.pid} on " in keeper.get(key).decode()

                # Redis loses the key, and another watcher takes the place meanwhile.
                keeper.flushall()
                keeper.set(key, "0123456789abcdef pid 1 on elsewhere since then", px=int(DEADLINE * 1000))

                async def lost() -> bool:
                    return _logged(server.log, "Lost the watch lease")

                await eventually(lost, "the watcher notices its lease is gone")
                (folder / "beta.md").write_text("# Beta\n\nWritten while another watcher held the lease: narwhal.\n")

                async def held_back() -> bool:
                    return _logged(server.log, "are held back until this process holds the watch lease again")

                await eventually(held_back, "the change is held back")
                await anyio.sleep(2 * LEASE)  # the lease renewed twice over: a watcher that writes anyway has written
                assert await _names(client) == {"alpha.md"}
                assert keeper.get(key).startswith(b"0123456789abcdef")  # never taken from its holder

                keeper.delete(key)  # the other watcher is done

                async def applied() -> bool:
                    return await _names(client) == {"alpha.md", "beta.md"}

                await eventually(applied, "the held-back change applied once the lease is free")
                assert f"pid {server.process.pid} on " in keeper.get(key).decode()
                assert _logged(server.log, "holding the watch lease of")


async def test_a_write_checks_the_lease_first(tmp_path: Path) -> None:
    """Between two renewals, the check before a write finds a lease that is gone."""
    with redis(tmp_path) as port:
        settings = Settings(
            db="s3://bucket/kb",
            sessions={"store": f"redis://127.0.0.1:{port}/0", "secret": SECRET},
            watch={"lease_seconds": 60},  # no renewal during the test
        )
        async with watcher_lock(settings) as lease:
            await lease.check()  # held
            redis_client.Redis(port=port).flushall()
            with pytest.raises(WatchLeaseLost, match=r"no longer holds the watch lease of s3://bucket/kb"):
                await lease.check()
            assert not lease.held
