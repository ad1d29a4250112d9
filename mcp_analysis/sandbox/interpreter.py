"""One analysis session's Python interpreter: persistent, hibernating, self-healing.

Variables, functions and imports persist across `execute` calls. After every call
that leaves the worker healthy, the interpreter state is dumped (~0.1 ms for small
state, hundreds of milliseconds for 20 MB: bench/state_writes.py); that dump is what
hibernation keeps and what recovery restores. A call that provably only looked
(`len(rows)`, `rows[:3]`: sandbox/readonly.py) is not dumped: the last dump already
holds every variable as it left them. A timeout,
a memory blow-up, a crashed or killed worker, a failed host call that leaves the
worker suspended, or a cancelled call discards the worker and rolls back to the
state after the last good call. A dump is only ever taken from an idle, healthy
worker (after an error, a probe feed proves it), so a saved state always loads;
if one still cannot be loaded, the next result says so instead of claiming the
variables were kept.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import anyio
from pydantic_monty import (
    AsyncMontySession,
    MontyCrashedError,
    MontyError,
    MontyRuntimeError,
    MontySyntaxError,
)

from mcp_analysis.logging_setup import TO_HOST
from mcp_analysis.sandbox.budget import OVER_CALLS, SPENT_SHARE, CallBudget
from mcp_analysis.sandbox.hints import with_hint
from mcp_analysis.sandbox.liveness import WorkerLiveness
from mcp_analysis.sandbox.models import ExecutionResult
from mcp_analysis.sandbox.output import NOT_KEPT, OutputCollector
from mcp_analysis.sandbox.pool import WorkerPool
from mcp_analysis.sandbox.presentation import value_repr
from mcp_analysis.sandbox.readonly import Purity
from mcp_analysis.sandbox.settings import SandboxSettings
from mcp_analysis.text import clip

log = logging.getLogger(__name__)

_GRACE_SECONDS = 2.0  # past code_timeout before the wall-clock backstop kills the worker
_RESTORE_ATTEMPTS = 3  # workers tried before a saved state is declared unloadable
KEPT = "Variables from before this call are kept."

StateListener = Callable[[bytes | None], None]
# Asked before a call's state is kept: its size in bytes -> why it may not be kept, or None.
StateAdmission = Callable[[int], str | None]


class Interpreter:
    def __init__(
        self,
        pool: WorkerPool,
        settings: SandboxSettings,
        state: bytes | None = None,
        on_state: StateListener | None = None,
        prelude: str | None = None,
        admit: StateAdmission | None = None,
        party: str = "",
    ) -> None:
        self.pool = pool
        self.party = party  # whom its calls run for: the pool keeps a worker for other parties
        self.admit = admit  # the server-wide memory budget for kept states (session/memory.py)
        self.prelude = prelude  # fed to every fresh interpreter (see sandbox/presentation.py)
        self.settings = settings
        self.state = state
        self.on_state = on_state
        self.last_used = time.monotonic()
        self._session: AsyncMontySession | None = None
        self._liveness: WorkerLiveness | None = None  # of the worker `_session` runs on
        # Uncontended, taken without a trip through the event loop (~0.1 ms of every call);
        # every holder awaits the worker, so no caller can starve the others.
        self._lock = anyio.Lock(fast_acquire=True)
        self._notice: str | None = None  # told with the next result (a state that could not be restored)
        self._purity = Purity(known=state is None, prelude=prelude)  # which calls may skip their dump
        self._spent = 0  # host calls made on the worker held now (monty counts them per checkout)

    @property
    def is_idle(self) -> bool:
        return not self._lock.locked()

    @property
    def reload_bytes(self) -> int:
        return len(self.state) if self.state is not None else 0

    @property
    def attached(self) -> bool:
        """Holds a worker now (false while hibernated)."""
        return self._session is not None

    # ------------------------------------------------------------------ public

    async def execute(
        self, code: str, *, os_handler: Any = None, functions: dict[str, Any] | None = None
    ) -> ExecutionResult:
        try:
            async with self._lock:
                self.last_used = time.monotonic()
                started = time.perf_counter()
                try:
                    return await self._execute(code, os_handler, functions or {}, started)
                finally:
                    self.last_used = time.monotonic()
        finally:
            self.pool.wake()  # this interpreter is idle again: a waiter may take its worker

    def notify(self, text: str) -> None:
        """Tell `text` (one line) with the next result, before its stderr."""
        self._notice = (self._notice or "") + text

    async def hibernate(self) -> None:
        """Give the worker back; the state stays in `self.state` (dumped after the last call)."""
        if self._session is None:
            return
        if self._lock.locked():
            return
        async with self._lock:
            await self._detach()

    async def reset(self) -> None:
        """Forget all variables (a new analysis)."""
        async with self._lock:
            await self._detach()
            self._set_state(None)
            self._purity = Purity(known=True, prelude=self.prelude)

    async def close(self) -> None:
        await self.hibernate()

    # ----------------------------------------------------------------- private

    def _set_state(self, state: bytes | None) -> None:
        self.state = state
        if self.on_state is not None:
            self.on_state(state)

    async def _attach(self) -> AsyncMontySession:
        if self._session is not None and not self.pool.may_run(self):
            await self._detach()  # the kept worker is the last one free: wait in line for one
        if self._session is not None:
            if self._liveness is None or self._liveness.alive():
                self.pool.touch(self)
                return self._session
            # The worker died while idle (OOM killer, kill -9): reload the last good state.
            log.warning(
                "An interpreter worker died while idle; restarted: the session continues on a fresh worker",
                extra=TO_HOST,
            )
            await self._detach()
        # Held from here on: whatever ends this method early (a cancelled call, a worker that will
        # not start) gives the worker back through _detach, so the pool never counts a worker that
        # no interpreter holds.
        self._session = await self.pool.acquire(self)
        self._spent = 0
        try:
            await self._restore()
        except BaseException:
            with anyio.CancelScope(shield=True):
                await self._detach()
            raise
        assert self._session is not None
        self._liveness = WorkerLiveness(self._session.worker_pid)
        return self._session

    async def _restore(self) -> None:
        """Load the saved state into the worker just taken (another worker if one dies meanwhile),
        or run the prelude in a fresh interpreter."""
        for attempt in range(_RESTORE_ATTEMPTS if self.state is not None else 0):
            assert self.state is not None and self._session is not None
            try:
                await self._session.load_session(self.state)
                break
            except Exception as exc:
                # A worker that dies while loading (SIGKILL, OOM killer) says nothing about the
                # state: try a fresh worker. Only a state no healthy worker loads is dropped.
                await self._detach()
                self._session = await self.pool.acquire(self)
                if attempt + 1 < _RESTORE_ATTEMPTS:
                    log.warning("Restoring interpreter state failed (%s); retrying on a fresh worker", exc)
                    continue
                log.warning("Could not restore interpreter state (%s); starting fresh", exc)
                self._set_state(None)
                self._notice = (
                    f"Note: the variables of earlier calls are gone: their saved state could not be restored ({exc}). "
                    "The interpreter started empty for this call.\n"
                )
        if self.state is None and self.prelude:
            assert self._session is not None
            try:
                await self._session.feed_run(self.prelude, print_callback=lambda stream, text: None)
            except Exception as exc:  # the plain host functions still answer search()/list_documents()
                log.warning("Could not run the sandbox prelude: %s", exc)

    async def _detach(self) -> None:
        session, self._session = self._session, None
        if self._liveness is not None:
            self._liveness.close()
            self._liveness = None
        if session is not None:
            await self.pool.release(self, session)

    async def _execute(self, code: str, os_handler: Any, functions: dict[str, Any], started: float) -> ExecutionResult:
        limit = self.settings.max_output_chars
        output = OutputCollector(limit)
        session = await self._attach()
        looks_only = self._purity.ran(code)
        value: str | None = None
        error: str | None = None
        rollback = False
        timeout = self.settings.code_timeout
        budget = CallBudget(self.settings.max_host_calls, timeout)
        functions, os_handler = budget.functions(functions), budget.os(os_handler)
        counting = CallBudget.current.set(budget)  # for the host modules' calls (`statistics.*`)
        try:
            with anyio.fail_after(timeout + _GRACE_SECONDS):
                result = await session.feed_run(code, external_lookup=functions, os=os_handler, print_callback=output)
            if result is not None:
                value = value_repr(result, self.settings.max_output_chars)
        except MontySyntaxError as exc:
            error = with_hint(exc.display())
        except MontyRuntimeError as exc:
            error, rollback = self._runtime_error(exc)
            if not rollback and not await _healthy(session):
                # A host call failed in transport (e.g. a frame over the size limit) and left the
                # worker suspended: its heap must not be dumped, only discarded.
                rollback = True
                error = f"{error.rstrip()}\nSandboxError: the interpreter could not continue after this error. {KEPT}"
        except MontyCrashedError as exc:
            rollback = True
            if exc.timed_out:  # one operation (a huge number's arithmetic) ran past the limit: its process was ended
                error = _timed_out(timeout, "inside one operation, so its interpreter process was ended")
            else:
                error = f"SandboxError: the interpreter process died ({exc}). {KEPT}"
        except TimeoutError:
            rollback = True
            error = _timed_out(timeout)
        except MontyError as exc:
            rollback = True
            error = f"SandboxError: {exc}. {KEPT}"
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await self._detach()
            raise
        except RuntimeError as exc:  # e.g. the checkout died underneath us
            rollback = True
            error = f"SandboxError: {exc}. {KEPT}"
        finally:
            CallBudget.current.reset(counting)
        self._spent += budget.calls
        if rollback:
            await self._detach()
        elif not looks_only:
            try:
                state = await session.dump()
                most = self.settings.max_state_mb * 1024 * 1024
                if len(state) > most:
                    raise _StateTooLarge(
                        f"the interpreter state after it is {len(state) / 1e6:,.0f} MB, more than a session keeps "
                        f"({self.settings.max_state_mb} MB, sandbox.max_state_mb)"
                    )
                refusal = self.admit(len(state)) if self.admit is not None else None
                if refusal is not None:
                    raise _StateTooLarge(refusal)
                self._set_state(state)
            except Exception as exc:
                # Kept in memory and written to the session store after every call: a state too
                # large for either is not kept, and the result says so: the client must not count on
                # variables that are gone.
                log.warning("Could not save interpreter state after a call: %s", exc)
                await self._detach()
                rollback = True
                reason = str(exc) if isinstance(exc, _StateTooLarge) else f"saving its state failed ({exc})"
                self.notify(
                    f"Note: this call's variables were not kept: {reason}. {KEPT} Keep less in variables "
                    "(del the large ones, or process documents one at a time).\n"
                )

        if self._session is not None and self._spent > self.settings.max_host_calls // SPENT_SHARE:
            # monty's per-checkout count (CHECKOUT_SUSPENSIONS, with the name lookups and futures a
            # call adds) must stay out of reach of the next call: it starts afresh on a new worker.
            await self._detach()
        stdout, stderr = output.render()
        if self._notice is not None:
            stderr, self._notice = self._notice + stderr, None
        truncated = output.truncated
        if value is not None:
            room = max(2000, limit - output.kept)
            value, cut = clip(value, room, NOT_KEPT)
            truncated = truncated or cut
        return ExecutionResult(
            success=error is None,
            stdout=stdout,
            stderr=stderr,
            value=value,
            error=error,
            duration_ms=round((time.perf_counter() - started) * 1000, 3),
            truncated=truncated,
            output_chars=output.total + (len(value) if value else 0),
            state_restored=rollback,
        )

    def _runtime_error(self, exc: MontyRuntimeError) -> tuple[str, bool]:
        """(message, whether the worker's heap must be discarded)."""
        text = exc.display()
        inner = exc.exception()
        s = self.settings
        if isinstance(inner, TimeoutError) and "limit" in str(inner):
            if "sleep" in str(inner):
                return (
                    f"TimeoutError: the code slept longer than sandbox.code_timeout ({s.code_timeout:g} s) "
                    f"in total. {KEPT}",
                    True,
                )
            return f"{text.rstrip()}\n{_timed_out(s.code_timeout)}", True
        if isinstance(inner, MemoryError):
            return (
                f"{text.rstrip()}\nMemoryError: the interpreter exceeded its memory limit "
                f"({s.max_memory_mb} MB, sandbox.max_memory_mb) and was stopped. {KEPT} "
                "Process documents one at a time instead of holding them all.",
                True,
            )
        if OVER_CALLS in text or "suspension limit" in text:
            # Over this call's budget (budget.py): the heap is intact. monty's own per-checkout count
            # (a backstop far above any call's budget) is reset only by a fresh worker: discard it.
            return (
                f"{text.rstrip()}\nHint: one call may make at most {s.max_host_calls} host calls "
                "(file reads, searches, sleeps; sandbox.max_host_calls). Read fewer files per call, or reuse "
                "what earlier calls stored in variables.",
                OVER_CALLS not in text,
            )
        if isinstance(inner, RecursionError):
            return (
                f"{text.rstrip()}\nHint: the call depth limit is {s.max_recursion_depth} "
                "(sandbox.max_recursion_depth); use a loop instead of deep recursion.",
                False,
            )
        return with_hint(text), False


class _StateTooLarge(Exception):
    """The state after a call exceeds sandbox.max_state_mb, or the server's memory budget."""


async def _healthy(session: AsyncMontySession) -> bool:
    """Whether the worker is idle and answering (not suspended mid-feed, not dead)."""
    try:
        with anyio.fail_after(10):
            await session.feed_run("None", print_callback=lambda *_: None)
    except Exception:
        return False
    return True


def _timed_out(timeout: float, how: str = "") -> str:
    """The error of a call stopped at `sandbox.code_timeout`, whether the interpreter stopped itself
    between steps or one native operation had its process ended."""
    where = f" ({how})" if how else ""
    return (
        f"TimeoutError: execution stopped after {timeout:g} s (sandbox.code_timeout){where}. {KEPT} "
        "Split the work into smaller calls or make it cheaper."
    )
