"""The pdfs MCP server: page text with engine fallback and OCR, images, search, and PDF
creation with embedded Unicode fonts. See docs/mcp_servers.md."""

from mcp_servers.pdfs.tools import SERVER

__all__ = ["SERVER"]
