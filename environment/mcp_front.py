"""The single, long-lived MCP server clients connect to at ``/mcp``.

Its only provider reads the manager's *current* gateway on every request, so a hot swap
changes the tools without dropping client sessions (clients may still re-initialise). After a
swap, :class:`SessionRegistry` sends ``notifications/tools/list_changed`` to every session that
has talked to the server, so clients that cache the tool list refresh it.
"""

from __future__ import annotations

import contextlib
import logging
import weakref
from collections.abc import Sequence
from typing import Any

import anyio
from fastmcp import FastMCP
from fastmcp.server.middleware import Middleware, MiddlewareContext
from fastmcp.server.providers import Provider
from fastmcp.tools import Tool

from atoll import __version__
from environment.gateway import GatewayManager

logger = logging.getLogger("environment.mcp")

#: How long one session may take to accept a notification before it is skipped.
NOTIFY_TIMEOUT_S = 2.0


class _LiveGatewayProvider(Provider):
    def __init__(self, manager: GatewayManager) -> None:
        super().__init__()
        self._manager = manager

    async def _list_tools(self) -> Sequence[Tool]:
        return list(self._manager.current.tools.values())

    async def _get_tool(self, name: str, version: Any = None) -> Tool | None:
        return self._manager.current.tools.get(name)


class SessionRegistry(Middleware):
    """Remembers the MCP connections that sent a message, to notify them when the tools change.

    Connections are held weakly: one that ended is forgotten with its transport. (Reaching the
    connection goes through the SDK's private ``ServerSession._connection``, as fastmcp itself
    does: mcp's public API offers no accessor, and its public alternatives either ride the
    current request's response or hold the connection alive with no way to tell whether it
    has a GET stream; docs/environment.md, "Why ServerSession._connection". fastmcp and mcp
    are pinned, and tests/environment/test_archipelago_clients.py fails if it moves.) A
    session without a standalone GET stream cannot be notified at all; it sees the new tools
    on its next ``tools/list``.
    """

    def __init__(self) -> None:
        self._sessions: weakref.WeakSet[Any] = weakref.WeakSet()
        self._by_id: weakref.WeakValueDictionary[str, Any] = weakref.WeakValueDictionary()

    async def on_message(self, context: MiddlewareContext, call_next: Any) -> Any:
        fastmcp_context = context.fastmcp_context
        if fastmcp_context is not None:
            with contextlib.suppress(RuntimeError):  # no session yet
                # The SDK's ServerSession is a per-request view; the connection behind it lives as
                # long as the client's session and owns its standalone (GET) stream.
                connection = getattr(fastmcp_context.session, "_connection", None)
                if connection is not None and getattr(connection, "has_standalone_channel", False):
                    self._sessions.add(connection)
                    session_id = getattr(connection, "session_id", None)
                    if session_id is not None:
                        self._by_id[session_id] = connection
        return await call_next(context)

    def __len__(self) -> int:
        return len(self._sessions)

    def can_notify(self, session_id: str) -> bool:
        """Whether the session ``session_id`` (its ``Mcp-Session-Id``) is recorded with its
        standalone GET stream, i.e. would be told when the tools change."""
        connection = self._by_id.get(session_id)
        return connection is not None and bool(getattr(connection, "has_standalone_channel", False))

    async def notify_tools_changed(self) -> int:
        """Send ``notifications/tools/list_changed`` to every live session; returns how many took it.

        A session's notification travels on its standalone GET stream; one without that stream
        (or one that is gone) is skipped, never waited on for more than NOTIFY_TIMEOUT_S.
        """
        delivered = 0

        async def notify(session: Any) -> None:
            nonlocal delivered
            with anyio.move_on_after(NOTIFY_TIMEOUT_S):
                try:
                    await session.send_tool_list_changed()
                    delivered += 1
                except Exception as exc:  # a closed session: forget it
                    self._sessions.discard(session)
                    logger.debug("session not notified", extra={"error": str(exc)})

        async with anyio.create_task_group() as group:
            for session in list(self._sessions):
                group.start_soon(notify, session)
        return delivered


def create_front_server(manager: GatewayManager, sessions: SessionRegistry | None = None) -> FastMCP:
    """The hub server: no tools of its own, every tool from the live gateway.

    Its serverInfo is ``atoll-environment`` with atoll's version; ``sessions`` (when given)
    records the connected sessions so a swap can notify them.
    """
    return FastMCP(
        "atoll-environment",
        version=__version__,
        providers=[_LiveGatewayProvider(manager)],
        middleware=[sessions] if sessions is not None else None,
    )
