"""A fixed set of monty worker processes shared by any number of interpreters.

An interpreter keeps its worker between calls (a warm call costs ~0.2 ms). When a
worker is needed and none is free, an *idle* interpreter is hibernated: the caller's own
party's first, then the one with the smallest state to reload, then the least recently used
(so a client's cheap calls cannot make another client reload tens of MB on every call). Its
state is already dumped after every call, so it just hands the worker back and reloads its
state on its next call. Idle interpreters also give
their worker back after ``sandbox.idle_release_seconds``. Checkout waits are
bounded: when every worker is busy running code, the caller gets a clear error.

One worker is kept for the others: a party (a bearer token's principal, else one session)
already running code on a worker may not take the last worker no one is running code on, nor
start running on a worker its interpreter kept. So one token running endless loops in many
sessions holds at most all workers but one, and another client's call always finds a worker
within `sandbox.checkout_timeout` (with `sandbox.workers` 1 there is nothing to keep;
`sandbox.keep_worker_for_others: false` lets one client run code on every worker).

The pool knows its tenants only as `Tenant`s (idle or not, when last used, how to
hibernate): the interpreter depends on the pool, never the other way round.
"""

from __future__ import annotations

import logging
import os
import time
from collections import OrderedDict
from typing import Any, Protocol

import anyio
from pydantic_monty import AsyncMonty, AsyncMontySession, MontyCrashedError

from mcp_analysis.errors import SandboxError
from mcp_analysis.sandbox.budget import CHECKOUT_SUSPENSIONS
from mcp_analysis.sandbox.modules import host_modules
from mcp_analysis.sandbox.settings import SandboxSettings

log = logging.getLogger(__name__)

_CHECKOUT_ATTEMPTS = 3  # processes tried per checkout: a dead idle one is dropped, not handed out


class Tenant(Protocol):
    """What the pool needs of an interpreter that holds one of its workers."""

    @property
    def is_idle(self) -> bool:
        """No call is running: the worker may be taken back."""
        ...

    @property
    def party(self) -> str:
        """Whom its calls run for (a principal or a session): the unit the pool is fair to."""
        ...

    @property
    def reload_bytes(self) -> int:
        """Size of the state it reloads when it takes a worker again (what hibernating it costs)."""
        ...

    @property
    def last_used(self) -> float:
        """`time.monotonic()` when a call last started or ended (for idle release)."""
        ...

    async def hibernate(self) -> None:
        """Give the worker back; the state is already saved, so nothing is lost."""
        ...


