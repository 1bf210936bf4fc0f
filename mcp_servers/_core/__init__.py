"""The shared foundation of every atoll MCP server (see docs/mcp_servers.md).

Light to import: FastMCP is only loaded by :mod:`mcp_servers._core.build`, and the names
below are loaded from their modules on first use (PEP 562), so code that needs one part (the
environment's populate and snapshot need only :mod:`~mcp_servers._core.beneath`) does not
import the tool definitions and result models with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from atoll._lazy import lazy_attributes

#: exported name -> the module defining it (``beneath``: that submodule itself)
_EXPORTS: dict[str, str] = {
    "beneath": "mcp_servers._core.beneath",
    "AppData": "mcp_servers._core.app_data",
    "OutsideRoot": "mcp_servers._core.beneath",
    "Root": "mcp_servers._core.beneath",
    "ServerContext": "mcp_servers._core.context",
    "ServerDefinition": "mcp_servers._core.definition",
    "ToolDef": "mcp_servers._core.definition",
    "ERROR_CODES": "mcp_servers._core.errors",
    "ToolError": "mcp_servers._core.errors",
    "InvalidOption": "mcp_servers._core.options",
    "ServerOptions": "mcp_servers._core.options",
    "validate_options": "mcp_servers._core.options",
    "MAX_NAME_BYTES": "mcp_servers._core.paths",
    "MAX_PATH_CHARS": "mcp_servers._core.paths",
    "PathResolver": "mcp_servers._core.paths",
    "validate_id": "mcp_servers._core.paths",
    "ImageBlock": "mcp_servers._core.results",
    "ToolOutput": "mcp_servers._core.results",
    "FileCache": "mcp_servers._core.store",
    "FileStamp": "mcp_servers._core.store",
    "file_lock": "mcp_servers._core.store",
    "WorldPath": "mcp_servers._core.world_path",
}

__all__ = [
    "AppData",
    "ERROR_CODES",
    "FileCache",
    "FileStamp",
    "ImageBlock",
    "InvalidOption",
    "MAX_NAME_BYTES",
    "MAX_PATH_CHARS",
    "OutsideRoot",
    "PathResolver",
    "Root",
    "ServerContext",
    "ServerDefinition",
    "ServerOptions",
    "ToolDef",
    "ToolError",
    "ToolOutput",
    "WorldPath",
    "beneath",
    "file_lock",
    "validate_id",
    "validate_options",
]


__getattr__, __dir__ = lazy_attributes(__name__, _EXPORTS, globals())


if TYPE_CHECKING:
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
