"""Collection paused during a served process's start-up imports, their objects frozen once per phase.

Each case runs in a fresh interpreter: a freeze cannot be undone in the test process.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO

PROGRAM = """
import gc, json, sys
from mcp_analysis import process_gc

report = {}
with process_gc.imports_paused("server"):  # not an owned process: nothing happens
    report["library_paused"] = not gc.isenabled()
report["library_frozen"] = gc.get_freeze_count()

process_gc.own_process()
with process_gc.imports_paused("server"):
    report["owned_paused"] = not gc.isenabled()
    import json.decoder, email.parser  # a start-up import
report["owned_enabled_after"] = gc.isenabled()
report["owned_frozen"] = gc.get_freeze_count()

with process_gc.imports_paused("server"):  # the same phase again (a runtime started anew): untouched
    report["again_paused"] = not gc.isenabled()
    again = [[i] for i in range(1000)]
report["again_frozen"] = gc.get_freeze_count()

try:
    with process_gc.imports_paused("runtime"):
        raise ImportError("a library that fails to import")
except ImportError:
    pass
report["after_failure_enabled"] = gc.isenabled()
report["after_failure_frozen_more"] = gc.get_freeze_count() >= report["again_frozen"]
print(json.dumps(report))
"""


def test_only_an_owned_process_pauses_and_freezes_each_phase_once() -> None:
    run = subprocess.run([sys.executable, "-c", PROGRAM], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    report = json.loads(run.stdout)
    assert report["library_paused"] is False and report["library_frozen"] == 0
    assert report["owned_paused"] is True and report["owned_enabled_after"] is True
    assert report["owned_frozen"] > 10_000  # the interpreter's and the imports' objects
    assert report["again_paused"] is False and report["again_frozen"] == report["owned_frozen"]
    assert report["after_failure_enabled"] is True and report["after_failure_frozen_more"] is True
