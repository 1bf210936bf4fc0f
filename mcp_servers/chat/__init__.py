"""Chat MCP server: the world's Google Chat export under ``<apps_data>/chat``."""

from mcp_servers.chat.server import SERVER

__all__ = ["SERVER"]
