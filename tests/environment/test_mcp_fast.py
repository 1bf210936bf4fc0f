"""The lean /mcp path (environment/mcp_fast.py): taken for hot requests, and indistinguishable
from fastmcp's own answers — results, errors, refusals — with sessions, swaps and guards intact."""

from __future__ import annotations

import asyncio
import base64
import io
import os
import time
from collections.abc import Iterator
from contextlib import AsyncExitStack, contextmanager
from pathlib import Path
from typing import Annotated, Any

import httpx
import pytest
from fastmcp import Client, FastMCP
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from pydantic import Field

from environment import EnvironmentServer, EnvironmentSettings
from environment.mcp_wire import error_reply
from mcp_servers import create_server
from mcp_servers._core.context import ServerContext
from mcp_servers._core.definition import ServerDefinition
from tests.environment.factories import world_settings

HANDSHAKE, MODERN = "2025-11-25", "2026-07-28"
_ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": MODERN,
    "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}

SLEEPY = ServerDefinition(name="sleepy", consolidated_name="sleepy")


@SLEEPY.tool(read_only=True)
async def nap(ctx: ServerContext, seconds: float) -> str:
    """Sleep, then answer (a call still in flight while the gateway is swapped)."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


REGIONAL = ServerDefinition(name="regional", consolidated_name="regional")


@REGIONAL.tool(read_only=True)
async def echo_region(
    ctx: ServerContext, region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]
) -> str:
    """Answer the region (an argument a 2026-era client also sends as an ``Mcp-Param-Region`` header)."""
    return region


def _factory(
    name: str, *, fs_root: Path, apps_data_root: Path, mode: str = "individual", options=None, **_: Any
):
    if name in ("sleepy", "regional"):
        from mcp_servers._core.build import build_server

        definition = SLEEPY if name == "sleepy" else REGIONAL
        return build_server(definition, ServerContext.create(fs_root, apps_data_root, {}), mode=mode)
    return create_server(
        name, fs_root=fs_root, apps_data_root=apps_data_root, mode=mode, options=options or {}
    )


def _png() -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.new("RGB", (4, 3), (200, 10, 10)).save(buffer, format="PNG")
    return buffer.getvalue()


def _settings(root: Path, **overrides: Any) -> EnvironmentSettings:
    fs_root = root / "filesystem"
    (fs_root / "Reports").mkdir(parents=True, exist_ok=True)
    (fs_root / "Reports" / "q3.txt").write_text("revenue up\n")
    (fs_root / "chart.png").write_bytes(_png())
    for path in (fs_root / "Reports" / "q3.txt", fs_root / "chart.png", fs_root / "Reports"):
        os.utime(path, (1_700_000_000, 1_700_000_000))  # both environments list the same times
    return world_settings(root, **overrides)


@contextmanager
def _environment(
    root: Path, servers: tuple[str, ...] = ("filesystem",), **overrides: Any
) -> Iterator[EnvironmentServer]:
    with EnvironmentServer(_settings(root, **overrides), server_factory=_factory) as env:
        _apply(env, servers)
        yield env


def _apply(env: EnvironmentServer, servers: tuple[str, ...]) -> None:
    config = {"mcpServers": {name: {"transport": "inprocess", "server": name} for name in servers}}
    reply = httpx.post(f"{env.url}/apps", json=config, timeout=60)
    assert reply.status_code == 200, reply.text


def _answered(env: EnvironmentServer) -> dict[str, int]:
    return dict(env.app.state.plane.fast_path.answered)


class _RawSession:
    """A hand-driven MCP client over plain HTTP, to compare replies as they are on the wire.

    ``version`` picks the era: a handshake-era one (``initialize``, then ``Mcp-Session-Id``) or
    2026-07-28 (no session; each request carries its envelope in ``_meta`` and routing headers),
    which fastmcp's ``Client`` speaks by default."""

    def __init__(self, http: httpx.Client, url: str, version: str = HANDSHAKE) -> None:
        self.http, self.url, self.version = http, url, version
        self.modern = version == MODERN
        self.next_id = 0
        self.session_id: str | None = None
        if not self.modern:
            init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": _init_params()}
            reply = self.post(init, session=False)
            assert reply.status_code == 200, reply.text
            self.session_id = reply.headers["mcp-session-id"]
            assert self.post({"jsonrpc": "2.0", "method": "notifications/initialized"}).status_code == 202

    def headers(self, session: bool = True) -> dict[str, str]:
        headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
        if session:
            headers["mcp-protocol-version"] = self.version
            if self.session_id is not None:
                headers["mcp-session-id"] = self.session_id
        return headers

    def post(self, message: Any, *, session: bool = True, **extra: str) -> httpx.Response:
        headers = self.headers(session)
        if self.modern and isinstance(message, dict) and "method" in message:
            headers["mcp-method"] = message["method"]
            name = (message.get("params") or {}).get("name")
            if message["method"] == "tools/call" and isinstance(name, str):
                headers["mcp-name"] = name
        return self.http.post(self.url, json=message, headers={**headers, **extra})

    def request(self, method: str, params: dict | None = None) -> httpx.Response:
        self.next_id += 1
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id, "method": method}
        if self.modern:
            params = dict(params or {})
            params["_meta"] = {**_ENVELOPE, **params.get("_meta", {})}
        if params is not None:
            message["params"] = params
        return self.post(message)


