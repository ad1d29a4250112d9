"""Waiting for a benchmarked server to listen: one loop for every bench script that starts one."""

from __future__ import annotations

import contextlib
import socket
import subprocess
import time


def wait_listening(proc: subprocess.Popen[bytes], port: int, timeout: float) -> str | None:
    """None once something accepts connections on 127.0.0.1:`port`; else why not: "exited"
    (the process ended first) or "timeout" (nothing listened within `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while True:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=0.2):
            return None
        if proc.poll() is not None:
            return "exited"
        if time.monotonic() > deadline:
            return "timeout"
        time.sleep(0.05)
