"""Long-lived conversion worker processes (worker.py), each file under a wall clock and a memory cap.

Third-party parsers cannot be bounded from inside: a deeply nested document or a decompression
bomb can take minutes and gigabytes in C code or in a loop that never checks a flag. So every
file is read and converted in a child process; the parent waits with a deadline
(`ingest.max_seconds_per_file`) while watching the child's resident memory (its baseline after
start-up plus `ingest.max_memory_mb`), and kills it past either. A killed or crashed worker is
replaced by a fresh one when the next file needs it; the parsers are imported once per worker,
not once per file. The methods block: call them from a thread.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any

import psutil

from mcp_analysis.errors import AnalysisError, IngestError
from mcp_analysis.ingest.files import FileSignature
from mcp_analysis.ingest.formats.base import limit_reached
from mcp_analysis.ingest.limits import MB, Limits
from mcp_analysis.ingest.prepare import PreparedFile

log = logging.getLogger(__name__)

START_SECONDS = 300.0  # importing the parsers takes seconds, more on a loaded machine
_POLL_SECONDS = 0.05
_RECYCLE_FRACTION = 0.5  # a worker holding more than this share of max_memory_mb after a file is replaced


@dataclass(frozen=True)
class ReadReply:
    digest: str
    size: int
    signature: FileSignature


class _Gone(Exception):
    """The worker is dead or was killed; `reason` is the message for the file it was on."""

    def __init__(self, reason: IngestError) -> None:
        super().__init__(str(reason))
        self.reason = reason


class ConversionWorker:
    """One worker process and its two pipes."""

    def __init__(self, limits: Limits, chunk_tokens: int) -> None:
        self.limits = limits
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        env = {**os.environ, "TOKENIZERS_PARALLELISM": "false", "OMP_NUM_THREADS": "1"}
        try:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "mcp_analysis.ingest.worker", str(to_child_r), str(from_child_w), _log_level()],
                pass_fds=(to_child_r, from_child_w),
                stdin=subprocess.DEVNULL,
                stdout=sys.stderr.fileno() if _has_fileno(sys.stderr) else subprocess.DEVNULL,
                env=env,
            )
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        self._watched: psutil.Process | None = None
        with contextlib.suppress(psutil.Error):
            self._watched = psutil.Process(self.process.pid)
        self.outbox = Connection(to_child_w, readable=False)
        self.inbox = Connection(from_child_r, writable=False)
        self.outbox.send(("start", limits, chunk_tokens))
        self.baseline: int | None = None
        self.deadline = 0.0

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def _wait_ready(self) -> None:
        if self.baseline is not None:
            return
        try:
            self._receive(time.monotonic() + START_SECONDS, watch_memory=False)  # ("ready",)
        except _Gone as gone:
            # Not one file's failure: every file would meet it, so the whole add stops with it.
            raise AnalysisError(f"The ingest conversion worker could not start ({gone}).") from None
        self.baseline = self._resident()

    def read(self, path: str, name: str) -> ReadReply:
        """Have the worker read (and hash) `path`; it keeps the bytes for `convert` or `drop`.
        The file's wall clock starts here, once the worker is ready, and runs on through `convert`."""
        self._wait_ready()
        self.deadline = time.monotonic() + self.limits.max_seconds
        reply = self._request(("read", path, name), self.deadline)
        return ReadReply(reply[1], reply[2], reply[3])

    def convert(self) -> PreparedFile:
        """Convert the bytes the last `read` got."""
        prepared = self._request(("convert",), self.deadline)[1]
        if self.baseline is not None and self.alive:
            grown = self._resident() - self.baseline
            if grown > self.limits.max_memory_mb * MB * _RECYCLE_FRACTION:
                self.stop()  # give the memory back; the next file gets a fresh worker
        return prepared

    def drop(self) -> None:
        with contextlib.suppress(OSError):
            self.outbox.send(("drop",))

    def _request(self, message: tuple[Any, ...], deadline: float) -> tuple[Any, ...]:
        try:
            self.outbox.send(message)
            reply = self._receive(deadline, watch_memory=True)
        except (OSError, _Gone) as exc:
            self.stop()
            raise exc.reason if isinstance(exc, _Gone) else self._death_reason() from None
        if reply[0] != "error":
            return reply
        kind, text = reply[1], reply[2]
        if kind == "memory":
            self.stop()
            raise limit_reached(self.limits, "max_memory_mb", "converting it")
        if kind == "depth":
            raise IngestError("its elements nest too deeply for the parser (Python's recursion limit)")
        if kind == "failed":
            raise IngestError(f"could not be converted: {text}")
        raise IngestError(text)

    def _receive(self, deadline: float, watch_memory: bool) -> tuple[Any, ...]:
        while True:
            alive = self.alive  # looked at before the pipe: a last message sent before exiting is still read
            try:
                if self.inbox.poll(max(0.0, min(_POLL_SECONDS, deadline - time.monotonic())) if alive else 0):
                    return self.inbox.recv()  # type: ignore[no-any-return]
            except (EOFError, OSError):
                raise _Gone(self._death_reason()) from None
            if not alive:
                raise _Gone(self._death_reason())
            if watch_memory and self.baseline is not None and self._over_memory():
                self.stop()
                raise _Gone(limit_reached(self.limits, "max_memory_mb", "converting it"))
            if time.monotonic() >= deadline:
                self.stop()
                raise _Gone(limit_reached(self.limits, "max_seconds", "reading and converting it"))

    def _resident(self) -> int:
        """The worker's resident size (0 once it is gone)."""
        try:
            return int(self._watched.memory_info().rss) if self._watched else 0
        except psutil.Error:
            return 0

    def _over_memory(self) -> bool:
        return self._resident() - (self.baseline or 0) > self.limits.max_memory_mb * MB

    def _death_reason(self) -> IngestError:
        code = self.process.poll()
        if code is None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self.process.wait(timeout=1.0)
        if code is not None and -code == signal.SIGXCPU:
            return limit_reached(self.limits, "max_seconds", "converting it")
        if code is not None and -code == signal.SIGABRT:
            # Native parsers (Rust, C++) abort when an allocation fails, and allocations past the
            # memory cap fail (worker._cap_memory): most often this is that bound.
            return IngestError(
                "its converter aborted (SIGABRT), most often a parser that could not get memory past the "
                f"limit of {self.limits.max_memory_mb:,} MB per file (raise ingest.max_memory_mb to allow more); "
                "else the file is damaged"
            )
        if code is not None and code < 0:
            return IngestError(f"its converter was ended by {signal.Signals(-code).name} (a damaged or hostile file?)")
        return IngestError(f"its converter stopped unexpectedly (exit status {code}); see the messages above")

    def stop(self) -> None:
        """Kill the worker (it may be stuck in a parser or a read) and reap it if it goes at once."""
        if self.alive:
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=2.0)  # a read stuck in the kernel may outlive the kill: not waited on
        for end in (self.outbox, self.inbox):
            with contextlib.suppress(OSError):
                end.close()


