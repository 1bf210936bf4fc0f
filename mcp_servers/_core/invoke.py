"""Calling a declared tool with raw MCP arguments: envelope, validation, errors, results.

Independent of the MCP library, so it can be tested and benchmarked directly;
:mod:`mcp_servers._core.build` wraps :func:`call_tool` into FastMCP tools.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import logging
from dataclasses import dataclass, field
from typing import Any

from pydantic import ValidationError

from atoll.errors import AtollError, ErrorCode
from mcp_servers._core.definition import ToolDef
from mcp_servers._core.errors import ToolError
from mcp_servers._core.results import ImageBlock, images_of, to_structured, to_text
from mcp_servers._core.workers import run_sync

logger = logging.getLogger("mcp_servers")

ENVELOPE_KEYS = ("input", "request")


@dataclass
class Outcome:
    """A finished call: what goes on the wire, whether it failed."""

    structured: dict[str, Any]
    text: str
    images: list[ImageBlock] = field(default_factory=list)
    is_error: bool = False


def unwrap_envelope(arguments: Any, declared: set[str]) -> dict[str, Any]:
    """Accept ``{"input": {...}}`` / ``{"request": {...}}`` (also JSON text) as flat arguments.

    A tool that itself declares an ``input``/``request`` argument is left alone.
    """
    if arguments is None:
        return {}
    if not isinstance(arguments, dict):
        raise ToolError(
            ErrorCode.invalid_argument, f"arguments must be a JSON object, got {type(arguments).__name__}"
        )
    for _ in range(2):  # {"request": {"input": {...}}} seen in the wild
        if len(arguments) != 1:
            break
        ((key, inner),) = arguments.items()
        if key not in ENVELOPE_KEYS or key in declared:
            break
        if isinstance(inner, str):
            try:
                inner = json.loads(inner)
            except ValueError:
                break
        if not isinstance(inner, dict):
            break
        arguments = inner
    return dict(arguments)


def validate_arguments(tool: ToolDef, arguments: dict[str, Any]) -> dict[str, Any]:
    """Validate raw arguments against the tool's model; returns keyword arguments.

    Raises ToolError ``invalid_argument`` with one line listing every problem.
    """
    json_fields = tool.json_arguments
    # An explicit null for an optional argument that does not take null means "not given"
    # (models often send every optional argument as null).
    prepared = {k: v for k, v in arguments.items() if not (v is None and k in tool.defaulted_non_nullable)}
    for name in json_fields & prepared.keys():
        value = prepared[name]
        if isinstance(value, str) and value.strip()[:1] in ("[", "{"):
            with contextlib.suppress(ValueError):
                prepared[name] = json.loads(value)
    unknown = sorted(set(prepared) - set(tool.arguments.model_fields))
    if unknown:
        accepted = ", ".join(tool.argument_names) or "none"
        raise ToolError(
            ErrorCode.invalid_argument,
            f"{tool.name}: unknown argument(s) {', '.join(map(repr, unknown))} (accepted: {accepted})",
            argument=unknown[0],
        )
    try:
        model = tool.arguments.model_validate(prepared)
    except ValidationError as exc:
        problems = []
        first = None
        for error in exc.errors(include_url=False):
            where = ".".join(str(part) for part in error.get("loc", ())) or "arguments"
            first = first or where.split(".")[0]
            problems.append(f"{where}: {error.get('msg', 'invalid')}")
        raise ToolError(
            ErrorCode.invalid_argument, f"{tool.name}: " + "; ".join(problems), argument=first
        ) from None
    return {name: getattr(model, name) for name in tool.arguments.model_fields}


async def call_tool(tool: ToolDef, state: object, arguments: dict[str, Any]) -> Outcome:
    """Run ``tool`` on already-unwrapped arguments; never raises (errors become outcomes)."""
    try:
        kwargs = validate_arguments(tool, arguments)
        if inspect.iscoroutinefunction(tool.function):
            value = await tool.function(state, **kwargs)
        else:
            # Sync tools do file work; keep the event loop free for other calls (the body has
            # returned before a cancellation of this call goes on: mcp_servers._core.workers).
            value = await run_sync(lambda: tool.function(state, **kwargs))
        structured = to_structured(value, tool.result_model)
        return Outcome(structured=structured, text=to_text(value, structured), images=images_of(value))
    except ToolError as exc:
        return error_outcome(exc)
    except AtollError as exc:  # a shared reader's coded error (atoll.formats.bounds: too_large)
        return error_outcome(ToolError(exc.code, f"{tool.name}: {exc.message}"))
    except Exception as exc:  # our own bug: report it, keep serving
        logger.exception("tool %s failed", tool.name)
        return error_outcome(
            ToolError(ErrorCode.internal, f"{tool.name}: internal error: {type(exc).__name__}: {exc}")
        )


def error_outcome(error: ToolError) -> Outcome:
    return Outcome(structured=error.to_dict(), text=error.to_text(), is_error=True)
