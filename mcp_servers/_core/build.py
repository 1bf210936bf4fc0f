"""Turning a :class:`ServerDefinition` into its tools (:func:`build_tools`, for a host that
calls them in-process) or a FastMCP server around them (:func:`build_server`), in either mode.

- individual mode: one MCP tool per declared function, named as declared;
- consolidated mode: ``NAME(action=…, <union of all arguments>)`` plus
  ``NAME_schema(model=ACTION)``; both are derived from the same definitions (arguments,
  descriptions, schemas), never from another tool's text.

A tool argument literally named ``action`` is exposed in consolidated mode as
``<action>_action`` (e.g. ``comments_action``) so it cannot clash with the selector.
"""

from __future__ import annotations

import json
import math
import threading
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

import mcp_types
import pydantic_core
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError as FastMcpToolError
from fastmcp.tools import Tool, ToolResult
from pydantic import PrivateAttr

from atoll import __version__
from atoll.errors import ErrorCode
from atoll.tool_schemas import MAX_DESCRIPTION, fit_description
from mcp_servers._core.context import ServerContext
from mcp_servers._core.definition import ServerDefinition, ToolDef
from mcp_servers._core.errors import ToolError
from mcp_servers._core.invoke import Outcome, call_tool, error_outcome, unwrap_envelope
from mcp_servers._core.outputs import ResultModel, model_schema, output_schema
from mcp_servers._core.results import encode_image

Mode = Literal["individual", "consolidated"]
MODES: tuple[str, ...] = ("individual", "consolidated")
HELP_ACTION = "help"

#: server -> its state's ``warm`` (see :func:`server_warmer`)
_WARMERS: weakref.WeakKeyDictionary[FastMCP, Callable[[], Any]] = weakref.WeakKeyDictionary()
#: server -> its tools by name (see :func:`direct_tools`)
_DIRECT: weakref.WeakKeyDictionary[FastMCP, dict[str, Tool]] = weakref.WeakKeyDictionary()


class _DefinedTool(Tool):
    """A FastMCP tool whose body is one of our invokers (raw arguments in, Outcome out).

    It needs neither a FastMCP request context nor its server's middleware, so a host serving
    the server in-process may call its public ``run()`` directly (:func:`direct_tools`)."""

    _invoke: Callable[[dict[str, Any]], Awaitable[Outcome]] = PrivateAttr()

    async def run(self, arguments: dict[str, Any]) -> ToolResult:
        try:
            outcome = await self._invoke(arguments)
        except ToolError as exc:  # envelope/action problems raised before call_tool
            outcome = error_outcome(exc)
        return to_tool_result(outcome)


def to_tool_result(outcome: Outcome) -> ToolResult:
    """The MCP result for an outcome: text first, then images; structured content always.

    The same result as ``ToolResult(content=..., structured_content=..., is_error=...)``, built
    without its validating ``__init__`` (≈ 50 µs a call: a JSON round trip of the structured
    content and a validation of the blocks, docs/performance.md "Per-call cost"): an outcome's
    structured content is already JSON values (``results.to_structured``), so the round trip
    gives back an equal dict; what it also checks, no NaN or infinity anywhere (JSON has none),
    is checked here with the same error (``tests/mcp_servers/test_tool_results.py``)."""
    content: list[Any] = [mcp_types.TextContent(type="text", text=outcome.text)]
    for image in outcome.images:
        content.append(
            mcp_types.ImageContent(type="image", data=encode_image(image), mime_type=image.mime_type)
        )
    structured = outcome.structured
    reject_non_finite(structured)
    return ToolResult.model_construct(
        content=content, structured_content=structured, meta=None, is_error=outcome.is_error
    )


def reject_non_finite(value: Any) -> None:
    """Raise fastmcp's ToolError, as ``ToolResult`` does, when a float in ``value`` is NaN or
    infinite; one JSON encoding tells whether there is any (the walk runs only then)."""
    payload = pydantic_core.to_json(value, inf_nan_mode="constants")
    if b"NaN" in payload or b"Infinity" in payload:
        _walk_non_finite(value, "$")


