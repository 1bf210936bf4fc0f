"""A lean path for the hot ``/mcp`` requests: ``tools/call`` and ``tools/list``.

FastMCP's Streamable-HTTP app (behind ``/mcp``) passes every message through the SDK's session
manager, transport, dispatcher and runner, then fastmcp's middleware chain, request context and
telemetry, before the gateway's tool runs: about two thirds of a trivial call's CPU
(docs/performance.md, "Per-call cost"). :class:`FastMcpCalls` answers the two requests an agent
sends all the time itself, in one JSON body, on a handshake-era session (``Mcp-Session-Id``)
or as a 2026-07-28 request (no session; the SDK's own classifier checks its envelope), and
hands everything else to fastmcp untouched: initialize, notifications, the GET stream, DELETE,
batches, other methods, ``_meta`` beyond the envelope, a progress token and a log level
(version pins, trace context), cursors, unknown tools, tools that need fastmcp's request
context, and any request fastmcp would refuse or answer differently (wrong Accept or
Content-Type, unknown session, an unknown protocol version, a Host/Origin the guard refuses, a
missing bearer token). Nothing is answered here that fastmcp would not answer the same way;
``tests/environment/test_mcp_fast.py`` compares them (docs/environment.md, "The lean /mcp path").

Sessions: a session id is served here only once fastmcp has minted it (the ``Mcp-Session-Id``
of a successful response) and is forgotten on DELETE and on any 404 fastmcp gives for it.
Requests served here do not reach the SDK's session, so its idle clock (30 min by default) does
not see them; one request per session is therefore passed to fastmcp at least every
:data:`REFRESH_S` seconds, which both keeps the session alive and learns promptly when fastmcp
has dropped it. A session that opened its GET stream is passed to fastmcp until
:class:`~environment.mcp_front.SessionRegistry` has recorded it, so hot swaps still reach it
with ``notifications/tools/list_changed``.
"""

from __future__ import annotations

import copy
import logging
import time
import weakref
from dataclasses import dataclass
from typing import Any

import fastmcp
import mcp_types
import pydantic_core
from fastmcp import FastMCP
from fastmcp.exceptions import DisabledError, FastMCPError, NotFoundError
from fastmcp.server.http import HostOriginGuardMiddleware
from fastmcp.tools import Tool
from fastmcp.tools.base import ToolResult
from fastmcp.utilities.exceptions import get_http_status_code, is_timeout_error
from fastmcp.utilities.json_schema import is_object_schema
from mcp.server.runner import modern_error_data
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import (
    ERROR_CODE_HTTP_STATUS,
    InboundModernRoute,
    classify_inbound_request,
    find_duplicated_routing_header,
    validate_mcp_param_headers,
)
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
)
from mcp_types import methods as mcp_methods
from mcp_types.jsonrpc import MISSING_REQUIRED_CLIENT_CAPABILITY
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError as PydanticValidationError
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from atoll.http import bearer_matches
from environment.gateway import Gateway, GatewayManager
from environment.mcp_front import SessionRegistry

logger = logging.getLogger("environment.mcp")

#: A session's requests go through fastmcp at least this often (seconds): its idle clock and
#: its liveness are fastmcp's.
REFRESH_S = 60.0
#: Bodies larger than this go to fastmcp unread beyond this point (a hot request is small).
MAX_BODY_BYTES = 1 << 20

_FAST_METHODS = frozenset({"tools/call", "tools/list"})
_REQUEST_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
#: the 2026-era per-request envelope (validated by the SDK's own classifier)
_ENVELOPE_META_KEYS = frozenset(
    {PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY}
)
#: ``_meta`` keys that leave fastmcp's answer unchanged here (JSON responses: no notifications)
_PASSIVE_META_KEYS = _ENVELOPE_META_KEYS | {"progressToken", "io.modelcontextprotocol/logLevel"}
_FORGET_AFTER_S = 3600.0  # a session silent this long is dropped from the table (re-learned if alive)


@dataclass
class _Session:
    passed_at: float  # monotonic time fastmcp last answered a request of this session
    stream_opened: bool = False  # a GET stream was opened and the registry has not seen it yet


