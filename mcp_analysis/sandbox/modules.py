"""Host-provided modules the sandbox can import (monty has no `statistics` of its own).

The functions run on the host with plain values; their ids are fixed so a module
imported before hibernation is still the same module after the state is reloaded.
"""

from __future__ import annotations

import statistics
import uuid

from pydantic_monty import ExternalModule

_STATISTICS_FUNCTIONS = (
    "mean", "fmean", "geometric_mean", "harmonic_mean", "median", "median_low", "median_high",
    "median_grouped", "mode", "multimode", "quantiles", "pstdev", "pvariance", "stdev", "variance",
    "covariance", "correlation", "linear_regression",
)  # fmt: skip

STATISTICS = ExternalModule(
    {name: getattr(statistics, name) for name in _STATISTICS_FUNCTIONS},
    id=uuid.UUID("6f1c6a36-2d5b-4b59-9d53-6a1f2c1e7a01"),
)

HOST_MODULES = {"statistics": STATISTICS}
