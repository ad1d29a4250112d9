"""Per-client analysis sessions: state, interpreter and citations, kept, bounded and expiring.

`AnalysisSession` (analysis.py) is the one implementation every front door calls; it
works alone (CLI, Python API) or under a `SessionManager` (manager.py), which finds a
session by its `SessionKey` (keys.py), keeps it in a store (stores/), writes it through
after each call (commit.py), bounds it in memory (live.py, memory.py) and locks it for a
call (locks.py). This package imports the sandbox, corpus and search layers, never server/.
"""
