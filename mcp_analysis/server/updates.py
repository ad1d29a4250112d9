"""Resource subscriptions for documents: who asked, and `notifications/resources/updated` when a document changes.

Handshake-era clients send ``resources/subscribe`` / ``unsubscribe`` for a document's files
(`documents:///{id}/content.txt`, ...; server/subscribe.py); the URIs are kept on their
connection (at most `MAX_PER_CONNECTION`) and go with it. 2026-07-28 clients name the URIs in
``subscriptions/listen``; the SDK's listen handler filters what is published on the bus.

A document changes when the knowledge base's version moves (a watched folder, `sync`, or `add`
by another process): `DocumentUpdates.changed` compares the documents with the last look and
tells subscribers of each changed, moved or removed document's files. A file whose content
changed becomes a new document (new id, new chunk ids: ingest writes the new rows, then deletes
the old ones by id). The subscription follows the file: its subscribers hear that the old URIs
changed, and their subscriptions move to the same files of the document that replaced it (whose
URIs they are told too); a read of the old URI says which document replaced it while this
server runs (`successor`).
"""

from __future__ import annotations

import re
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mcp.server.connection import Connection
from mcp.server.subscriptions import ResourceUpdated

from mcp_analysis.server import uris

if TYPE_CHECKING:
    from mcp_analysis.store.models import DocumentMeta

MAX_PER_CONNECTION = 1000  # subscribed URIs one client connection may hold
SUCCESSORS = 10_000  # replaced documents remembered (old id -> new id) for a clear not-found
_KEY = "mcp_analysis.subscriptions"
_PREFIX = "documents:///"
_TABLE_CSV = re.compile(r"tables/\d{1,9}\.csv")


@dataclass(frozen=True)
class Change:
    """One document that is not as it was: `successor` replaced it (its file changed), or None."""

    document_id: str
    successor: str | None


def subscribed(connection: Connection) -> dict[str, str | None]:
    """The connection's subscribed URIs, each with the document filter its subscriber reads with."""
    found = connection.state.get(_KEY)
    if not isinstance(found, dict):
        found = connection.state[_KEY] = {}
    return found


def document_of(uri: str) -> tuple[str, str] | None:
    """(document id, file) of a document resource URI (one of its files, or a table's CSV), else None."""
    if not uri.startswith(_PREFIX):
        return None
    document_id, _, name = uri[len(_PREFIX) :].partition("/")
    known = name in uris.DOCUMENT_FILES or _TABLE_CSV.fullmatch(name) is not None
    return (document_id, name) if document_id and known else None


class DocumentUpdates:
    """The last look at the documents, and what changed since (for the subscribers)."""

    def __init__(self) -> None:
        self.last: dict[str, tuple[str, str, str]] | None = None  # id -> (uri, content hash, updated_at)
        self.successors: OrderedDict[str, str] = OrderedDict()

    def changed(self, documents: Iterable[DocumentMeta]) -> list[Change]:
        """The documents changed, moved, replaced or removed since the last call (none on the first)."""
        now = {d.id: (d.uri, d.content_hash, d.updated_at) for d in documents}
        before, self.last = self.last, now
        if before is None:
            return []
        by_uri = {uri: document_id for document_id, (uri, _, _) in now.items()}
        changes = []
        for document_id, seen in before.items():
            if now.get(document_id) == seen:
                continue
            successor = by_uri.get(seen[0]) if document_id not in now else None
            changes.append(Change(document_id, successor))
            if successor is not None:
                self.successors[document_id] = successor
                while len(self.successors) > SUCCESSORS:
                    self.successors.popitem(last=False)
        return changes

    def successor(self, document_id: str) -> str | None:
        """The document that replaced `document_id` (its file changed), following replacements."""
        seen: set[str] = set()
        while document_id in self.successors and document_id not in seen:
            seen.add(document_id)
            document_id = self.successors[document_id]
        return document_id if seen else None

    async def tell(
        self,
        changes: list[Change],
        connections: Iterable[Connection],
        bus: Any,
        visible: Callable[[str | None, str], Awaitable[bool]],
    ) -> None:
        """`notifications/resources/updated` to the subscribers of each change's files; a subscription
        follows a replaced document only where the subscriber's filter (`visible`) sees its successor."""
        for change in changes:
            for name in uris.DOCUMENT_FILES:  # 2026-07-28 listeners: the SDK sends those they named
                await bus.publish(ResourceUpdated(uri=uris.document_file(change.document_id, name)))
        for connection in list(connections):
            mine = subscribed(connection)
            if not mine:
                continue
            for change in changes:
                for uri in sorted(u for u in mine if u.startswith(f"{_PREFIX}{change.document_id}/")):
                    await connection.send_resource_updated(uri)  # best effort, never raises
                    if change.successor is not None:
                        document_filter = mine.pop(uri)
                        if await visible(document_filter, change.successor):
                            moved = uri.replace(change.document_id, change.successor, 1)
                            mine[moved] = document_filter
                            await connection.send_resource_updated(moved)