class McpFastPath:
    """The state of the lean path: known sessions and how many requests it answered.

    ``manager`` is the live gateway, ``registry`` and ``server`` the front server's session
    registry and the front server itself (its identity goes into results), ``token``
    the bearer token ``/mcp`` requires (None: none). ``enabled=False`` (SSE responses, which
    forward a tool's progress notifications) passes everything to fastmcp.
    """

    def __init__(
        self,
        manager: GatewayManager,
        registry: SessionRegistry,
        server: FastMCP,
        *,
        token: str | None = None,
        enabled: bool = True,
        mask_error_details: bool | None = None,
    ) -> None:
        self.manager = manager
        self.registry = registry
        #: what the SDK stamps into 2026-era results as serverInfo (the front server's identity)
        self.server_info = mcp_types.Implementation(
            name=server.name,
            version=server.version,
            website_url=server.website_url,
            icons=server.icons or None,
        ).model_dump(by_alias=True, mode="json", exclude_none=True)
        self.token = token
        self.enabled = enabled
        self.mask_error_details = (
            fastmcp.settings.mask_error_details if mask_error_details is None else mask_error_details
        )
        #: requests answered here, by method (tests and benchmarks read it)
        self.answered: dict[str, int] = dict.fromkeys(_FAST_METHODS, 0)
        self._sessions: dict[str, _Session] = {}
        self._tool_lists: weakref.WeakKeyDictionary[Gateway, dict[str, dict[str, Any]]] = (
            weakref.WeakKeyDictionary()
        )

    def _learn(self, session_id: str) -> None:
        now = time.monotonic()
        session = self._sessions.get(session_id)
        if session is not None:
            session.passed_at = now
            return
        if len(self._sessions) % 256 == 255:  # now and then, drop sessions long silent
            stale = [sid for sid, known in self._sessions.items() if now - known.passed_at > _FORGET_AFTER_S]
            for sid in stale:
                del self._sessions[sid]
        self._sessions[session_id] = _Session(passed_at=now)

    def _forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def tool_list(self, gateway: Gateway, version: str) -> dict[str, Any]:
        """The ``tools/list`` result for ``gateway`` and ``version`` as fastmcp's handler returns it,
        dumped (computed once per gateway and version: a gateway's tools never change; callers
        must not modify it)."""
        by_version = self._tool_lists.get(gateway)
        if by_version is None:
            by_version = self._tool_lists[gateway] = {}
        listed = by_version.get(version)
        if listed is None:
            modern = version in MODERN_PROTOCOL_VERSIONS
            tools = [
                tool.to_mcp_tool(
                    name=tool.name, outputSchema=_listed_output_schema(tool.output_schema, modern)
                )
                for tool in gateway.tools.values()
            ]
            result = mcp_types.ListToolsResult(tools=tools, next_cursor=None)
            listed = by_version[version] = result.model_dump(by_alias=True, mode="json", exclude_none=True)
        return listed

    def wire(self, method: str, version: str, result: dict[str, Any]) -> dict[str, Any]:
        """A result dict as the SDK's runner puts it on the wire for ``version``: sieved by the
        version's schema, and on a 2026-era connection with ``resultType`` and the serverInfo stamp."""
        wired = mcp_methods.serialize_server_result(method, version, result)
        if version in MODERN_PROTOCOL_VERSIONS:
            wired.setdefault("resultType", "complete")
            meta = wired.get("_meta")
            if meta is None:
                wired["_meta"] = {SERVER_INFO_META_KEY: copy.deepcopy(self.server_info)}
            elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
                wired["_meta"] = {**meta, SERVER_INFO_META_KEY: copy.deepcopy(self.server_info)}
        return wired


