"""The before-every-call check that an idle interpreter's worker still runs."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time

import pytest

from mcp_analysis.sandbox import liveness
from mcp_analysis.sandbox.liveness import WorkerLiveness


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def _wait_exited(pid: int) -> None:
    """Until `pid` has exited (a zombie: this test has not reaped it yet)."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            if handle.read().split(b") ", 1)[1][:1] == b"Z":
                return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} did not exit")


@pytest.mark.parametrize("pidfd", [True, False], ids=["pidfd", "signal-probe"])
def test_a_killed_worker_is_seen_dead_zombie_or_reaped(pidfd: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if not pidfd:
        monkeypatch.delattr(liveness.os, "pidfd_open", raising=False)
    elif not hasattr(os, "pidfd_open"):
        pytest.fail("this Linux/Python has no os.pidfd_open: the fast path is untested here")
    proc = _sleeper()
    watch = WorkerLiveness(proc.pid)
    try:
        assert (watch._fd is not None) is pidfd
        assert watch.alive()
        os.kill(proc.pid, signal.SIGKILL)
        _wait_exited(proc.pid)
        assert not watch.alive()  # a zombie is not a worker
        proc.wait()
        assert not watch.alive()
    finally:
        watch.close()
        proc.kill()
        proc.wait()


def test_closing_releases_the_descriptor_and_unknown_pids_count_as_alive() -> None:
    proc = _sleeper()
    try:
        watch = WorkerLiveness(proc.pid)
        fd = watch._fd
        assert fd is not None and fd >= 0
        watch.close()
        with pytest.raises(OSError):
            os.fstat(fd)
    finally:
        proc.kill()
        proc.wait()
    assert WorkerLiveness(None).alive()  # a turn in flight: cannot tell, so no restore is forced
    gone = _sleeper()
    gone.kill()
    gone.wait()
    assert not WorkerLiveness(gone.pid).alive()


def test_a_descriptor_numbered_past_1024_is_watched_too() -> None:
    """A busy server hands out high descriptor numbers; select() would refuse them."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft <= 1500:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    proc = _sleeper()
    watch = WorkerLiveness(proc.pid)
    try:
        assert watch._fd is not None and watch._fd >= 0
        high = os.dup2(watch._fd, 1500)
        os.close(watch._fd)
        watch._fd = high
        assert watch.alive()
        os.kill(proc.pid, signal.SIGKILL)
        _wait_exited(proc.pid)
        assert not watch.alive()
    finally:
        watch.close()
        proc.kill()
        proc.wait()