def _walk_non_finite(value: Any, path: str) -> None:
    if isinstance(value, float) and not math.isfinite(value):
        raise FastMcpToolError(
            f"Tool result contains a non-finite float ({value!r}) at {path}; "
            "JSON cannot represent NaN or Infinity"
        )
    if isinstance(value, dict):
        for key, item in value.items():
            _walk_non_finite(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            _walk_non_finite(item, f"{path}[{index}]")


#: Each tool's validated model, made once per process for its declaration and name; every
#: server built gets a copy of it with its own invoker (``model_copy``: nothing validated
#: again, the schemas shared and never changed). Building a world's servers validated some
#: hundred tool models, and a trial's world is built anew (docs/performance.md, "Paper scale").
#: Keyed by the declaration's identity, which the entry holds, so no other takes its id; a
#: template is reused only while what it was made from is equal (a definition may gain tools).
_TEMPLATES: dict[tuple[int, str], tuple[object, _DefinedTool]] = {}
_templates_lock = threading.Lock()


def _make_tool(
    source: object,
    name: str,
    description: str,
    parameters: dict[str, Any],
    invoke: Callable[[dict[str, Any]], Awaitable[Outcome]],
    *,
    outputs: dict[str, Any],
    read_only: bool = False,
    destructive: bool = False,
) -> Tool:
    """The tool ``name`` declared by ``source`` (a ToolDef, or the ServerDefinition of a
    consolidated tool), called through ``invoke``."""
    key = (id(source), name)
    with _templates_lock:
        held = _TEMPLATES.get(key)
    if (
        held is None
        or held[0] is not source
        or held[1].description != description
        or held[1].parameters != parameters
        or held[1].output_schema != outputs
    ):
        annotations = mcp_types.ToolAnnotations(
            read_only_hint=read_only or None,
            destructive_hint=(destructive or None) if not read_only else None,
        )
        template = _DefinedTool(
            name=name,
            description=description,
            parameters=parameters,
            output_schema=outputs,
            annotations=annotations,
        )
        with _templates_lock:
            _TEMPLATES[key] = (source, template)
    else:
        template = held[1]
    tool = template.model_copy()
    tool._invoke = invoke
    return tool


@dataclass(frozen=True)
class AppTools:
    """One app server's tools over one world, for a host that calls them in-process.

    ``tools`` are listed as a FastMCP server around them lists them (same order, names,
    descriptions and schemas: their schemas are portable already, nested models inlined by
    :mod:`atoll.tool_schemas`, so FastMCP's dereferencing changes nothing) and called with their public ``run(arguments)``: they need no
    request context nor a server's middleware. ``warm`` builds the server's indexes ahead of
    the first call (:func:`server_warmer`), or is None. The environment's gateway takes these
    instead of a FastMCP server: a world's nine servers are built anew for every trial, and the
    servers, their ``add_tool`` and a ``tools/list`` through their middleware were about 5% of a
    local trial's CPU (docs/performance.md, "Paper scale")."""

    name: str
    description: str
    tools: tuple[Tool, ...]
    warm: Callable[[], Any] | None


def build_tools(
    definition: ServerDefinition, context: ServerContext, *, mode: str = "individual"
) -> AppTools:
    """``definition``'s tools in ``mode`` over ``context``'s world.

    Raises ValueError for an unknown mode.
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
    state = definition.state(context) if definition.state is not None else context
    tools = (
        [_individual_tool(tool, state) for tool in definition.tools]
        if mode == "individual"
        else list(_consolidated_tools(definition, state))
    )
    warm = getattr(state, "warm", None)
    return AppTools(definition.name, definition.description, tuple(tools), warm if callable(warm) else None)


def build_server(
    definition: ServerDefinition,
    context: ServerContext,
    *,
    mode: str = "individual",
) -> FastMCP:
    """A FastMCP server exposing ``definition``'s tools in ``mode`` (``atoll mcp NAME``, and
    hosts that serve it through a client).

    Raises ValueError for an unknown mode.
    """
    built = build_tools(definition, context, mode=mode)
    server = FastMCP(
        name=f"atoll-{definition.name}",
        version=__version__,
        instructions=definition.description or None,
        on_duplicate="error",
    )
    for tool in built.tools:
        server.add_tool(tool)
    _DIRECT[server] = {tool.name: tool for tool in built.tools}
    if built.warm is not None:
        _WARMERS[server] = built.warm
    return server


def direct_tools(server: FastMCP) -> dict[str, Tool]:
    """The tools of ``server`` (made by :func:`build_server`) by name, each callable in-process
    with its public ``run(arguments)``: no FastMCP request context nor the server's middleware
    is needed, so a host skips a second pass of FastMCP's request machinery (about a third of
    a call's CPU). Empty for a server built otherwise."""
    return dict(_DIRECT.get(server, {}))


def server_warmer(server: FastMCP) -> Callable[[], Any] | None:
    """What builds ``server``'s indexes ahead of its first call, or None when it has none.

    A server's state may define ``warm()``: read the world's data files the way a first call
    would (the app-data servers build their per-file indexes), so that a host can run it in the
    background after a populate. It must be safe beside tool calls: a call that needs a file
    being indexed waits for that build (:class:`~mcp_servers._core.store.FileCache` parses one
    file version once) instead of starting its own.
    """
    return _WARMERS.get(server)


