"""The read-only /documents tree the sandbox sees, answered from the store.

    /documents/{id}/metadata.json   {id, title, uri, created_at, metadata}   from the in-memory index
    /documents/{id}/content.txt     full text                                 loaded on first read
    /documents/{id}/items.jsonl     one JSON object per document item         loaded on first read
    /documents/{id}/toc.json        section tree with item ranges, chunk ids  loaded on first read
    /documents/{id}/tables.json     one entry per table (name, title, header) loaded on first read
    /documents/{id}/tables/{n}.csv  table n from its header row, RFC 4180     loaded on first read (raw
                                    values: the MCP resource neutralises formula cells, not this)

Every path is normalized first (``..`` cannot climb out); anything outside the tree
is FileNotFoundError, every write is PermissionError, the environment is empty.
Documents outside the session's filter do not exist here, whatever id is guessed.
Listing never loads contents. Paths longer than 4,096 characters and reads larger
than the session's memory limit allows are refused (sandbox/bounds.py; a table from its
stored size, before it is decompressed); listing a
large tree is built in a worker thread, off the event loop.
"""

from __future__ import annotations

import json
import posixpath
import re
from collections.abc import Awaitable, Callable
from datetime import datetime
from pathlib import PurePosixPath
from typing import Any, ClassVar

import anyio
from cachetools import LRUCache
from pydantic_monty import NOT_HANDLED, MontyFileHandle, ScanEntry, StatResult

from mcp_analysis.corpus import Corpus
from mcp_analysis.errors import DocumentNotFoundError, TableTooLargeError
from mcp_analysis.sandbox.bounds import HostBounds, check_path
from mcp_analysis.store.models import DocumentMeta

ROOT = "/documents"
FILES = ("metadata.json", "content.txt", "items.jsonl", "toc.json", "tables.json")
TABLES_DIR = "tables"
_TABLE_FILE = re.compile(r"(0|[1-9][0-9]{0,8})\.csv")
_WRITES = {
    "Path.write_text",
    "Path.write_bytes",
    "Path.append_text",
    "Path.append_bytes",
    "Path.mkdir",
    "Path.unlink",
    "Path.rmdir",
    "Path.rename",
}
_RENDER_CACHE_CHARS = 32 * 1024 * 1024


def _normalize(path: Any) -> str:
    raw = str(path.path if isinstance(path, MontyFileHandle) else path)
    check_path(raw)
    if not raw.startswith("/"):
        raw = "/" + raw
    return "/" + posixpath.normpath(raw).lstrip("/")  # POSIX keeps a leading "//"; we do not


def table_index(meta: DocumentMeta, name: str) -> int:
    """The n of "tables/{n}.csv" (DocumentNotFoundError for another name)."""
    file_name = name[len(TABLES_DIR) + 1 :]
    if not name.startswith(f"{TABLES_DIR}/") or not _TABLE_FILE.fullmatch(file_name):
        raise DocumentNotFoundError(f"No table {file_name!r} in document {meta.id}; tables.json lists them.")
    return int(file_name[:-4])


def _not_found(path: str) -> FileNotFoundError:
    return FileNotFoundError(f"[Errno 2] No such file or directory: '{path}'")


def _epoch(meta: DocumentMeta) -> float:
    try:
        return datetime.fromisoformat(meta.updated_at or meta.created_at).timestamp()
    except ValueError:
        return 0.0


_OFF_LOOP_DOCS = 2000  # trees with more documents are listed in a worker thread


def _doc_entries(prefix: str, ids: list[str], tables: dict[str, int]) -> list[ScanEntry]:
    entries = []
    for doc_id in ids:
        entries.append(ScanEntry(f"{prefix}{doc_id}", True, False, False))
        entries.extend(ScanEntry(f"{prefix}{doc_id}/{name}", False, True, False) for name in FILES)
        entries.extend(_table_entries(f"{prefix}{doc_id}/", tables.get(doc_id, 0)))
    return entries


def _table_entries(prefix: str, count: int) -> list[ScanEntry]:
    entries = [ScanEntry(f"{prefix}{TABLES_DIR}", True, False, False)]
    entries.extend(ScanEntry(f"{prefix}{TABLES_DIR}/{n}.csv", False, True, False) for n in range(count))
    return entries


