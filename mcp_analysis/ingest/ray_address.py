"""`--ray ADDRESS`: what ADDRESS means, whether something answers there, and the optional Ray
packages imported, or the error that says how to install them. Checked before the knowledge base
is opened (the CLI's `preflight`); ray_engine connects with it."""

from __future__ import annotations

import importlib
import os
import re
import socket
from types import ModuleType

from mcp_analysis.errors import AnalysisError

ADDRESS_FORMS = "auto, local, HOST:PORT or ray://HOST:PORT"
_REACH_SECONDS = 10.0
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]]+):\d{1,5}")


def missing_extra(module: str) -> AnalysisError:
    """What to install when `--ray` cannot import `module`."""
    return AnalysisError(
        f"--ray needs the optional Ray packages, and the module '{module}' is not installed: "
        "pip install 'mcp-analysis[ray]' (in a clone of the repository: python3 -m uv sync --extra ray)."
    )


def import_extra(module: str) -> ModuleType:
    """`module`, from the `ray` extra, or the error that says how to install it."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise missing_extra(exc.name or module) from None


def init_address(address: str) -> str:
    """What `ray.init` is given for ADDRESS (auto: RAY_ADDRESS, else a cluster running here)."""
    address = address.strip()
    if address == "auto":
        return os.environ.get("RAY_ADDRESS") or "auto"
    if address == "local" or (address.startswith("ray://") and _HOST_PORT.fullmatch(address[6:])):
        return address
    if _HOST_PORT.fullmatch(address):
        return address
    raise AnalysisError(f"--ray expects {ADDRESS_FORMS}, got {address!r}.")


def preflight(address: str) -> None:
    """What can be checked before anything is opened: the extra is installed, ADDRESS has a known
    form and, when it names a host, something listens there."""
    import_extra("ray")
    check_reachable(address, init_address(address))


def check_reachable(address: str, target: str) -> None:
    """A HOST:PORT that nothing answers on fails at once (Ray itself retries for minutes)."""
    host_port = target.removeprefix("ray://")
    if not _HOST_PORT.fullmatch(host_port):
        return  # auto (a cluster of this machine, found by Ray) or local
    host, _, port = host_port.rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=_REACH_SECONDS).close()
    except OSError as exc:
        raise AnalysisError(
            f"Cannot reach the Ray cluster at {address} ({exc.strerror or exc}): is its head running, "
            "and is the address its `ray start --head` printed?"
        ) from None
