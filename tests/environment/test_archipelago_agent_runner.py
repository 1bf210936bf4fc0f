"""The MCP calls of Archipelago's agent runner (``agents/runner``: ``loop_agent`` and
``react_toolbelt_agent``), reproduced against atoll's environment with real app servers.

The runner builds a FastMCP client from ``{"mcpServers": {"gateway": {"transport":
"streamable-http", "url": "<env>/mcp/", "headers": {"Authorization": "Bearer <token>"}}}}``,
lists the tools once, hands them to the model as OpenAI functions (name, description,
``inputSchema`` as parameters), then calls each through the client's raw MCP session
(``client.session.call_tool``) and puts the result's content blocks in the tool message; a
result without content is reported to the model as invalid. docs/environment.md
("Archipelago's agent runner") records a run of the runner itself against atoll.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from fastmcp import Client

from environment import EnvironmentServer, EnvironmentSettings
from tests.environment.factories import initialize_message

TOKEN = "runner-secret"
SERVERS = ("filesystem", "mail", "calendar", "chat")


@pytest.fixture
def world_env(settings: EnvironmentSettings) -> Any:
    settings = EnvironmentSettings(**{**settings.model_dump(), "mcp_token": TOKEN})
    (settings.fs_root / "Contracts").mkdir(parents=True)
    (settings.fs_root / "Contracts" / "supply.txt").write_text("9.2 Liability cap: $2,500,000.\n")
    settings.apps_data_root.mkdir(parents=True)
    with EnvironmentServer(settings) as env:
        config = {"mcpServers": {name: {"transport": "inprocess", "server": name} for name in SERVERS}}
        assert httpx.post(f"{env.url}/apps", json=config, timeout=120).status_code == 200
        yield env


def _gateway_config(url: str, token: str | None) -> dict[str, Any]:
    gateway: dict[str, Any] = {"transport": "streamable-http", "url": url}
    if token:
        gateway["headers"] = {"Authorization": f"Bearer {token}"}
    return {"mcpServers": {"gateway": gateway}}


def _text(result: Any) -> str:
    return " ".join(getattr(block, "text", "") for block in result.content)


def test_the_runners_tool_listing_and_calls_work(world_env: EnvironmentServer):
    async def run() -> tuple[list[dict[str, Any]], dict[str, Any]]:
        async with Client(_gateway_config(world_env.url + "/mcp/", TOKEN)) as client:
            listed = await client.list_tools()
            functions = [
                {
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description or "",
                        "parameters": t.inputSchema,
                    },
                }
                for t in listed
            ]
            # What the loop agent does with every tool it may call without arguments, and with one
            # it calls wrongly: the raw session (outputSchema checks of the SDK included).
            results = {}
            for tool in listed:
                if not tool.inputSchema.get("required"):
                    results[tool.name] = await client.session.call_tool(tool.name, {})
            results["read"] = await client.session.call_tool(
                "filesystem_read_text_file", {"file_path": "/Contracts/supply.txt"}
            )
            results["missing"] = await client.session.call_tool("filesystem_read_text_file", {})
            return functions, results

    functions, results = asyncio.run(run())
    names = [f["function"]["name"] for f in functions]
    assert len(names) == len(set(names)) and {n.split("_", 1)[0] for n in names} == set(SERVERS)
    assert all(f["function"]["parameters"].get("type") == "object" for f in functions)
    assert all(f["function"]["description"] for f in functions)
    no_argument_calls = {name: r for name, r in results.items() if name not in ("read", "missing")}
    assert {"filesystem_list_files", "mail_list_mails", "calendar_list_events"} <= no_argument_calls.keys()
    for name, result in no_argument_calls.items():
        assert result.content, name  # an empty content is "Call result is not valid" to the runner
    assert not results["read"].isError and "$2,500,000" in _text(results["read"])
    # A wrong call is a tool error with a reason the model can act on, not a protocol error
    # (which the runner would report as "Error calling tool" or, if fatal, end the run with).
    assert results["missing"].isError and "file_path" in _text(results["missing"])


@pytest.mark.parametrize("token", [None, "wrong"])
def test_the_runner_without_the_right_token_is_refused(world_env: EnvironmentServer, token: str | None):
    async def connect() -> None:
        async with Client(_gateway_config(world_env.url + "/mcp/", token)) as client:
            await client.list_tools()

    with pytest.raises(Exception, match="error response"):  # the client's words for the 401 below
        asyncio.run(connect())
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    initialize = initialize_message("archipelago-runner")
    reply = httpx.post(
        world_env.url + "/mcp/",
        json=initialize,
        timeout=30,
        headers={**headers, "Accept": "application/json, text/event-stream"},
    )
    assert reply.status_code == 401
