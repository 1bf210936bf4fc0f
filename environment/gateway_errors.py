"""What the gateway can refuse with, importable without the MCP machinery behind it.

The routes (``POST /apps``), the preload and the MCP plane (:mod:`environment.plane`) name
these before fastmcp and the MCP SDK are imported; :mod:`environment.gateway` raises them.
"""

from __future__ import annotations

from atoll.errors import AtollError, ErrorCode


class GatewayNotReady(AtollError):
    """One or more servers failed to start or list their tools; ``failures`` maps name → error."""

    def __init__(self, failures: dict[str, str]) -> None:
        names = ", ".join(sorted(failures))
        first = next(iter(sorted(failures.items())))
        super().__init__(
            ErrorCode.gateway_not_ready, f"MCP server(s) not ready: {names} ({first[0]}: {first[1]})"
        )
        self.failures = failures


class ToolNameCollision(AtollError):
    """Two servers produce the same ``{server}_{tool}`` name."""

    def __init__(self, name: str, first: tuple[str, str], second: tuple[str, str]) -> None:
        super().__init__(
            ErrorCode.tool_name_collision,
            f"tool name {name!r} is produced by server {first[0]!r} (tool {first[1]!r}) "
            f"and by server {second[0]!r} (tool {second[1]!r})",
        )
        self.name = name
        self.servers = (first[0], second[0])


def describe_error(exc: BaseException) -> str:
    """One line for people: the innermost useful message of ``exc``."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__