class FastMcpCalls:
    """ASGI middleware answering hot ``/mcp`` requests from the live gateway (see the module).

    It sits inside the environment's Host/cross-site guard and before FastAPI's routing; every
    request it does not answer goes on to ``app`` with its body intact.
    """

    def __init__(self, app: ASGIApp, *, fast_path: McpFastPath, path: str = "/mcp") -> None:
        self.app = app
        self.fast = fast_path
        self.paths = (path, path + "/")
        # The same guard (and configuration) fastmcp's http_app(host_origin_protection="auto")
        # puts in front of /mcp; here it only ever runs on requests this layer answers.
        self._host_guard = HostOriginGuardMiddleware(_allow, mode="auto")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in self.paths or not self.fast.enabled:
            await self.app(scope, receive, send)
            return
        headers = _Headers(scope["headers"])
        method = scope["method"]
        fast = self.fast
        session_id = headers.session_id
        if method == "DELETE":
            if session_id is not None:
                fast._forget(session_id)
            await self.app(scope, receive, send)
            return
        if method == "GET":
            session = fast._sessions.get(session_id) if session_id is not None else None
            if session is not None:
                session.stream_opened = True
            await self._pass(session_id, scope, receive, send)
            return
        version = headers.protocol_version
        modern = session_id is None and version in MODERN_PROTOCOL_VERSIONS
        if (
            method != "POST"
            or not (modern or (session_id is not None and version in HANDSHAKE_PROTOCOL_VERSIONS))
            or not headers.json_body
            or not headers.accepts_json
            or (not modern and not self._session_is_hot(session_id))
        ):
            await self._pass(session_id, scope, receive, send)
            return
        assert version is not None
        body, complete = await _read_body(receive)
        request = _hot_request(body, version, headers, scope["headers"]) if complete else None
        if (
            request is not None
            and fast.token is not None
            and not bearer_matches(headers.authorization, fast.token)
        ):
            request = None  # /mcp's own guard answers the 401
        tool = None
        if request is not None and request.method == "tools/call":
            tool = fast.manager.current.tools.get(request.params["name"])
            if tool is None or not getattr(tool, "context_free", False):
                request = None  # unknown tools and those needing fastmcp's context: fastmcp's answer
            elif (
                modern
                and request.params.get("arguments")
                and validate_mcp_param_headers(tool.parameters, request.params["arguments"], {}) is not None
            ):
                request = None  # an argument the schema routes by header: fastmcp's rejection
        if request is None:
            await self._pass(session_id, scope, _replay(body, complete, receive), send)
            return
        if not await _guard_allows(self._host_guard, scope, receive, send):  # it sent the refusal
            return
        fast.answered[request.method] += 1
        if request.method == "tools/list":
            result = dict(fast.tool_list(fast.manager.current, version))
            reply = {"jsonrpc": "2.0", "id": request.id, "result": fast.wire(request.method, version, result)}
        else:
            assert tool is not None
            reply = await _call_tool(fast, tool, request, version)
        status = 200
        if "error" in reply and modern:
            status = ERROR_CODE_HTTP_STATUS.get(reply["error"]["code"], 200)
        await _send_json(send, status, pydantic_core.to_json(reply), None if modern else session_id)

    def _session_is_hot(self, session_id: str | None) -> bool:
        """Whether a request of this handshake-era session may be answered here (see the module)."""
        session = self.fast._sessions.get(session_id) if session_id is not None else None
        if session is None or time.monotonic() - session.passed_at > REFRESH_S:
            return False
        if session.stream_opened:
            assert session_id is not None
            if not self.fast.registry.can_notify(session_id):
                return False
            session.stream_opened = False
        return True

    async def _pass(self, session_id: str | None, scope: Scope, receive: Receive, send: Send) -> None:
        """Hand the request to fastmcp, learning from its answer which sessions are live."""
        fast = self.fast

        async def watch(message: Message) -> None:
            if message["type"] == "http.response.start":
                status = message["status"]
                if status == 404 and session_id is not None:
                    fast._forget(session_id)
                elif status < 400:
                    for name, value in message.get("headers", ()):
                        if name.lower() == b"mcp-session-id":
                            minted = value.decode("latin-1")
                            if session_id is None or minted == session_id:
                                fast._learn(minted)
                            break
            await send(message)

        await self.app(scope, receive, watch)


