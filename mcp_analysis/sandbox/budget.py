"""Per-call bounds on host calls and sleep, counted here because monty counts per checkout.

monty's `max_suspensions` and `max_total_sleep_secs` add up over a worker's whole checkout,
which lasts as long as a session keeps its worker: a long analysis would exhaust them across
calls and then fail every call, `NameError`s included, although each call kept to the limit. So
each `execute_code` call gets a `CallBudget`: its host calls (file system callbacks, searches,
listings, charts, `statistics.*`, sleeps) count against `sandbox.max_host_calls`, and its sleeps (routed to the
host by the checkout's `os_policy`) against `sandbox.code_timeout`. Going over raises an
ordinary exception in the sandbox: the heap is intact and the variables stay.

monty's own count stays on as the bound of what this module cannot count (name lookups and future
resolutions, up to about two more per host function call): `CHECKOUT_SUSPENSIONS` x max_host_calls per
checkout, and an interpreter whose worker has served more than 1/`SPENT_SHARE` of a call's budget
hands it back after the call, so the next call starts on a fresh checkout with room for its whole
budget (3 suspensions per host call at most). A call that trips monty's count (a flood of failing
name lookups) is rolled back, as a timeout is.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any, ClassVar

import anyio
from pydantic_monty import NOT_HANDLED

SUSPENSIONS_PER_CALL = 3  # a host function call: the name's lookup, the call, its future's resolution
SPENT_SHARE = 3  # a worker that has served more than max_host_calls / 3 host calls is handed back
# x max_host_calls: at most 3 x max / SPENT_SHARE spent before a call, and 3 x max within it
CHECKOUT_SUSPENSIONS = SUSPENSIONS_PER_CALL // SPENT_SHARE + SUSPENSIONS_PER_CALL
RUNNING_AT_ONCE = 32  # host functions of one call running at once (more wait their turn)
SLEEPS = frozenset({"time.sleep", "asyncio.sleep", "system.sleep", "system.async_sleep"})
OVER_CALLS = "host call limit"  # in the message a call over its budget raises (the interpreter adds a hint)


class CallBudget:
    """What one `execute_code` call may spend on the host."""

    current: ClassVar[ContextVar[CallBudget | None]] = ContextVar("call_budget", default=None)

    def __init__(self, max_calls: int, max_sleep: float) -> None:
        self.max_calls = max_calls
        self.max_sleep = max_sleep
        self.calls = 0
        self.slept = 0.0
        self._running: set[anyio.CancelScope] = set()  # host functions in flight (gathered searches)
        # Gathered calls run RUNNING_AT_ONCE at a time, the rest wait cheaply: a flood of searches
        # must not load the server so much that its call over the budget is slow to arrive.
        self._slots = anyio.Semaphore(RUNNING_AT_ONCE)

    def spend(self) -> None:
        self.calls += 1
        if self.calls > self.max_calls:
            for scope in self._running:  # a flood fails now, not after the calls already started
                scope.cancel()
            raise self._over()

    def _over(self) -> RuntimeError:
        return RuntimeError(f"{OVER_CALLS} of {self.max_calls} exceeded in this call (sandbox.max_host_calls)")

    def functions(self, functions: dict[str, Any]) -> dict[str, Any]:
        """`functions` (the host functions by name) with each call counted."""
        return {name: self._counted(fn) if callable(fn) else fn for name, fn in functions.items()}

    def _counted(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        # Named as `fn`, without functools.wraps: its copying (and the `__wrapped__` monty would then
        # follow) cost 0.13 ms of every 0.5 ms call (bench/sandbox.py, warm execute p50).
        if not inspect.iscoroutinefunction(fn):  # a plain function stays one (the sandbox awaits only coroutines)

            def counted_now(*args: Any, **kwargs: Any) -> Any:
                self.spend()
                return fn(*args, **kwargs)

            return _named(counted_now, fn)

        async def counted(*args: Any, **kwargs: Any) -> Any:
            self.spend()
            with anyio.CancelScope() as scope:
                self._running.add(scope)
                try:
                    async with self._slots:
                        return await fn(*args, **kwargs)
                finally:
                    self._running.discard(scope)
            raise self._over()  # stopped by `spend`: the call went over its budget meanwhile

        return _named(counted, fn)

    def os(self, handler: Callable[..., Any] | None) -> Callable[..., Any]:
        """An `os=` handler: sleeps served here, every other callback counted and passed to `handler`."""

        def counted(*, name: str, args: tuple[Any, ...], kwargs: dict[str, Any], **rest: Any) -> Any:
            try:
                self.spend()
            except RuntimeError as exc:
                return _raise(exc)
            if name in SLEEPS:
                return self._sleep(args[0] if args else kwargs.get("seconds", kwargs.get("delay")))
            if handler is None:
                return NOT_HANDLED
            return handler(name=name, args=args, kwargs=kwargs, **rest)

        return counted

    async def _sleep(self, seconds: Any) -> None:
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or math.isnan(seconds):
            raise TypeError(f"sleep() takes a number of seconds, not {type(seconds).__name__}")
        if seconds < 0:
            raise ValueError("sleep length must be non-negative")
        if self.slept + seconds > self.max_sleep:
            raise TimeoutError(
                f"a sleep of {seconds:g} s would take this call's sleeping to {self.slept + seconds:g} s, past "
                f"sandbox.code_timeout ({self.max_sleep:g} s): nothing was slept. Sleep less, or over several calls."
            )
        self.slept += seconds
        await anyio.sleep(seconds)


def spend_current() -> None:
    """Count a call of a host module (`statistics.*`): set up once per worker, so it finds the running
    call's budget in its context (monty runs callbacks in a copy of the feeding task's context)."""
    budget = CallBudget.current.get()
    if budget is not None:
        budget.spend()


def _named(wrapper: Callable[..., Any], fn: Callable[..., Any]) -> Callable[..., Any]:
    wrapper.__name__ = wrapper.__qualname__ = getattr(fn, "__name__", "host_function")
    return wrapper


async def _raise(exc: BaseException) -> Any:
    raise exc
