"""The built-in sample knowledge base: 14 documents of a fictional marine-electronics firm.

Quarterly financial reports (Q1-Q4 2025; revenue in tables; md, html, pdf, docx),
security advisories (two mention vulnerabilities, two do not), longer multi-section
reports (an annual security review, an engineering roadmap, and two customer-research
reports, "Report A" and "Report B", with Key Findings), a workbook (revenue by region per
quarter, support tickets; notes rows, formulas, dates) and a scanned memo read by OCR.
The workbook and the memo are written by tools/make_sample_extras.py.

Exact answers (checked by tests/sample/test_questions.py):
- documents mentioning security vulnerabilities: 4
- average quarterly revenue: $13,850,000 (12.4 + 13.1 + 14.6 + 15.3 million / 4); the
  workbook's regions add up to the same quarter totals
- fastest-growing region from Q1 to Q4 2025: Poland (+46.7%); largest in Q3: Norway
- support tickets per product: NavCore 8, FleetLink 6, Customer portal 5
- the scanned memo: the Bergen line stopped for 14 hours; the repair cost NOK 86,500

Once built, the knowledge base carries a stamp naming the sample files it was built
from; while the files match it, `ensure_sample_kb` only reads the stamp and a few file
sizes (no LanceDB, no hashing), so `--sample` starts as fast as `--db`. Files with the
content the stamp records (its digests) but another place or times (another clone or
environment sharing the data directory, a reinstall) only move the documents' uris there:
no parser is imported, no document read again. A server opens it
with `SampleOpener`, which builds it in the background while the server already answers.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import time
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import anyio

from mcp_analysis import progress
from mcp_analysis.config import Settings
from mcp_analysis.paths import data_home, is_local_path

if TYPE_CHECKING:
    from mcp_analysis.corpus import KnowledgeBase

STAMP_FILE = ".sample-built.json"


def documents_dir() -> Path:
    return Path(str(resources.files("mcp_analysis.sample") / "documents"))


def default_sample_db() -> Path:
    return data_home() / "sample.lancedb"


def _fingerprint() -> dict[str, Any]:
    """What the sample was built from: the files' location, names, sizes and modification times."""
    directory = documents_dir()
    files = {}
    for path in sorted(directory.iterdir()):
        if path.is_file() and not path.name.startswith("."):
            stat = path.stat()
            files[path.name] = [stat.st_size, stat.st_mtime_ns]
    return {"documents_dir": str(directory), "files": files}


def is_built(db: Path) -> bool:
    """True when `db` holds a complete build of the current sample files (cheap: a few stat calls)."""
    stamp = _stamp(db)
    return stamp is not None and {k: stamp.get(k) for k in ("documents_dir", "files")} == _fingerprint()


def _stamp(db: Path) -> dict[str, Any] | None:
    """The stamp a complete build of the sample left in `db`, if any."""
    if not is_local_path(db) or not (Path(db) / "document_meta.lance").is_dir():
        return None
    try:
        stamp = json.loads((Path(db) / STAMP_FILE).read_text())
    except (OSError, ValueError):
        return None
    return stamp if isinstance(stamp, dict) else None


def _digests(names: Any) -> dict[str, str]:
    return {name: hashlib.sha256((documents_dir() / name).read_bytes()).hexdigest() for name in names}


def _moved_only(db: Path, fingerprint: dict[str, Any]) -> bool:
    """The stamp records these very files by content (digests): only their place or times changed."""
    stamp = _stamp(db)
    if stamp is None or not isinstance(stamp.get("files"), dict):
        return False
    digests = stamp.get("sha256")
    names = set(fingerprint["files"])
    return isinstance(digests, dict) and set(stamp["files"]) == set(digests) == names and digests == _digests(names)


