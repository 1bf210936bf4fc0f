"""The single, long-lived MCP server clients connect to at ``/mcp``.

Its only provider reads the manager's *current* gateway on every request, so a hot swap
changes the tools without dropping client sessions (clients may still re-initialise).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from fastmcp import FastMCP
from fastmcp.server.providers import Provider
from fastmcp.tools import Tool
from starlette.types import ASGIApp, Receive, Scope, Send

from atoll.http import bearer_matches
from environment.gateway import GatewayManager


class _LiveGatewayProvider(Provider):
    def __init__(self, manager: GatewayManager) -> None:
        super().__init__()
        self._manager = manager

    async def _list_tools(self) -> Sequence[Tool]:
        return list(self._manager.current.tools.values())

    async def _get_tool(self, name: str, version: Any = None) -> Tool | None:
        return self._manager.current.tools.get(name)


class _FrontServer(FastMCP):
    """FastMCP whose tool lookup goes straight to the live gateway's table.

    FastMCP's aggregate lookup asks every provider concurrently (a task group per call); the
    front has one provider, so that costs ~10% of a call's CPU for nothing.
    """

    _gateway_manager: GatewayManager

    async def _get_tool(self, name: str, version: Any = None) -> Tool | None:
        if version is None:
            tool = self._gateway_manager.current.tools.get(name)
            if tool is not None:
                return tool
        return await super()._get_tool(name, version)


def create_front_server(manager: GatewayManager) -> FastMCP:
    """The hub server: no tools of its own, every tool from the live gateway."""
    server = _FrontServer("atoll-environment", providers=[_LiveGatewayProvider(manager)])
    server._gateway_manager = manager
    return server


class BearerTokenGuard:
    """ASGI wrapper answering 401 unless the request carries ``Authorization: Bearer <token>``."""

    def __init__(self, app: ASGIApp, token: str) -> None:
        self.app = app
        self.token = token

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            raw = headers.get(b"authorization")
            if not bearer_matches(raw.decode("latin-1") if raw else None, self.token):
                body = b'{"detail":"missing or wrong bearer token for /mcp"}'
                await send(
                    {
                        "type": "http.response.start",
                        "status": 401,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"www-authenticate", b"Bearer"),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send)
