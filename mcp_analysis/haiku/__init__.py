"""Everything mcp-analysis knows about haiku.rag's formats, in one place.

- `config_file`: a ``haiku.rag.yaml`` read as our settings (config layer);
- `embedders`: haiku.rag's embedder records -> query embedders we can run (names only).

Its database check and read-time layout are the store's (store/haiku_database.py,
store/haiku_layout.py): they read the store's schema, so they sit in its layer.

Contract: three doors only import this package: config.py (a haiku.rag.yaml is a
config source), store/haiku_layout.py (a haiku.rag database's query embedder) and
agent/skill.py (haiku.rag's skill API). Everything above the store reads a haiku.rag
database as it reads ours, asking the store properties (`read_only`,
`ids_are_immutable`) instead of its kind. Each module sits at the layer it serves
(nothing here imports above store/), and importing the package loads nothing.
"""
