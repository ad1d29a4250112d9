"""What `add` reads: files and folders, and objects on an object store (`add s3://bucket/prefix/`).

- `s3://bucket/prefix/` is every object under the prefix, in key order (a folder's own objects
  before its subfolders', as a walk goes); an object with a hidden part in its key (`.x`) is
  skipped, as in a folder, and the knowledge base's own objects (`--db s3://...` under the prefix)
  are never listed. `s3://bucket/key` is that one object. Objects are reached through pyarrow's
  filesystem layer, with the environment's credentials, region and endpoint (AWS_ACCESS_KEY_ID,
  AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL), as a knowledge base on an object store is.
- An object is read where a file is, in the conversion worker, under the same bounds: a listed
  size over `ingest.max_file_mb` refuses it unread, its bytes are read in pieces up to that bound
  (a text's first NUL byte stops the read), hashed, and are the bytes converted. An object whose
  size or modification time moved while it was read (replaced meanwhile) is refused, as a file is.
- Its uri is the object's own (`s3://bucket/key`); a rerun reads and hashes it again and skips it
  when that hash is stored, as for files. A source that cannot be listed (no such bucket, no
  credentials, an endpoint that does not answer) stops the add before anything is written.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from mcp_analysis.errors import AnalysisError, IngestError
from mcp_analysis.ingest import formats
from mcp_analysis.ingest.excluded import OWN_FOLDER, Excluded
from mcp_analysis.ingest.files import (
    FileSignature,
    ReadFile,
    check_entry,
    collect_files,
    file_uri,
    read_file,
    read_pieces,
)
from mcp_analysis.ingest.formats.base import limit_error
from mcp_analysis.ingest.limits import MB, Limits
from mcp_analysis.ingest.secrets import named_secret

SCHEMES = ("s3",)


@dataclass(frozen=True)
class ObjectPath:
    """One object, with what ingest uses of a file's Path: its name, its suffix, and (os.fspath) its uri."""

    uri: str

    @property
    def name(self) -> str:
        return self.uri.rsplit("/", 1)[-1]

    @property
    def suffix(self) -> str:
        return PurePosixPath(self.name).suffix

    def __fspath__(self) -> str:
        return self.uri

    def __str__(self) -> str:
        return self.uri


SourcePath = Path | ObjectPath


def is_object_uri(source: str | os.PathLike[str]) -> bool:
    """`source` names an object or a prefix on an object store (scheme://...), not a local path."""
    return isinstance(source, ObjectPath) or (isinstance(source, str) and "://" in source)


def as_sources(given: Sequence[str | os.PathLike[str]]) -> list[str | Path]:
    """The command line's arguments: object-store uris as they are, the rest local paths."""
    return [raw if isinstance(raw, str) and is_object_uri(raw) else Path(raw) for raw in given]


def _split(uri: str) -> tuple[str, str]:
    """(scheme://bucket, bucket/key): the key taken as written (never parsed for a query)."""
    scheme, _, rest = uri.partition("://")
    if scheme.lower() not in SCHEMES:
        raise AnalysisError(f"{uri}: only s3:// object-store sources can be added (and local files or folders).")
    return f"{scheme}://{rest.split('/', 1)[0]}", rest.rstrip("/")


@functools.lru_cache(maxsize=16)
def _filesystem(bucket: str) -> Any:
    from pyarrow import fs

    return fs.FileSystem.from_uri(bucket)[0]


# The AWS SDK's words for a request the store refused for its credentials or their permissions.
_REFUSED = ("ACCESS_DENIED", "INVALID_ACCESS_KEY_ID", "SIGNATURE_DOES_NOT_MATCH", "EXPIRED_TOKEN", "HTTP status 403")
_ENVIRONMENT = "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION, AWS_ENDPOINT_URL"


def _one_line(exc: BaseException) -> str:
    """`exc` in one line; a refusal says so first (a HEAD's refusal comes without the store's words)."""
    said = " ".join(str(exc).split()) or type(exc).__name__
    refused = any(word in said for word in _REFUSED)
    return f"the object store refused access with these credentials ({said})" if refused else said


def _where(uri: str) -> tuple[Any, str]:
    bucket, path = _split(uri)
    try:
        return _filesystem(bucket), path
    except (OSError, ValueError) as exc:
        raise AnalysisError(f"Cannot reach {bucket}: {_one_line(exc)}") from None


def unreadable(uri: str) -> str | None:
    """Why `uri` cannot be looked at from here (no such bucket, no credentials...), else None."""
    try:
        filesystem, path = _where(uri)
        filesystem.get_file_info(path)
    except (AnalysisError, OSError) as exc:
        return _one_line(exc)
    return None


def _cannot_list(source: str, reason: str) -> AnalysisError:
    return AnalysisError(
        f"Cannot list {source}: {reason} (the bucket's name, the credentials and the endpoint come from "
        f"the environment: {_ENVIRONMENT})"
    )


