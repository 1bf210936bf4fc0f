"""The shared foundation of every atoll MCP server (see docs/mcp_servers.md).

Light to import: FastMCP is only loaded by :mod:`mcp_servers._core.build`, and the names
below are loaded from their modules on first use (PEP 562), so code that needs one part (the
environment's populate and snapshot need only :mod:`~mcp_servers._core.beneath`) does not
import the tool definitions and result models with it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

#: exported name -> (module, attribute in it; None: the module itself)
_EXPORTS: dict[str, tuple[str, str | None]] = {
    "beneath": ("mcp_servers._core.beneath", None),
    "AppData": ("mcp_servers._core.app_data", "AppData"),
    "OutsideRoot": ("mcp_servers._core.beneath", "OutsideRoot"),
    "Root": ("mcp_servers._core.beneath", "Root"),
    "ServerContext": ("mcp_servers._core.context", "ServerContext"),
    "ServerDefinition": ("mcp_servers._core.definition", "ServerDefinition"),
    "ToolDef": ("mcp_servers._core.definition", "ToolDef"),
    "ERROR_CODES": ("mcp_servers._core.errors", "ERROR_CODES"),
    "ToolError": ("mcp_servers._core.errors", "ToolError"),
    "InvalidOption": ("mcp_servers._core.options", "InvalidOption"),
    "ServerOptions": ("mcp_servers._core.options", "ServerOptions"),
    "validate_options": ("mcp_servers._core.options", "validate_options"),
    "MAX_NAME_BYTES": ("mcp_servers._core.paths", "MAX_NAME_BYTES"),
    "MAX_PATH_CHARS": ("mcp_servers._core.paths", "MAX_PATH_CHARS"),
    "PathResolver": ("mcp_servers._core.paths", "PathResolver"),
    "validate_id": ("mcp_servers._core.paths", "validate_id"),
    "ImageBlock": ("mcp_servers._core.results", "ImageBlock"),
    "ToolOutput": ("mcp_servers._core.results", "ToolOutput"),
    "FileCache": ("mcp_servers._core.store", "FileCache"),
    "FileStamp": ("mcp_servers._core.store", "FileStamp"),
    "file_lock": ("mcp_servers._core.store", "file_lock"),
    "WorldPath": ("mcp_servers._core.world_path", "WorldPath"),
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


def __getattr__(name: str) -> Any:
    try:
        module_name, attribute = _EXPORTS[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})


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
