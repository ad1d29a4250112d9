"""`--ray ADDRESS`: what ADDRESS means, whether something answers there, and the optional Ray
packages imported, or the error that says how to install them. Checked before the knowledge base
is opened (the CLI's `preflight`); ray_engine connects with it."""

from __future__ import annotations

import importlib
import os
import re
import socket
import sys
from types import ModuleType

from mcp_analysis.errors import AnalysisError

ADDRESS_FORMS = "auto, local, HOST:PORT or ray://HOST:PORT"
_REACH_SECONDS = 10.0
_HOST_PORT = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[^\s:/\[\]]+):\d{1,5}")
# Ray 2.60 rewrites the job of a driver started under `uv run` (as `python3 -m uv run mcp-analysis`
# is): the driver's working directory is packed up and copied to every node, and each worker starts
# through `uv run` there, in a virtual environment uv builds on the node (2.0 GB for a clone of this
# repository), so a node needs uv and the packages' index, and a driver run from another folder gets
# workers without mcp-analysis. The nodes run their own installation (the driver checks its
# version, ray_engine.Cluster), so the driver turns that off unless its environment sets the switch.
# Ray reads it once, when first imported: it is set only around that import, so the processes this
# one starts (a server's conversion workers, a caller's own programs) inherit nothing of it.
UV_RUN_SWITCH = "RAY_ENABLE_UV_RUN_RUNTIME_ENV"


def missing_extra(module: str) -> AnalysisError:
    """What to install when `--ray` cannot import `module`."""
    return AnalysisError(
        f"--ray needs the optional Ray packages, and the module '{module}' is not installed: "
        "pip install 'mcp-analysis[ray]' (in a clone of the repository: python3 -m uv sync --extra ray)."
    )


def import_extra(module: str) -> ModuleType:
    """`module`, from the `ray` extra, or the error that says how to install it (Ray's first import
    without its `uv run` hook, unless the environment sets UV_RUN_SWITCH)."""
    switched = "ray" not in sys.modules and UV_RUN_SWITCH not in os.environ
    if switched:
        os.environ[UV_RUN_SWITCH] = "0"
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise missing_extra(exc.name or module) from None
    finally:
        if switched:
            os.environ.pop(UV_RUN_SWITCH, None)


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
