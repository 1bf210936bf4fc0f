"""Every tool's structured content comes from a typed result model, checked when it is sent."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fastmcp import Client

from atoll import __version__
from mcp_servers import SERVER_NAMES, create_server, get_definition, register_server, unregister_server
from mcp_servers._core import ServerDefinition, ToolOutput
from mcp_servers._core.outputs import ResultModel, error_schema, portable


@pytest.mark.parametrize("server", SERVER_NAMES)
def test_every_builtin_tool_names_a_result_model(server: str):
    for tool in get_definition(server).tools:
        assert tool.result_model is not None, (
            f"{server}.{tool.name} returns {tool.returns!r}, not a result model"
        )
        assert tool.output_schema["anyOf"][-1] == error_schema()


class Greeting(ResultModel):
    greeting: str
    count: int


def _toy_server(name: str) -> ServerDefinition:
    definition = ServerDefinition(name, consolidated_name=name)

    @definition.tool
    def good(state: Any) -> Greeting:
        """A dict that fits the model."""
        return {"greeting": "hi", "count": 2, "extra": [1]}  # type: ignore[return-value]

    @definition.tool
    def wrapped(state: Any) -> ToolOutput[Greeting]:
        """The same, through ToolOutput."""
        return ToolOutput({"greeting": "hi", "count": 3}, text="hi")

    @definition.tool
    def broken(state: Any) -> Greeting:
        """A dict that does not fit: count is text."""
        return {"greeting": "hi", "count": "two"}  # type: ignore[return-value]

    return definition


def test_results_are_validated_into_their_model(tmp_path):
    definition = _toy_server("toy_results")
    register_server(definition)
    try:
        server = create_server("toy_results", fs_root=tmp_path, apps_data_root=tmp_path)

        async def run() -> tuple[Any, ...]:
            async with Client(server) as client:
                info = client.server_info
                listed = {tool.name: tool for tool in await client.list_tools()}
                good = await client.call_tool("good", {})
                wrapped = await client.call_tool("wrapped", {})
                broken = await client.call_tool("broken", {}, raise_on_error=False)
                return info, listed, good, wrapped, broken

        info, listed, good, wrapped, broken = asyncio.run(run())
    finally:
        unregister_server("toy_results")
    assert (info.name, info.version) == ("atoll-toy_results", __version__)
    assert listed["good"].outputSchema["anyOf"][0]["properties"]["count"] == {
        "title": "Count",
        "type": "integer",
    }
    assert listed["wrapped"].outputSchema == listed["good"].outputSchema
    assert good.structured_content == {"greeting": "hi", "count": 2, "extra": [1]}  # undeclared keys kept
    assert wrapped.structured_content == {"greeting": "hi", "count": 3}
    # A result that does not fit is our bug: an internal error naming the field, never bad content.
    assert broken.is_error and broken.structured_content["error"]["code"] == "internal"
    assert "count" in broken.structured_content["error"]["message"]


def test_portable_schemas_drop_dangling_discriminators_and_unknown_formats():
    schema = {
        "$defs": {
            "A": {"properties": {"kind": {"const": "a"}}},
            "B": {"properties": {"kind": {"const": "b"}}},
        },
        "properties": {
            "op": {
                "oneOf": [{"$ref": "#/$defs/A"}, {"$ref": "#/$defs/B"}],
                "discriminator": {"propertyName": "kind", "mapping": {"a": "#/$defs/A", "b": "#/$defs/B"}},
            },
            "where": {"type": "string", "format": "path"},
            "when": {"type": "string", "format": "date-time"},
            "format": {"type": "string", "default": {"format": "kept: data, not schema"}},
        },
    }
    cleaned = portable(schema)
    assert "$defs" not in cleaned and "discriminator" not in cleaned["properties"]["op"]
    assert cleaned["properties"]["op"]["oneOf"][0] == {"properties": {"kind": {"const": "a"}}}
    assert "format" not in cleaned["properties"]["where"]
    assert cleaned["properties"]["when"]["format"] == "date-time"
    assert cleaned["properties"]["format"]["default"] == {"format": "kept: data, not schema"}
