"""Screening raw JSON-RPC messages before the SDK sees them, so every malformed one is answered.

mcp 2.3's stdio transport drops a line it cannot parse or validate without a reply
(the client then waits until its own timeout), and its legacy HTTP transport answers
an invalid envelope with -32602 and a pydantic dump. Both transports pass each
raw message through `screen()`: a message the SDK would accept goes on unchanged;
anything else is answered here with the JSON-RPC 2.0 error for it, the same on stdio
and HTTP:

- ``-32700`` Parse error, ``id: null`` — not JSON (or not UTF-8);
- ``-32600`` Invalid Request — JSON, but not one JSON-RPC message object: a batch,
  ``[]``, a missing or non-string ``method``, a bad ``id``, text that is not valid
  Unicode (a lone surrogate escape such as ``\\ud800``); ``id`` is echoed when it
  can be read, else ``null``;
- ``-32602`` Invalid params — a well-formed request whose ``params`` is not an object, or
  whose params no protocol version of its era accepts for its method (a tool call without
  ``name``, ``logging/setLevel`` with a level that does not exist): the message names the
  field and what it takes, where the SDK says only "Invalid request parameters". The era is
  the handshake versions, or the modern version the request's ``_meta`` states.

Unknown methods (``-32601``) stay the SDK's.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pydantic_core
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    JSONRPCNotification,
    JSONRPCRequest,
    jsonrpc_message_adapter,
)
from mcp_types import methods as spec_methods
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

log = logging.getLogger(__name__)

MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # one stdio line; HTTP bodies have the SDK's smaller limit


def error_body(code: int, message: str, request_id: Any = None) -> bytes:
    """A JSON-RPC error response (``id`` is written even when null, as JSON-RPC requires)."""
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}, ensure_ascii=False
    ).encode()


def screen(raw: bytes) -> bytes | None:
    """``None`` if the SDK accepts `raw` as one JSON-RPC message; otherwise the error response to send.

    Never raises: whatever a peer sends, the answer is a JSON-RPC error and serving goes on."""
    try:
        return _screen(raw)
    except Exception:
        log.warning("Could not screen a %d-byte message; answered as a parse error", len(raw), exc_info=True)
        return error_body(PARSE_ERROR, "Parse error: the message could not be read as JSON-RPC.")


def _screen(raw: bytes) -> bytes | None:
    try:
        message = jsonrpc_message_adapter.validate_json(raw, by_name=False)
    except ValidationError:
        pass
    else:
        # The SDK reads a request whose id is an object, a boolean or null as a notification
        # (and never answers it): JSON-RPC calls that an invalid request.
        if isinstance(message, JSONRPCNotification) and b'"id"' in raw:
            value = pydantic_core.from_json(raw)
            if isinstance(value, dict) and "id" in value:
                return error_body(INVALID_REQUEST, "Invalid Request: id must be a string or an integer.")
        if isinstance(message, JSONRPCRequest) and message.method in spec_methods.SPEC_CLIENT_METHODS:
            return _params_error(message)
        return None
    try:
        value = pydantic_core.from_json(raw)
    except ValueError as exc:
        recovered = _lenient(raw)
        if isinstance(recovered, dict):  # valid JSON grammar, but text that is not Unicode
            return error_body(
                INVALID_REQUEST,
                "Invalid Request: the message holds text that is not valid Unicode (a lone surrogate escape "
                "such as \\ud800); send UTF-8 text.",
                _readable_id(recovered),
            )
        return error_body(PARSE_ERROR, f"Parse error: {_first_line(exc)}")
    if not isinstance(value, dict):
        what = "a batch (an array)" if isinstance(value, list) else f"a JSON {type(value).__name__}"
        return error_body(
            INVALID_REQUEST,
            f"Invalid Request: expected one JSON-RPC message object, got {what}; batches are not supported.",
        )
    request_id = _readable_id(value)
    method = value.get("method")
    params = value.get("params")
    if value.get("jsonrpc") == "2.0" and isinstance(method, str) and "params" in value and not isinstance(params, dict):
        kind = "an array" if isinstance(params, list) else f"a {type(params).__name__}"
        return error_body(INVALID_PARAMS, f"Invalid params: params must be an object, not {kind}.", request_id)
    if value.get("jsonrpc") != "2.0":
        reason = 'jsonrpc must be "2.0"'
    elif "method" in value and not isinstance(method, str):
        reason = "method must be a string"
    elif "method" not in value and "result" not in value and "error" not in value:
        reason = "method is missing"
    elif "id" in value and request_id is None and value["id"] is not None:
        reason = "id must be a string or an integer"
    else:
        reason = "not a valid request, notification or response"
    return error_body(INVALID_REQUEST, f"Invalid Request: {reason}.", request_id)


_VERSION_META = "io.modelcontextprotocol/protocolVersion"  # carried by every request of the modern era


def _params_error(request: JSONRPCRequest) -> bytes | None:
    """-32602 naming what is wrong, when no protocol version of the request's era accepts its params
    for its method (the SDK, checking them under the version in use, would refuse them without a
    word). A method its era does not have is left to the SDK's -32601."""
    meta = request.params.get("_meta") if isinstance(request.params, dict) else None
    stated = meta.get(_VERSION_META) if isinstance(meta, dict) else None
    if stated is None:
        versions: tuple[str, ...] = HANDSHAKE_PROTOCOL_VERSIONS
    elif stated in MODERN_PROTOCOL_VERSIONS:
        versions = (stated,)
    else:  # a version this SDK does not know: the SDK's own answer
        return None
    refusals: list[list[str]] = []
    for version in versions:
        try:
            spec_methods.validate_client_request(request.method, version, request.params)
        except KeyError:  # not a method of this version
            continue
        except ValidationError as exc:
            refusals.append([_problem(error) for error in exc.errors(include_url=False, include_input=False)])
            continue
        return None
    if not refusals:
        return None
    problems = min(refusals, key=len)  # the version that objects least names the real problem
    listed = "; ".join(problems[:3]) + ("; ..." if len(problems) > 3 else "")
    return error_body(INVALID_PARAMS, f"Invalid params for {request.method}: {listed}.", request.id)


