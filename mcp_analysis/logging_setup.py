"""Logging that never touches stdout: over stdio, stdout is the MCP wire."""

from __future__ import annotations

import logging
import sys

_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"


def configure_logging(level: str = "INFO") -> None:
    """Send all logging to stderr at `level`; quieten chatty third-party loggers."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(_FORMAT, datefmt="%H:%M:%S"))
    root.addHandler(handler)
    root.setLevel(level.upper())
    quiet = logging.WARNING if level.upper() != "DEBUG" else logging.INFO
    for name in (
        "httpx",
        "httpx2",
        "httpcore",
        "httpcore2",
        "uvicorn.access",
        "docling",
        "docling_core",
        "lance",
    ):
        logging.getLogger(name).setLevel(quiet)
