"""Folders kept in sync with a knowledge base: `serve --watch DIR` and `sync DIR`.

The contract: the documents that came from a folder mirror its followed files (watch.include /
watch.ignore, gitignore-style; hidden and editor temp files never). New and changed files go in
through the same ingest path as `add` (every ingest bound applies), one atomic commit per
batch; documents whose files are gone are removed; documents from elsewhere are never touched.
A file is read only once its size and mtime held still (never mid-write). Symbolic links are
never followed (one out of the folders is refused, naming it), the server's own files never read
(ingest/excluded.py), and a folder gone and made again is followed again. One process at a time
mirrors folders into a knowledge base (`watch.lock`); a second one is refused.
"""
