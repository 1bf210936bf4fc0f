"""Presentations MCP server: PowerPoint (.pptx) decks under the filesystem root."""

from mcp_servers.presentations import tools_media as _tools_media  # noqa: F401  (registers more tools)
from mcp_servers.presentations import tools_write as _tools_write  # noqa: F401  (registers the writing tools)
from mcp_servers.presentations.server import SERVER

__all__ = ["SERVER"]
