"""Many agents at once: 32 MCP sessions × 200 tool calls through the gateway, without an error."""

from __future__ import annotations

import asyncio

import pytest
from fastmcp import Client

SESSIONS = 32
CALLS = 200

pytestmark = pytest.mark.slow


def test_32_concurrent_sessions_of_200_calls_each(client, env_server):
    reply = client.post(
        "/apps", json={"mcpServers": {"alpha": {"server": "alpha"}, "beta": {"server": "beta"}}}
    )
    assert reply.status_code == 200

    async def session(index: int) -> list[str]:
        server = "alpha" if index % 2 else "beta"
        answers = []
        async with Client(env_server.mcp_url, timeout=60) as mcp:
            for call in range(CALLS):
                result = await mcp.call_tool(f"{server}_echo", {"text": f"{index}-{call}"})
                answers.append(result.content[0].text)
        return answers

    async def all_sessions() -> list[list[str]]:
        return await asyncio.gather(*(session(i) for i in range(SESSIONS)))

    results = asyncio.run(all_sessions())
    for index, answers in enumerate(results):
        server = "alpha" if index % 2 else "beta"
        assert answers == [f"{server}:{index}-{call}" for call in range(CALLS)]
    metrics = client.get("/metrics").text
    ok = sum(
        float(line.rsplit(" ", 1)[1])
        for line in metrics.splitlines()
        if line.startswith("atoll_env_tool_calls_total{") and 'outcome="ok"' in line
    )
    assert ok == SESSIONS * CALLS
    assert 'outcome="exception"' not in metrics and 'outcome="error"' not in metrics
