"""Session keys: which client a session belongs to, as a kind and a value.

The kinds (server/identity.py decides which applies to a call):

- ``local``: the stdio process (and the in-memory test transport): one process, one client;
- ``http``: a legacy streamable-HTTP connection, by the session id the SDK validated;
- ``principal``: an authenticated principal (bearer token) on sessionless HTTP;
- ``handle``: a server-issued handle that a sessionless client passes back.

Sessions keyed by principal or handle outlive their connection, so a manager with a store
keeps them there; the others end with their connection anyway. `storage` is the stable text
form that stores file records under (``principal:alice``, ``handle:s_...``, ``local``):
records and Redis keys written by earlier runs are found under the same text.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class KeyKind(StrEnum):
    LOCAL = "local"
    HTTP = "http"
    PRINCIPAL = "principal"
    HANDLE = "handle"


_OUTLIVE_CONNECTION = frozenset({KeyKind.PRINCIPAL, KeyKind.HANDLE})


@dataclass(frozen=True, slots=True)
class SessionKey:
    """Whose session: `kind` says how the client was identified, `value` by what."""

    kind: KeyKind
    value: str = ""

    @classmethod
    def local(cls) -> SessionKey:
        return cls(KeyKind.LOCAL)

    @classmethod
    def http(cls, transport_session_id: str) -> SessionKey:
        return cls(KeyKind.HTTP, transport_session_id)

    @classmethod
    def principal(cls, name: str) -> SessionKey:
        return cls(KeyKind.PRINCIPAL, name)

    @classmethod
    def handle(cls, handle: str) -> SessionKey:
        return cls(KeyKind.HANDLE, handle)

    @property
    def outlives_connection(self) -> bool:
        """Whether a later connection can continue the session (so it is worth a store)."""
        return self.kind in _OUTLIVE_CONNECTION

    def belongs_to(self, owner: str | None) -> bool:
        """False for another principal's key: its sessions are not `owner`'s to reach."""
        return self.kind is not KeyKind.PRINCIPAL or self.value == owner

    @property
    def name(self) -> str:
        """What the client knows the session by, for messages (never the storage prefix)."""
        return self.value or self.kind.value

    @property
    def storage(self) -> str:
        """The stable text form stores use (``kind:value``; ``local`` alone)."""
        return self.kind.value if self.kind is KeyKind.LOCAL else f"{self.kind.value}:{self.value}"

    def __str__(self) -> str:
        return self.storage
