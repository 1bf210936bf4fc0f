"""Documents MCP server: Word (.docx) files under the filesystem root."""

from mcp_servers.documents import tools_format as _tools_format  # noqa: F401  (registers more tools)
from mcp_servers.documents import tools_write as _tools_write  # noqa: F401  (registers the writing tools)
from mcp_servers.documents.server import SERVER

__all__ = ["SERVER"]
