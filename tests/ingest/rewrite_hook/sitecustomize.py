"""Rewrites one file (truncate + write, as an editor saves) right after ingest has read it.

Active only when MCP_ANALYSIS_TEST_REWRITE=PATH=NEW_TEXT is set and this directory is on PYTHONPATH
(tests/ingest/test_hostile_files.py does both). It wraps the one function that reads a file's bytes
for ingest, in whichever process calls it.
"""

import os

_target = os.environ.get("MCP_ANALYSIS_TEST_REWRITE")
if _target:
    _path, _, _text = _target.partition("=")
    from mcp_analysis.ingest import files as _files

    _read = _files.read_file

    def _read_then_rewrite(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        result = _read(path, *args, **kwargs)
        if os.fspath(path) == _path:
            with open(_path, "r+", encoding="utf-8") as handle:
                handle.truncate(0)
                handle.write(_text)
        return result

    _files.read_file = _read_then_rewrite
