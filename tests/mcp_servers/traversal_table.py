"""Rows for the traversal suite: every tool with a path-like argument, per server.

Add your server's tools here (see traversal.py for what the fields mean). ``base`` holds
valid values for the tool's other required arguments; ``setup`` seeds the world so those
values exist.
"""

from __future__ import annotations

from tests.mcp_servers.traversal import TraversalCase

FILESYSTEM_CASES = [
    TraversalCase("filesystem", "list_files", path_arguments=("path",)),
    TraversalCase("filesystem", "read_text_file", path_arguments=("file_path",)),
    TraversalCase("filesystem", "read_image_file", path_arguments=("file_path",)),
    TraversalCase("filesystem", "search_files", path_arguments=("path",), base={"pattern": "*"}),
    TraversalCase("filesystem", "search_files", path_arguments=("pattern",), base={"path": "/"}),
    TraversalCase("filesystem", "get_file_metadata", path_arguments=("file_path",)),
    TraversalCase("filesystem", "get_directory_tree", path_arguments=("path",), base={"max_depth": 10}),
]

TRAVERSAL_CASES: list[TraversalCase] = [*FILESYSTEM_CASES]