def _init_params() -> dict[str, Any]:
    return {"protocolVersion": HANDSHAKE, "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}


#: Requests whose replies must be the same on both paths: listing, a result with structured
#: content, one with an image, tool errors (missing file, bad and missing arguments), an unknown
#: tool, and requests the fast path leaves to fastmcp (a cursor, _meta, malformed params).
HOT_REQUESTS: list[tuple[str, dict | None]] = [
    ("tools/list", None),
    ("tools/list", {}),
    ("tools/call", {"name": "filesystem_list_files", "arguments": {"path": "/Reports"}}),
    ("tools/call", {"name": "filesystem_read_text_file", "arguments": {"file_path": "/Reports/q3.txt"}}),
    ("tools/call", {"name": "filesystem_read_image_file", "arguments": {"file_path": "/chart.png"}}),
    ("tools/call", {"name": "filesystem_read_text_file", "arguments": {"file_path": "/missing.txt"}}),
    ("tools/call", {"name": "filesystem_list_files", "arguments": {"path": 7}}),
    ("tools/call", {"name": "filesystem_read_text_file", "arguments": {}}),
    ("tools/call", {"name": "filesystem_read_text_file"}),
    ("tools/call", {"name": "no_such_tool", "arguments": {}}),
    (
        "tools/call",
        {"name": "filesystem_list_files", "arguments": {"path": "/"}, "_meta": {"progressToken": 3}},
    ),
    (
        "tools/call",
        {
            "name": "filesystem_list_files",
            "arguments": {"path": "/"},
            "_meta": {"traceparent": "00-ab-cd-01"},
        },
    ),
    ("tools/call", {"arguments": {}}),
    ("tools/list", {"cursor": "nonsense"}),
]


def _replies(env: EnvironmentServer, version: str) -> list[tuple[int, str, Any]]:
    with httpx.Client(timeout=60) as http:
        raw = _RawSession(http, env.mcp_url, version)
        replies = []
        for method, params in HOT_REQUESTS:
            reply = raw.request(method, params)
            replies.append((reply.status_code, reply.headers["content-type"], reply.json()))
        return replies


@pytest.mark.parametrize("version", [HANDSHAKE, MODERN])
def test_hot_requests_are_answered_exactly_as_fastmcp_answers_them(tmp_path, version):
    with _environment(tmp_path / "slow", mcp_fast_path=False) as env:
        slow = _replies(env, version)
        assert _answered(env) == {"tools/call": 0, "tools/list": 0}
    with _environment(tmp_path / "fast") as env:
        fast = _replies(env, version)
        # the two listings and the eight calls of our tools; the rest went to fastmcp
        assert _answered(env) == {"tools/call": 8, "tools/list": 2}
    for (method, params), slow_reply, fast_reply in zip(HOT_REQUESTS, slow, fast, strict=True):
        assert fast_reply == slow_reply, (method, params)
    image = fast[4][2]["result"]["content"][1]
    assert image["type"] == "image" and base64.b64decode(image["data"]).startswith(b"\x89PNG")
    assert fast[5][2]["result"]["isError"] is True


def test_both_sdk_clients_are_served_by_the_fast_path(tmp_path):
    async def with_fastmcp(url: str) -> list[str]:
        async with Client(url) as mcp:
            names = [tool.name for tool in await mcp.list_tools()]
            texts = [(await mcp.call_tool("filesystem_list_files", {"path": "/Reports"})).content[0].text]
            for _ in range(9):
                texts.append(
                    (await mcp.call_tool("filesystem_list_files", {"path": "/Reports"})).content[0].text
                )
            assert len(set(texts)) == 1 and "q3.txt" in texts[0]
            return names

    async def with_sdk(url: str) -> list[str]:
        async with AsyncExitStack() as stack:
            read, write, *_ = await stack.enter_async_context(streamable_http_client(url))
            session = await stack.enter_async_context(ClientSession(read, write))
            await session.initialize()
            names = [tool.name for tool in (await session.list_tools()).tools]
            for _ in range(10):
                result = await session.call_tool(
                    "filesystem_read_text_file", {"file_path": "/Reports/q3.txt"}
                )
                assert not result.is_error and "revenue up" in result.content[0].text
            return names

    with _environment(tmp_path) as env:
        for client in (with_fastmcp, with_sdk):
            before = _answered(env)
            names = asyncio.run(client(env.mcp_url))
            assert "filesystem_list_files" in names
            after = _answered(env)
            # a client that opened its GET stream is passed to fastmcp until the session registry
            # has seen that stream; after that every call is answered here
            assert after["tools/call"] - before["tools/call"] >= 8, client.__name__


def test_a_session_never_initialised_or_ended_is_refused_as_fastmcp_refuses_it(tmp_path):
    def refusals(env: EnvironmentServer) -> list[tuple[int, Any]]:
        with httpx.Client(timeout=60) as http:
            raw = _RawSession(http, env.mcp_url)
            call = {"name": "filesystem_list_files", "arguments": {"path": "/"}}
            assert raw.request("tools/call", call).status_code == 200
            message = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": call}
            invented = raw.post(message, **{"mcp-session-id": "0" * 32})
            assert http.delete(env.mcp_url, headers=raw.headers()).status_code == 200
            ended = raw.post(message)
            return [(reply.status_code, reply.json()) for reply in (invented, ended)]

    with _environment(tmp_path / "slow", mcp_fast_path=False) as env:
        slow = refusals(env)
    with _environment(tmp_path / "fast") as env:
        fast = refusals(env)
        assert _answered(env)["tools/call"] == 1
    assert fast == slow
    assert [status for status, _ in fast] == [404, 404]


def test_guards_refuse_hot_requests_as_before(tmp_path):
    def refusals(env: EnvironmentServer) -> list[tuple[int, str]]:
        with httpx.Client(timeout=60) as http:
            http.headers["authorization"] = "Bearer secret-token"
            raw = _RawSession(http, env.mcp_url)
            call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "filesystem_list_files", "arguments": {"path": "/"}}}  # fmt: skip
            assert raw.post(call).status_code == 200
            no_token = raw.post(call, authorization="Bearer wrong")
            foreign_origin = raw.post(call, origin="http://evil.example")
            foreign_host = raw.post(call, host="evil.example")
            return [(reply.status_code, reply.text) for reply in (no_token, foreign_origin, foreign_host)]

    with _environment(tmp_path / "slow", mcp_fast_path=False, mcp_token="secret-token") as env:
        slow = refusals(env)
    with _environment(tmp_path / "fast", mcp_token="secret-token") as env:
        fast = refusals(env)
        assert _answered(env)["tools/call"] == 1
    assert fast == slow
    assert [status for status, _ in fast] == [401, 403, 421]


