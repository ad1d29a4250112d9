"""LanceDB storage of a knowledge base: schema, filters, identification, reads, atomic writes.

Contract: `Store` (database.py) is the only way to the tables. It identifies the database
by its settings row (identify.py: ours, haiku.rag's or empty, never guessed) and reads it
through a layout adapter it keeps private (layout.py; haiku.rag's is haiku_layout.py),
so every read returns our rows whatever wrote them. Layers above never learn the kind:
they ask `read_only`, `ids_are_immutable`, `check_searchable()` and `query_embedder()`.
A document is visible exactly when its ``document_meta`` row exists (written last).
"""
