"""The shared foundation of every atoll MCP server (see docs/mcp_servers.md).

Light to import: FastMCP is only loaded by :mod:`mcp_servers._core.build`.
"""

from mcp_servers._core import beneath
from mcp_servers._core.app_data import AppData
from mcp_servers._core.beneath import OutsideRoot, Root
from mcp_servers._core.context import ServerContext
from mcp_servers._core.definition import ServerDefinition, ToolDef
from mcp_servers._core.errors import ERROR_CODES, ToolError
from mcp_servers._core.options import InvalidOption, ServerOptions, validate_options
from mcp_servers._core.paths import MAX_NAME_BYTES, MAX_PATH_CHARS, PathResolver, validate_id
from mcp_servers._core.results import ImageBlock, ToolOutput
from mcp_servers._core.store import FileCache, FileStamp, file_lock
from mcp_servers._core.world_path import WorldPath

__all__ = [
    "AppData",
    "ERROR_CODES",
    "MAX_NAME_BYTES",
    "MAX_PATH_CHARS",
    "FileCache",
    "FileStamp",
    "ImageBlock",
    "InvalidOption",
    "OutsideRoot",
    "PathResolver",
    "Root",
    "ServerContext",
    "ServerDefinition",
    "ServerOptions",
    "ToolDef",
    "ToolError",
    "ToolOutput",
    "beneath",
    "file_lock",
    "WorldPath",
    "validate_id",
    "validate_options",
]