def test_a_call_whose_header_routed_argument_lacks_its_header_is_left_to_fastmcp(tmp_path):
    # A tool whose schema routes an argument by header (x-mcp-header): a 2026-era call whose
    # Mcp-Param header is missing or disagrees is fastmcp's to judge (the SDK's header rule);
    # only one that agrees is answered here. (fastmcp applies the rule to tools it has listed
    # itself, so without a listing through it both paths answer the call.)
    def replies(env: EnvironmentServer) -> list[tuple[int, Any]]:
        with httpx.Client(timeout=60) as http:
            raw = _RawSession(http, env.mcp_url, MODERN)
            answers = []
            for header in (None, "us", "eu"):
                raw.next_id += 1
                message = {"jsonrpc": "2.0", "id": raw.next_id, "method": "tools/call",
                           "params": {"name": "regional_echo_region", "arguments": {"region": "eu"},
                                      "_meta": _ENVELOPE}}  # fmt: skip
                reply = raw.post(message, **({"mcp-param-region": header} if header else {}))
                answers.append((reply.status_code, reply.json()))
            return answers

    with _environment(tmp_path / "slow", servers=("regional",), mcp_fast_path=False) as env:
        slow = replies(env)
    with _environment(tmp_path / "fast", servers=("regional",)) as env:
        fast = replies(env)
        assert _answered(env)["tools/call"] == 0  # a Mcp-Param header always goes to fastmcp
        with httpx.Client(timeout=60) as http:
            raw = _RawSession(http, env.mcp_url, MODERN)
            call = {"name": "regional_echo_region", "arguments": {"region": "eu"}}
            assert raw.request("tools/call", call).status_code == 200
        assert _answered(env)["tools/call"] == 0  # missing header: not answered here either
    assert fast == slow
    assert fast[2][0] == 200 and fast[2][1]["result"]["content"][0]["text"] == "eu"


