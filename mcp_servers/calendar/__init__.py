"""Calendar MCP server: the world's .ics files under ``<apps_data>/calendar``."""

from mcp_servers.calendar.server import SERVER

__all__ = ["SERVER"]
