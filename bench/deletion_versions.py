"""Table versions written by deleting many documents: a watched folder's batch, and `rm`.

For each checkout given (this one, and e.g. /work/main as the baseline, in the same run), with
that checkout's venv: `sync` a folder of `--files` notes, start `serve --http --watch` on it,
delete them all at once, and count the LanceDB versions (manifests on disk) written until the
documents are gone from `list_documents`, the seconds that took, and the versions after the
watcher's idle compaction (`--idle` s later). Then `rm` of `--rm` ids: in one call where the
checkout's `rm` takes several ids, else one call per id for the first `--rm-single` of them
(versions per document, the way that checkout removes a batch).

    python bench/deletion_versions.py [--checkout PATH ...] [--files 120] [--rm 100] [--rm-single 10]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import anyio
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from _machine import describe, machine  # noqa: E402

from tests.services import free_port, stop, wait_for_port  # noqa: E402


def versions(db: Path) -> int:
    return sum(1 for _ in db.glob("*.lance/_versions/*.manifest"))


def notes(folder: Path, count: int) -> None:
    folder.mkdir(parents=True)
    for n in range(count):
        (folder / f"note-{n:03d}.md").write_text(f"# Note {n}\n\nBerth {n} was dredged to {n % 17 + 5} metres.\n")


def cli(checkout: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    python = str(checkout / ".venv" / "bin" / "python")
    return subprocess.run([python, "-m", "mcp_analysis", *args], cwd=checkout, env=env, capture_output=True, text=True)


async def documents(url: str) -> int:
    http = httpx2.AsyncClient(timeout=httpx2.Timeout(60.0))
    async with Client(streamable_http_client(url, http_client=http)) as client:
        listed = (await client.call_tool("list_documents", {})).structured_content
        return int(listed["total"])


def watched_deletion(checkout: Path, work: Path, env: dict[str, str], files: int, idle: float) -> dict[str, float]:
    folder, db = work / "watched", work / "watched.lancedb"
    notes(folder, files)
    assert cli(checkout, env, "--db", str(db), "sync", str(folder)).returncode == 0
    port = free_port()
    python = str(checkout / ".venv" / "bin" / "python")
    command = [python, "-m", "mcp_analysis", "--db", str(db), "serve", "--http", "--port", str(port), "--watch"]
    with open(work / "server.log", "wb") as log:
        process = subprocess.Popen([*command, str(folder)], cwd=checkout, env=env, stdout=log, stderr=log)
    try:
        wait_for_port(port, process, 120, "server")
        url = f"http://127.0.0.1:{port}/mcp"
        while anyio.run(documents, url) != files:
            time.sleep(0.5)
        time.sleep(2)  # the start-up mirror's own writes settle
        before = versions(db)
        started = time.perf_counter()
        for path in folder.iterdir():
            path.unlink()
        while anyio.run(documents, url) != 0:
            time.sleep(0.2)
        seconds = time.perf_counter() - started
        at_visible = versions(db) - before
        time.sleep(idle)
        return {
            "seconds_to_visible": seconds,
            "versions_at_visible": at_visible,
            "versions_after_idle": versions(db) - before,
        }
    finally:
        stop(process)


def rm_ids(checkout: Path, work: Path, env: dict[str, str], count: int, single: int) -> dict[str, float]:
    folder, db = work / "rm", work / "rm.lancedb"
    notes(folder, count)
    assert cli(checkout, env, "--db", str(db), "add", str(folder)).returncode == 0
    ids = [d["id"] for d in json.loads(cli(checkout, env, "--db", str(db), "list", "--json").stdout)]
    before = versions(db)
    batch = cli(checkout, env, "--db", str(db), "rm", *ids)
    if batch.returncode == 0:
        return {"documents": len(ids), "calls": 1, "versions": versions(db) - before}
    for one in ids[:single]:
        assert cli(checkout, env, "--db", str(db), "rm", one).returncode == 0
    return {"documents": single, "calls": single, "versions": versions(db) - before}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkout", type=Path, action="append", help="a checkout with its .venv (repeatable)")
    parser.add_argument("--files", type=int, default=120)
    parser.add_argument("--rm", type=int, default=100)
    parser.add_argument("--rm-single", type=int, default=10)
    parser.add_argument("--idle", type=float, default=15.0)
    args = parser.parse_args()
    results = []
    for n, checkout in enumerate(args.checkout or [ROOT]):
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            env = {**os.environ, "XDG_DATA_HOME": str(work / "data")}
            results.append(
                {
                    "checkout": str(checkout),
                    "watch": watched_deletion(checkout.resolve(), work, env, args.files, args.idle),
                    "rm": rm_ids(checkout.resolve(), work, env, args.rm, args.rm_single),
                }
            )
            print(f"run {n} done", file=sys.stderr)
    print(describe(), file=sys.stderr)
    print(json.dumps({"machine": machine(), "files": args.files, "results": results}, indent=2))


if __name__ == "__main__":
    main()
