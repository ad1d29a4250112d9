"""`GET /healthz` and `GET /metrics` on the HTTP server (for load balancers and Prometheus).

- /healthz: 200 with ``{"ready": true, ...}`` when the knowledge base is open and readable,
  the interpreter workers are up and the session store answers; 503 (same body, naming
  what fails) otherwise. A load balancer takes a replica out while it is 503 and back
  when it recovers (no restart needed).
- /metrics: the Prometheus text format: tool calls, errors and latency by tool (from a
  server middleware), and at scrape time: readiness, sessions live / holding a worker /
  hibernated / kept in the store, workers and their use, lock waits that timed out.

Both are unauthenticated, like most health and metrics endpoints (balancers and readiness
probes call them without a token): they reveal states and counts, never content. With bearer
tokens configured (the server is meant for more than its operator), /healthz shows where the
knowledge base is and why a part fails only to a request with a valid token; others get each
check as "ok" or "failing" (the reasons are in the server log). Keep both off the public
network anyway (or filter them at the load balancer).
"""

from __future__ import annotations

import gc
import ipaddress
import json
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from mcp.server.transport_security import TransportSecurityMiddleware, TransportSecuritySettings
from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from starlette.requests import Request
from starlette.responses import Response

from mcp_analysis.server.middleware import MIDDLEWARE

