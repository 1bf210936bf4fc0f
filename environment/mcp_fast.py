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
has dropped it. A session is passed to fastmcp until
:class:`~environment.mcp_front.SessionRegistry` has recorded it, so hot swaps still reach it
with ``notifications/tools/list_changed`` (a stateful session's connection has its standalone
channel from the start; the registry sees it on the first message fastmcp handles).
"""

from __future__ import annotations

import threading
import time
import weakref
from collections import OrderedDict
from typing import Any

import fastmcp
import pydantic_core
from fastmcp import FastMCP
from fastmcp.server.http import HostOriginGuardMiddleware
from fastmcp.tools import Tool
from mcp.shared.inbound import ERROR_CODE_HTTP_STATUS, X_MCP_HEADER_KEY, validate_mcp_param_headers
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from atoll.http import bearer_matches
from atoll.tool_listing import DIGEST_HEADER, digest_of_listing_json
from environment.gateway import Gateway, GatewayManager
from environment.mcp_front import SessionRegistry
from environment.mcp_wire import (
    HOT_METHODS,
    call_tool_reply,
    parse_hot_request,
    server_info_of,
    tools_list_result,
    wire_result,
)

#: A session's requests go through fastmcp at least this often (seconds): its idle clock and
#: its liveness are fastmcp's.
REFRESH_S = 60.0
#: The header naming the digest of the listing a request's session gets (atoll.tool_listing).
_DIGEST_HEADER = DIGEST_HEADER.encode()
#: Bodies larger than this go to fastmcp unread beyond this point (a hot request is small).
MAX_BODY_BYTES = 1 << 20

#: A session silent this long is dropped from the table (learned again if it is still alive).
_FORGET_AFTER_S = 3600.0


_SHARED_TOOL_LISTS = 64  # distinct configs whose tools/list is kept across gateways
#: (config, protocol version, server identity) -> tools/list JSON, shared by the environments of
#: a process (a local executor runs one per concurrent trial; each world has its own config)
_shared_tool_lists: OrderedDict[tuple[str, str, bytes], bytes] = OrderedDict()
#: tools/list JSON -> its digest, for the lists above (the same bytes object while shared)
_shared_digests: OrderedDict[bytes, bytes] = OrderedDict()
_shared_lock = threading.Lock()


def _shared_key(gateway: Gateway, version: str, server_info: Any) -> tuple[str, str, bytes] | None:
    """The key under which ``gateway``'s tools/list may be shared with later gateways of the
    same config: only when every server is one of ours, in-process, whose tools are a function
    of its config (a stdio or HTTP server may list other tools when it restarts)."""
    servers = gateway.config.mcpServers.values()
    if not servers or any(server.transport != "inprocess" for server in servers):
        return None
    return gateway.config.model_dump_json(), version, pydantic_core.to_json(server_info)


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
        self.server_info = server_info_of(server)
        self.token = token
        self.enabled = enabled
        self.mask_error_details = (
            fastmcp.settings.mask_error_details if mask_error_details is None else mask_error_details
        )
        #: requests answered here, by method (tests and benchmarks read it)
        self.answered: dict[str, int] = dict.fromkeys(HOT_METHODS, 0)
        #: session id -> monotonic time fastmcp last answered a request of that session
        self._sessions: dict[str, float] = {}
        #: gateway -> protocol version -> its tools/list result as JSON, as it goes on the wire
        self._tool_lists: weakref.WeakKeyDictionary[Gateway, dict[str, bytes]] = weakref.WeakKeyDictionary()
        #: gateway -> protocol version -> the digest of that tools/list (atoll.tool_listing)
        self._tool_digests: weakref.WeakKeyDictionary[Gateway, dict[str, bytes]] = weakref.WeakKeyDictionary()
        #: gateway -> tool name -> whether its input schema may route arguments by header
        self._header_routed: weakref.WeakKeyDictionary[Gateway, dict[str, bool]] = weakref.WeakKeyDictionary()

    def _learn(self, session_id: str) -> None:
        now = time.monotonic()
        if session_id not in self._sessions and len(self._sessions) % 256 == 255:
            # now and then, drop sessions long silent (one still alive is learned again)
            for stale in [sid for sid, seen in self._sessions.items() if now - seen > _FORGET_AFTER_S]:
                del self._sessions[stale]
        self._sessions[session_id] = now

    def _forget(self, session_id: str) -> None:
        self._sessions.pop(session_id, None)

    def tool_list_json(self, gateway: Gateway, version: str) -> bytes:
        """``gateway``'s ``tools/list`` result for ``version`` as JSON, exactly as it goes on the
        wire (sieved, stamped), built once per gateway and version: a gateway's tools never
        change, and the result does not depend on the request (no cursor is answered here)."""
        by_version = self._tool_lists.get(gateway)
        if by_version is None:
            by_version = self._tool_lists[gateway] = {}
        listed = by_version.get(version)
        if listed is None:
            # A gateway of our in-process servers is rebuilt for every trial (its world was
            # replaced) with the same tools: its list is built once per config.
            key = _shared_key(gateway, version, self.server_info)
            with _shared_lock:
                listed = _shared_tool_lists.get(key) if key is not None else None
            if listed is None:
                result = tools_list_result(gateway.tools.values(), version)
                wired = wire_result("tools/list", version, result, self.server_info)
                listed = pydantic_core.to_json(wired)
                if key is not None:
                    with _shared_lock:
                        _shared_tool_lists[key] = listed
                        while len(_shared_tool_lists) > _SHARED_TOOL_LISTS:
                            _shared_tool_lists.popitem(last=False)
            by_version[version] = listed
        return listed

    def tool_list_digest(self, gateway: Gateway, version: str) -> bytes:
        """The digest of ``gateway``'s ``tools/list`` for ``version`` (:mod:`atoll.tool_listing`),
        named in the header of every authorised ``/mcp`` reply so that a client holding that
        listing from an earlier session need not fetch it again. Computed once per gateway and
        version (for a gateway of our in-process servers, from the list shared by its config)."""
        by_version = self._tool_digests.get(gateway)
        if by_version is None:
            by_version = self._tool_digests[gateway] = {}
        digest = by_version.get(version)
        if digest is None:
            listed = self.tool_list_json(gateway, version)
            with _shared_lock:
                digest = _shared_digests.get(listed)
            if digest is None:
                digest = digest_of_listing_json(listed).encode()
                with _shared_lock:
                    _shared_digests[listed] = digest
                    while len(_shared_digests) > _SHARED_TOOL_LISTS:
                        _shared_digests.popitem(last=False)
            by_version[version] = digest
        return digest

    def routes_by_header(self, gateway: Gateway, tool: Tool) -> bool:
        """Whether ``tool``'s input schema carries an ``x-mcp-header`` annotation anywhere (then
        a 2026-era call's arguments are checked against the SDK's header rule on every call);
        without one the rule has nothing to check. Learned once per gateway and tool."""
        by_name = self._header_routed.get(gateway)
        if by_name is None:
            by_name = self._header_routed[gateway] = {}
        routed = by_name.get(tool.name)
        if routed is None:
            routed = by_name[tool.name] = X_MCP_HEADER_KEY.encode() in pydantic_core.to_json(tool.parameters)
        return routed


class FastMcpCalls:
    """ASGI middleware answering hot ``/mcp`` requests from the live gateway (see the module).

    It sits right behind the environment's Host/cross-site guard, ahead of FastAPI's own
    middleware stack and routing (``environment.app``); every request it does not answer goes
    on to ``app`` with its body intact.
    """

    def __init__(self, app: ASGIApp, *, fast_path: McpFastPath, path: str = "/mcp") -> None:
        self.app = app
        self.fast = fast_path
        self.paths = (path, path + "/")
        # The same guard (and configuration) fastmcp's http_app(host_origin_protection="auto")
        # puts in front of /mcp; here it only ever runs on requests this layer answers.
        self._host_guard = HostOriginGuardMiddleware(_allow, mode="auto")
        # Without an Origin header its verdict depends only on the Host header and the address
        # served, so an allowed pair is remembered (a few per deployment).
        self._hosts_allowed: set[tuple[bytes | None, Any]] = set()

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
        version = headers.protocol_version
        modern = session_id is None and version in MODERN_PROTOCOL_VERSIONS
        digest = self._listing_digest(headers) if method == "POST" else None
        if (
            method != "POST"
            or not (modern or (session_id is not None and version in HANDSHAKE_PROTOCOL_VERSIONS))
            or not headers.json_body
            or not headers.accepts_json
            or headers.repeated
            or (not modern and not self._session_is_hot(session_id))
        ):
            await self._pass(session_id, scope, receive, send, digest)
            return
        assert version is not None
        body, complete = await _read_body(receive)
        request = (
            parse_hot_request(body, version, scope["headers"], mcp_param_headers=headers.mcp_param)
            if complete
            else None
        )
        if (
            request is not None
            and fast.token is not None
            and not bearer_matches(headers.authorization, fast.token)
        ):
            request = None  # /mcp's own guard answers the 401
        tool = None
        gateway = fast.manager.current
        if request is not None and request.method == "tools/call":
            tool = gateway.tools.get(request.params["name"])
            if tool is None or not getattr(tool, "context_free", False):
                request = None  # unknown tools and those needing fastmcp's context: fastmcp's answer
            elif (
                modern
                and request.params.get("arguments")
                and fast.routes_by_header(gateway, tool)
                and validate_mcp_param_headers(tool.parameters, request.params["arguments"], {}) is not None
            ):
                request = None  # an argument the schema routes by header: fastmcp's rejection
        if request is None:
            await self._pass(session_id, scope, _replay(body, complete, receive), send, digest)
            return
        if not await self._guard_allows(headers, scope, receive, send):  # it sent the refusal
            return
        fast.answered[request.method] += 1
        reply_session = None if modern else session_id
        if request.method == "tools/list":
            # the same bytes as dumping {"jsonrpc", "id", "result"}, the result dumped once
            listed = fast.tool_list_json(gateway, version)
            body = (
                b'{"jsonrpc":"2.0","id":' + pydantic_core.to_json(request.id) + b',"result":' + listed + b"}"
            )
            await _send_json(send, 200, body, reply_session, digest)
            return
        assert tool is not None
        reply = await call_tool_reply(
            tool,
            request,
            version,
            server_info=fast.server_info,
            mask_error_details=fast.mask_error_details,
        )
        status = 200
        if "error" in reply and modern:
            status = ERROR_CODE_HTTP_STATUS.get(reply["error"]["code"], 200)
        await _send_json(send, status, pydantic_core.to_json(reply), reply_session, digest)

    def _listing_digest(self, headers: _Headers) -> bytes | None:
        """The digest of the tools/list this request's session gets (atoll.tool_listing), for
        the reply's header; None unless the request names a protocol version we serve and
        carries the bearer token ``/mcp`` requires."""
        version = headers.protocol_version
        if version not in HANDSHAKE_PROTOCOL_VERSIONS and version not in MODERN_PROTOCOL_VERSIONS:
            return None
        fast = self.fast
        if fast.token is not None and not bearer_matches(headers.authorization, fast.token):
            return None
        return fast.tool_list_digest(fast.manager.current, version)

    async def _guard_allows(self, headers: _Headers, scope: Scope, receive: Receive, send: Send) -> bool:
        """Whether fastmcp's Host/Origin guard lets the request through; when not, it has sent
        its refusal (421 or 403)."""
        if headers.has_origin:
            return await _guard_allows(self._host_guard, scope, receive, send)
        key = (headers.host, scope.get("server"))
        if key in self._hosts_allowed:
            return True
        allowed = await _guard_allows(self._host_guard, scope, receive, send)
        if allowed:
            if len(self._hosts_allowed) >= 64:
                self._hosts_allowed.clear()
            self._hosts_allowed.add(key)
        return allowed

    def _session_is_hot(self, session_id: str | None) -> bool:
        """Whether a request of this handshake-era session may be answered here (see the module)."""
        seen = self.fast._sessions.get(session_id) if session_id is not None else None
        if seen is None or time.monotonic() - seen > REFRESH_S:
            return False
        assert session_id is not None
        return self.fast.registry.can_notify(session_id)

    async def _pass(
        self, session_id: str | None, scope: Scope, receive: Receive, send: Send, digest: bytes | None = None
    ) -> None:
        """Hand the request to fastmcp, learning from its answer which sessions are live; a
        successful answer names ``digest`` (the session's listing) in its header."""
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
                    if digest is not None:
                        message = {
                            **message,
                            "headers": [*message.get("headers", ()), (_DIGEST_HEADER, digest)],
                        }
            await send(message)

        await self.app(scope, receive, watch)


_READ_HEADERS = frozenset(
    (
        b"host",
        b"origin",
        b"mcp-session-id",
        b"mcp-protocol-version",
        b"content-type",
        b"accept",
        b"authorization",
    )
)


class _Headers:
    """The request headers this layer reads, from one pass over the ASGI list."""

    __slots__ = (
        "session_id",
        "protocol_version",
        "json_body",
        "accepts_json",
        "authorization",
        "mcp_param",
        "host",
        "has_origin",
        "repeated",
    )

    def __init__(self, raw: list[tuple[bytes, bytes]]) -> None:
        self.session_id = self.protocol_version = self.authorization = None
        self.host: bytes | None = None
        self.json_body = self.accepts_json = self.mcp_param = self.has_origin = False
        # A header this layer reads given twice: which copy counts differs between readers
        # (fastmcp's Host guard reads the first), so such a request is fastmcp's to answer.
        self.repeated = False
        seen: set[bytes] = set()
        for name, value in raw:
            if name in _READ_HEADERS:
                if name in seen:
                    self.repeated = True
                seen.add(name)
            if name == b"host":
                self.host = value
            elif name == b"origin":
                self.has_origin = True
            elif name == b"mcp-session-id":
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
    chunks: list[bytes] = []
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


async def _send_json(
    send: Send, status: int, body: bytes, session_id: str | None, digest: bytes | None = None
) -> None:
    headers = [(b"content-length", str(len(body)).encode()), (b"content-type", b"application/json")]
    if session_id is not None:
        headers.append((b"mcp-session-id", session_id.encode("latin-1")))
    if digest is not None:
        headers.append((_DIGEST_HEADER, digest))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
