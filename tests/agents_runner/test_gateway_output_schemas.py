"""Tool results are checked against the tool's declared output schema in every session,
including sessions that reuse a validator another session compiled."""

from __future__ import annotations

import asyncio

import pytest
from fastmcp import FastMCP
from fastmcp.tools import ToolResult

from agents_runner.gateway import Gateway, GatewayUnavailable
from tests.served_app import ServedApp

SCHEMA = {"type": "object", "properties": {"count": {"type": "integer"}}, "required": ["count"]}


def _server() -> FastMCP:
    mcp = FastMCP("schemas")

    @mcp.tool(name="ledger_count", output_schema=SCHEMA)
    def count(honest: bool) -> ToolResult:
        """Count the ledger's rows."""
        value = 3 if honest else "three"
        return ToolResult(content=f"{value} rows", structured_content={"count": value})

    return mcp


async def _calls(url: str) -> list[str]:
    outcomes = []
    for _ in range(2):  # two sessions: the second reuses the first one's compiled validator
        async with Gateway(url) as gateway:
            outcomes.append((await gateway.call("ledger_count", {"honest": True}, timeout_s=30)).text)
            with pytest.raises(GatewayUnavailable, match="count"):
                await gateway.call("ledger_count", {"honest": False}, timeout_s=30)
    return outcomes


def test_every_session_refuses_a_result_that_breaks_the_tool_output_schema() -> None:
    with ServedApp(_server().http_app(path="/mcp")) as served:
        assert asyncio.run(_calls(f"{served.url}/mcp")) == ["3 rows", "3 rows"]
