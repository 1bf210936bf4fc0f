"""The lean load generator of benchmarks/environment.py (its environment-capacity row): real MCP
sessions over raw HTTP/1.1 that count only calls the environment answered with a result, and
refuse every other reply, so it cannot report throughput for failed calls."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import httpx
import pytest

from environment import EnvironmentServer
from tests.benchmark_scripts import load_benchmark
from tests.environment.factories import world_settings

LIST_REPORTS = ("filesystem_list_files", {"path": "/Reports"})


bench = load_benchmark("environment")


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EnvironmentServer]:
    root = tmp_path_factory.mktemp("world")
    (root / "filesystem" / "Reports").mkdir(parents=True)
    (root / "filesystem" / "Reports" / "q3.txt").write_text("Q3 revenue: 4.2M\n")
    settings = world_settings(root)
    with EnvironmentServer(settings) as server:
        config = {"mcpServers": {"filesystem": {"transport": "inprocess", "server": "filesystem"}}}
        assert httpx.post(f"{server.url}/apps", json=config, timeout=60).status_code == 200
        yield server


def _served(env: EnvironmentServer, outcome: str) -> float:
    """How many list_files calls the environment's gateway counted with ``outcome`` so far."""
    metrics = httpx.get(f"{env.url}/metrics", timeout=10).text
    label = f'atoll_env_tool_calls_total{{outcome="{outcome}",server="filesystem",tool="list_files"}} '
    return sum(float(line[len(label) :]) for line in metrics.splitlines() if line.startswith(label))


@pytest.mark.parametrize("modern", [False, True], ids=["handshake-session", "2026-07-28"])
def test_it_counts_the_calls_the_environment_served(env, modern):
    before = _served(env, "ok")
    run = asyncio.run(
        bench.lean_load(env.mcp_url, *LIST_REPORTS, sessions=3, calls=12, warmup=2, modern=modern)
    )
    assert run.calls == 12 and len(run.timings) == 12 and all(t > 0 for t in run.timings)
    assert run.rate == run.calls / run.wall_s and run.env_cpu_s is None
    # every call reached the tool: the 2 warm-up calls of each of the 3 sessions and the 12 timed
    assert _served(env, "ok") - before == 3 * 2 + 12


def test_a_call_returns_the_tools_result(env):
    async def one_call() -> dict:
        async with bench.RawMcpSession(env.mcp_url) as session:
            assert session.session_id and session.protocol_version == bench.LOAD_HANDSHAKE_VERSION
            return await session.call_tool(*LIST_REPORTS)

    result = asyncio.run(one_call())
    assert result["isError"] is False and "q3.txt" in result["content"][0]["text"]


@pytest.mark.parametrize(
    "tool, arguments",
    [("filesystem_no_such_tool", {}), ("filesystem_list_files", {"path": "/Missing"})],
    ids=["unknown-tool", "tool-error"],
)
@pytest.mark.parametrize("warmup", [0, 3], ids=["failing-timed-call", "failing-warm-up"])
def test_an_error_reply_fails_the_run(env, tool, arguments, warmup):
    with pytest.raises(bench.LoadError, match="isError"):
        asyncio.run(bench.lean_load(env.mcp_url, tool, arguments, sessions=4, calls=8, warmup=warmup))


def test_a_session_the_environment_does_not_know_fails_the_run(env):
    async def call_with_a_stale_session() -> None:
        async with bench.RawMcpSession(env.mcp_url) as session:
            session.session_id = "0" * 32
            session._heads.clear()
            await session.call_tool(*LIST_REPORTS)

    with pytest.raises(bench.LoadError, match="HTTP 4"):
        asyncio.run(call_with_a_stale_session())


def _http(status: str, headers: dict[str, str], body: bytes, *, length: bool = True) -> bytes:
    if length:
        headers = {**headers, "content-length": str(len(body))}
    head = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
    return f"HTTP/1.1 {status}\r\n{head}\r\n".encode() + body


JSON = {"content-type": "application/json"}
RESULT = b'{"jsonrpc":"2.0","id":1,"result":{"content":[],"isError":false}}'

#: Answers to a tools/call (id 1) the generator must refuse: anything but an HTTP/1.1 JSON reply
#: with a Content-Length, on a connection kept alive, that is the successful result of the call.
BAD_REPLIES = {
    "chunked": _http(
        "200 OK", {**JSON, "transfer-encoding": "chunked"}, b"4\r\n{}{}\r\n0\r\n\r\n", length=False
    ),
    "sse": _http(
        "200 OK", {"content-type": "text/event-stream"}, b"event: message\ndata: " + RESULT + b"\n\n"
    ),
    "no-length": _http("200 OK", JSON, RESULT, length=False),
    "connection-close": _http("200 OK", {**JSON, "connection": "close"}, RESULT),
    "wrong-id": _http("200 OK", JSON, RESULT.replace(b'"id":1', b'"id":2')),
    "json-rpc-error": _http(
        "200 OK", JSON, b'{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"x"}}'
    ),
    "is-error": _http("200 OK", JSON, RESULT.replace(b"false", b"true")),
    "not-json": _http("200 OK", JSON, b"<html>"),
    "http-500": _http("500 Internal Server Error", JSON, b"{}"),
    "closed": b"",
}


def test_the_well_formed_reply_those_are_made_from_is_accepted():
    assert asyncio.run(_against_a_server_answering(_http("200 OK", JSON, RESULT))) == {
        "content": [],
        "isError": False,
    }


async def _against_a_server_answering(reply: bytes) -> dict:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(reply)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with bench.RawMcpSession(f"http://127.0.0.1:{port}/mcp", modern=True) as session:
            return await session.call_tool(*LIST_REPORTS)
    finally:
        server.close()


@pytest.mark.parametrize("reply", BAD_REPLIES.values(), ids=BAD_REPLIES.keys())
def test_a_reply_it_cannot_read_as_a_result_fails_loudly(reply):
    with pytest.raises(bench.LoadError):
        asyncio.run(_against_a_server_answering(reply))
