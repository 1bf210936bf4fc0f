"""A tool's MCP result built without ToolResult's validating __init__ (build.to_tool_result) and
put on the wire without a CallToolResult and the SDK's sieve (environment.mcp_wire.
wired_call_result) is the same result, byte for byte on every protocol version, as the
validated way builds, dumps and sieves it; NaN and infinity are refused
with fastmcp's own error."""

from __future__ import annotations

import mcp_types
import pydantic_core
import pytest
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError as FastMcpToolError
from fastmcp.tools import Tool, ToolResult
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS

from environment.mcp_wire import _wire_result, error_reply, server_info_of, wire_result, wired_call_result
from mcp_servers._core.build import to_tool_result
from mcp_servers._core.invoke import Outcome
from mcp_servers._core.results import ImageBlock, encode_image

OUTCOMES = [
    Outcome(structured={"path": "/Reports", "entries": [{"name": "q3.txt", "size": 17}]}, text="q3.txt"),
    Outcome(structured={}, text=""),
    Outcome(
        structured={"ünï": "çödé ✓", "nested": {"list": [1, 2.5, -0.0, None, True, "x"], "big": 2**70}},
        text="multi\nline ✓",
    ),
    Outcome(structured={"error": {"code": "not_found", "message": "no such file"}}, text="no", is_error=True),
    Outcome(
        structured={"page": 1},
        text="a picture",
        images=[ImageBlock(b"\x89PNG fake", "image/png"), ImageBlock(b"GIF89a", "image/gif")],
    ),
]


def _validated(outcome: Outcome) -> ToolResult:
    """The result as it was built before: through ToolResult's validating constructor."""
    content: list = [mcp_types.TextContent(type="text", text=outcome.text)]
    content += [
        mcp_types.ImageContent(type="image", data=encode_image(image), mime_type=image.mime_type)
        for image in outcome.images
    ]
    return ToolResult(content=content, structured_content=outcome.structured, is_error=outcome.is_error)


@pytest.mark.parametrize("outcome", OUTCOMES)
def test_the_result_is_the_one_the_validating_constructor_builds(outcome: Outcome) -> None:
    built, reference = to_tool_result(outcome), _validated(outcome)
    assert built.model_dump() == reference.model_dump()
    assert built.model_fields_set == reference.model_fields_set
    assert built.to_mcp_result() == reference.to_mcp_result()


@pytest.mark.parametrize(
    ("structured", "where"),
    [
        ({"x": float("nan")}, "$.x"),
        ({"rows": [1.0, {"v": float("inf")}]}, "$.rows[1].v"),
        ({"a": {"b": [float("-inf")]}}, "$.a.b[0]"),
    ],
)
def test_nan_and_infinity_are_refused_as_fastmcp_refuses_them(structured: dict, where: str) -> None:
    outcome = Outcome(structured=structured, text="t")
    with pytest.raises(FastMcpToolError) as reference:
        _validated(outcome)
    with pytest.raises(FastMcpToolError) as ours:
        to_tool_result(outcome)
    assert str(ours.value) == str(reference.value)
    assert where in str(ours.value)


def test_a_string_that_only_spells_nan_is_kept() -> None:
    outcome = Outcome(structured={"name": "NaN", "note": "Infinity and beyond"}, text="NaN")
    assert to_tool_result(outcome).structured_content == {"name": "NaN", "note": "Infinity and beyond"}


def _tool(output_schema: dict | None) -> Tool:
    return Tool(name="t", parameters={"type": "object", "properties": {}}, output_schema=output_schema)


def _general(tool: Tool, result: ToolResult, version: str, server_info: dict) -> dict:
    """The general way: a CallToolResult, dumped, then sieved and stamped for ``version``."""
    modern = version in MODERN_PROTOCOL_VERSIONS
    dumped = _wire_result(tool, result, modern).model_dump(by_alias=True, mode="json", exclude_none=True)
    return wire_result("tools/call", version, dumped, server_info)


@pytest.mark.parametrize("version", [*HANDSHAKE_PROTOCOL_VERSIONS, *MODERN_PROTOCOL_VERSIONS])
@pytest.mark.parametrize(
    "output_schema",
    [{"type": "object"}, None, {"anyOf": [{"type": "object"}, {"type": "array"}]}, {"type": "array"}],
)
def test_the_wire_result_is_byte_for_byte_the_general_ways(version: str, output_schema: dict | None) -> None:
    tool = _tool(output_schema)
    server_info = server_info_of(FastMCP("front", version="1.2.3"))
    results = [to_tool_result(outcome) for outcome in OUTCOMES]
    results.append(to_tool_result(Outcome(structured={"a": None, "b": {"c": None}, "l": [None]}, text="n")))
    results.append(ToolResult(content=[mcp_types.TextContent(type="text", text="only text")]))
    results.append(ToolResult(content="with meta", structured_content={"a": 1}, meta={"k": "v"}))
    results.append(
        ToolResult(content=[mcp_types.TextContent(type="text", text="t", annotations={"priority": 0.5})])
    )
    results.append(error_reply("t", RuntimeError("boom"), mask_error_details=False))
    for result in results:
        assert isinstance(result, ToolResult)
        ours = wired_call_result(tool, result, version, server_info)
        assert pydantic_core.to_json(ours) == pydantic_core.to_json(
            _general(tool, result, version, server_info)
        )
