"""What a benchmark ran on: CPU, cores and load, printed with every result (figures mean little without)."""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any


def machine() -> dict[str, Any]:
    model = platform.processor() or platform.machine()
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    load = [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None
    return {"cpu": model, "cores": os.cpu_count(), "load_1_5_15": load, "python": platform.python_version()}


def describe() -> str:
    m = machine()
    return f"machine: {m['cpu']}, {m['cores']} cores"
