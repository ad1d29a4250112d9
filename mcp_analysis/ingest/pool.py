"""Long-lived conversion worker processes (worker.py), each file under a wall clock and a memory cap.

Third-party parsers cannot be bounded from inside: a deeply nested document or a decompression
bomb can take minutes and gigabytes in C code or in a loop that never checks a flag. So every
file is read and converted in a child process; the parent waits with a deadline
(`ingest.max_seconds_per_file`) while watching the child's resident memory (its baseline once
its parsers are imported, plus `ingest.max_memory_mb`), and kills it past either. A killed or
crashed worker is replaced by a fresh one when the next file needs it; the parsers are imported
once per worker, not once per file, and only once a file is to be converted (or one is expected:
`warm`), so reading and hashing files that turn out unchanged costs no parser imports. The
methods block: call them from a thread.

A worker's stdout and stderr (a library's prints, a native parser's last words and Rust backtrace)
never reach this process's stderr, which may be a host's log: they are read into a short tail,
logged at DEBUG (`--debug` shows them), and the one telling line of a worker that died is put in
the file's message.
"""

from __future__ import annotations

import collections
import contextlib
import logging
import os
import re
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

from mcp_analysis.errors import AnalysisError, IngestError, SecretFileError
from mcp_analysis.ingest.files import FileSignature
from mcp_analysis.ingest.formats.base import limit_reached
from mcp_analysis.ingest.limits import MB, Limits
from mcp_analysis.ingest.prepare import PreparedFile
from mcp_analysis.text import label

log = logging.getLogger(__name__)

