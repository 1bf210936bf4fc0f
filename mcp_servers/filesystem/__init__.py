"""Filesystem server: a read-only view of the filesystem root (the agent's ``/``).

Tools: list_files, read_text_file, read_image_file, search_files, get_file_metadata,
get_directory_tree. Consolidated tool: ``filesystem(action=list|read_text|read_image|
search|metadata|tree)``.
"""

from mcp_servers.filesystem import browse, reading  # noqa: F401  (registers the tools)
from mcp_servers.filesystem.server import SERVER

__all__ = ["SERVER"]
