"""Changes one file at a chosen moment of ingest's read of it, in whichever process reads it.

Active only when this directory is on PYTHONPATH (tests/adversarial/test_ingest_files.py puts it
there) and one of these is set:

- MCP_ANALYSIS_TEST_REWRITE=PATH=NEW_TEXT: right after the read, PATH is saved anew (truncate +
  write, as an editor saves), before the bytes read are converted;
- MCP_ANALYSIS_TEST_GROW=PATH: once the read has started, a line is appended to PATH, as a
  program still writing it would;
- MCP_ANALYSIS_TEST_SWAP=PATH=FOLDER: right before the read, PATH's folder is renamed away and a
  symbolic link to FOLDER put in its place, as someone racing the walk would;
- MCP_ANALYSIS_TEST_FLIP=PATH=TARGET: while ingest takes PATH's uri (before its read), PATH is a
  symbolic link to TARGET, and the file again right after, as a loop swapping the two would.
"""

import os

_rewrite = os.environ.get("MCP_ANALYSIS_TEST_REWRITE")
_grow = os.environ.get("MCP_ANALYSIS_TEST_GROW")
_swap = os.environ.get("MCP_ANALYSIS_TEST_SWAP")
_flip = os.environ.get("MCP_ANALYSIS_TEST_FLIP")
if _flip:
    from pathlib import Path

    from mcp_analysis.ingest import pipeline as _pipeline

    _source_uri = _pipeline.source_uri
    _flipped, _, _target = _flip.partition("=")

    def _uri_while_a_link(path):  # type: ignore[no-untyped-def]
        if os.fspath(path) != _flipped:
            return _source_uri(path)
        flipped, aside = Path(_flipped), Path(_flipped + ".aside")
        flipped.rename(aside)
        flipped.symlink_to(_target)
        try:
            return _source_uri(path)
        finally:
            flipped.unlink()
            aside.rename(flipped)

    _pipeline.source_uri = _uri_while_a_link
if _rewrite or _grow or _swap:
    from mcp_analysis.ingest import files as _files
    from mcp_analysis.ingest import sources as _sources

    _read_file = _files.read_file
    _read_pieces = _files.read_pieces
    _reading: list[str] = []

    def _read_then_rewrite(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        _reading[:] = [os.fspath(path)]
        swapped, _, folder = (_swap or "").partition("=")
        if _swap and os.fspath(path) == swapped:
            from pathlib import Path

            parent = Path(swapped).parent
            parent.rename(parent.with_name(parent.name + ".moved"))
            parent.symlink_to(folder)
        result = _read_file(path, *args, **kwargs)
        target, _, text = (_rewrite or "").partition("=")
        if _rewrite and os.fspath(path) == target:
            with open(target, "r+", encoding="utf-8") as handle:
                handle.truncate(0)
                handle.write(text)
        return result

    def _grow_while_reading(*args, **kwargs):  # type: ignore[no-untyped-def]
        if _reading and _reading[0] == _grow:
            with open(_grow, "a", encoding="utf-8") as handle:
                handle.write("\nA line written while the file was being read.\n")
        return _read_pieces(*args, **kwargs)

    _files.read_file = _sources.read_file = _read_then_rewrite  # the worker reads through sources.read_source
    _files.read_pieces = _grow_while_reading