class ConversionPool:
    """Idle workers, started ahead (`start`) or on demand, replaced when they die; `close` ends them all."""

    def __init__(self, limits: Limits, chunk_tokens: int, size: int = 1) -> None:
        self.limits = limits
        self.chunk_tokens = chunk_tokens
        self.size = size
        self._idle: list[ConversionWorker] = []
        self._every: set[ConversionWorker] = set()
        self._closed = False
        self._lock = threading.Lock()
        self.started = 0  # workers started so far (a replacement counts): how often a bound was hit

    def start(self) -> None:
        """Start `size` workers now, so their imports overlap the caller's own start-up."""
        with self._lock:
            while len(self._every) < self.size and not self._closed:
                self._idle.append(self._spawn())

    def _spawn(self) -> ConversionWorker:
        worker = ConversionWorker(self.limits, self.chunk_tokens)
        self._every.add(worker)
        self.started += 1
        return worker

    @contextlib.contextmanager
    def worker(self) -> Iterator[ConversionWorker]:
        """A live worker for one file (a new one if none is idle), given back afterwards if still alive."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the conversion pool is closed")
            while self._idle and not self._idle[-1].alive:
                self._every.discard(self._idle.pop())
            worker = self._idle.pop() if self._idle else self._spawn()
        try:
            yield worker
        finally:
            with self._lock:
                if worker.alive and not self._closed:
                    self._idle.append(worker)
                else:
                    worker.stop()
                    self._every.discard(worker)

    def release_idle(self) -> int:
        """End the idle workers (their memory back) and keep the pool open: the next file starts
        one again. Returns how many were ended."""
        with self._lock:
            idle, self._idle = self._idle, []
            self._every.difference_update(idle)
        for worker in idle:
            worker.stop()
        return len(idle)

    def pids(self) -> list[int]:
        """Process ids of the live workers."""
        with self._lock:
            return [w.process.pid for w in self._every if w.alive]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            workers, self._every, self._idle = list(self._every), set(), []
        for worker in workers:
            worker.stop()


def _has_fileno(stream: Any) -> bool:
    try:
        stream.fileno()
    except (AttributeError, OSError, ValueError):
        return False
    return True


def _log_level() -> str:
    """This process's logging level, for its workers to log at too."""
    return logging.getLevelName(logging.getLogger().getEffectiveLevel())
