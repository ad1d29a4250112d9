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
from dataclasses import dataclass
from pathlib import Path

from mcp.server.auth.provider import AccessToken, TokenVerifier

from mcp_analysis.errors import ConfigError
from mcp_analysis.store.filters import normalize_filter
from mcp_analysis.yaml_files import load_yaml

SCOPE = "mcp-analysis"


@dataclass(frozen=True)
class TokenEntry:
    name: str
    digest: bytes
    filter: str | None


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
        unknown = set(row) - {"name", "token", "token_sha256", "filter"}
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
            if len(secret) < 16:
                raise ConfigError(f"{where}: token of {name!r} is shorter than 16 characters.")
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
        entries.append(TokenEntry(name, digest, normalize_filter(row.get("filter"))))
    return entries


class StaticTokenVerifier(TokenVerifier):
    """Checks bearer tokens against the tokens file in constant time."""

    def __init__(self, entries: list[TokenEntry]) -> None:
        self.entries = entries

    async def verify_token(self, token: str) -> AccessToken | None:
        digest = hashlib.sha256(token.encode()).digest()
        match: TokenEntry | None = None
        for entry in self.entries:  # no early exit: timing does not reveal which entry matched
            if hmac.compare_digest(entry.digest, digest):
                match = entry
        if match is None:
            return None
        return AccessToken(token="[redacted]", client_id=match.name, scopes=[SCOPE], claims={"filter": match.filter})
