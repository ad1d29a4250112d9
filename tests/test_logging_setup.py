"""A library's traceback never reaches the host's log unless asked for: its record is one line
(the failure it is about is our own one-line message), `--debug` shows it whole. Run in real
processes, as the CLI and the conversion worker set logging up."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.conftest import REPO, run_cli

# What docling's pipeline logs when a backend fails mid-conversion (base_pipeline.py), and what
# its InputDocument logs when a backend's constructor raises (datamodel/document.py).
EMIT = textwrap.dedent(
    """
    import logging, sys, traceback
    from mcp_analysis.logging_setup import configure_logging

    configure_logging(sys.argv[1])
    try:
        {}["word/document.xml"]
    except KeyError as exc:
        trace = "\\n".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        logging.getLogger("docling.pipeline.base_pipeline").warning(
            f"Encountered an error during conversion of document 1a2b:\\n{trace}"
        )
        logging.getLogger("docling.datamodel.document").exception("File bad.docx not found or cannot be opened.")
        logging.getLogger("mcp_analysis.watch.follow").error("watch: could not apply changes", exc_info=True)
        logging.getLogger("mcp.server.lowlevel").error("Error handling request", exc_info=True)
    """
)


def _stderr(level: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", EMIT, level], cwd=REPO, capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == ""  # stdout is the MCP wire
    return done.stderr


@pytest.mark.parametrize("level", ["INFO", "WARNING"])
def test_a_library_record_is_one_line_without_its_traceback(level: str) -> None:
    lines = _stderr(level).splitlines()
    library = [line for line in lines if " docling." in line]
    assert [line.split(": ", 1)[1] for line in library] == [
        "Encountered an error during conversion of document 1a2b (details with --debug)",
        "File bad.docx not found or cannot be opened.",
    ]
    # Our own records and the serving stack's keep their traceback: a person is meant to act on them.
    assert sum("Traceback (most recent call last)" in line for line in lines) == 2
    assert any("mcp_analysis.watch.follow: watch: could not apply changes" in line for line in lines)
    assert any("mcp.server.lowlevel: Error handling request" in line for line in lines)


def test_debug_shows_the_library_tracebacks() -> None:
    said = _stderr("DEBUG")
    assert said.count("Traceback (most recent call last)") == 4
    assert "KeyError: 'word/document.xml'" in said


def test_the_conversion_workers_lines_show_with_debug_only(tmp_path: Path) -> None:
    """What a worker logs (a parser's warning) is the command's DEBUG output, in our format; without
    --debug stderr holds our own lines only."""
    note = tmp_path / "cafe.md"
    note.write_bytes("# Café\n\nNaïve résumé.\n".encode("cp1252"))  # docling warns that it guessed cp1252
    quiet = run_cli("--db", str(tmp_path / "kb"), "add", str(note))
    assert quiet.returncode == 0, quiet.stderr
    assert "docling" not in quiet.stderr
    shown = run_cli("--debug", "--db", str(tmp_path / "kb2"), "add", str(note))
    assert shown.returncode == 0, shown.stderr
    worker = [line for line in shown.stderr.splitlines() if "docling.utils.text_decoding" in line]
    assert worker, shown.stderr
    assert " DEBUG   mcp_analysis.ingest.pool: conversion worker " in worker[0]
    assert " WARNING docling.utils.text_decoding: Document is not UTF-8" in worker[0]  # the worker's own format
