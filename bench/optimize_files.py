"""Open files a long-lived process keeps after each optimize of a knowledge base (LanceDB's and Lance's).

A watched folder's server adds and optimizes for as long as it runs. This process does the same in
a loop, in one process, on a fresh knowledge base: each round an `add` of one new Markdown file
through the product's own ingest (which folds the new rows into the indexes: `optimize`), then a
search (`--scanner`: through Lance's scanner, `search.scanner_min_chunks: 0`; else LanceDB's
queries). After every few rounds it counts the files this process holds open under the chunks
table's `_indices/`, and how many of those belong to an index segment the table no longer lists
(superseded by an optimize); at the end, the same after the knowledge base is closed.

    python bench/optimize_files.py [--rounds 12] [--scanner]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from _machine import describe, machine  # noqa: E402


def index_files(db: Path) -> tuple[int, int]:
    """(files open under the chunks table's indexes, those of a segment the table no longer has)."""
    import lance

    marker = f"{db.resolve()}/chunks.lance/_indices/"
    held: list[str] = []
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = str(fd.readlink())
        except OSError:
            continue
        if target.startswith(marker):
            held.append(target[len(marker) :].split("/", 1)[0])
    current = {index["uuid"] for index in lance.dataset(str(db / "chunks.lance")).list_indices()}
    return len(held), sum(1 for uuid in held if uuid not in current)


async def run(rounds: int, scanner: bool, work: Path) -> dict[str, Any]:
    from mcp_analysis.config import load_settings
    from mcp_analysis.corpus import KnowledgeBase
    from mcp_analysis.ingest.pipeline import Ingestor

    db = work / "kb.lancedb"
    # A vector index from the first rows (as a knowledge base past `search.vector_index_min_rows` has).
    search: dict[str, Any] = {"vector_index_min_rows": 1}
    if scanner:
        search["scanner_min_chunks"] = 0
    overrides: dict[str, Any] = {"db": db, "search": search}
    settings = load_settings(None, **overrides)
    kb = await KnowledgeBase.open(settings, create=True)
    counts: list[dict[str, int]] = []
    try:
        for number in range(rounds):
            doc = work / f"note-{number}.md"
            doc.write_text(f"# Note {number}\n\nThe harbour crane moved {number} containers at the tide.\n")
            await Ingestor(kb).add([doc])
            assert await kb.corpus().search("harbour crane tide", 5)
            held, stale = index_files(db)
            counts.append({"round": number + 1, "open": held, "superseded": stale})
        indexes = sorted((await kb.store.index_names()).get("chunks", []))
    finally:
        await kb.close()
    held, stale = index_files(db)
    return {"rounds": counts, "indexes": indexes, "after_close": {"open": held, "superseded": stale}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=12)
    parser.add_argument("--scanner", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="optimize-files-") as work:
        result = anyio.run(run, args.rounds, args.scanner, Path(work))
    for row in result["rounds"]:
        print(f"round {row['round']:>3}: {row['open']} index files open, {row['superseded']} of superseded segments")
    after = result["after_close"]
    print(f"after close: {after['open']} open, {after['superseded']} of superseded segments")
    print(f"the chunks table's indexes: {', '.join(result['indexes'])}")
    print(describe())
    print(json.dumps({"bench": "optimize_files", "scanner": args.scanner, **result, "machine": machine()}))


if __name__ == "__main__":
    main()
