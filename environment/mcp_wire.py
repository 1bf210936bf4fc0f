"""The MCP wire shapes of the lean ``/mcp`` path (:mod:`environment.mcp_fast`): which requests
it may answer, and each reply exactly as fastmcp's handlers and the SDK's runner shape it.

Every function here mirrors one step of fastmcp 4.2's ``tools/call``/``tools/list`` handlers
(``MCPOperationsMixin``, ``FastMCP.call_tool``) or of the SDK's runner (``ServerRunner._serialize``,
the 2026-07-28 HTTP entry), through their public pieces: ``Tool.run``/``to_mcp_tool``,
``ToolResult.to_mcp_result``, ``mcp_types.methods``' validators and sieve, the SDK's inbound
classifier. ``tests/environment/test_mcp_fast.py`` compares the replies with fastmcp's own.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, cast

import mcp_types
import pydantic_core
from fastmcp import FastMCP
from fastmcp.exceptions import DisabledError, FastMCPError, NotFoundError
from fastmcp.tools import Tool
from fastmcp.tools.base import ToolResult
from fastmcp.utilities.exceptions import get_http_status_code, is_timeout_error
from fastmcp.utilities.json_schema import is_object_schema
from mcp.server.runner import modern_error_data
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import InboundModernRoute, classify_inbound_request, find_duplicated_routing_header
from mcp.shared.jsonrpc_dispatcher import handler_exception_to_error_data
from mcp_types import (
    CLIENT_CAPABILITIES_META_KEY,
    CLIENT_INFO_META_KEY,
    PROTOCOL_VERSION_META_KEY,
    SERVER_INFO_META_KEY,
)
from mcp_types import methods as mcp_methods
from mcp_types.jsonrpc import MISSING_REQUIRED_CLIENT_CAPABILITY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError as PydanticValidationError

logger = logging.getLogger("environment.mcp")

#: the methods the lean path answers
HOT_METHODS = frozenset({"tools/call", "tools/list"})
_REQUEST_KEYS = frozenset({"jsonrpc", "id", "method", "params"})
#: the 2026-era per-request envelope (validated by the SDK's own classifier)
_ENVELOPE_META_KEYS = frozenset(
    {PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY}
)
#: ``_meta`` keys that leave fastmcp's answer unchanged here (JSON responses: no notifications)
_PASSIVE_META_KEYS = _ENVELOPE_META_KEYS | {"progressToken", "io.modelcontextprotocol/logLevel"}


@dataclass(frozen=True)
class HotRequest:
    """One ``tools/call`` or ``tools/list`` request, parsed."""

    id: str | int
    method: str
    params: dict[str, Any]


def parse_hot_request(
    body: bytes, version: str, raw_headers: list[tuple[bytes, bytes]], *, mcp_param_headers: bool
) -> HotRequest | None:
    """The request when ``body`` is one ``tools/call`` or ``tools/list`` this path answers exactly
    as fastmcp would; None for anything else (fastmcp then answers it)."""
    try:
        message = pydantic_core.from_json(body)
    except ValueError:
        return None
    if type(message) is not dict or message.get("jsonrpc") != "2.0" or not message.keys() <= _REQUEST_KEYS:
        return None
    request_id = message.get("id")
    method = message.get("method")
    params = message.get("params")
    if type(request_id) not in (int, str) or method not in HOT_METHODS:
        return None
    if params is None:
        params = {}
    elif type(params) is not dict or params.get("cursor") is not None:
        return None
    meta = params.get("_meta")
    # Version pins, trace context and the like change what fastmcp does; a progress token or a
    # log level change nothing here: JSON responses carry no notifications on either era.
    if meta is not None and (type(meta) is not dict or not meta.keys() <= _PASSIVE_META_KEYS):
        return None
    if version in MODERN_PROTOCOL_VERSIONS:
        if mcp_param_headers or find_duplicated_routing_header(
            (name.decode("latin-1"), value.decode("latin-1")) for name, value in raw_headers
        ):
            return None
        routing = {name.decode("latin-1"): value.decode("latin-1") for name, value in raw_headers}
        if not isinstance(classify_inbound_request(message, headers=routing), InboundModernRoute):
            return None
    elif meta is not None and meta.keys() & _ENVELOPE_META_KEYS:
        return None
    if not request_is_valid(method, version, params):
        return None  # malformed for this version: fastmcp's own error
    return HotRequest(cast(str | int, request_id), method, params)  # its type checked above


#: (method, version, what ``arguments`` is, the other params as JSON) -> the SDK's verdict
_VERDICTS: dict[tuple[str, str, str, bytes], bool] = {}
_MAX_VERDICTS = 1024
#: params larger than this (beyond ``arguments``) are validated every time, not remembered
_MAX_KEY_BYTES = 4096
_ABSENT = object()  # no "arguments" key


def request_is_valid(method: str, version: str, params: dict[str, Any]) -> bool:
    """Whether the SDK's validator for ``method`` on ``version`` accepts ``params``.

    Its verdict is remembered (≈ 15 µs a call saved): it depends on ``arguments`` only through
    whether it is absent, null or an object (every version types it ``dict[str, Any] | None``,
    and JSON object keys are strings; checked for each known version by
    ``tests/environment/test_mcp_wire.py``), and on the rest of ``params`` (name, ``_meta``),
    which a client repeats call after call; so the key is those, encoded as JSON."""
    arguments = params.get("arguments", _ABSENT)
    shape = "absent" if arguments is _ABSENT else "null" if arguments is None else "object"
    if shape == "object" and type(arguments) is not dict:
        shape = ""
    try:
        rest = pydantic_core.to_json({k: v for k, v in params.items() if k != "arguments"})
    except ValueError:
        shape = ""
    if not shape or len(rest) > _MAX_KEY_BYTES:
        return _validates(method, version, params)
    key = (method, version, shape, rest)
    verdict = _VERDICTS.get(key)
    if verdict is None:
        verdict = _validates(method, version, params)
        if len(_VERDICTS) >= _MAX_VERDICTS:
            _VERDICTS.clear()
        _VERDICTS[key] = verdict
    return verdict


def _validates(method: str, version: str, params: dict[str, Any]) -> bool:
    try:
        mcp_methods.validate_client_request(method, version, params)
    except Exception:
        return False
    return True


async def call_tool_reply(
    tool: Tool, request: HotRequest, version: str, *, server_info: dict[str, Any], mask_error_details: bool
) -> dict[str, Any]:
    """The JSON-RPC reply to one ``tools/call``, shaped as fastmcp's tools/call handler shapes it."""
    name = request.params["name"]
    modern = version in MODERN_PROTOCOL_VERSIONS
    try:
        result = await tool.run(request.params.get("arguments") or {})
    except Exception as exc:
        error = error_reply(name, exc, mask_error_details, modern=modern)
        if isinstance(error, mcp_types.ErrorData):
            return {
                "jsonrpc": "2.0",
                "id": request.id,
                "error": error.model_dump(by_alias=True, mode="json", exclude_none=True),
            }
        result = error
    return {
        "jsonrpc": "2.0",
        "id": request.id,
        "result": wired_call_result(tool, result, version, server_info),
    }