def _problem(error: Any) -> str:
    where = ".".join(str(part)[:60] for part in error["loc"][1:] if part != "params") or "params"
    text = f"{where}: {error['msg'][:300]}"
    return text.encode("utf-8", "backslashreplace").decode()  # a key may hold a lone surrogate


def _readable_id(value: dict[str, Any]) -> str | int | None:
    request_id = value.get("id")
    if isinstance(request_id, int) and not isinstance(request_id, bool):
        return request_id
    if isinstance(request_id, str):
        try:
            request_id.encode("utf-8")
        except UnicodeEncodeError:  # a lone surrogate in the id itself: cannot be echoed
            return None
        return request_id
    return None


def _lenient(raw: bytes) -> Any:
    """Python's json accepts lone surrogate escapes that pydantic refuses, so the id can still be read.

    It recurses per nesting level, so a deeply nested message (which pydantic already refused
    with its own depth limit) raises RecursionError here: that is a parse error too, never an
    exception out of the screen (one escaping would end the stdio server)."""
    try:
        return json.loads(raw)
    except (ValueError, RecursionError):
        return None


def _first_line(exc: Exception) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__


class ScreenedHttpBodies:
    """ASGI middleware: a POSTed body that is not one valid JSON-RPC message is answered here (400).

    Sits inside the authentication middleware: with bearer tokens configured, a request
    that is not authenticated goes on unscreened and the SDK answers it 401. Bodies
    beyond the SDK's size limit go on too (the SDK answers 413).
    """

    def __init__(self, app: Any, *, path: str, require_auth: bool, max_body: int) -> None:
        self.app = app
        self.path = path.rstrip("/") or "/"
        self.require_auth = require_auth
        self.max_body = max_body

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if (
            scope["type"] != "http"
            or scope.get("method") != "POST"
            or (scope.get("path", "").rstrip("/") or "/") != self.path
            or (self.require_auth and not _authenticated(scope))
        ):
            await self.app(scope, receive, send)
            return
        body = bytearray()
        complete = False
        while len(body) <= self.max_body:
            message = await receive()
            if message["type"] != "http.request":  # client went away
                return
            body.extend(message.get("body", b""))
            if not message.get("more_body", False):
                complete = True
                break
        if complete:
            rejection = screen(bytes(body))
            if rejection is not None:
                await _respond(send, 400, rejection)
                return
        await self.app(scope, _replay(bytes(body), complete, receive), send)


def _authenticated(scope: Any) -> bool:
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser

    return isinstance(scope.get("user"), AuthenticatedUser)


def _replay(body: bytes, complete: bool, receive: Any) -> Any:
    sent = False

    async def replay() -> Any:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": not complete}
        return await receive()

    return replay


async def _respond(send: Any, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})