def test_hot_requests_skip_fastapis_middleware_stack_and_the_rest_still_enter_it(tmp_path):
    # The lean path sits ahead of FastAPI's own layers (telemetry, body limit, 500 handler):
    # a hot call never enters them, anything else (fastmcp's requests, the routes) still does.
    with _environment(tmp_path) as env, httpx.Client(timeout=60) as http:
        assert http.get(f"{env.url}/health").status_code == 200  # FastAPI's stack is built
        entered: list[str] = []
        stack = env.app.middleware_stack

        async def counting(scope, receive, send):
            entered.append(f"{scope.get('method')} {scope['path']}")
            await stack(scope, receive, send)

        env.app.middleware_stack = counting
        raw = _RawSession(http, env.mcp_url)
        assert len(entered) == 2  # initialize and its notification: fastmcp's
        reply = raw.request(
            "tools/call", {"name": "filesystem_list_files", "arguments": {"path": "/Reports"}}
        )
        assert reply.status_code == 200 and not reply.json()["result"]["isError"]
        assert raw.request("tools/list").status_code == 200
        assert _answered(env) == {"tools/call": 1, "tools/list": 1}
        assert len(entered) == 2
        assert http.get(f"{env.url}/health").status_code == 200
        assert http.get(f"{env.url}/", headers={"host": "evil.example"}).status_code == 421  # guard first
        assert entered[2:] == ["GET /health"]


def _raw_post(url: str, message: Any, headers: list[tuple[str, str]]) -> int:
    """POST ``message`` with exactly these header lines (repeats kept); the reply's status."""
    import json
    import socket
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    body = json.dumps(message).encode()
    lines = [f"POST {parts.path} HTTP/1.1", *(f"{k}: {v}" for k, v in headers)]
    lines += [f"content-length: {len(body)}", "connection: close", "", ""]
    with socket.create_connection((parts.hostname, parts.port), timeout=60) as sock:
        sock.sendall("\r\n".join(lines).encode("latin-1") + body)
        reply = b""
        while chunk := sock.recv(65536):
            reply += chunk
    return int(reply.split(b" ", 2)[1])


def test_a_repeated_host_header_is_left_to_fastmcp_and_does_not_open_the_host_check(tmp_path):
    # fastmcp's Host guard reads the first Host header; a layer reading the last one and
    # remembering its verdict would later let that other host through on its own.
    def answers(env: EnvironmentServer) -> list[int]:
        with httpx.Client(timeout=60) as http:
            raw = _RawSession(http, env.mcp_url)
            call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                    "params": {"name": "filesystem_list_files", "arguments": {"path": "/"}}}  # fmt: skip
            first = [
                raw.post(call, host="localhost").status_code,
                raw.post(call, host="192.168.9.9").status_code,
            ]
            # httpx refuses to send two Host headers; an attacker's client does not.
            hosts = [("host", "localhost"), ("host", "192.168.9.9")]
            two_hosts = _raw_post(env.mcp_url, call, [*raw.headers().items(), *hosts])
            return [*first, two_hosts, raw.post(call, host="192.168.9.9").status_code]

    with _environment(tmp_path / "slow", mcp_fast_path=False) as env:
        slow = answers(env)
    with _environment(tmp_path / "fast") as env:
        fast = answers(env)
    assert fast == slow
    assert fast[1] == fast[3] == 421


