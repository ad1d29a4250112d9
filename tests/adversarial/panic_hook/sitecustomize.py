"""Makes calamine panic on one workbook, in whichever process reads it, as a Rust library does on input
it never expected (pyo3 raises a panic in Python as `pyo3_runtime.PanicException`, a BaseException).

Active only when this directory is on PYTHONPATH (tests/adversarial/test_hostile_workbooks.py puts it
there) and MCP_ANALYSIS_TEST_PANIC=MARKER is set: a workbook whose bytes hold MARKER (stored, not
deflated) panics when opened, with the real PanicException class; every other file is read as usual.
"""

import os

_marker = os.environ.get("MCP_ANALYSIS_TEST_PANIC", "").encode()
if _marker:
    import python_calamine as _calamine

    _Workbook = _calamine.CalamineWorkbook
    _Panic = next(c for c in BaseException.__subclasses__() if c.__name__ == "PanicException")

    class _Panicking:
        @staticmethod
        def from_filelike(filelike):  # type: ignore[no-untyped-def]
            data = filelike.read()
            filelike.seek(0)
            if _marker in data:
                raise _Panic("index out of bounds: the len is 3 but the index is 7")
            return _Workbook.from_filelike(filelike)

    _calamine.CalamineWorkbook = _Panicking
