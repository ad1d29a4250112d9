"""Everything mcp-analysis knows about haiku.rag's formats, in one place.

- `config_file`: a ``haiku.rag.yaml`` read as our settings (config layer);
- `embedders`: haiku.rag's embedder records -> query embedders we can run (names only);
- `database`: its settings row and tables, checked before a database is served;
- `layout`: the store's layout adapter turning its rows into ours at read time.

Contract: three doors only import this package: config.py (a haiku.rag.yaml is a
config source), store/identify.py (a haiku.rag database is a store layout) and
agent/skill.py (haiku.rag's skill API). Everything above the store reads a haiku.rag
database as it reads ours, asking the store properties (`read_only`,
`ids_are_immutable`) instead of its kind. Each module sits at the layer it serves
(nothing here imports above store/), and importing the package loads nothing.
"""
