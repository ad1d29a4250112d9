"""Panics of native (Rust) libraries that a converter caught and survived, counted for the worker.

pyo3 turns a Rust panic into `pyo3_runtime.PanicException`, a BaseException (so `except Exception`
lets it through). A converter that can do without the part that panicked (one sheet of a
workbook) catches it with `is_panic` and calls `caught`; the conversion worker then retires after
the file (worker.py), since a library that panicked may be left in any state, and the next file
is converted by a fresh one.
"""

from __future__ import annotations

_caught = 0


def is_panic(exc: BaseException) -> bool:
    return type(exc).__name__ == "PanicException"


def caught() -> None:
    global _caught
    _caught += 1


def count() -> int:
    return _caught