def test_a_hot_swap_lets_fast_calls_in_flight_finish_and_lists_the_new_tools(tmp_path):
    with _environment(tmp_path, servers=("sleepy",)) as env, httpx.Client(timeout=60) as http:
        raw = _RawSession(http, env.mcp_url)
        names = {tool["name"] for tool in raw.request("tools/list").json()["result"]["tools"]}
        assert names == {"sleepy_nap"}

        async def call_during_swap() -> tuple[httpx.Response, float]:
            async with httpx.AsyncClient(timeout=60) as async_http:
                message = {"jsonrpc": "2.0", "id": 50, "method": "tools/call",
                           "params": {"name": "sleepy_nap", "arguments": {"seconds": 1.0}}}  # fmt: skip
                call = asyncio.ensure_future(
                    async_http.post(env.mcp_url, json=message, headers=raw.headers())
                )
                await asyncio.sleep(0.3)  # the call is running in the old gateway
                started = time.monotonic()
                await asyncio.to_thread(_apply, env, ("filesystem",))
                return await call, time.monotonic() - started

        reply, swap_s = asyncio.run(call_during_swap())
        assert reply.status_code == 200
        assert reply.json()["result"]["content"][0]["text"] == "slept 1.0"
        assert swap_s >= 0.5  # the swap waited for the call in flight before closing the old gateway
        names = {tool["name"] for tool in raw.request("tools/list").json()["result"]["tools"]}
        assert "filesystem_list_files" in names and "sleepy_nap" not in names
        gone = raw.request("tools/call", {"name": "sleepy_nap", "arguments": {"seconds": 0}}).json()
        assert gone["result"] == {
            "content": [{"type": "text", "text": "Unknown tool: 'sleepy_nap'"}],
            "isError": True,
        }
        assert _answered(env) == {"tools/call": 1, "tools/list": 2}


@pytest.mark.parametrize("masked", [False, True])
def test_a_raising_tool_is_reported_as_fastmcp_reports_it(masked):
    server = FastMCP("raising", mask_error_details=masked)

    @server.tool
    def explode() -> str:
        raise RuntimeError("boom")

    async def via_fastmcp() -> Any:
        async with Client(server) as mcp:
            return await mcp.call_tool("explode", {}, raise_on_error=False)

    expected = asyncio.run(via_fastmcp())
    ours = error_reply("explode", RuntimeError("boom"), masked)
    assert ours.is_error and expected.is_error
    assert ours.content[0].text == expected.content[0].text


def test_a_session_with_a_get_stream_is_still_told_of_a_swap_while_its_calls_are_fast(tmp_path):
    async def session_sees_swap(env: EnvironmentServer) -> tuple[int, int, list[str]]:
        changed = asyncio.Event()

        async def on_message(message: object) -> None:
            if (
                "tools/list_changed" in repr(message)
                or type(message).__name__ == "ToolListChangedNotification"
            ):
                changed.set()

        async with AsyncExitStack() as stack:
            read, write, *_ = await stack.enter_async_context(streamable_http_client(env.mcp_url))
            session = await stack.enter_async_context(ClientSession(read, write, message_handler=on_message))
            await session.initialize()
            await asyncio.sleep(0.2)  # the client opens its standalone GET stream
            for _ in range(5):
                assert not (await session.call_tool("filesystem_list_files", {"path": "/"})).is_error
            before_swap = _answered(env)["tools/call"]
            await asyncio.to_thread(_apply, env, ("sleepy",))
            await asyncio.wait_for(changed.wait(), 10)
            names = sorted(tool.name for tool in (await session.list_tools()).tools)
            assert (await session.call_tool("sleepy_nap", {"seconds": 0})).content[0].text == "slept 0.0"
            return before_swap, _answered(env)["tools/call"], names

    with _environment(tmp_path) as env:
        before_swap, after_swap, names = asyncio.run(session_sees_swap(env))
    assert before_swap >= 3  # the first call after the GET stream may go to fastmcp, the rest not
    assert after_swap == before_swap + 1
    assert names == ["sleepy_nap"]


def test_a_session_is_passed_to_fastmcp_once_its_refresh_interval_is_over(tmp_path, monkeypatch):
    import environment.mcp_fast

    with _environment(tmp_path) as env, httpx.Client(timeout=60) as http:
        raw = _RawSession(http, env.mcp_url)
        call = {"name": "filesystem_list_files", "arguments": {"path": "/"}}
        assert raw.request("tools/call", call).status_code == 200
        assert _answered(env)["tools/call"] == 1
        monkeypatch.setattr(environment.mcp_fast, "REFRESH_S", 0.0)
        time.sleep(0.01)
        assert raw.request("tools/call", call).json()["result"]["isError"] is False
        assert _answered(env)["tools/call"] == 1  # fastmcp answered (and saw the session)
        monkeypatch.setattr(environment.mcp_fast, "REFRESH_S", 60.0)
        assert raw.request("tools/call", call).status_code == 200
        assert _answered(env)["tools/call"] == 2