def check_readable(sources: Sequence[str]) -> None:
    """That this process can look at each object-store source (before others are asked to read them)."""
    for source in sources:
        if (reason := unreadable(source)) is not None:
            raise _cannot_list(source, reason)


def list_objects(source: str, skipped: list[tuple[str, str]], db: str) -> list[ObjectPath]:
    """The objects `source` names (see the module's docs); a prefix with none is reported in `skipped`."""
    from pyarrow import fs

    filesystem, path = _where(source)
    scheme = source.partition("://")[0]
    own = _split(db)[1] if is_object_uri(db) and _split(db)[0].startswith(scheme) else None
    if own is not None and (path == own or path.startswith(own + "/")):
        skipped.append((source, f"is {OWN_FOLDER}, never added as documents"))
        return []
    try:
        info = filesystem.get_file_info(path)
        if info.type == fs.FileType.File:
            return [ObjectPath(source)]
        # Not allow_not_found: a bucket that does not exist is an error, a prefix without objects a skip.
        found = filesystem.get_file_info(fs.FileSelector(path, recursive=True))
    except FileNotFoundError:
        found = []
    except OSError as exc:
        raise _cannot_list(source, _one_line(exc)) from None
    keys = []
    for entry in found:
        parts = entry.path[len(path) :].strip("/").split("/")
        inside_own = own is not None and entry.path.startswith(own + "/")
        # hidden, or a secret
        left_out = any(p.startswith(".") for p in parts) or named_secret("/".join(parts)) is not None
        if entry.type == fs.FileType.File and not inside_own and not left_out:
            keys.append(((*((1, p) for p in parts[:-1]), (0, parts[-1])), entry.path))
    if not keys:
        skipped.append((source, "no objects under this prefix (objects with a hidden part in their key are not added)"))
    return [ObjectPath(f"{scheme}://{key}") for _, key in sorted(keys)]


def collect_sources(
    given: Sequence[str | os.PathLike[str]], excluded: Excluded, db: str | os.PathLike[str]
) -> tuple[list[SourcePath], list[tuple[str, str]]]:
    """`files.collect_files` for the local paths, then the objects of each object-store source."""
    local = [Path(p) for p in given if not is_object_uri(p)]
    files: list[SourcePath] = []
    skipped: list[tuple[str, str]] = []
    if local:
        found, skipped = collect_files(local, excluded)
        files.extend(found)
    seen = set()
    for source in (os.fspath(p) for p in given if is_object_uri(p)):
        for item in list_objects(source, skipped, os.fspath(db)):
            if item.uri not in seen:
                seen.add(item.uri)
                files.append(item)
    return files, skipped


def refusal(path: SourcePath) -> str | None:
    """Why `path` is skipped before any worker reads it: not a regular file, or an unknown suffix."""
    reason = None if isinstance(path, ObjectPath) else check_entry(path)
    if reason is None and path.suffix and formats.find(path.name) is None:
        reason = f"unsupported file type '{path.suffix.lower()}' (supported: {formats.supported()})"
    return reason


def source_uri(path: SourcePath) -> str:
    """The uri a document of `path` is stored under."""
    return path.uri if isinstance(path, ObjectPath) else file_uri(path)


def read_source(path: str, limits: Limits, text_after: Callable[[bytes], bool]) -> ReadFile:
    """`files.read_file`, or `read_object` for an object's uri (in the conversion worker)."""
    if is_object_uri(path):
        return read_object(path, limits, text_after)
    return read_file(path, limits, text_after)


def read_object(uri: str, limits: Limits, text_after: Callable[[bytes], bool]) -> ReadFile:
    """An object's bytes, read once in pieces under `limits` and hashed (see the module's docs)."""
    import hashlib

    from pyarrow import fs

    try:
        filesystem, path = _where(uri)
        before = filesystem.get_file_info(path)
        if before.type != fs.FileType.File:
            raise IngestError("does not exist (any more)")
        if before.size > limits.max_bytes:
            raise limit_error(limits, "max_bytes", f"{before.size / MB:,.0f} MB")
        with filesystem.open_input_stream(path) as stream:
            data = read_pieces(stream.read, limits, text_after)
        after = filesystem.get_file_info(path)
    except IngestError:
        raise
    except (AnalysisError, OSError) as exc:
        raise IngestError(f"cannot read: {_one_line(exc)}") from None
    signature = FileSignature(0, 0, before.size, before.mtime_ns or 0, before.mtime_ns or 0)
    if (after.size, after.mtime_ns) != (before.size, before.mtime_ns) or len(data) != before.size:
        raise IngestError("it changed while it was being read (replaced meanwhile?); add it again")
    return ReadFile(data, hashlib.sha256(data).hexdigest(), signature)