class _Headers:
    """The request headers this layer reads, from one pass over the ASGI list."""

    __slots__ = ("session_id", "protocol_version", "json_body", "accepts_json", "authorization", "mcp_param")

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self.session_id = self.protocol_version = self.authorization = None
        self.json_body = self.accepts_json = self.mcp_param = False
        for name, value in raw:
            if name == b"mcp-session-id":
                self.session_id = value.decode("latin-1")
            elif name == b"mcp-protocol-version":
                self.protocol_version = value.decode("latin-1")
            elif name == b"content-type":
                self.json_body = _is_json(value)
            elif name == b"accept":
                self.accepts_json = _accepts_json(value)
            elif name == b"authorization":
                self.authorization = value.decode("latin-1")
            elif name.startswith(b"mcp-param-"):
                self.mcp_param = True


async def _allow(scope: Scope, receive: Receive, send: Send) -> None:
    scope["atoll.mcp_fast_allowed"] = True


async def _guard_allows(guard: HostOriginGuardMiddleware, scope: Scope, receive: Receive, send: Send) -> bool:
    await guard(scope, receive, send)
    return bool(scope.pop("atoll.mcp_fast_allowed", False))


def _is_json(content_type: bytes) -> bool:
    # The transport's own rule: the first media type (comma-separated parts allowed) is JSON.
    media = content_type.split(b";", 1)[0]
    return any(part.strip() == b"application/json" for part in media.split(b","))


def _accepts_json(accept: bytes) -> bool:
    # Stricter than the SDK's check (which also takes wildcards): a miss only means fastmcp answers.
    return any(part.split(b";", 1)[0].strip().lower() == b"application/json" for part in accept.split(b","))


async def _read_body(receive: Receive) -> tuple[bytes, bool]:
    """The request body, and whether it is all there (False: over MAX_BODY_BYTES, or not HTTP)."""
    chunks = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return b"".join(chunks), False
        chunk = message.get("body", b"")
        chunks.append(chunk)
        size += len(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks), True
        if size > MAX_BODY_BYTES:
            return b"".join(chunks), False


def _replay(body: bytes, complete: bool, receive: Receive) -> Receive:
    """A ``receive`` that gives the bytes already read first, then the rest of the request."""
    sent = False

    async def replay() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": not complete}
        return await receive()

    return replay


@dataclass(frozen=True)
class _HotRequest:
    id: str | int
    method: str
    params: dict[str, Any]


def _hot_request(
    body: bytes, version: str, headers: _Headers, raw_headers: list[tuple[bytes, bytes]]
) -> _HotRequest | None:
    """The request when ``body`` is one ``tools/call`` or ``tools/list`` this path answers exactly
    as fastmcp would; None for anything else (fastmcp then answers it)."""
    try:
        message = pydantic_core.from_json(body)
    except ValueError:
        return None
    if type(message) is not dict or message.get("jsonrpc") != "2.0" or not message.keys() <= _REQUEST_KEYS:
        return None
    request_id = message.get("id")
    method = message.get("method")
    params = message.get("params")
    if type(request_id) not in (int, str) or method not in _FAST_METHODS:
        return None
    if params is None:
        params = {}
    elif type(params) is not dict or params.get("cursor") is not None:
        return None
    meta = params.get("_meta")
    # Version pins, trace context and the like change what fastmcp does; a progress token or a
    # log level change nothing here: JSON responses carry no notifications on either era.
    if meta is not None and (type(meta) is not dict or not meta.keys() <= _PASSIVE_META_KEYS):
        return None
    if version in MODERN_PROTOCOL_VERSIONS:
        if headers.mcp_param or find_duplicated_routing_header(
            (name.decode("latin-1"), value.decode("latin-1")) for name, value in raw_headers
        ):
            return None
        routing = {name.decode("latin-1"): value.decode("latin-1") for name, value in raw_headers}
        if not isinstance(classify_inbound_request(message, headers=routing), InboundModernRoute):
            return None
    elif meta is not None and meta.keys() & _ENVELOPE_META_KEYS:
        return None
    try:
        mcp_methods.validate_client_request(method, version, params)
    except Exception:  # malformed for this version: fastmcp's own error
        return None
    return _HotRequest(request_id, method, params)