def wired_call_result(
    tool: Tool, result: ToolResult, version: str, server_info: dict[str, Any]
) -> dict[str, Any]:
    """A tool's result as it goes on the wire for ``version``: converted to a CallToolResult,
    dumped, sieved by the version's schema and (2026-era) stamped, as fastmcp and the SDK do.

    The results of the tools this path calls (ours, ``context_free``: built by
    ``mcp_servers._core.build.to_tool_result`` or :func:`error_reply`) are written out here
    directly (≈ 60 µs a call less): text and image blocks with nothing else set, structured
    content that is already JSON values and an object that travels unwrapped, no ``meta``, no
    protocol result of their own to copy. For such a result each step is an identity on the
    fields it has (the sieve types structured content ``dict[str, Any]``, the blocks as the
    same fields, and drops ``resultType`` before 2026-07-28), so what is left is the sieve's
    key order, written here as it dumps it. Anything else takes the general way;
    ``tests/mcp_servers/test_tool_results.py`` checks, for every protocol version, that both
    give the same JSON bytes."""
    modern = version in MODERN_PROTOCOL_VERSIONS
    wired = _direct_wire(tool, result, modern, server_info)
    if wired is not None:
        return wired
    dumped = _wire_result(tool, result, modern).model_dump(by_alias=True, mode="json", exclude_none=True)
    return wire_result("tools/call", version, dumped, server_info)


def _direct_wire(
    tool: Tool, result: ToolResult, modern: bool, server_info: dict[str, Any]
) -> dict[str, Any] | None:
    structured = result.structured_content
    if (
        type(result) is not ToolResult
        or result.meta is not None
        or (structured is not None and (type(structured) is not dict or _wraps(tool, structured, modern)))
    ):
        return None
    content: list[dict[str, Any]] = []
    for block in result.content:
        if type(block) is mcp_types.TextContent and block.annotations is None and block.meta is None:
            content.append({"text": block.text, "type": "text"})
        elif type(block) is mcp_types.ImageContent and block.annotations is None and block.meta is None:
            content.append({"data": block.data, "mimeType": block.mime_type, "type": "image"})
        else:
            return None
    wired: dict[str, Any] = {"content": content, "isError": result.is_error}
    if modern:
        wired["resultType"] = "complete"
    if structured is not None:
        wired["structuredContent"] = structured
    if modern:
        wired["_meta"] = {SERVER_INFO_META_KEY: server_info}
    return wired


def _wraps(tool: Tool, structured: Any, modern: bool) -> bool:
    """Whether a structured value travels wrapped as ``{"result": value}`` (handshake era only)."""
    return not modern and (
        not isinstance(structured, dict)
        or (tool.output_schema is not None and not is_object_schema(tool.output_schema))
    )


