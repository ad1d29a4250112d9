"""What the Redis session store counts against `sessions.max_stored_mb`, against what Redis holds.

A real redis-server (no persistence) and the real store (session/stores/redis.py): for each
session size, N sessions are saved (a record and an interpreter dump of random bytes, sealed
and encrypted as a server does), then Redis's own `used_memory` growth is compared with
the bytes the cap counted (`usage()`) and with the baseline: the record and dump bytes alone
(what a cap blind to Redis's own overhead counts). The figures are per-session growth, after
one warm-up session (Redis's one-off costs are not per session).
A ratio real/counted at or below 1.0 means the cap never lets Redis hold more than it counts.

    python bench/redis_bytes.py [--sessions 400] [--sizes 2000 17000 100000 1000000]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
from pathlib import Path

import anyio
import redis as redis_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _machine import describe, machine  # noqa: E402

from mcp_analysis.session.keys import SessionKey  # noqa: E402
from mcp_analysis.session.state import AnalysisState  # noqa: E402
from mcp_analysis.session.stores.base import Limits, SessionRecord, Signer  # noqa: E402
from mcp_analysis.session.stores.cipher import RecordCipher, derive_key  # noqa: E402
from mcp_analysis.session.stores.redis import RedisSessionStore  # noqa: E402
from tests.services import redis  # noqa: E402

SECRET = b"bench-redis-bytes-secret-0123456789"


async def measure(port: int, size: int, sessions: int) -> dict[str, float]:
    admin = redis_client.Redis(port=port)
    admin.flushall()
    signer = Signer(SECRET)
    store = RedisSessionStore(
        f"redis://127.0.0.1:{port}/0", signer, namespace=f"b{size}", cipher=RecordCipher(derive_key(SECRET))
    )
    limits = Limits(ttl_seconds=3600, max_stored=10**6, max_per_principal=10**6, max_stored_bytes=2**62)
    payload = 0

    async def save_one() -> int:
        key = SessionKey.handle(signer.new_handle(None))
        record = SessionRecord(key=key.storage, session_id=key.value, state=AnalysisState(), last_used=0.0)
        blob = os.urandom(size)
        await store.save(record, blob, expected=0, limits=limits)
        return len(record.model_dump_json()) + len(blob)

    # One session first: Redis's one-off costs (the scripts and Lua, a client's query buffer as
    # large as one record) are behind the baseline; the headroom they need is in docs/deploying.md.
    await save_one()
    admin.memory_purge()
    _, counted_before = await store.usage()
    before = int(admin.info("memory")["used_memory"])
    for _ in range(sessions):
        payload += await save_one()
    _, counted = await store.usage()
    counted -= counted_before
    real = int(admin.info("memory")["used_memory"]) - before
    await store.close()
    admin.close()
    return {"size": size, "sessions": sessions, "real": real, "counted": counted, "payload": payload}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=400)
    parser.add_argument("--sizes", type=int, nargs="+", default=[2000, 17000, 100000, 1000000])
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp, contextlib.ExitStack() as stack:
        port = stack.enter_context(redis(Path(tmp)))
        for size in args.sizes:
            count = args.sessions if size < 500_000 else max(20, args.sessions // 20)
            rows.append(anyio.run(measure, port, size, count))
    print(describe())
    print(
        f"{'dump bytes':>10} {'sessions':>8} {'Redis MB':>9} {'counted MB':>10} {'payload MB':>10} "
        f"{'real/counted':>12} {'real/payload':>12}"
    )
    for row in rows:
        row["real_per_counted"] = round(row["real"] / row["counted"], 3)
        row["real_per_payload"] = round(row["real"] / row["payload"], 3)
        print(
            f"{row['size']:>10} {row['sessions']:>8} {row['real'] / 2**20:>9.2f} {row['counted'] / 2**20:>10.2f} "
            f"{row['payload'] / 2**20:>10.2f} {row['real_per_counted']:>12} {row['real_per_payload']:>12}"
        )
    print(json.dumps({"bench": "redis_bytes", "machine": machine(), "rows": rows}))


if __name__ == "__main__":
    main()
