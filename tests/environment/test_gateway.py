"""The MCP gateway over real HTTP: aggregation, stable names, atomic hot swap, rollback, children."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time

import httpx
import pytest
from fastmcp import Client, Context, FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.server.middleware import Middleware

from environment import EnvironmentServer
from tests.environment.factories import RemoteMcpServer, initialize_message, make_test_server, stdio_entry

pytestmark = pytest.mark.slow  # stdio children import fastmcp (~1-2 s each)


def _apps(client: httpx.Client, servers: dict) -> httpx.Response:
    return client.post("/apps", json={"mcpServers": servers})


async def _call(url: str, tool: str, arguments: dict | None = None):
    async with Client(url) as mcp:
        return await mcp.call_tool(tool, arguments or {})


def _text(result) -> str:
    return result.content[0].text


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_inprocess_stdio_and_remote_servers_share_one_gateway(client, env_server, settings):
    (settings.fs_root / "Reports").mkdir()
    remote = FastMCP("remote")

    @remote.tool
    def ping() -> str:
        return "pong"

    with RemoteMcpServer(remote) as remote_server:
        reply = _apps(
            client,
            {
                "local": {"transport": "inprocess", "server": "local"},
                "child": stdio_entry(GREETING="hello"),
                "far": {"transport": "http", "url": remote_server.url},
            },
        )
        assert reply.status_code == 200, reply.text
        assert reply.json()["servers"] == ["local", "child", "far"]

        async def exercise():
            async with Client(env_server.mcp_url) as mcp:
                names = {tool.name for tool in await mcp.list_tools()}
                assert {"local_echo", "local_list_root", "child_echo", "child_pid", "far_ping"} <= names
                assert _text(await mcp.call_tool("local_echo", {"text": "x"})) == "local:x"
                assert _text(await mcp.call_tool("child_echo", {"text": "x"})) == "hello:x"
                assert _text(await mcp.call_tool("far_ping", {})) == "pong"
                # in-process servers get the environment's roots
                listed = await mcp.call_tool("local_list_root", {})
                assert listed.structured_content["result"] == ["Reports"]

        asyncio.run(exercise())
        listing = client.get("/apps").json()
        assert listing["servers"] == ["local", "child", "far"]
        assert {"name": "child_pid", "server": "child", "tool": "pid"}.items() <= next(
            t for t in listing["tools"] if t["name"] == "child_pid"
        ).items()
        assert listing["mcpServers"]["child"]["env"] == {"GREETING": "***"}  # secrets are not echoed


def test_identical_config_is_a_no_op_that_keeps_children(client, env_server):
    config = {"child": stdio_entry()}
    assert _apps(client, config).json()["changed"] is True
    pid = int(_text(asyncio.run(_call(env_server.mcp_url, "child_pid"))))
    again = _apps(client, config)
    assert again.status_code == 200 and again.json()["changed"] is False
    assert int(_text(asyncio.run(_call(env_server.mcp_url, "child_pid")))) == pid


def test_replaced_config_terminates_its_children(client, env_server):
    assert _apps(client, {"child": stdio_entry()}).status_code == 200
    pid = int(_text(asyncio.run(_call(env_server.mcp_url, "child_pid"))))
    assert _alive(pid)
    assert _apps(client, {"local": {"server": "local"}}).status_code == 200
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(pid), "the stdio child of the replaced config is still running"
    names = {t["name"] for t in client.get("/apps").json()["tools"]}
    assert "child_pid" not in names and "local_echo" in names


def test_failed_swap_names_every_failing_server_and_keeps_the_old_gateway(client, env_server):
    assert _apps(client, {"old": {"server": "old"}}).status_code == 200
    reply = _apps(
        client,
        {
            "good": {"server": "good"},
            "broken": {"server": "broken", "options": {"fail": "no licence"}},
            "missing": {"command": "/nonexistent/mcp-server-binary"},
            "crashing": {"command": sys.executable, "args": ["-c", "import sys; sys.exit(3)"]},
        },
    )
    assert reply.status_code == 503
    detail = reply.json()["detail"]
    assert detail["failed_servers"] == ["broken", "crashing", "missing"]
    assert "no licence" in detail["details"]["broken"]["error"]
    # the old gateway still serves, unchanged
    assert client.get("/apps").json()["servers"] == ["old"]
    assert _text(asyncio.run(_call(env_server.mcp_url, "old_echo", {"text": "still"}))) == "old:still"


def test_tool_name_collision_is_rejected_naming_both_servers(client, env_server):
    assert _apps(client, {"old": {"server": "old"}}).status_code == 200
    reply = _apps(
        client,
        {
            "a": {"server": "a", "options": {"extra_tools": ["b_echo"]}},  # a_b_echo
            "a_b": {"server": "a_b"},  # a_b_echo too
        },
    )
    assert reply.status_code == 400
    detail = reply.json()["detail"]
    assert "'a_b_echo'" in detail["error"] and "'a'" in detail["error"] and "'a_b'" in detail["error"]
    assert sorted(detail["failed_servers"]) == ["a", "a_b"]
    assert client.get("/apps").json()["servers"] == ["old"]


def test_in_flight_calls_finish_and_sessions_see_the_new_tools(client, env_server):
    assert _apps(client, {"first": {"server": "first"}}).status_code == 200

    async def scenario():
        async with (
            Client(env_server.mcp_url) as mcp,
            httpx.AsyncClient(base_url=env_server.url, timeout=60) as http,
        ):
            slow = asyncio.create_task(mcp.call_tool("first_slow", {"seconds": 1.0}))
            await asyncio.sleep(0.3)
            swap = await http.post("/apps", json={"mcpServers": {"second": {"server": "second"}}})
            assert swap.status_code == 200
            assert _text(await slow) == "done"  # the old gateway let it finish
            names = {tool.name for tool in await mcp.list_tools()}  # same session, new tools
            assert "second_echo" in names and "first_echo" not in names
            assert _text(await mcp.call_tool("second_echo", {"text": "y"})) == "second:y"
            with pytest.raises(ToolError, match="Unknown tool: 'first_echo'"):  # nothing stale is served
                await mcp.call_tool("first_echo", {"text": "y"})

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("json_response", "content_type"), [(True, "application/json"), (False, "text/event-stream")]
)
def test_mcp_answers_one_json_body_by_default_and_sse_when_configured(settings, json_response, content_type):
    settings.mcp_json_response = json_response
    headers = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}
    initialize = initialize_message()
    call = {
        "jsonrpc": "2.0",
        "id": 2,
        "method": "tools/call",
        "params": {"name": "first_echo", "arguments": {"text": "x"}},
    }
    with (
        EnvironmentServer(settings, server_factory=make_test_server) as env,
        httpx.Client(base_url=env.url, timeout=60) as http,
    ):
        assert _apps(http, {"first": {"server": "first"}}).status_code == 200
        opened = http.post("/mcp", json=initialize, headers=headers)
        assert opened.status_code == 200
        headers["mcp-session-id"] = opened.headers["mcp-session-id"]
        answer = http.post("/mcp", json=call, headers=headers)
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith(content_type)
    payload = answer.text if json_response else answer.text.split("data: ", 1)[1]
    assert json.loads(payload)["result"]["content"][0]["text"] == "first:x"


def test_a_server_that_never_initialises_times_out_by_name(settings):
    settings.ready_timeout_s = 2
    hang = {"command": sys.executable, "args": ["-c", "import time; time.sleep(60)"]}
    with (
        EnvironmentServer(settings, server_factory=make_test_server) as env,
        httpx.Client(base_url=env.url) as http,
    ):
        started = time.monotonic()
        reply = http.post("/apps", json={"mcpServers": {"sleepy": hang}}, timeout=30)
        assert reply.status_code == 503
        assert reply.json()["detail"]["details"]["sleepy"]["error"] == "not ready within 2 s"
        assert time.monotonic() - started < 10
        assert http.get("/health").status_code == 200


def test_bad_config_shapes_are_rejected(client):
    assert _apps(client, {"x": {"transport": "stdio"}}).status_code == 422  # stdio without command
    assert _apps(client, {"bad name!": {"server": "mail"}}).status_code == 422
    assert client.post("/apps", json={"servers": []}).status_code == 200  # no mcpServers = empty gateway


def test_same_config_rebuilds_a_gateway_whose_child_died(client, env_server):
    config = {"child": stdio_entry()}
    assert _apps(client, config).status_code == 200
    pid = int(_text(asyncio.run(_call(env_server.mcp_url, "child_pid"))))
    os.kill(pid, 9)
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    again = _apps(client, config)
    assert again.status_code == 200 and again.json()["changed"] is True
    new_pid = int(_text(asyncio.run(_call(env_server.mcp_url, "child_pid"))))
    assert new_pid != pid and _alive(new_pid)


def test_same_config_after_a_replaced_world_gets_fresh_servers(client, env_server):
    from tests.environment.factories import tar_gz

    config = {"child": stdio_entry()}
    assert _apps(client, config).status_code == 200
    pid = int(_text(asyncio.run(_call(env_server.mcp_url, "child_pid"))))
    archive = {"archive": ("w.tar.gz", tar_gz([("a.txt", b"1")]))}
    assert client.post("/data/populate", files=archive).status_code == 200  # merge: same world
    assert _apps(client, config).json()["changed"] is False
    assert client.post("/data/populate", params={"mode": "replace"}, files=archive).status_code == 200
    assert _apps(client, config).json()["changed"] is True  # a new world: no state carries over
    assert int(_text(asyncio.run(_call(env_server.mcp_url, "child_pid")))) != pid
    assert _apps(client, config).json()["changed"] is False


def test_in_process_tools_keep_their_server_middleware_and_context(settings):
    """Only tools marked self-contained skip their server's call path; others keep its middleware."""

    class Stamp(Middleware):
        async def on_call_tool(self, context, call_next):
            result = await call_next(context)
            result.content[0].text += " [stamped]"
            return result

    def factory(name: str, **_: object) -> FastMCP:
        server = FastMCP(name)
        server.add_middleware(Stamp())

        @server.tool
        async def whoami(ctx: Context) -> str:
            return f"served by {ctx.fastmcp.name}"

        return server

    with (
        EnvironmentServer(settings, server_factory=factory) as env,
        httpx.Client(base_url=env.url, timeout=60) as http,
    ):
        reply = _apps(http, {"custom": {"transport": "inprocess", "server": "custom"}})
        assert reply.status_code == 200, reply.text
        assert _text(asyncio.run(_call(env.mcp_url, "custom_whoami"))) == "served by custom [stamped]"