if TYPE_CHECKING:
    from mcp.server import MCPServer

    from mcp_analysis.server.runtime import Runtime

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class _RuntimeCollector:
    """Gauges read from the runtime when Prometheus scrapes."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime

    def collect(self) -> Iterator[Metric]:
        runtime = self.runtime
        health = runtime.health()
        yield GaugeMetricFamily("mcp_analysis_ready", "1 when /healthz reports ready.", value=int(health["ready"]))
        sessions, pool = runtime.sessions, runtime.pool
        live = len(sessions) if sessions is not None else 0
        attached = sessions.live.attached if sessions is not None else 0
        yield GaugeMetricFamily("mcp_analysis_sessions_live", "Analysis sessions in this replica's memory.", value=live)
        yield GaugeMetricFamily(
            "mcp_analysis_sessions_attached", "Live sessions holding an interpreter worker now.", value=attached
        )
        yield GaugeMetricFamily(
            "mcp_analysis_sessions_hibernated",
            "Live sessions whose interpreter gave its worker back (state dumped).",
            value=live - attached,
        )
        yield GaugeMetricFamily(
            "mcp_analysis_sessions_stored",
            "Sessions kept in the session store (all replicas; refreshed every 10 s).",
            value=sessions.health.stored_count if sessions is not None else 0,
        )
        yield GaugeMetricFamily(
            "mcp_analysis_sessions_state_bytes",
            "Interpreter state and kept charts live sessions hold in memory (bounded by sessions.max_memory_mb).",
            value=sessions.memory.state_bytes if sessions is not None else 0,
        )
        yield CounterMetricFamily(
            "mcp_analysis_session_memory_evictions",
            "Idle kept sessions dropped from memory to stay within sessions.max_memory_mb.",
            value=sessions.memory.evictions if sessions is not None else 0,
        )
        yield CounterMetricFamily(
            "mcp_analysis_session_lock_timeouts",
            "Calls refused because another call held their session past sessions.lock_timeout.",
            value=sessions.locks.timeouts if sessions is not None else 0,
        )
        yield GaugeMetricFamily("mcp_analysis_workers", "Interpreter worker processes.", value=pool.size if pool else 0)
        yield GaugeMetricFamily(
            "mcp_analysis_workers_in_use", "Workers checked out by an interpreter.", value=pool.in_use if pool else 0
        )
        yield CounterMetricFamily(
            "mcp_analysis_worker_hibernations",
            "Idle sessions hibernated to free a worker for another.",
            value=pool.hibernations if pool else 0,
        )
        yield GaugeMetricFamily(
            "mcp_analysis_gc_frozen_objects",
            "Objects garbage collection skips: alive when serve froze its start-up imports (process_gc.py).",
            value=gc.get_freeze_count(),
        )


class Observability:
    """Metrics registry, the tool-call middleware, and the two routes, for one server."""

    def __init__(
        self,
        server: MCPServer,
        runtime: Runtime,
        *,
        details_need_token: bool = False,
        security: TransportSecuritySettings | None = None,
    ) -> None:
        self.server = server
        self.runtime = runtime
        self.details_need_token = details_need_token
        self.security = security
        self.registry = CollectorRegistry()
        self.calls = Counter("mcp_analysis_tool_calls", "Tool calls by tool.", ["tool"], registry=self.registry)
        self.errors = Counter(
            "mcp_analysis_tool_errors", "Tool calls that ended in an error, by tool.", ["tool"], registry=self.registry
        )
        self.latency = Histogram(
            "mcp_analysis_tool_duration_seconds",
            "Tool call latency by tool.",
            ["tool"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_RuntimeCollector(runtime))  # type: ignore[arg-type]
        self._tools: set[str] | None = None

    def install(self) -> None:
        """The routes, and the middleware outside ours (`MIDDLEWARE`, `exact_errors`), so a call refused there for
        an unknown tool or argument is counted as a failed call too."""
        chain = self.server.middleware
        ours = [i for i, middleware in enumerate(chain) if middleware in MIDDLEWARE]
        chain.insert(ours[0] if ours else len(chain), self.middleware)
        self.server.custom_route("/healthz", methods=["GET"], include_in_schema=False)(self.healthz)
        self.server.custom_route("/metrics", methods=["GET"], include_in_schema=False)(self.metrics)

    async def _label(self, name: Any) -> str:
        """The tool name, or 'unknown' (clients must not create label values at will)."""
        if self._tools is None:
            self._tools = {tool.name for tool in await self.server.list_tools()}
        return name if isinstance(name, str) and name in self._tools else "unknown"

    async def middleware(self, ctx: Any, call_next: Any) -> Any:
        if getattr(ctx, "method", None) != "tools/call":
            return await call_next(ctx)
        params = ctx.params if isinstance(ctx.params, dict) else {}
        tool = await self._label(params.get("name"))
        started = time.perf_counter()
        failed = True
        try:
            result = await call_next(ctx)
            failed = _is_error(result)
            return result
        finally:
            self.calls.labels(tool).inc()
            self.latency.labels(tool).observe(time.perf_counter() - started)
            if failed:
                self.errors.labels(tool).inc()

    async def _rebound(self, request: Request) -> Response | None:
        """The refusal /mcp gives a web page that rebinds its own name to this server (DNS rebinding):
        such a page could read the knowledge base's location and every client's call counts here. A Host
        that names a host is checked as /mcp checks it; an IP address (a balancer's or a probe's, which
        no rebinding page can send) or none passes, so health checks keep working without allowed_hosts."""
        if self.security is None or _an_address(request.headers.get("host")):
            return None
        return await TransportSecurityMiddleware(self.security).validate_request(request)

    async def healthz(self, request: Request) -> Response:
        if (refused := await self._rebound(request)) is not None:
            return refused
        health = self.runtime.health()
        if self.details_need_token and not _authenticated(request):
            health = {
                "ready": health["ready"],
                "checks": {name: "ok" if state == "ok" else "failing" for name, state in health["checks"].items()},
            }
        return Response(
            json.dumps(health),
            status_code=200 if health["ready"] else 503,
            media_type="application/json",
            headers={"Cache-Control": "no-store"},
        )

    async def metrics(self, request: Request) -> Response:
        if (refused := await self._rebound(request)) is not None:
            return refused
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


def _an_address(host: str | None) -> bool:
    """Whether a Host header is missing or an IP address (with or without a port), not a name."""
    if not host:
        return True
    if host.startswith("["):  # [IPv6]:port
        name = host[1:].partition("]")[0]
    elif host.count(":") > 1:  # a bare IPv6 address
        name = host
    else:  # a name or an IPv4 address, with or without a port
        name = host.partition(":")[0]
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


def _authenticated(request: Request) -> bool:
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser

    return isinstance(request.scope.get("user"), AuthenticatedUser)


def _is_error(result: Any) -> bool:
    if isinstance(result, dict):
        return bool(result.get("isError") or result.get("is_error"))
    return bool(getattr(result, "is_error", False))
