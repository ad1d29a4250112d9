"""Content rows written as Lance fragments by other processes (a Ray ingest's workers), committed here.

The atomic design of writes.py, for a whole ingest job rather than a batch:

1. workers write each batch's rows of each content table (documents, document_items,
   document_tables, chunks) as new data files (`write_fragments`): no version of any table
   references them yet, so nothing reads them, and the driver keeps only their metadata;
2. at the end of the job, the driver appends each table's fragments in one commit per table
   (`commit_fragments`): the rows are there but invisible, as a local add's are before its commit
   point, because no `document_meta` row names their document;
3. the job's one commit point: one merge of `document_meta` that adds and replaces the job's
   documents and rewrites the stored ones it moved or gave new metadata.

A driver killed before 2 leaves every table at the version it had (the data files it wrote stay
unreferenced, never read; Lance's cleanup in a later `optimize` deletes such files once they are
7 days old); killed between 2 and 3, rows without a meta row, which the next ingest removes under
the ingest lock (writes.py). Either way the knowledge base reads as before the job.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import anyio
import pyarrow as pa

from mcp_analysis.store import schema
from mcp_analysis.store.filters import sql_in
from mcp_analysis.store.models import DocumentMeta
from mcp_analysis.store.writes import DocumentRows, StoreWrites

CONTENT_TABLES = (schema.DOCUMENTS, schema.DOCUMENT_ITEMS, schema.DOCUMENT_TABLES, schema.CHUNKS)


@dataclass(frozen=True)
class FragmentTarget:
    """Where a worker writes one table's data files: its dataset, its exact schema, the store's options."""

    uri: str
    schema: pa.Schema
    options: dict[str, str] | None


def _rows_of(table: str, document: DocumentRows) -> list[dict[str, Any]]:
    if table == schema.DOCUMENTS:
        return [document.document]
    if table == schema.DOCUMENT_ITEMS:
        return document.items
    if table == schema.DOCUMENT_TABLES:
        return document.tables
    return document.chunks


def write_fragments(batch: Sequence[DocumentRows], targets: Mapping[str, FragmentTarget]) -> dict[str, list[Any]]:
    """Each content table's rows of `batch` as new, uncommitted data files: their fragments' metadata by table."""
    import lance.fragment

    written: dict[str, list[Any]] = {}
    for name, target in targets.items():
        rows = [row for document in batch for row in _rows_of(name, document)]
        if rows:
            data = pa.Table.from_pylist(rows, schema=target.schema)
            written[name] = list(
                lance.fragment.write_fragments(data, target.uri, schema=target.schema, storage_options=target.options)
            )
    return written


def _append(target: FragmentTarget, fragments: list[Any]) -> None:
    import lance

    dataset = lance.dataset(target.uri, storage_options=target.options)
    lance.LanceDataset.commit(
        dataset, lance.LanceOperation.Append(fragments), read_version=dataset.version, storage_options=target.options
    )


class StoreFragments(StoreWrites):
    """The store's side of fragments written elsewhere: where to write them, and their commits."""

    async def fragment_targets(self) -> dict[str, FragmentTarget]:
        self.check_writable()
        await self._document_tables_ready()
        options = self.lance_options()
        return {
            name: FragmentTarget(await self.tables[name].uri(), await self.tables[name].schema(), options)
            for name in CONTENT_TABLES
        }

    async def commit_fragments(
        self,
        metas: Sequence[DocumentMeta],
        fragments: Mapping[str, list[Any]],
        targets: Mapping[str, FragmentTarget],
        updated: Sequence[DocumentMeta] = (),
    ) -> list[str]:
        """`write_documents` for documents whose content rows are `fragments`, plus `updated`: stored
        documents' new meta rows (moved, new metadata), all visible in one commit (see the module's
        docs); the ids of the documents replaced."""
        self.check_writable()
        if not metas and not updated:
            return []
        kept = {m.id for m in updated}  # a moved document's old uri may be a new document's now
        found = await self.all_meta(sql_in("uri", [m.uri for m in metas])) if metas else []
        old = [m for m in found if m.id not in kept]
        for name in CONTENT_TABLES:
            if fragments.get(name):
                await anyio.to_thread.run_sync(_append, targets[name], fragments[name])
                await self.tables[name].checkout_latest()  # this process's handle sees the rows appended
        return await self._commit_meta([*metas, *updated], old, sorted(kept))
