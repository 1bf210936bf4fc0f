"""The spreadsheets MCP server: .xlsx workbooks (and .csv reads) with formulas recomputed
by a warm headless LibreOffice after every write. See docs/mcp_servers.md."""

from mcp_servers.spreadsheets import tools_read  # noqa: F401  (registers the read tools)
from mcp_servers.spreadsheets.tools import SERVER

__all__ = ["SERVER"]