async def _relocate(settings: Settings, fingerprint: dict[str, Any]) -> None:
    """Point the sample documents' uris at the files here (the knowledge base's reading stack only)."""
    from mcp_analysis.corpus import KnowledgeBase
    from mcp_analysis.ingest.lock import ingest_lock

    kb = await KnowledgeBase.open(settings)
    try:
        moved = []
        for meta in await kb.store.all_meta():
            if _is_sample_uri(meta.uri, fingerprint["files"]):
                here = (documents_dir() / unquote(meta.uri.rpartition("/")[2])).resolve().as_uri()
                if here != meta.uri:
                    moved.append(meta.model_copy(update={"uri": here}))
        if moved:
            async with ingest_lock(kb.store.path):
                await kb.store.update_meta(*moved)
    finally:
        await kb.close()
    _write_stamp(settings.db, fingerprint)


def _write_stamp(db: Path, fingerprint: dict[str, Any]) -> None:
    if is_local_path(db):
        (Path(db) / STAMP_FILE).write_text(json.dumps({**fingerprint, "sha256": _digests(fingerprint["files"])}))


def forget_build(db: Path) -> None:
    """Make the next `ensure_sample_kb` check the documents again (after a removal, say)."""
    if is_local_path(db):
        (Path(db) / STAMP_FILE).unlink(missing_ok=True)


def _is_sample_uri(uri: str, names: dict[str, Any]) -> bool:
    """A sample file from another location (only these are pruned; documents users added stay)."""
    directory, _, name = uri.rpartition("/")
    return name in names and directory.endswith("/sample/documents")


async def ensure_sample_kb(settings: Settings) -> Settings:
    """Build (or bring up to date) the sample knowledge base at settings.db; instant once built.

    Documents from an older location of the sample files (another clone or environment
    sharing the data directory) are removed, so the sample has exactly the shipped files.
    """
    if is_built(settings.db):
        return settings
    fingerprint = _fingerprint()
    if _moved_only(settings.db, fingerprint):
        await _relocate(settings, fingerprint)
        return settings
    started = time.perf_counter()
    progress.say(
        "Building the sample knowledge base in %s (first use only; up to a minute on a slow machine)...", settings.db
    )
    progress.say("sample knowledge base: loading libraries")
    from mcp_analysis.corpus import KnowledgeBase
    from mcp_analysis.ingest.pipeline import Ingestor
    from mcp_analysis.ingest.removal import remove_document

    kb = await KnowledgeBase.open(_with_ocr(settings), create=True)
    try:
        report = await Ingestor(kb, progress.LineProgress("sample knowledge base")).add([documents_dir()])
        current = {(documents_dir() / name).resolve().as_uri() for name in fingerprint["files"]}
        for meta in await kb.store.all_meta():
            if meta.uri not in current and _is_sample_uri(meta.uri, fingerprint["files"]):
                await remove_document(kb, meta.id)
        documents = await kb.corpus().count()
    finally:
        await kb.close()
    if report.skipped:  # never expected: the files ship with the package
        from mcp_analysis.errors import IngestError

        raise IngestError(f"The sample documents could not all be read: {report.skipped}")
    _write_stamp(settings.db, fingerprint)
    progress.say(
        "Sample knowledge base ready: %d documents in %.1f s (next starts are instant).",
        documents,
        time.perf_counter() - started,
    )
    return settings


def _with_ocr(settings: Settings) -> Settings:
    """The sample ships a scanned page, read by OCR (about a second) even where `ingest.ocr` is off."""
    if settings.ingest.ocr == "auto":
        return settings
    return settings.model_copy(update={"ingest": settings.ingest.model_copy(update={"ocr": "auto"})})


class SampleOpener:
    """Opens the sample knowledge base for a server, building it first when needed.

    The server's runtime opens its knowledge base in the background after the server
    answers, so with this opener `initialize` and `tools/list` are answered during a
    first build (tens of seconds, past an MCP host's connect timeout) and tool calls
    wait for it. The ingest modules are imported in a thread: the event loop keeps
    answering meanwhile.
    """

    async def open(self, settings: Settings) -> KnowledgeBase:
        if not is_built(settings.db) and not _moved_only(settings.db, _fingerprint()):
            await anyio.to_thread.run_sync(importlib.import_module, "mcp_analysis.ingest.pipeline")
        await ensure_sample_kb(settings)
        from mcp_analysis.corpus import KnowledgeBase

        return await KnowledgeBase.open(settings)
