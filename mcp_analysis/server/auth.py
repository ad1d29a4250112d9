"""Bearer tokens for HTTP, each mapped to its own document filter (per-user access control).

Tokens file (YAML)::

    tokens:
      - name: alice                      # the principal; sessions are bound to it
        token: "s3cret-alice"            # or token_sha256: "<hex digest of the token>"
        filter: "uri LIKE '%public%'"    # optional; ANDed with the server's --filter
      - name: admin
        token_sha256: "9f86d0..."

No token or an unknown one is answered 401 before anything runs.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import stat
import time
from dataclasses import dataclass
from pathlib import Path

from mcp.server.auth.provider import AccessToken, TokenVerifier

from mcp_analysis.errors import ConfigError, FilterError
from mcp_analysis.ingest.secrets import MIN_TOKEN_CHARS, TOKEN_ENTRY_KEYS
from mcp_analysis.store.filters import normalize_filter
from mcp_analysis.yaml_files import load_yaml

SCOPE = "mcp-analysis"
RECHECK_SECONDS = 1.0  # how often a request may look at the tokens file's status
SETTLE_SECONDS = 1.0  # how long a changed tokens file must hold still before its new entries hold
_clock = time.monotonic

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TokenEntry:
    name: str
    digest: bytes
    filter: str | None
    clear: bool = False  # the file holds the token itself, not its digest


def load_tokens(path: Path) -> list[TokenEntry]:
    data = load_yaml(path, "Tokens file")
    rows = data.get("tokens") if isinstance(data, dict) else None
    if not isinstance(rows, list) or not rows:
        raise ConfigError(f"Tokens file {path} must contain a non-empty list under 'tokens:'.")
    entries: list[TokenEntry] = []
    names: set[str] = set()
    for index, row in enumerate(rows):
        where = f"{path}, tokens[{index}]"
        if not isinstance(row, dict):
            raise ConfigError(f"{where}: each token is a mapping with name, token (or token_sha256) and filter.")
        unknown = set(row) - TOKEN_ENTRY_KEYS
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {', '.join(sorted(unknown))}.")
        name = str(row.get("name") or "").strip()
        if not name:
            raise ConfigError(f"{where}: 'name' is required.")
        if name in names:
            raise ConfigError(f"{where}: duplicate name {name!r}.")
        names.add(name)
        if row.get("token"):
            secret = str(row["token"])
            if len(secret) < MIN_TOKEN_CHARS:
                raise ConfigError(f"{where}: token of {name!r} is shorter than {MIN_TOKEN_CHARS} characters.")
            digest = hashlib.sha256(secret.encode()).digest()
        elif row.get("token_sha256"):
            try:
                digest = bytes.fromhex(str(row["token_sha256"]))
            except ValueError:
                raise ConfigError(f"{where}: token_sha256 must be a hex sha256 digest.") from None
            if len(digest) != 32:
                raise ConfigError(f"{where}: token_sha256 must be 64 hex characters.")
        else:
            raise ConfigError(f"{where}: give 'token' or 'token_sha256' for {name!r}.")
        if row.get("filter") is not None and not isinstance(row["filter"], str):
            raise ConfigError(f"{where}: the filter of {name!r} must be a string (an SQL WHERE expression).")
        try:
            where_clause = normalize_filter(row.get("filter"))
        except FilterError as exc:
            raise ConfigError(f"{where}: the filter of {name!r} is not valid: {exc}") from None
        entries.append(TokenEntry(name, digest, where_clause, clear=bool(row.get("token"))))
    return entries


class TokenFileVerifier(TokenVerifier):
    """Checks bearer tokens against the tokens file in constant time, and follows the file: a token
    removed (or a filter changed) there holds from the next request, without a restart.

    The file's status is looked at no more than once per `RECHECK_SECONDS`; when it changed the file is
    read again. Until it has held still for `SETTLE_SECONDS` (an editor may be half-way through writing
    it), only the entries both versions agree on hold: a removed token is refused at once, a new or
    changed one (a token whose filter line is not written yet) waits. A file that can no longer be read,
    or is no longer valid, refuses every token (fail closed: a revocation with a typo in it must not
    leave the revoked token working) and is logged, until it is fixed."""

    def __init__(self, path: Path, entries: list[TokenEntry] | None = None) -> None:
        self.path = path
        self._status = _status(path)  # before reading: an edit made meanwhile is read on the next check
        self.entries = load_tokens(path) if entries is None else entries
        self._settled = list(self.entries)  # the last version that held still
        self._unsettled: list[TokenEntry] | None = None  # a newer one, read once, not yet still
        self._checked = self._changed = _clock()

    async def verify_token(self, token: str) -> AccessToken | None:
        self._follow_file()
        digest = hashlib.sha256(token.encode()).digest()
        match: TokenEntry | None = None
        for entry in self.entries:  # no early exit: timing does not reveal which entry matched
            if hmac.compare_digest(entry.digest, digest):
                match = entry
        if match is None:
            return None
        return AccessToken(token="[redacted]", client_id=match.name, scopes=[SCOPE], claims={"filter": match.filter})

    def _follow_file(self) -> None:
        now = _clock()
        if now - self._checked < RECHECK_SECONDS:
            return
        self._checked = now
        status = _status(self.path)
        if status == self._status:
            if self._unsettled is not None and now - self._changed >= SETTLE_SECONDS:  # still: it holds whole
                self.entries = self._settled = self._unsettled
                self._unsettled = None
                log.warning("Tokens file %s changed: %d token(s) accepted from now on.", self.path, len(self.entries))
            return
        self._status, self._changed = status, now
        try:
            read = load_tokens(self.path)
        except Exception as exc:  # whatever the mistake, never the old tokens: one of them was revoked
            self.entries, self._unsettled = [], None
            why = str(exc) if isinstance(exc, ConfigError) else f"Tokens file {self.path}: {type(exc).__name__}"
            log.error("%s Every bearer token is refused until the tokens file is fixed.", why)
            return
        both = set(read)
        self.entries = [entry for entry in self._settled if entry in both]
        self._unsettled = read


def warn_if_readable_by_others(path: Path, entries: list[TokenEntry]) -> None:
    """A tokens file holding tokens in clear that other users may read is named in a warning."""
    if not any(entry.clear for entry in entries):
        return
    try:
        mode = path.stat().st_mode
    except OSError:
        return
    if mode & (stat.S_IRGRP | stat.S_IROTH):
        log.warning(
            "Tokens file %s can be read by other users of this machine (mode %o): `chmod 600 %s`, or give "
            "token_sha256 in place of token.",
            path,
            stat.S_IMODE(mode),
            path,
        )


def _status(path: Path) -> tuple[int, ...] | None:
    """What changes when the file is edited or replaced; None when it cannot be looked at."""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)  # ctime: an mtime put back