async def _call_tool(fast: McpFastPath, tool: Tool, request: _HotRequest, version: str) -> dict[str, Any]:
    """The JSON-RPC reply to one ``tools/call``, shaped as fastmcp's tools/call handler shapes it."""
    name = request.params["name"]
    modern = version in MODERN_PROTOCOL_VERSIONS
    try:
        result = await tool.run(request.params.get("arguments") or {})
    except Exception as exc:
        error = _error_reply(name, exc, fast.mask_error_details, modern=modern)
        if isinstance(error, mcp_types.ErrorData):
            return {
                "jsonrpc": "2.0",
                "id": request.id,
                "error": error.model_dump(by_alias=True, mode="json", exclude_none=True),
            }
        result = error
    dumped = _wire_result(tool, result, modern).model_dump(by_alias=True, mode="json", exclude_none=True)
    return {"jsonrpc": "2.0", "id": request.id, "result": fast.wire("tools/call", version, dumped)}


def _wire_result(tool: Tool, result: ToolResult, modern: bool) -> mcp_types.CallToolResult:
    """A tool's result as a CallToolResult: on a handshake-era connection a structured value
    that is not an object (or declared by a non-object output schema) travels wrapped as
    ``{"result": value}``, as fastmcp sends it."""
    structured = result.structured_content
    if (
        not modern
        and structured is not None
        and (
            not isinstance(structured, dict)
            or (tool.output_schema is not None and not is_object_schema(tool.output_schema))
        )
    ):
        meta = dict(result.meta or {})
        fastmcp_meta = meta.get("fastmcp")
        if not (isinstance(fastmcp_meta, dict) and fastmcp_meta.get("wrap_result") is True):
            meta["fastmcp"] = {
                **(fastmcp_meta if isinstance(fastmcp_meta, dict) else {}),
                "wrap_result": True,
            }
            result = ToolResult(
                content=result.content,
                structured_content={"result": structured},
                meta=meta,
                is_error=result.is_error,
            )
    mcp_result = result.to_mcp_result()
    if isinstance(mcp_result, mcp_types.CallToolResult):
        return mcp_result
    if isinstance(mcp_result, tuple):
        content, structured_content = mcp_result
        return mcp_types.CallToolResult(content=content, structured_content=structured_content)
    return mcp_types.CallToolResult(content=mcp_result)


def _error_reply(
    name: str, exc: Exception, mask_error_details: bool, *, modern: bool = False
) -> ToolResult | mcp_types.ErrorData:
    """What fastmcp answers when a tool raises ``exc``: an isError result, or (for an argument
    validation error from pydantic, or a missing client capability) a JSON-RPC error."""
    if isinstance(exc, DisabledError | NotFoundError):
        text = f"Unknown tool: {name!r}"
    elif isinstance(exc, FastMCPError):
        text = str(exc)
    elif isinstance(exc, PydanticValidationError) or (
        isinstance(exc, MCPError) and exc.error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
    ):
        if modern:
            return modern_error_data(exc)
        error = handler_exception_to_error_data(exc)
        assert error is not None
        return error
    else:
        status_code = get_http_status_code(exc)
        logger.error("tool %s failed", name, exc_info=status_code is None)
        if status_code == 429:
            text = "Rate limited by upstream API, please retry later"
        elif is_timeout_error(exc):
            text = "Upstream request timed out, please retry"
        elif mask_error_details:
            text = f"Error calling tool {name!r}"
        else:
            text = f"Error calling tool {name!r}: {exc}"
    return ToolResult(content=[mcp_types.TextContent(type="text", text=text)], is_error=True)


def _listed_output_schema(schema: dict[str, Any] | None, modern: bool) -> dict[str, Any] | None:
    """The output schema as fastmcp lists it: as it is on a 2026-era connection, with an object
    at the root (a non-object value wrapped under ``result``) on a handshake-era one."""
    if schema is None:
        return None
    if modern:
        return schema
    if is_object_schema(schema):
        return schema if schema.get("type") == "object" else {**schema, "type": "object"}
    wrapped: dict[str, Any] = {
        "type": "object",
        "properties": {"result": schema},
        "required": ["result"],
        "x-fastmcp-wrap-result": True,
    }
    for key in ("$defs", "definitions"):
        if key in schema:
            wrapped[key] = schema[key]
    return wrapped


async def _send_json(send: Send, status: int, body: bytes, session_id: str | None) -> None:
    headers = [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]
    if session_id is not None:
        headers.append((b"mcp-session-id", session_id.encode("latin-1")))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