START_SECONDS = 300.0  # importing the parsers takes seconds, more on a loaded machine
_POLL_SECONDS = 0.05
_RECYCLE_FRACTION = 0.5  # a worker holding more than this share of max_memory_mb after a file is replaced
_TAIL_LINES = 64  # a worker's last lines of output kept for the message of its death
_LINE_BYTES = 4096  # a longer line is cut (a line without an end is read in pieces)
_OUTPUT_SECONDS = 2.0  # how long a dead worker's last output is waited for
_ALLOCATION = re.compile(r"memory allocation of (\d+) bytes failed")


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
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
            )
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        self._tail: collections.deque[str] = collections.deque(maxlen=_TAIL_LINES)
        self._output = threading.Thread(target=self._drain, name=f"worker-{self.process.pid}-output", daemon=True)
        self._output.start()
        self._watched: psutil.Process | None = None
        with contextlib.suppress(psutil.Error):
            self._watched = psutil.Process(self.process.pid)
        self.outbox = Connection(to_child_w, readable=False)
        self.inbox = Connection(from_child_r, writable=False)
        self.outbox.send(("start", limits, chunk_tokens))
        self.baseline: int | None = None
        self.deadline = 0.0
        self._parsers = "none"  # "asked": ("warm",) sent, its reply not read yet; "loaded"
        self._held = 0  # bytes of the file read last, held by the worker until `convert` or `drop`

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def warm(self) -> None:
        """Have the worker import its parsers now, without waiting for it (a conversion is expected):
        the next request reads the reply first. Otherwise `convert` asks for them itself."""
        if self._parsers == "none":
            with contextlib.suppress(OSError):  # gone: the next request says why
                self.outbox.send(("warm",))
                self._parsers = "asked"

    def _wait_ready(self) -> None:
        if self.baseline is None:
            self.baseline = self._started(time.monotonic())  # ("ready",)
        if self._parsers == "asked":
            self._wait_parsers(held=0)

    def _started(self, since: float) -> int:
        """Read the worker's ("ready",) or ("warmed",): its resident size then (the memory bound's baseline)."""
        try:
            reply = self._receive(since + START_SECONDS, watch_memory=False)
        except _Gone as gone:
            # Not one file's failure: every file would meet it, so the whole add stops with it.
            raise AnalysisError(f"The ingest conversion worker could not start ({gone}).") from None
        if reply[0] == "error":
            self.stop()
            raise AnalysisError(f"The ingest conversion worker could not load its parsers ({reply[2]}).")
        return self._resident()

    def _wait_parsers(self, held: int) -> None:
        """The ("warmed",) reply; the bound's baseline is taken again there, less the `held` bytes of a
        file read before, and the file's clock does not run while the parsers load."""
        since = time.monotonic()
        self.baseline = self._started(since) - held
        self._parsers = "loaded"
        self.deadline += time.monotonic() - since

    def read(self, path: str, name: str) -> ReadReply:
        """Have the worker read (and hash) `path`; it keeps the bytes for `convert` or `drop`.
        The file's wall clock starts here, once the worker is ready, and runs on through `convert`."""
        self._wait_ready()
        self.deadline = time.monotonic() + self.limits.max_seconds
        self._tail.clear()  # what the worker says from here on is about this file
        reply = self._request(("read", path, name), self.deadline)
        self._held = reply[2]
        return ReadReply(reply[1], reply[2], reply[3])

    def convert(self) -> PreparedFile:
        """Convert the bytes the last `read` got (the parsers imported first, once)."""
        self.warm()
        if self._parsers == "asked":
            self._wait_parsers(held=self._held)
        reply = self._request(("convert",), self.deadline)
        prepared = reply[1]
        if reply[2]:  # a native library panicked on this file and the worker ends: the next file gets a fresh one
            self.stop()
        elif self.baseline is not None and self.alive:
            grown = self._resident() - self.baseline
            if grown > self.limits.max_memory_mb * MB * _RECYCLE_FRACTION:
                self.stop()  # give the memory back; the next file gets a fresh worker
        return prepared

    def drop(self) -> None:
        self._held = 0
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
        if kind == "panic":
            self.stop()  # a native library that panicked may be left in any state: the next file gets a fresh worker
            raise IngestError(f"its converter failed inside a native parser ({text}); the file is damaged or hostile")
        if kind == "depth":
            raise IngestError("its elements nest too deeply for the parser (Python's recursion limit)")
        if kind == "failed":
            raise IngestError(f"could not be converted: {text}")
        if kind == "secret":
            raise SecretFileError(text)
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
        said = self._last_words()
        if code is not None and -code == signal.SIGABRT:
            return self._abort_reason(said)
        detail = f": {said}" if said else ""
        if code is not None and code < 0:
            return IngestError(
                f"its converter was ended by {signal.Signals(-code).name} (a damaged or hostile file?){detail}"
            )
        return IngestError(f"its converter stopped unexpectedly (exit status {code}){detail}")

    def _abort_reason(self, said: str) -> IngestError:
        """Native parsers (Rust, C++) abort when an allocation fails, and allocations past the memory cap
        fail (worker._cap_memory). Rust says how much it asked for: more than the machine has is no
        bound to raise, but a file built to make a parser allocate without end."""
        asked = _ALLOCATION.search(said)
        limit = f"{self.limits.max_memory_mb:,} MB"
        if asked is None:
            return IngestError(
                f"its converter aborted (SIGABRT), most often a parser that could not get memory past the limit of "
                f"{limit} per file (raise ingest.max_memory_mb to allow more); else the file is damaged"
                + (f" ({said})" if said else "")
            )
        size = int(asked.group(1))
        wanted = f"a parser asked for {size / MB:,.0f} MB at once"
        if size > psutil.virtual_memory().total:
            return IngestError(
                f"its converter aborted: {wanted}, more than this machine has, so no memory setting can allow it; "
                "the file is damaged or made to exhaust memory"
            )
        return IngestError(
            f"its converter aborted: {wanted}, past the limit of {limit} per file "
            "(raise ingest.max_memory_mb to allow more)"
        )

    def _drain(self) -> None:
        """Read the worker's output to its end: kept in the tail, logged at DEBUG, never on our stderr."""
        stream = self.process.stdout
        if stream is None:
            return
        with contextlib.suppress(OSError, ValueError):
            while line := stream.readline(_LINE_BYTES):
                text = line.decode("utf-8", "replace").rstrip()
                if text:
                    self._tail.append(text)
                    log.debug("conversion worker %d: %s", self.process.pid, text)

    def _last_words(self) -> str:
        """The line of a dead worker's output that says why (a Rust panic's message, a failed allocation,
        else the last line that is no backtrace frame), cut to one short line; "" if it said nothing."""
        self._output.join(_OUTPUT_SECONDS)
        lines = list(self._tail)
        for index, line in enumerate(lines):
            if " panicked at " in line:
                message = lines[index + 1] if index + 1 < len(lines) and line.rstrip().endswith(":") else line
                return _one_line(message)
        for line in reversed(lines):
            if _ALLOCATION.search(line):
                return _one_line(line)
        frames = ("stack backtrace:", "note:", "at ", "Traceback")
        for line in reversed(lines):
            stripped = line.strip()
            if stripped and not line[:1].isspace() and not stripped.startswith(frames):
                return _one_line(stripped)
        return ""

    def stop(self) -> None:
        """Kill the worker (it may be stuck in a parser or a read) and reap it if it goes at once."""
        if self.alive:
            self.process.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=2.0)  # a read stuck in the kernel may outlive the kill: not waited on
        for end in (self.outbox, self.inbox):
            with contextlib.suppress(OSError):
                end.close()
        if self.process.returncode is not None:
            self._output.join(_OUTPUT_SECONDS)
        if not self._output.is_alive() and self.process.stdout is not None:
            self.process.stdout.close()


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

    def warm(self) -> None:
        """Have the idle workers import their parsers now (files are about to be converted)."""
        with self._lock:
            for worker in self._idle:
                worker.warm()

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


def _log_level() -> str:
    """This process's logging level, for its workers to log at too."""
    return logging.getLevelName(logging.getLogger().getEffectiveLevel())


def _one_line(text: str) -> str:
    return label(" ".join(text.split()), 200)