def test_a_get_stream_opened_after_fast_calls_still_hears_of_a_swap(tmp_path):
    """The stream is opened only after calls the fast path answered; the session registry
    recorded the session when fastmcp handled its first messages, so the swap reaches it."""

    async def scenario(env: EnvironmentServer, raw: _RawSession) -> list[str]:
        call = {"name": "filesystem_list_files", "arguments": {"path": "/"}}
        heard: list[str] = []
        async with httpx.AsyncClient(timeout=30) as http:
            stream_headers = {**raw.headers(), "accept": "text/event-stream"}
            async with http.stream("GET", env.mcp_url, headers=stream_headers) as stream:
                assert stream.status_code == 200

                async def listen() -> None:
                    async for line in stream.aiter_lines():
                        if "tools/list_changed" in line:
                            heard.append(line)
                            return

                listener = asyncio.ensure_future(listen())
                await asyncio.sleep(0.2)
                assert (await asyncio.to_thread(raw.request, "tools/call", call)).status_code == 200
                await asyncio.to_thread(_apply, env, ("sleepy",))
                await asyncio.wait_for(listener, 10)
        return heard

    with _environment(tmp_path) as env, httpx.Client(timeout=60) as http:
        raw = _RawSession(http, env.mcp_url)
        call = {"name": "filesystem_list_files", "arguments": {"path": "/"}}
        for _ in range(3):
            assert raw.request("tools/call", call).status_code == 200
        assert _answered(env)["tools/call"] == 3
        heard = asyncio.run(scenario(env, raw))
        assert heard
        assert _answered(env)["tools/call"] == 4


def test_a_session_the_registry_has_not_recorded_is_left_to_fastmcp(tmp_path, monkeypatch):
    from environment.mcp_front import SessionRegistry

    monkeypatch.setattr(SessionRegistry, "can_notify", lambda self, session_id: False)
    with _environment(tmp_path) as env, httpx.Client(timeout=60) as http:
        raw = _RawSession(http, env.mcp_url)
        for _ in range(3):
            reply = raw.request("tools/call", {"name": "filesystem_list_files", "arguments": {"path": "/"}})
            assert reply.json()["result"]["isError"] is False
        assert _answered(env)["tools/call"] == 0  # a swap could not reach it: fastmcp serves it


def test_sse_answers_send_every_request_through_fastmcp(tmp_path):
    """Streamed answers forward a tool's progress notifications; the lean path has none to send."""
    with _environment(tmp_path, mcp_json_response=False) as env, httpx.Client(timeout=60) as http:
        raw = _RawSession(http, env.mcp_url)
        reply = raw.request("tools/call", {"name": "filesystem_list_files", "arguments": {"path": "/"}})
        assert reply.status_code == 200 and reply.headers["content-type"].startswith("text/event-stream")
        assert _answered(env) == {"tools/call": 0, "tools/list": 0}


def test_a_gateway_rebuilt_with_the_same_servers_lists_the_same_tools_and_another_config_its_own(tmp_path):
    """tools/list of in-process servers is shared between gateways of one config (a trial's
    gateway is rebuilt for every world), and never served for another config."""
    world = tmp_path / "world.tar.gz"
    with _environment(tmp_path) as env, httpx.Client(timeout=60) as http:

        def listed() -> bytes:
            return _RawSession(http, env.mcp_url).request("tools/list").content

        def replace_world() -> None:  # a new trial: the next /apps builds a new gateway
            import tarfile

            with tarfile.open(world, "w:gz") as tar:
                tar.addfile(tarfile.TarInfo("filesystem"))
            with world.open("rb") as archive:
                answer = http.post(
                    f"{env.url}/data/populate",
                    params={"subsystem": "world", "mode": "replace"},
                    files={"archive": ("w.tar.gz", archive)},
                )
            assert answer.status_code == 200, answer.text

        first = listed()
        replace_world()
        _apply(env, ("filesystem",))
        assert listed() == first
        _apply(env, ("filesystem", "sleepy"))
        both = listed()
        assert b"sleepy_nap" in both and b"filesystem_list_files" in both
        replace_world()
        _apply(env, ("filesystem",))
        assert listed() == first and b"sleepy_nap" not in first