def _individual_tool(tool: ToolDef, state: object) -> Tool:
    declared = set(tool.argument_names)

    async def invoke(raw: dict[str, Any]) -> Outcome:
        return await call_tool(tool, state, unwrap_envelope(raw, declared))

    return _make_tool(
        tool,
        tool.name,
        tool.published_description,
        tool.published_schema,
        invoke,
        outputs=tool.output_schema,
        read_only=tool.read_only,
        destructive=tool.destructive,
    )


def exposed_name(tool: ToolDef, argument: str) -> str:
    """An argument's name inside the consolidated tool."""
    return f"{tool.action}_action" if argument == "action" else argument


def consolidated_schema(definition: ServerDefinition) -> dict[str, Any]:
    """Input schema of ``NAME``: ``action`` plus the union of every action's arguments."""
    actions = [t.action for t in definition.tools]
    properties: dict[str, Any] = {
        "action": {
            "type": "string",
            "enum": [*actions, HELP_ACTION],
            "description": "What to do; 'help' lists the actions and their arguments.",
        }
    }
    # name -> [(action, description)] and name -> distinct shapes (schema without prose)
    users: dict[str, list[tuple[str, str]]] = {}
    variants: dict[str, list[dict[str, Any]]] = {}
    defs: dict[str, Any] = {}
    for tool in definition.tools:
        schema = tool.published_schema
        defs.update(schema.get("$defs", {}))
        for argument, prop in schema["properties"].items():
            name = exposed_name(tool, argument)
            users.setdefault(name, []).append((tool.action, prop.get("description") or ""))
            bare = {k: v for k, v in prop.items() if k not in ("description", "title", "default")}
            known = variants.setdefault(name, [])
            for shape in bare["anyOf"] if list(bare) == ["anyOf"] else [bare]:
                if all(_canonical(shape) != _canonical(v) for v in known):
                    known.append(shape)
    for name, shapes in variants.items():
        merged: dict[str, Any] = dict(shapes[0]) if len(shapes) == 1 else {"anyOf": shapes}
        merged["description"] = _merged_description(users[name])
        properties[name] = merged
    result: dict[str, Any] = {"type": "object", "properties": properties, "required": ["action"]}
    if defs:
        result["$defs"] = defs
    return result


def _canonical(schema: dict[str, Any]) -> str:
    return json.dumps(schema, sort_keys=True)


def _merged_description(users: list[tuple[str, str]]) -> str:
    """One description per distinct text, each followed by the actions it applies to."""
    by_text: dict[str, list[str]] = {}
    for action, text in users:
        by_text.setdefault(text, []).append(action)
    parts = [f"{text} (actions: {', '.join(actions)})".strip() for text, actions in by_text.items()]
    return " | ".join(parts)


class ActionHelp(ResultModel):
    action: str
    tool: str
    summary: str
    required: list[str]
    optional: list[str]


class ConsolidatedHelp(ResultModel):
    """What ``NAME(action="help")`` returns."""

    server: str
    tool: str
    schema_tool: str
    actions: list[ActionHelp]


class ActionSummary(ResultModel):
    action: str
    tool: str
    summary: str


class ActionList(ResultModel):
    """What ``NAME_schema()`` returns without a model."""

    actions: list[ActionSummary]


class ActionSchema(ResultModel):
    """What ``NAME_schema(model=ACTION)`` returns."""

    action: str
    tool: str
    description: str
    input_schema: dict[str, Any]


def help_data(definition: ServerDefinition) -> dict[str, Any]:
    """What ``NAME(action="help")`` returns."""
    return {
        "server": definition.name,
        "tool": definition.consolidated_name,
        "schema_tool": f"{definition.consolidated_name}_schema",
        "actions": [
            {
                "action": tool.action,
                "tool": tool.name,
                "summary": tool.summary,
                "required": [exposed_name(tool, a) for a in tool.required_arguments],
                "optional": [
                    exposed_name(tool, a) for a in tool.argument_names if a not in tool.required_arguments
                ],
            }
            for tool in definition.tools
        ],
    }


def _is_empty(value: Any) -> bool:
    """What agents fill in for other actions' arguments of the consolidated tool (ignored)."""
    return value is None or (isinstance(value, str | list | dict) and len(value) == 0)


def _help_text(data: dict[str, Any]) -> str:
    lines = [f"{data['tool']} actions (call {data['tool']}(action=ACTION, ...)):"]
    for entry in data["actions"]:
        args = [f"{a}*" for a in entry["required"]] + entry["optional"]
        lines.append(f"- {entry['action']}: {entry['summary']} Arguments: {', '.join(args) or 'none'}.")
    lines.append(f"Full argument schema of one action: {data['schema_tool']}(model=ACTION).")
    return "\n".join(lines)


