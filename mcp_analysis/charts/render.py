"""`ChartRenderer`: the server's handle on its renderer process (charts/worker.py).

Why a process: vl-convert's JavaScript engine costs ~85 MB once loaded and keeps what
a large chart made it allocate (a 50,000-point chart left it at 370 MB), and a render
cannot be interrupted from Python. In a child process the server's own memory never
grows, a render that overruns `charts.render_timeout` is ended by killing the child,
and the memory goes back when the child exits after `charts.renderer_idle_seconds`
without charts. The child starts on the first chart (2-6 s with the engine's
first render), so a server that never draws a chart never pays for it.

Requests are served one at a time (one child), in turns by party (charts/turns.py: one
client's ten slow charts cannot make another's wait ten timeouts). A chart waits for its turn
on the event loop (it polls its ticket: no thread is held, so gathered charts cannot take the
threads other work runs in); only its render runs in a worker thread, so the event loop never
waits on the pipe, from any event loop. A caller that is cancelled stops waiting at once and
leaves the line; a render it already started still ends within its timeout. A child that dies
of a signal is named by its cause (`died`): out of memory under `charts.renderer_memory_mb`
(SIGABRT, SIGTRAP), or killed, not "exit -6".
"""

from __future__ import annotations

import atexit
import contextlib
import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import IO

import anyio

from mcp_analysis.charts.limits import ChartSettings
from mcp_analysis.charts.spec import CheckedSpec
from mcp_analysis.charts.turns import Turns
from mcp_analysis.charts.worker import HEADER
from mcp_analysis.errors import ChartError

log = logging.getLogger(__name__)

RECYCLE_RSS_MB = 400  # a child that grew past this (a large chart) is replaced after its render
_QUEUE_FACTOR = 3  # a caller waits at most this many render timeouts for its turn
_TURN_POLL = 0.02  # seconds between looks at a waiting ticket (a render takes 0.1-20 s)


@dataclass(frozen=True)
class RenderedChart:
    svg: str
    png: bytes
    width: int
    height: int
    render_ms: float


