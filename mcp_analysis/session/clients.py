"""Who a client is for the per-client bounds: its bearer principal, else the address it connects from.

Sessions that live only in this process's memory (legacy HTTP connections; every session when
`sessions.persist` is off) cannot be dropped without losing them, so one client may hold at most
`sessions.max_live_per_client` of them. The server tells the session layer the address of the
current request (`client_address`, set around each call by server/middleware.py); behind a
reverse proxy that is the address the proxy forwards (uvicorn trusts ``X-Forwarded-For`` from
the addresses in ``FORWARDED_ALLOW_IPS``, loopback by default). Light on purpose: no LanceDB or
monty behind it, since the server imports it before the runtime has loaded anything.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_ADDRESS: ContextVar[str | None] = ContextVar("mcp_analysis_client_address", default=None)


def client_label(owner: str | None, address: str | None) -> str:
    """The client a per-client bound counts for, as messages name it."""
    if owner is not None:
        return f"principal {owner!r}"
    if address:
        return f"address {address}"
    return "anonymous clients"


def current_client(owner: str | None) -> str:
    """The client of the current request (see `client_label`)."""
    return client_label(owner, _ADDRESS.get())


@contextmanager
def client_address(address: str | None) -> Iterator[None]:
    """The current request comes from `address` (None: not a network client)."""
    token = _ADDRESS.set(address)
    try:
        yield
    finally:
        _ADDRESS.reset(token)