def _wire_result(tool: Tool, result: ToolResult, modern: bool) -> mcp_types.CallToolResult:
    """A tool's result as a CallToolResult: on a handshake-era connection a structured value
    that is not an object (or declared by a non-object output schema) travels wrapped as
    ``{"result": value}``, as fastmcp sends it."""
    structured = result.structured_content
    if structured is not None and _wraps(tool, structured, modern):
        meta = dict(result.meta or {})
        fastmcp_meta = meta.get("fastmcp")
        if not (isinstance(fastmcp_meta, dict) and fastmcp_meta.get("wrap_result") is True):
            meta["fastmcp"] = {
                **(fastmcp_meta if isinstance(fastmcp_meta, dict) else {}),
                "wrap_result": True,
            }
            result = ToolResult(
                content=result.content,
                structured_content={"result": structured},
                meta=meta,
                is_error=result.is_error,
            )
    mcp_result = result.to_mcp_result()
    if isinstance(mcp_result, mcp_types.CallToolResult):
        return mcp_result
    if isinstance(mcp_result, tuple):
        content, structured_content = mcp_result
        return mcp_types.CallToolResult(content=content, structured_content=structured_content)
    return mcp_types.CallToolResult(content=mcp_result)


def error_reply(
    name: str, exc: Exception, mask_error_details: bool, *, modern: bool = False
) -> ToolResult | mcp_types.ErrorData:
    """What fastmcp answers when a tool raises ``exc``: an isError result, or (for an argument
    validation error from pydantic, or a missing client capability) a JSON-RPC error."""
    if isinstance(exc, DisabledError | NotFoundError):
        text = f"Unknown tool: {name!r}"
    elif isinstance(exc, FastMCPError):
        text = str(exc)
    elif isinstance(exc, PydanticValidationError) or (
        isinstance(exc, MCPError) and exc.error.code == MISSING_REQUIRED_CLIENT_CAPABILITY
    ):
        if modern:
            return modern_error_data(exc)
        error = handler_exception_to_error_data(exc)
        assert error is not None
        return error
    else:
        status_code = get_http_status_code(exc)
        logger.error("tool %s failed", name, exc_info=status_code is None)
        if status_code == 429:
            text = "Rate limited by upstream API, please retry later"
        elif is_timeout_error(exc):
            text = "Upstream request timed out, please retry"
        elif mask_error_details:
            text = f"Error calling tool {name!r}"
        else:
            text = f"Error calling tool {name!r}: {exc}"
    return ToolResult(content=[mcp_types.TextContent(type="text", text=text)], is_error=True)


def _listed_output_schema(schema: dict[str, Any] | None, modern: bool) -> dict[str, Any] | None:
    """The output schema as fastmcp lists it: as it is on a 2026-era connection, with an object
    at the root (a non-object value wrapped under ``result``) on a handshake-era one."""
    if schema is None:
        return None
    if modern:
        return schema
    if is_object_schema(schema):
        return schema if schema.get("type") == "object" else {**schema, "type": "object"}
    wrapped: dict[str, Any] = {
        "type": "object",
        "properties": {"result": schema},
        "required": ["result"],
        "x-fastmcp-wrap-result": True,
    }
    for key in ("$defs", "definitions"):
        if key in schema:
            wrapped[key] = schema[key]
    return wrapped


def tools_list_result(tools: Iterable[Tool], version: str) -> dict[str, Any]:
    """The ``tools/list`` result for ``tools`` as fastmcp's handler returns it, dumped."""
    modern = version in MODERN_PROTOCOL_VERSIONS
    listed = [
        tool.to_mcp_tool(name=tool.name, outputSchema=_listed_output_schema(tool.output_schema, modern))
        for tool in tools
    ]
    result = mcp_types.ListToolsResult(tools=listed, next_cursor=None)
    return result.model_dump(by_alias=True, mode="json", exclude_none=True)


def wire_result(
    method: str, version: str, result: dict[str, Any], server_info: dict[str, Any]
) -> dict[str, Any]:
    """A result dict as the SDK's runner puts it on the wire for ``version``: sieved by the
    version's schema, and on a 2026-era connection with ``resultType`` and the serverInfo stamp
    (``server_info``: the front server's identity, dumped). ``server_info`` goes in as it is,
    not copied (a deep copy was ≈ 10 µs a call): every caller encodes the result to JSON at
    once and changes nothing in it."""
    wired = mcp_methods.serialize_server_result(method, version, result)
    if version in MODERN_PROTOCOL_VERSIONS:
        wired.setdefault("resultType", "complete")
        meta = wired.get("_meta")
        if meta is None:
            wired["_meta"] = {SERVER_INFO_META_KEY: server_info}
        elif isinstance(meta, dict) and meta.get(SERVER_INFO_META_KEY) is None:
            wired["_meta"] = {**meta, SERVER_INFO_META_KEY: server_info}
    return wired


def server_info_of(server: FastMCP) -> dict[str, Any]:
    """What the SDK stamps into 2026-era results as serverInfo for ``server``, dumped."""
    return mcp_types.Implementation(
        name=server.name, version=server.version, website_url=server.website_url, icons=server.icons or None
    ).model_dump(by_alias=True, mode="json", exclude_none=True)
