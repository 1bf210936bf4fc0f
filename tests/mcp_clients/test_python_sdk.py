"""The official MCP Python SDK client (``mcp``) against every tool atoll serves.

The SDK validates each successful result against the tool's outputSchema itself (and raises
when it does not match); error results are checked here with ``jsonschema`` too, since other
clients (the TypeScript SDK) validate those as well.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from jsonschema import Draft202012Validator
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from atoll import __version__
from atoll.tool_schemas import tool_problems
from mcp_servers import SERVER_NAMES, get_definition
from tests.mcp_clients.conftest import sample_calls


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$ref"]] if isinstance(node.get("$ref"), str) else []
        return found + [ref for value in node.values() for ref in _refs(value)]
    if isinstance(node, list):
        return [ref for item in node for ref in _refs(item)]
    return []


async def _with_session(url: str, work: Any) -> Any:
    async with streamable_http_client(url) as (read, write, *_), ClientSession(read, write) as session:
        init = await session.initialize()
        return await work(session, init)


def test_every_tool_declares_a_portable_output_schema(all_apps_env):
    async def work(session: ClientSession, init: Any) -> list[Any]:
        assert (init.server_info.name, init.server_info.version) == ("atoll-environment", __version__)
        return (await session.list_tools()).tools

    tools = asyncio.run(_with_session(all_apps_env.mcp_url, work))
    individual = sum(len(get_definition(name).tools) for name in SERVER_NAMES)
    assert len(tools) == individual + 2 * len(SERVER_NAMES)
    for tool in tools:
        for label, schema in (("input", tool.input_schema), ("output", tool.output_schema)):
            assert schema is not None, f"{tool.name}: no {label} schema"
            Draft202012Validator.check_schema(schema)
            text = json.dumps(schema)
            assert "discriminator" not in text, f"{tool.name}: {label} schema keeps an OpenAPI discriminator"
            defs = schema.get("$defs", {})
            for ref in _refs(schema):
                assert ref.startswith("#/$defs/") and ref.split("/")[-1] in defs, (
                    f"{tool.name}: dangling {ref}"
                )
        assert tool.output_schema["type"] == "object"
    # as the gateway names and serves them, every input passes every model provider's rules
    problems = [
        str(p) for tool in tools for p in tool_problems(tool.name, tool.description, tool.input_schema)
    ]
    assert problems == []


def test_every_result_validates_against_its_output_schema(all_apps_env):
    calls = sample_calls()
    answered = dict(all_apps_env.app.state.plane.fast_path.answered)

    async def work(session: ClientSession, init: Any) -> list[tuple[dict, Any, dict]]:
        schemas = {tool.name: tool.output_schema for tool in (await session.list_tools()).tools}
        done = []
        for call in calls:
            # Raises RuntimeError when a successful result does not match the tool's schema.
            result = await session.call_tool(call["name"], call["arguments"])
            done.append((call, result, schemas[call["name"]]))
        return done

    for call, result, schema in asyncio.run(_with_session(all_apps_env.mcp_url, work)):
        assert result.is_error == call.get("expect_error", False), (call["name"], result.content)
        assert result.structured_content is not None, call["name"]
        Draft202012Validator(schema).validate(result.structured_content)
        if result.is_error:
            assert set(result.structured_content["error"]) >= {"code", "message"}
    # the lean /mcp path served the listing and the calls (environment/mcp_fast.py)
    served = all_apps_env.app.state.plane.fast_path.answered
    assert served["tools/list"] > answered["tools/list"]
    assert served["tools/call"] - answered["tools/call"] == len(calls)