def _consolidated_description(definition: ServerDefinition) -> str:
    """The server's description and its actions with their arguments; when that is longer
    than a provider accepts (:data:`atoll.tool_schemas.MAX_DESCRIPTION`), the actions with their
    summaries, else their names alone: ``NAME(action="help")`` and ``NAME_schema`` still give
    every action's arguments in full."""
    head = definition.description.strip()
    data = help_data(definition)
    tool = data["tool"]
    more = f"Arguments of each action: {tool}(action='help'); one action's schema: {data['schema_tool']}(model=ACTION)."
    summaries = [f"{tool} actions (call {tool}(action=ACTION, ...)):"]
    summaries += [f"- {entry['action']}: {entry['summary']}" for entry in data["actions"]]
    names = ", ".join(entry["action"] for entry in data["actions"])
    for body in (
        _help_text(data),
        "\n".join([*summaries, more]),
        f"{tool} actions (call {tool}(action=ACTION, ...)): {names}.\n{more}",
    ):
        text = f"{head}\n\n{body}" if head else body
        if len(text) <= MAX_DESCRIPTION:
            return text
    return fit_description(text, more=more)


def _consolidated_tools(definition: ServerDefinition, state: object) -> list[Tool]:
    name = definition.consolidated_name
    schema = consolidated_schema(definition)
    declared = set(schema["properties"])
    action_names = ", ".join([*(t.action for t in definition.tools), HELP_ACTION])

    async def invoke(raw: dict[str, Any]) -> Outcome:
        arguments = unwrap_envelope(raw, declared)
        action = arguments.pop("action", None)
        if not isinstance(action, str) or not action.strip():
            raise ToolError(
                ErrorCode.invalid_argument,
                f"{name}: 'action' is required (one of {action_names})",
                argument="action",
            )
        if action.strip().lower() == HELP_ACTION:
            data = help_data(definition)
            return Outcome(structured=data, text=_help_text(data))
        tool = definition.find(action)
        if tool is None:
            raise ToolError(
                ErrorCode.unknown_action,
                f"{name}: unknown action {action!r} (one of {action_names})",
                argument="action",
            )
        own = {exposed_name(tool, a): a for a in tool.argument_names}
        call_arguments: dict[str, Any] = {}
        for key, value in arguments.items():
            if key in own:
                call_arguments[own[key]] = value
            elif not _is_empty(value):
                call_arguments[key] = value  # refused by validation with the list of accepted arguments
        return await call_tool(tool, state, call_arguments)

    async def invoke_schema(raw: dict[str, Any]) -> Outcome:
        arguments = unwrap_envelope(raw, {"model", "action"})
        model = arguments.get("model") or arguments.get("action")
        if not model:
            data: dict[str, Any] = {
                "actions": [
                    {"action": t.action, "tool": t.name, "summary": t.summary} for t in definition.tools
                ]
            }
            return Outcome(structured=data, text=json.dumps(data, indent=2))
        tool = definition.find(str(model))
        if tool is None:
            raise ToolError(
                ErrorCode.unknown_action,
                f"{name}_schema: unknown model {model!r} (one of {action_names})",
                argument="model",
            )
        input_schema = json.loads(json.dumps(tool.input_schema))
        for argument in list(input_schema["properties"]):
            exposed = exposed_name(tool, argument)
            if exposed != argument:
                input_schema["properties"][exposed] = input_schema["properties"].pop(argument)
                input_schema["required"] = [
                    exposed if r == argument else r for r in input_schema.get("required", [])
                ]
        data = {
            "action": tool.action,
            "tool": tool.name,
            "description": tool.description,
            "input_schema": input_schema,
        }
        return Outcome(structured=data, text=json.dumps(data, indent=2, ensure_ascii=False))

    schema_parameters = {
        "type": "object",
        "properties": {
            "model": {
                "type": "string",
                "description": f"The action whose arguments to describe ({action_names}).",
            }
        },
    }
    # NAME returns what its action returns (or the help): one schema per distinct result.
    action_results = [tool.result_schema for tool in definition.tools] + [model_schema(ConsolidatedHelp)]
    return [
        _make_tool(
            definition,
            name,
            _consolidated_description(definition),
            schema,
            invoke,
            outputs=output_schema(action_results),
        ),
        _make_tool(
            definition,
            f"{name}_schema",
            f"JSON schema of the arguments of one {name} action (model=ACTION); without model, the list of actions.",
            schema_parameters,
            invoke_schema,
            outputs=output_schema([model_schema(ActionList), model_schema(ActionSchema)]),
            read_only=True,
        ),
    ]
