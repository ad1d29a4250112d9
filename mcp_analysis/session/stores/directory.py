"""Which directory the local session store owns under `sessions.dir`, and nothing else.

The store writes, chmods and expires only inside a directory it can tell is its own: one it
created (mode 0700, with a marker file, `MARKER`), or one an earlier version created. An
operator may point `sessions.dir` at a directory that holds other things (a shared
``/srv/state``, a 1777 scratch directory): the server then keeps its sessions in a
subdirectory of its own (`SUBDIR`) and never changes the mode of, or deletes anything in,
the directory it was given.

How a directory without the marker is judged (an earlier version wrote none):

- it is *an earlier version's* when only this user may write to it and every entry in it is
  named as the store names its files (``secret.key``, ``<40 hex>.json|.bin|.kept``, write
  temporaries, ``<40 hex>.chunks`` folders of chunk files), each ``.json`` starting with the
  store's header line: it is adopted as it is;
- otherwise it is *shared*: the store uses ``SUBDIR`` inside it. If only this user may write to
  the shared directory, session files of an earlier version found there (recognised as above,
  with their signing key) move into ``SUBDIR`` so their sessions continue; in a directory others
  may write to, nothing is trusted or touched.

``SUBDIR`` itself must be a real directory of this user that nobody else may write to, else the
store refuses it (`OSError`, with what to do): a link or someone else's directory planted there
would let them read or forge sessions.
"""

from __future__ import annotations

import json
import logging
import os
import re
import stat
from pathlib import Path

from mcp_analysis.session.stores.chunks import NAME

log = logging.getLogger(__name__)

MARKER = ".mcp-analysis-sessions"
SUBDIR = "mcp-analysis-sessions"
SECRET_FILE = "secret.key"
_MARKER_TEXT = (
    "mcp-analysis keeps analysis sessions in this directory (session files and their signing key).\n"
    "The server deletes only its own files here; stop it before removing the directory.\n"
)
#: The names the store gives its files: a record, a dump, a "was kept" marker, per key digest.
SESSION_FILE = re.compile(r"[0-9a-f]{40}\.(json|bin|kept)")
_CHUNKS = re.compile(r"[0-9a-f]{40}\.chunks")
_TEMPORARY = re.compile(r"\.[0-9a-f]{40}\.(json|bin)\.[0-9a-f]{8}\.tmp")
_HEADER_KEYS = frozenset({"version", "owner", "mac"})


def owned_directory(configured: Path) -> Path:
    """The directory the store may own for `configured` (`sessions.dir`): made, adopted or a subdirectory."""
    if not configured.exists():
        _create(configured)
        return configured
    if not configured.is_dir():
        raise OSError(f"sessions.dir {configured} is not a directory")
    private = _private(configured.stat())
    if private and (configured / MARKER).is_file():
        return configured
    if private and _earlier_versions(configured):
        _mark(configured)
        log.info("Adopted %s as the session directory (written by an earlier version of mcp-analysis)", configured)
        return configured
    own = configured / SUBDIR
    if not os.path.lexists(own):
        _create(own)
        if private:
            _move_earlier_sessions(configured, own)
        log.info("Keeping sessions in %s: %s holds files mcp-analysis did not write", own, configured)
        return own
    if not _private(own.lstat(), directory=True) or not (own / MARKER).is_file():
        raise OSError(
            f"{own} was not created by mcp-analysis (it is a link, belongs to another user, lets others write "
            f"to it or lacks the {MARKER} marker), so sessions are not kept there. Remove it, or set "
            "sessions.dir to a directory of your own."
        )
    return own


def is_session_file(path: Path) -> bool:
    """Whether `path` is named as the store names its session files (the only ones it deletes)."""
    return SESSION_FILE.fullmatch(path.name) is not None


def _private(info: os.stat_result, *, directory: bool = False) -> bool:
    """Only this user may write to it (and, for `directory`, it is a real directory, not a link)."""
    if directory and not stat.S_ISDIR(info.st_mode):
        return False
    return info.st_uid == os.getuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _create(path: Path) -> None:
    path.mkdir(parents=True, mode=0o700)
    _mark(path)


def _mark(path: Path) -> None:
    (path / MARKER).write_text(_MARKER_TEXT)


def _our_header(path: Path) -> bool:
    try:
        with open(path, "rb") as handle:
            header = json.loads(handle.readline())
    except (OSError, ValueError):
        return False
    return isinstance(header, dict) and header.keys() >= _HEADER_KEYS


def _earlier_versions(directory: Path) -> bool:
    """Every entry is a file the store writes (see module docs): the directory is an earlier version's."""
    for entry in directory.iterdir():
        name = entry.name
        if name == SECRET_FILE or _TEMPORARY.fullmatch(name):
            continue
        if _CHUNKS.fullmatch(name) and _chunk_folder(entry):
            continue
        if not SESSION_FILE.fullmatch(name) or not entry.is_file():
            return False
        if name.endswith(".json") and not _our_header(entry):
            return False
    return True


def _chunk_folder(path: Path) -> bool:
    """A private folder (not a link) holding only chunk files, as the store writes them."""
    try:
        return _private(path.lstat(), directory=True) and all(NAME.fullmatch(p.name) for p in path.iterdir())
    except OSError:
        return False


def _move_earlier_sessions(shared: Path, own: Path) -> None:
    """Sessions an earlier version kept among the operator's files continue from `own` (with their key)."""
    secret = shared / SECRET_FILE
    records = [p for p in shared.glob("*.json") if is_session_file(p) and _our_header(p)]
    if not records or not secret.is_file():
        return
    moved = 0
    for record in records:
        for path in (record, record.with_suffix(".bin"), record.with_suffix(".kept")):
            if path.is_file():
                path.replace(own / path.name)
        chunks = record.with_suffix(".chunks")
        if _chunk_folder(chunks):
            chunks.replace(own / chunks.name)
        moved += 1
    secret.replace(own / SECRET_FILE)
    log.warning(
        "Moved %d session(s) an earlier version of mcp-analysis kept in %s into %s; the other files there were "
        "left as they are (earlier versions set that directory's mode to 0700: restore it if it was another)",
        moved,
        shared,
        own,
    )
