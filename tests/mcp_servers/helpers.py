"""Test helpers for MCP servers: a world on disk and a synchronous MCP client session.

world = make_world(tmp_path)                      # <tmp>/world/{filesystem,.apps_data}
with open_session("filesystem", world) as mcp:    # real FastMCP server, in-memory client
    result = mcp.call("read_text_file", {"file_path": "/a.txt"})
    assert not result.is_error and result.structured_content["content"] == "..."
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastmcp import Client, FastMCP

from mcp_servers import create_server, get_definition


@dataclass
class World:
    """A world on disk: ``fs_root`` (agent's ``/``) and ``apps_root`` (app data)."""

    base: Path
    fs_root: Path
    apps_root: Path

    def file(self, virtual: str, content: str | bytes = "") -> Path:
        """Create a file under the filesystem root (parents too)."""
        path = self.fs_root / virtual.lstrip("/")
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path

    def app_file(self, relative: str, content: str | bytes = "") -> Path:
        """Create a file under the app-data root (parents too)."""
        path = self.apps_root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        return path


def make_world(tmp_path: Path) -> World:
    base = tmp_path / "world"
    fs_root = base / "filesystem"
    apps_root = base / ".apps_data"
    fs_root.mkdir(parents=True, exist_ok=True)
    apps_root.mkdir(parents=True, exist_ok=True)
    return World(base=base, fs_root=fs_root, apps_root=apps_root)


class McpSession:
    """A synchronous facade over ``fastmcp.Client`` connected in memory to one server.

    With ``definition`` and ``mode="consolidated"``, calls naming an individual tool
    (``send_mail``) are sent as ``mail(action="send", ...)``, so one test body covers both
    modes.
    """

    def __init__(self, server: FastMCP, *, definition: Any = None, mode: str = "individual") -> None:
        self.server = server
        self.mode = mode
        self._definition = definition
        self._loop = asyncio.new_event_loop()
        self._client = Client(server)
        self._loop.run_until_complete(self._client.__aenter__())

    def call(self, tool: str, arguments: Mapping[str, Any] | None = None) -> Any:
        """Call a tool; returns the CallToolResult (errors are results, never raised)."""
        arguments = dict(arguments or {})
        if self.mode == "consolidated" and self._definition is not None:
            tool_def = next((t for t in self._definition.tools if t.name == tool), None)
            if tool_def is not None:
                if "action" in arguments:  # exposed as <action>_action in consolidated mode
                    arguments[f"{tool_def.action}_action"] = arguments.pop("action")
                arguments = {"action": tool_def.action, **arguments}
                tool = self._definition.consolidated_name
        return self._loop.run_until_complete(self._client.call_tool(tool, arguments, raise_on_error=False))

    def ok(self, tool: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Call a tool that must succeed; returns its structured content."""
        result = self.call(tool, arguments)
        assert not result.is_error, f"{tool} failed: {text_of(result)}"
        return result.structured_content

    def error(self, tool: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """Call a tool that must fail; returns ``{"code", "message", ...}``."""
        result = self.call(tool, arguments)
        assert result.is_error, f"{tool} unexpectedly succeeded: {text_of(result)[:300]}"
        return result.structured_content["error"]

    def tool_names(self) -> list[str]:
        return sorted(tool.name for tool in self._loop.run_until_complete(self._client.list_tools()))

    def tools(self) -> list[Any]:
        return list(self._loop.run_until_complete(self._client.list_tools()))

    def close(self) -> None:
        try:
            self._loop.run_until_complete(self._client.__aexit__(None, None, None))
        finally:
            self._loop.close()


def text_of(result: Any) -> str:
    """All text content of a CallToolResult, joined."""
    return "\n".join(getattr(block, "text", "") for block in result.content)


@contextmanager
def open_session(
    name: str,
    world: World,
    *,
    mode: str = "individual",
    options: Mapping[str, Any] | None = None,
) -> Iterator[McpSession]:
    """Create server ``name`` over ``world`` and yield a connected session (see McpSession)."""
    server = create_server(
        name, fs_root=world.fs_root, apps_data_root=world.apps_root, mode=mode, options=options
    )
    session = McpSession(server, definition=get_definition(name), mode=mode)
    try:
        yield session
    finally:
        session.close()


def consolidated_call(
    session: McpSession, consolidated: str, action: str, arguments: Mapping[str, Any]
) -> Any:
    """Call ``consolidated(action=..., **arguments)``."""
    return session.call(consolidated, {"action": action, **arguments})
