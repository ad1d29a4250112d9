"""Hibernated sessions on disk, so they outlive a server restart.

Per session: ``<digest>.json`` (key, owner, filter, AnalysisState, last use) and
``<digest>.bin`` (the interpreter dump). Both are authenticated with an HMAC key
kept in the directory (mode 0600): monty must only load dumps it produced, so a
tampered or foreign file is ignored, never loaded. Files idle past the TTL go.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import secrets
import time
from pathlib import Path

from pydantic import BaseModel

from mcp_analysis.session.state import AnalysisState

log = logging.getLogger(__name__)


class SessionRecord(BaseModel):
    key: str
    session_id: str
    owner: str | None = None
    document_filter: str | None = None
    state: AnalysisState
    last_used: float


class SessionStore:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True)
        directory.chmod(0o700)
        key_file = directory / "secret.key"
        if not key_file.exists():
            fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as handle:
                handle.write(secrets.token_bytes(32))
        self._secret = key_file.read_bytes()

    def _paths(self, key: str) -> tuple[Path, Path]:
        digest = hashlib.sha256(key.encode()).hexdigest()[:40]
        return self.directory / f"{digest}.json", self.directory / f"{digest}.bin"

    def _mac(self, record_json: bytes, blob: bytes | None) -> str:
        mac = hmac.new(self._secret, record_json, hashlib.sha256)
        mac.update(b"\x00" + (blob or b""))
        return mac.hexdigest()

    def save(self, record: SessionRecord, blob: bytes | None) -> None:
        record_path, blob_path = self._paths(record.key)
        body = record.model_dump_json().encode()
        envelope = json.dumps({"mac": self._mac(body, blob), "record": body.decode()}).encode()
        if blob is not None:
            _atomic_write(blob_path, blob)
        else:
            blob_path.unlink(missing_ok=True)
        _atomic_write(record_path, envelope)

    def load(self, key: str) -> tuple[SessionRecord, bytes | None] | None:
        record_path, blob_path = self._paths(key)
        try:
            envelope = json.loads(record_path.read_bytes())
            body = envelope["record"].encode()
            blob = blob_path.read_bytes() if blob_path.exists() else None
        except (OSError, ValueError, KeyError):
            return None
        if not hmac.compare_digest(envelope.get("mac", ""), self._mac(body, blob)):
            log.warning("Ignoring session file %s: its signature does not match", record_path.name)
            return None
        try:
            record = SessionRecord.model_validate_json(body)
        except ValueError:
            return None
        return (record, blob) if record.key == key else None

    def delete(self, key: str) -> None:
        for path in self._paths(key):
            path.unlink(missing_ok=True)

    def expire(self, ttl_seconds: float) -> int:
        """Delete files of sessions idle longer than the TTL; returns how many went."""
        cutoff = time.time() - ttl_seconds
        removed = 0
        for path in self.directory.glob("*.json"):
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink(missing_ok=True)
                    path.with_suffix(".bin").unlink(missing_ok=True)
                    removed += 1
            except OSError:
                continue
        return removed


def _atomic_write(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)
    tmp.replace(path)
