"""Host-provided modules the sandbox can import (monty has no `statistics` of its own).

The functions run on the host (in monty's callback thread, not the event loop)
with plain values. Each call is bounded (sandbox/bounds.py): what it accepts and
what it returns are counted against the session's memory limit, so
``statistics.quantiles(data, n=20_000_000)`` is a clear error in the sandbox
instead of 20 M floats built on the host; numbers beyond a float's range are refused
(big-int arithmetic holds the GIL, stalling the event loop). Module ids are fixed so a module
imported before hibernation is still the same module after the state is reloaded.
"""

from __future__ import annotations

import functools
import statistics
import uuid
from collections.abc import Callable
from typing import Any

from pydantic_monty import ExternalModule

from mcp_analysis.sandbox.bounds import HostBounds
from mcp_analysis.sandbox.budget import spend_current
from mcp_analysis.sandbox.settings import SandboxSettings

_STATISTICS_FUNCTIONS = (
    "mean", "fmean", "geometric_mean", "harmonic_mean", "median", "median_low", "median_high",
    "median_grouped", "mode", "multimode", "quantiles", "pstdev", "pvariance", "stdev", "variance",
    "covariance", "correlation", "linear_regression",
)  # fmt: skip
STATISTICS_ID = uuid.UUID("6f1c6a36-2d5b-4b59-9d53-6a1f2c1e7a01")


def _bounded(name: str, fn: Callable[..., Any], bounds: HostBounds) -> Callable[..., Any]:
    call = f"statistics.{name}"

    @functools.wraps(fn)
    def run(*args: Any, **kwargs: Any) -> Any:
        spend_current()
        bounds.check_arguments(call, args, kwargs)
        bounds.check_numbers(call, args, kwargs)
        if name == "quantiles":
            n = kwargs.get("n", 4)
            if isinstance(n, int) and not isinstance(n, bool):
                bounds.check_count(call, n - 1)
        result = fn(*args, **kwargs)
        bounds.check_result(call, result)
        return result

    return run


def host_modules(settings: SandboxSettings) -> dict[str, ExternalModule]:
    """The importable host modules, bounded by `settings`' limits."""
    bounds = HostBounds.of(settings)
    functions = {name: _bounded(name, getattr(statistics, name), bounds) for name in _STATISTICS_FUNCTIONS}
    return {"statistics": ExternalModule(functions, id=STATISTICS_ID)}
