"""Support for the spreadsheets and pdfs tests (no tests here): calling a tool in either mode."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from mcp_servers import get_definition
from tests.mcp_servers.helpers import McpSession, World, open_session, text_of


class ModeSession:
    """Calls tools by their individual name; in consolidated mode through NAME(action=...)."""

    def __init__(self, session: McpSession, server: str, mode: str) -> None:
        self.session = session
        self.mode = mode
        self.definition = get_definition(server)

    def call(self, tool: str, arguments: Mapping[str, Any] | None = None) -> Any:
        if self.mode == "individual":
            return self.session.call(tool, arguments)
        found = self.definition.find(tool)
        assert found is not None, tool
        return self.session.call(
            self.definition.consolidated_name, {"action": found.action, **dict(arguments or {})}
        )

    def ok(self, tool: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
        result = self.call(tool, arguments)
        assert not result.is_error, f"{tool} failed: {text_of(result)}"
        return result.structured_content

    def error(self, tool: str, arguments: Mapping[str, Any] | None = None) -> dict[str, Any]:
        result = self.call(tool, arguments)
        assert result.is_error, f"{tool} unexpectedly succeeded: {text_of(result)[:300]}"
        return result.structured_content["error"]


@contextmanager
def mode_session(
    server: str, world: World, mode: str, options: Mapping[str, Any] | None = None
) -> Iterator[ModeSession]:
    with open_session(server, world, mode=mode, options=options) as session:
        yield ModeSession(session, server, mode)
