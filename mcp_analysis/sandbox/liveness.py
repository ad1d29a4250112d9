"""Whether an interpreter's worker process still runs, asked before every call.

A worker can die while its interpreter is idle (the OOM killer, kill -9); the next call
must then restore the saved state on a fresh worker instead of failing. The question is
asked on every `execute_code`, so it must cost next to nothing: on Linux a pidfd of the
worker, opened once when the interpreter takes the worker, is polled without waiting
(a few microseconds; it becomes readable when the process ends, zombie or reaped, and it
can never name another process that reused the pid). Elsewhere, a signal-0 probe and, for
a zombie, the process state in /proc (~0.1 ms).

A kill is not an end: `kill -9` returns while the process still runs its way out (longer on a
busy machine), and a call fed to it then dies with it. So a process with SIGKILL pending, or
already exiting, counts as dead too (Linux: /proc/PID/status then /proc/PID/stat, in the order
the kernel moves through them, tens of microseconds). That narrows the window to the moment
between taking the signal and starting to exit, not to nothing: a call that still falls in it
fails as a death during a call does, with the variables kept.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys


class WorkerLiveness:
    """Answers `alive()` for one worker process (`pid` None: unknown, assumed alive)."""

    def __init__(self, pid: int | None) -> None:
        self.pid = pid
        self._fd: int | None = None
        if pid is not None and hasattr(os, "pidfd_open"):
            try:
                self._fd = os.pidfd_open(pid)
            except ProcessLookupError:
                self._fd = -1  # already gone
            except OSError:  # an old kernel, a seccomp filter: probe by signal instead
                self._fd = None

    def alive(self) -> bool:
        if self._fd == -1:
            return False
        if self._fd is not None:
            # poll, not select: a busy server's descriptors pass 1024, which select cannot take.
            poller = select.poll()
            poller.register(self._fd, select.POLLIN)
            try:
                if poller.poll(0) or _dying(self.pid):
                    return False
                # Once more: had the worker ended and its pid been reused meanwhile, /proc described another.
                return not poller.poll(0)
            except OSError:
                return _probe(self.pid)
        return _probe(self.pid)

    def close(self) -> None:
        if self._fd is not None and self._fd >= 0:
            os.close(self._fd)
        self._fd = None

    def __del__(self) -> None:  # an interpreter dropped without closing must not leak the descriptor
        with contextlib.suppress(Exception):  # at interpreter exit `os` may be gone already
            self.close()


_SIGKILL_BIT = 1 << 8  # signal 9 in the pending masks of /proc/PID/status
_PF_EXITING = 0x4  # the task flag do_exit sets (include/linux/sched.h)


def _dying(pid: int | None) -> bool:
    """A kill on its way: SIGKILL pending, or the process exiting (Linux; elsewhere False).

    The masks are read before the flags: the kernel clears the pending bit when the process
    takes the signal, then sets PF_EXITING, so one of the two is seen unless the process is
    between the two at both reads.
    """
    if pid is None:
        return False
    try:
        with open(f"/proc/{pid}/status", "rb") as handle:
            status = handle.read()
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except (FileNotFoundError, ProcessLookupError):
        return True  # gone between the poll and the read
    except OSError:
        return False  # no /proc here: the pidfd alone answers
    for line in status.splitlines():
        if line.startswith((b"SigPnd:", b"ShdPnd:")) and int(line.split()[1], 16) & _SIGKILL_BIT:
            return True
    fields = stat.rsplit(b") ", 1)[-1].split()
    try:  # after the name: state, ppid, pgrp, session, tty_nr, tpgid, flags
        return fields[0] in (b"Z", b"X") or bool(int(fields[6]) & _PF_EXITING)
    except (IndexError, ValueError):
        return False


def _probe(pid: int | None) -> bool:
    if pid is None or sys.platform == "win32":  # Windows: os.kill(pid, 0) would terminate it
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            return handle.read().split(b") ", 1)[1][:1] != b"Z"
    except (OSError, IndexError):
        return True