class WorkerPool:
    def __init__(self, settings: SandboxSettings) -> None:
        self.settings = settings
        self.size = settings.workers or os.cpu_count() or 1
        self._monty = AsyncMonty(
            max_processes=self.size,
            min_processes=1,
            checkout_timeout=settings.checkout_timeout,
        )
        self._modules = host_modules(settings)
        self._attached: OrderedDict[Tenant, None] = OrderedDict()
        self._starting: set[Tenant] = set()  # taking a worker now: they run code next
        self._in_use = 0
        self._freed: anyio.Event | None = None
        self._task_group: Any = None
        self.hibernations = 0

    # ------------------------------------------------------------- lifecycle

    async def __aenter__(self) -> WorkerPool:
        await self._monty.__aenter__()
        self._task_group = anyio.create_task_group()
        await self._task_group.__aenter__()
        if self.settings.idle_release_seconds > 0:
            self._task_group.start_soon(self._release_idle_loop)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._task_group is not None:
            self._task_group.cancel_scope.cancel()
            await self._task_group.__aexit__(None, None, None)
            self._task_group = None
        with anyio.CancelScope(shield=True):
            for owner in list(self._attached):
                await owner.hibernate()
            await self._monty.__aexit__(None, None, None)

    def limits(self) -> dict[str, Any]:
        s = self.settings
        return {
            "max_feed_duration_secs": s.code_timeout,
            "max_memory": s.max_memory_mb * 1024 * 1024,
            "max_recursion_depth": s.max_recursion_depth,
            "max_suspensions": CHECKOUT_SUSPENSIONS * s.max_host_calls,  # per checkout: see budget.py
        }

    @property
    def attached(self) -> int:
        return len(self._attached)

    @property
    def in_use(self) -> int:
        """Workers checked out now (running code or kept by a live interpreter)."""
        return self._in_use

    # -------------------------------------------------------------- checkout

    async def acquire(self, owner: Tenant) -> AsyncMontySession:
        """A fresh worker session for `owner` (hibernating an idle interpreter if needed)."""
        deadline = time.monotonic() + self.settings.checkout_timeout
        stuck: set[Tenant] = set()  # asked to hibernate and gave nothing back: not asked again
        # Single event loop: no await between the capacity check and taking the slot.
        while not (self._in_use < self.size and self.may_run(owner)):
            victim = self._victim(owner, stuck) if self.may_run(owner) else None
            if victim is not None:
                await victim.hibernate()
                self.hibernations += 1
                if victim in self._attached:
                    stuck.add(victim)
                await anyio.lowlevel.checkpoint()  # never a loop that does not yield
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise SandboxError(self._busy_message(owner))
            if self._freed is None:
                self._freed = anyio.Event()
            with anyio.move_on_after(remaining):
                await self._freed.wait()
        self._in_use += 1
        self._starting.add(owner)
        try:
            session = await self._checkout()
        except BaseException:
            self._give_back()
            raise
        finally:
            self._starting.discard(owner)
        self._attached[owner] = None
        return session

    def may_run(self, owner: Tenant) -> bool:
        """Whether `owner` may run code on a worker now (one it takes, or the one it kept): not if
        its party already runs code on one and only one worker is left that no one runs code on."""
        running = self._running(owner)
        free = self.size - len(running)
        if free <= 0:
            return False
        party = _party(owner)
        keep = self.settings.keep_worker_for_others and self.size > 1
        return free > 1 or not keep or all(_party(o) != party for o in running)

    def _running(self, owner: Tenant) -> list[Tenant]:
        """The other tenants running code now (or about to: taking a worker)."""
        return [o for o in (*self._attached, *self._starting) if o is not owner and not o.is_idle]

    def _victim(self, owner: Tenant, stuck: set[Tenant]) -> Tenant | None:
        """The idle interpreter whose worker `owner` takes: one of its own party's first (a client
        taking its own idle worker back costs no one else a reload), then the one whose state is the
        cheapest to reload, then the least recently used."""
        idle = [o for o in self._attached if o is not owner and o.is_idle and o not in stuck]
        party = _party(owner)
        order = {o: n for n, o in enumerate(idle)}  # _attached is kept in least recently used order
        return min(idle, key=lambda o: (_party(o) != party, o.reload_bytes, order[o]), default=None)

    def _busy_message(self, owner: Tenant) -> str:
        party = _party(owner)
        running = self._running(owner)
        own = sum(1 for o in running if _party(o) == party)
        if own and len(running) == self.size - 1:
            return (
                f"{own} of the {self.size} interpreter workers are running this client's other calls, and the "
                "last one is kept for other clients; try again when one of those calls has ended "
                "(or raise sandbox.workers)."
            )
        return (
            f"All {self.size} interpreter workers are busy running code; try again shortly (or raise sandbox.workers)."
        )

    async def _checkout(self) -> AsyncMontySession:
        """A started worker session. A process monty kept idle may have been killed meanwhile
        (kill -9 of the process group, the OOM killer): it fails to start, so take another."""
        attempts = _CHECKOUT_ATTEMPTS
        while True:
            session = self._monty.checkout(
                limits=self.limits(),  # type: ignore[arg-type]
                os_policy={"timezone": "utc", "sleep": "call_host"},  # sleeps are the call's budget's
                external_modules=self._modules,
            )
            try:
                await session.__aenter__()
                return session
            except MontyCrashedError as exc:
                attempts -= 1
                if not attempts:
                    raise SandboxError(f"Could not start an interpreter worker: {exc}") from exc
                log.warning("An idle interpreter worker had died (%s); taking another", exc)
            except Exception as exc:
                raise SandboxError(f"Could not start an interpreter worker: {exc}") from exc

    async def release(self, owner: Tenant, session: AsyncMontySession) -> None:
        """Return `owner`'s worker (a dead or killed worker is replaced by the pool)."""
        self._attached.pop(owner, None)
        with anyio.CancelScope(shield=True):
            try:
                await session.__aexit__(None, None, None)
            except Exception:  # the worker may already be gone; the pool replaces it
                log.debug("worker release after failure", exc_info=True)
            self._give_back()

    def touch(self, owner: Tenant) -> None:
        if owner in self._attached:
            self._attached.move_to_end(owner)

    def _give_back(self) -> None:
        self._in_use -= 1
        self.wake()

    def wake(self) -> None:
        """Wake checkouts waiting for a worker (one was freed, or an interpreter went idle)."""
        if self._freed is not None:
            self._freed.set()
            self._freed = None

    async def _release_idle_loop(self) -> None:
        interval = max(1.0, self.settings.idle_release_seconds / 4)
        while True:
            await anyio.sleep(interval)
            cutoff = time.monotonic() - self.settings.idle_release_seconds
            for owner in list(self._attached):
                if owner.is_idle and owner.last_used < cutoff:
                    await owner.hibernate()


def _party(tenant: Tenant) -> str:
    """A tenant's party; one without a name is a party of its own."""
    return tenant.party or f"tenant-{id(tenant)}"