class DocumentsFS:
    """A monty OS handler (``os=``) serving the /documents tree of one Corpus."""

    def __init__(self, corpus: Corpus) -> None:
        self.corpus = corpus
        self.bounds = HostBounds.of(corpus.kb.settings.sandbox)
        self._rendered: LRUCache[str, str] = LRUCache(maxsize=_RENDER_CACHE_CHARS, getsizeof=len)

    # monty calls the handler with keyword arguments; async work is returned as a coroutine.
    def __call__(
        self, *, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], is_async: bool = True, **_: Any
    ) -> Any:
        if name in _WRITES:
            try:
                target = _normalize(args[0]) if args else "?"
            except OSError as exc:
                return self._fail(exc)
            return self._fail(PermissionError(f"[Errno 30] Read-only file system: '{target}'"))
        if name == "os.getenv":
            return args[1] if len(args) > 1 else kwargs.get("default")
        if name == "os.environ":
            return {}
        handler = self._handlers.get(name)
        if handler is None:
            return NOT_HANDLED
        return handler(self, *args, **kwargs)

    @staticmethod
    async def _fail(exc: BaseException) -> Any:
        raise exc

    # ---------------------------------------------------------------- resolving

    async def _kind(self, path: str) -> tuple[str, DocumentMeta | None, str | None]:
        """('root'|'tree'|'doc'|'tables'|'file'|'missing', meta, file name; "tables/3.csv" for a table)."""
        if path == "/":
            return "root", None, None
        if path == ROOT:
            return "tree", None, None
        if not path.startswith(ROOT + "/"):
            return "missing", None, None
        parts = path[len(ROOT) + 1 :].split("/")
        meta = await self.corpus.find(parts[0]) if parts[0] else None
        if meta is None or len(parts) > 3:
            return "missing", None, None
        if len(parts) == 1:
            return "doc", meta, None
        if len(parts) == 2 and parts[1] in FILES:
            return "file", meta, parts[1]
        if parts[1] == TABLES_DIR:
            if len(parts) == 2:
                return "tables", meta, None
            if _TABLE_FILE.fullmatch(parts[2]) and int(parts[2][:-4]) < await self._table_count(meta):
                return "file", meta, f"{TABLES_DIR}/{parts[2]}"
        return "missing", None, None

    async def _table_size(self, meta: DocumentMeta, name: str) -> int:
        size = await self.corpus.table_size(meta.id, table_index(meta, name))
        if size is not None:
            return size
        try:
            return len((await self.render(meta, name)).encode("utf-8"))
        except OSError:  # over the read bound: say so when read, not when listed
            return self.bounds.max_text_chars + 1

    async def _table_count(self, meta: DocumentMeta) -> int:
        return (await self.corpus.kb.tables.counts([meta])).get(meta.id, 0)

    async def render(self, meta: DocumentMeta, name: str) -> str:
        """The text of one file of a visible document (cached per session except content.txt)."""
        if name == "metadata.json":
            return json.dumps(meta.public(), ensure_ascii=False, indent=2)
        key = f"{meta.id}/{meta.updated_at}/{name}"  # haiku.rag rewrites documents under the same id
        cached = self._rendered.get(key)
        if cached is not None:
            return cached
        if name == "content.txt":
            text = await self.corpus.content(meta.id)
        elif name == "items.jsonl":
            text = await self.corpus.items_jsonl(meta.id)
        elif name == "tables.json":
            text = json.dumps(await self.corpus.tables(meta.id), ensure_ascii=False, indent=2)
        elif name.startswith(f"{TABLES_DIR}/"):
            index = table_index(meta, name)
            try:  # can be large: not cached here; refused from its stored size before it is decompressed
                return await self.corpus.table_csv(meta.id, index, self.bounds.max_text_chars)
            except TableTooLargeError as exc:
                raise OSError(
                    f"[Errno 27] File too large: '{ROOT}/{meta.id}/{name}' holds {exc.measure}, more than "
                    f"one read may bring into the sandbox ({exc.limit:,} characters, {self.bounds.setting}). "
                    "search() finds the rows you need; tables.json gives each table's size."
                ) from None
        else:
            text = json.dumps(await self.corpus.toc(meta.id), ensure_ascii=False, indent=2)
        # content is cached by the knowledge base already; a text larger than the whole cache is not kept
        if name != "content.txt" and len(text) <= _RENDER_CACHE_CHARS:
            self._rendered[key] = text
        return text

    # ---------------------------------------------------------------- handlers

    async def _exists(self, path: Any) -> bool:
        return (await self._kind(_normalize(path)))[0] != "missing"

    async def _is_file(self, path: Any) -> bool:
        return (await self._kind(_normalize(path)))[0] == "file"

    async def _is_dir(self, path: Any) -> bool:
        return (await self._kind(_normalize(path)))[0] in ("root", "tree", "doc", "tables")

    async def _is_symlink(self, path: Any) -> bool:
        return False

    async def _open(self, path: Any, mode: str = "r", *_: Any) -> MontyFileHandle:
        normal = _normalize(path)
        if any(flag in mode for flag in "wax+"):
            raise PermissionError(f"[Errno 30] Read-only file system: '{normal}'")
        kind, _meta, _name = await self._kind(normal)
        if kind == "missing":
            raise _not_found(normal)
        if kind != "file":
            raise IsADirectoryError(f"[Errno 21] Is a directory: '{normal}'")
        return MontyFileHandle(normal, mode)

    async def _file_text(self, path: Any) -> str:
        normal = _normalize(path)
        kind, meta, name = await self._kind(normal)
        if kind == "missing":
            raise _not_found(normal)
        if kind != "file" or meta is None or name is None:
            raise IsADirectoryError(f"[Errno 21] Is a directory: '{normal}'")
        return await self.render(meta, name)

    async def _read_text(self, path: Any, *_: Any) -> str:
        text = await self._file_text(path)
        self.bounds.check_text(_normalize(path), text)
        return text

    async def _read_bytes(self, path: Any, *_: Any) -> bytes:
        text = await self._file_text(path)
        self.bounds.check_text(_normalize(path), text)
        return text.encode("utf-8")

    async def _children(self, normal: str) -> list[str]:
        kind, meta, _ = await self._kind(normal)
        if kind == "root":
            return ["documents"]
        if kind == "tree":
            return [m.id for m in await self.corpus.documents()]
        if kind == "doc" and meta is not None:
            return [*FILES, TABLES_DIR]
        if kind == "tables" and meta is not None:
            return [f"{n}.csv" for n in range(await self._table_count(meta))]
        if kind == "file":
            raise NotADirectoryError(f"[Errno 20] Not a directory: '{normal}'")
        raise _not_found(normal)

    async def _iterdir(self, path: Any) -> list[PurePosixPath]:
        normal = _normalize(path)
        base = PurePosixPath(normal)
        return [base / child for child in await self._children(normal)]

    async def _scan(self, path: Any, **glob_hints: Any) -> list[ScanEntry]:
        """The whole subtree in one host call (os.walk, glob, scandir); no contents loaded.

        monty filters the reply by the glob itself, so `glob_hints` (pattern, depth) are not needed.
        """
        normal = _normalize(path)
        kind, meta, _name = await self._kind(normal)
        if kind == "missing":
            raise _not_found(normal)
        if kind == "file":
            return [ScanEntry("", False, True, False)]
        entries = [ScanEntry("", True, False, False)]
        ids: list[str] = []
        tables: dict[str, int] = {}
        prefix = ""
        if kind == "root":
            entries.append(ScanEntry("documents", True, False, False))
            prefix = "documents/"
        if kind in ("root", "tree"):
            ids = [m.id for m in await self.corpus.documents()]
            tables = await self.corpus.table_counts()
        elif kind == "doc" and meta is not None:
            entries.extend(ScanEntry(name, False, True, False) for name in FILES)
            entries.extend(_table_entries("", await self._table_count(meta)))
        elif kind == "tables" and meta is not None:
            count = await self._table_count(meta)
            entries.extend(ScanEntry(f"{n}.csv", False, True, False) for n in range(count))
        if len(ids) > _OFF_LOOP_DOCS:
            entries.extend(await anyio.to_thread.run_sync(_doc_entries, prefix, ids, tables))
        else:
            entries.extend(_doc_entries(prefix, ids, tables))
        return entries

    async def _stat(self, path: Any) -> StatResult:
        normal = _normalize(path)
        kind, meta, name = await self._kind(normal)
        if kind == "missing":
            raise _not_found(normal)
        mtime = _epoch(meta) if meta else 0.0
        if kind != "file" or meta is None or name is None:
            return StatResult.dir_stat(0o555, mtime)
        if name == "content.txt":
            size = meta.content_size
        elif name.startswith(f"{TABLES_DIR}/"):
            size = await self._table_size(meta, name)
        else:
            size = len((await self.render(meta, name)).encode("utf-8"))
        return StatResult.file_stat(size, 0o444, mtime)

    async def _resolve(self, path: Any) -> str:
        return _normalize(path)

    _handlers: ClassVar[dict[str, Callable[..., Awaitable[Any]]]] = {
        "Path.exists": _exists,
        "Path.is_file": _is_file,
        "Path.is_dir": _is_dir,
        "Path.is_symlink": _is_symlink,
        "open": _open,
        "Path.read_text": _read_text,
        "Path.read_bytes": _read_bytes,
        "Path.iterdir": _iterdir,
        "Path.scan": _scan,
        "Path.stat": _stat,
        "Path.resolve": _resolve,
        "Path.absolute": _resolve,
    }