class ChartRenderer:
    """One renderer process, started when needed; see the module docs."""

    def __init__(self, settings: ChartSettings) -> None:
        self.settings = settings
        self._turns = Turns()
        self._process: subprocess.Popen[bytes] | None = None
        self._idle_timer: threading.Timer | None = None
        self.renders = 0  # rendered since this object was made (for tests and metrics)
        self.starts = 0  # child processes started

    @property
    def pid(self) -> int | None:
        process = self._process
        return process.pid if process is not None and process.poll() is None else None

    async def render(self, checked: CheckedSpec, party: str = "") -> RenderedChart:
        """Draw `checked` in `party`'s turn (the caller's principal or session)."""
        # The checked text as it is (the spec is not serialized again): JSON of at most charts.max_spec_kb.
        limits = json.dumps({"max_size_px": self.settings.max_size_px, "max_png_bytes": self.settings.max_png_bytes})
        request = ('{"spec":' + checked.text + "," + limits[1:]).encode()
        waited = self.settings.render_timeout * _QUEUE_FACTOR
        deadline = time.monotonic() + waited
        ticket = self._turns.ticket(party)
        try:
            while not self._turns.claim(ticket):
                if time.monotonic() >= deadline:
                    raise RendererUnavailable(
                        f"chart(): the chart renderer is busy with other charts (waited {waited:g} s); try again."
                    )
                await anyio.sleep(_TURN_POLL)
        except BaseException:
            self._turns.abandon(ticket)  # cancelled or gave up: never drawn for nobody
            raise
        hand = _Handover()
        try:
            # Its own thread budget: the one render holding the turn never waits for a thread that
            # searches and session saves hold (the default limiter's 40).
            return await anyio.to_thread.run_sync(
                self._render_held, request, hand, abandon_on_cancel=True, limiter=anyio.CapacityLimiter(1)
            )
        except BaseException:
            if hand.withdraw():  # cancelled before its thread started: the turn goes back here
                self._turns.leave()
            raise

    def close(self) -> None:
        """Stop the child process once no render runs (the next render starts a new one). Blocks:
        call it from a thread, or where no chart is being drawn."""
        if not self._turns.enter(self._turns.ticket(""), self.settings.render_timeout * _QUEUE_FACTOR):
            return  # a render still runs past its timeout: it stops the child itself
        try:
            self.stop()
        finally:
            self._turns.leave()

    # ------------------------------------------------------------------ the child process

    def _render_held(self, request: bytes, hand: _Handover) -> RenderedChart:
        """Render in the turn the caller holds, and give the turn back (in this thread, so a caller
        cancelled meanwhile cannot start the next render while this one runs)."""
        if not hand.start():
            raise RendererUnavailable("chart(): the call ended before its chart was drawn")
        timeout = self.settings.render_timeout
        try:
            self._cancel_idle_timer()
            started = time.perf_counter()
            process = self._ensure_started()
            try:
                header, svg, png = self._exchange(process, request, started + timeout)
            except _RendererGone as exc:
                self.stop()
                error = RendererTimeout if exc.timed_out else RendererUnavailable
                raise error(f"chart(): {exc}") from None
            self.renders += 1
            if _rss_mb(process.pid) > RECYCLE_RSS_MB:
                self.stop()  # give a large chart's memory back now rather than at idle
            if not header.get("ok"):
                raise ChartError(f"chart(): the chart could not be drawn: {header.get('error')}")
            return RenderedChart(
                svg=svg.decode(),
                png=png,
                width=int(header["width"]),
                height=int(header["height"]),
                render_ms=round((time.perf_counter() - started) * 1000, 1),
            )
        finally:
            self._schedule_idle_stop()
            self._turns.leave()

    def _ensure_started(self) -> subprocess.Popen[bytes]:
        if self._process is not None and self._process.poll() is None:
            return self._process
        self._process = subprocess.Popen(
            [sys.executable, "-m", "mcp_analysis.charts.worker", str(self.settings.renderer_memory_mb)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=None,  # the server's stderr: the renderer's own messages are log lines
            close_fds=True,
            start_new_session=True,  # a terminal's Ctrl-C goes to the server, which stops the child
        )
        self.starts += 1
        _LIVE.add(self)
        return self._process

    def _exchange(
        self, process: subprocess.Popen[bytes], request: bytes, deadline: float
    ) -> tuple[dict[str, object], bytes, bytes]:
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(len(request).to_bytes(HEADER, "big") + request)
            process.stdin.flush()
        except OSError as exc:
            code = process.poll()
            why = died(code, self.settings) if code is not None else f"the chart renderer stopped unexpectedly ({exc})"
            raise _RendererGone(f"{why}; try again") from None
        reader = _Reader(process, self.settings, deadline)
        header = json.loads(reader.frame())
        if not header.get("ok"):
            return header, b"", b""
        return header, reader.frame(), reader.frame()

    def stop(self) -> None:
        process = self._process
        if process is None:
            return
        with contextlib.suppress(OSError):
            process.kill()
        with contextlib.suppress(Exception):
            process.wait(timeout=5)
        for stream in (process.stdin, process.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        self._process = None  # only now: `pid` is None once the process is gone

    def _schedule_idle_stop(self) -> None:
        if self._process is None:
            return
        timer = threading.Timer(self.settings.renderer_idle_seconds, self._stop_if_idle)
        timer.daemon = True
        self._idle_timer = timer
        timer.start()

    def _cancel_idle_timer(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    def _stop_if_idle(self) -> None:
        if self._turns.try_enter():
            try:
                self.stop()
            finally:
                self._turns.leave()
        elif not self._turns.held:  # charts waiting, none drawn yet: they may all give up, so look again
            self._schedule_idle_stop()


class _Handover:
    """Who gives a held turn back: the render thread once it starts, or the caller if it was
    cancelled before the thread started (exactly one of them, decided under a lock)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = "waiting"

    def start(self) -> bool:
        with self._lock:
            if self._state == "waiting":
                self._state = "started"
            return self._state == "started"

    def withdraw(self) -> bool:
        with self._lock:
            if self._state == "waiting":
                self._state = "withdrawn"
            return self._state == "withdrawn"


class RendererUnavailable(ChartError):
    """The renderer could not draw the chart: busy, or its process died."""


class RendererTimeout(RendererUnavailable):
    """The render overran `charts.render_timeout`; its process was killed."""


class _RendererGone(Exception):
    """The child died, or overran its time and was killed."""

    def __init__(self, message: str, timed_out: bool = False) -> None:
        super().__init__(message)
        self.timed_out = timed_out


class _Reader:
    """Reads reply frames from the child until a deadline; past it the child is killed."""

    def __init__(self, process: subprocess.Popen[bytes], settings: ChartSettings, deadline: float) -> None:
        assert process.stdout is not None
        self.process = process
        self.stream: IO[bytes] = process.stdout
        self.settings = settings
        self.timeout = settings.render_timeout
        self.deadline = deadline

    def frame(self) -> bytes:
        size = int.from_bytes(self._exactly(HEADER), "big")
        return self._exactly(size)

    def _exactly(self, size: int) -> bytes:
        fd = self.stream.fileno()
        parts: list[bytes] = []
        left = size
        while left:
            wait = self.deadline - time.perf_counter()
            if wait <= 0 or not _readable(fd, wait):
                raise _RendererGone(
                    f"rendering took longer than {self.timeout:g} s (charts.render_timeout) and was stopped. "
                    "Draw fewer points, fewer views or simpler transforms.",
                    timed_out=True,
                )
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                raise _RendererGone(f"{died(self.process.wait(), self.settings)}; the chart was not drawn")
            parts.append(chunk)
            left -= len(chunk)
        return b"".join(parts)


def _readable(fd: int, seconds: float) -> bool:
    """Whether `fd` has data within `seconds`. poll, not select: a busy server's descriptors pass 1024
    (`serve --http` raises its limit of open files), which select cannot take."""
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return bool(poller.poll(max(1, int(seconds * 1000))))


#: How the renderer ends when an allocation fails under its cap: its allocator aborts (SIGABRT,
#: "memory allocation of N bytes failed"), its JavaScript engine traps (SIGTRAP, "Fatal JavaScript
#: out of memory"). By name: Windows has neither.
OUT_OF_MEMORY = frozenset({"SIGABRT", "SIGTRAP"})


def died(code: int, settings: ChartSettings) -> str:
    """Why the renderer process ended with exit status `code` (negative: the signal), for the code's traceback."""
    if code >= 0:
        return f"the chart renderer stopped unexpectedly (exit {code})"
    try:
        sig = signal.Signals(-code)
    except ValueError:
        return f"the chart renderer was ended by signal {-code}"
    if sig.name in OUT_OF_MEMORY:
        return (
            f"the chart renderer ran out of memory ({sig.name}: it may use {settings.renderer_memory_mb:,} MB, "
            "charts.renderer_memory_mb); draw fewer points, shorter labels or simpler transforms"
        )
    if sig.name == "SIGKILL":
        return (
            "the chart renderer was killed (SIGKILL: the machine ran out of memory, or it was stopped from "
            f"outside; its own limit is charts.renderer_memory_mb, {settings.renderer_memory_mb:,} MB)"
        )
    return f"the chart renderer crashed ({sig.name})"


def _rss_mb(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            for line in status:
                if line.startswith(b"VmRSS:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


_LIVE: set[ChartRenderer] = set()  # stopped at exit (a child also exits when its stdin closes)
_SHARED: dict[str, ChartRenderer] = {}
_SHARED_LOCK = threading.Lock()


def shared_renderer(settings: ChartSettings) -> ChartRenderer:
    """The process-wide renderer for these settings (one child process serves every session)."""
    key = settings.model_dump_json()
    with _SHARED_LOCK:
        renderer = _SHARED.get(key)
        if renderer is None:
            renderer = _SHARED[key] = ChartRenderer(settings.model_copy())
        return renderer


@atexit.register
def _stop_all() -> None:
    for renderer in list(_LIVE):
        with contextlib.suppress(Exception):
            renderer.stop()
