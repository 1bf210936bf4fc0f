"""What the agents send the model as tools stays within every provider's rules
(atoll/tool_schemas.py): portable parameters, at most 128 tools per request."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastmcp import FastMCP
from pydantic import ValidationError

from agents_runner import run_agent
from agents_runner.gateway import ToolSpec
from atoll.agent_config import AgentConfig
from atoll.testing.scripted_llm import ScriptedLLM
from atoll.tool_schemas import MAX_TOOLS, openai_tools_problems
from atoll.trajectory import RunStatus

from .conftest import ServedApp, call


def test_a_tool_from_another_server_is_made_portable_and_one_without_arguments_has_none():
    foreign = ToolSpec(
        "other_lookup",
        "Look up. " * 200,
        {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "key": {"anyOf": [{"type": "string"}, {"type": "null"}], "title": "Key"},
                "mode": {"$ref": "#/$defs/Mode"},
            },
            "$defs": {"Mode": {"type": "string", "enum": ["fast", "full"]}},
        },
    )
    sent = foreign.as_openai_tool()
    assert openai_tools_problems([sent]) == []
    assert sent["function"]["parameters"]["properties"] == {
        "key": {"type": "string"},
        "mode": {"type": "string", "enum": ["fast", "full"]},
    }
    bare = ToolSpec(
        "market_data_list_coverage", "What the world covers.", {"type": "object", "properties": {}}
    )
    assert bare.as_openai_tool() == {
        "type": "function",
        "function": {"name": "market_data_list_coverage", "description": "What the world covers."},
    }


def test_the_toolbelt_cannot_be_sized_past_128_tools_per_request():
    from agents_runner.agents.react_toolbelt import META_TOOLS, _Toolbelt

    largest = AgentConfig(toolbelt_size=MAX_TOOLS - len(META_TOOLS)).toolbelt_size
    with pytest.raises(ValidationError, match="toolbelt_size"):
        AgentConfig(toolbelt_size=largest + 1)
    available = [ToolSpec(f"s_t{i}", "d", {"type": "object", "properties": {}}) for i in range(200)]
    toolbelt = _Toolbelt(available, largest)
    for spec in available:
        toolbelt.add({"tool_name": spec.name})
    assert len(toolbelt.openai_tools()) == MAX_TOOLS
    assert openai_tools_problems(toolbelt.openai_tools()) == []


@pytest.fixture(scope="module")
def crowded_gateway() -> Iterator[str]:
    server = FastMCP("crowded")
    for index in range(MAX_TOOLS + 1):
        server.tool(lambda: "ok", name=f"s_tool{index}", description="one of many")
    with ServedApp(server.http_app(path="/mcp")) as served:
        yield f"http://127.0.0.1:{served.port}/mcp"


async def test_the_loop_agent_refuses_a_gateway_with_more_tools_than_a_request_takes(crowded_gateway):
    with ScriptedLLM([{"tool_calls": [call("s_tool0")]}, {"content": "done"}]) as llm:
        trajectory = await run_agent(
            model="openai/x",
            api_base=llm.api_base,
            api_key="x",
            gateway_url=crowded_gateway,
            prompt="p",
            agent="loop",
        )
    assert trajectory.status == RunStatus.error
    assert "gateway has 129 (at most 128 per request)" in trajectory.error.message
    assert llm.requests == []
