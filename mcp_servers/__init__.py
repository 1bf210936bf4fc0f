"""atoll's MCP servers: nine app servers (and the optional market_data) built on one
foundation (``mcp_servers._core``).

    from mcp_servers import create_server, SERVER_NAMES
    server = create_server("mail", fs_root=..., apps_data_root=..., options={"user_email": ...})

A host that calls the tools in-process (the environment's gateway) takes them without the
FastMCP server: ``create_tools`` (same arguments) gives an :class:`AppTools`.

Importing this package is cheap: each server (and FastMCP) is imported only when
:func:`create_server` first needs it, and one server never imports another's libraries.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from atoll.apps import DEFAULT_SERVERS, OPTIONAL_SERVERS
from atoll.errors import AtollError, ErrorCode
from atoll.registry import Registry

if TYPE_CHECKING:
    from fastmcp import FastMCP

    from mcp_servers._core.build import AppTools
    from mcp_servers._core.context import ServerContext
    from mcp_servers._core.definition import ServerDefinition

# One table of servers for the whole tree: atoll.apps (which maps a world's apps onto them)
# owns it, since atoll may not import the servers; optional ones start only for worlds
# that need them.
SERVER_NAMES: tuple[str, ...] = DEFAULT_SERVERS
OPTIONAL_SERVER_NAMES: tuple[str, ...] = OPTIONAL_SERVERS
MODES: tuple[str, ...] = ("individual", "consolidated")

# The one registry of servers (atoll.registry): the built-in ones are declared here (each
# package's module attribute SERVER is its definition, imported on first use); tests and
# plug-ins add theirs with register_server, packages through an ``atoll.servers`` entry point
# naming their ServerDefinition.
SERVERS: Registry[ServerDefinition] = Registry(
    "MCP server",
    group="atoll.servers",
    unknown_code=ErrorCode.unknown_server,
    unavailable_code=ErrorCode.server_unavailable,
)
for _name in (*SERVER_NAMES, *OPTIONAL_SERVER_NAMES):
    SERVERS.declare(_name, f"mcp_servers.{_name}:SERVER")


def register_server(definition: ServerDefinition) -> None:
    """Make ``definition`` available to :func:`create_server` under its name (replacing any
    definition registered under that name before)."""
    SERVERS.remove(definition.name)
    SERVERS.add(definition.name, definition)


def unregister_server(name: str) -> None:
    """Forget a server registered with :func:`register_server` (no-op if absent)."""
    SERVERS.remove(name)


def get_definition(name: str) -> ServerDefinition:
    """The definition of server ``name``, importing its module on first use.

    Raises AtollError ``unknown_server`` for a name that is neither built in, registered nor
    an entry point, ``server_unavailable`` when the server's module is missing.
    """
    return SERVERS.get(name)


def create_server(
    name: str,
    *,
    fs_root: str | Path,
    apps_data_root: str | Path,
    mode: str = "individual",
    options: Mapping[str, Any] | None = None,
) -> FastMCP:
    """A ready FastMCP server for app ``name`` over the given world roots.

    ``mode`` is ``individual`` (one tool per function, bare names like ``send_mail``) or
    ``consolidated`` (``NAME(action=…)`` plus ``NAME_schema``). ``options`` are per-server
    knobs; ``user_email``/``user_name`` are the world's user.

    Raises AtollError ``unknown_server``, ``server_unavailable`` or ``invalid_mode``, and
    ``invalid_option`` (:class:`~mcp_servers._core.options.InvalidOption`) naming an option the
    server does not take or a value of the wrong type.
    """
    from mcp_servers._core.build import build_server

    definition, context = _prepared(name, fs_root, apps_data_root, mode, options)
    return build_server(definition, context, mode=mode)


def create_tools(
    name: str,
    *,
    fs_root: str | Path,
    apps_data_root: str | Path,
    mode: str = "individual",
    options: Mapping[str, Any] | None = None,
) -> AppTools:
    """App ``name``'s tools over the given world roots, listed as :func:`create_server`'s server
    lists them and callable in-process without it (``tool.run(arguments)``); the same arguments
    and errors."""
    from mcp_servers._core.build import build_tools

    definition, context = _prepared(name, fs_root, apps_data_root, mode, options)
    return build_tools(definition, context, mode=mode)


def _prepared(
    name: str,
    fs_root: str | Path,
    apps_data_root: str | Path,
    mode: str,
    options: Mapping[str, Any] | None,
) -> tuple[ServerDefinition, ServerContext]:
    if mode not in MODES:
        raise AtollError(
            ErrorCode.invalid_mode, f"MCP server mode must be one of {', '.join(MODES)}, got {mode!r}"
        )
    definition = get_definition(name)
    from mcp_servers._core.context import ServerContext
    from mcp_servers._core.options import validate_options

    options = validate_options(name, definition.options, options)
    return definition, ServerContext.create(fs_root, apps_data_root, options)


def direct_tools(server: FastMCP) -> dict[str, Any]:
    """The tools of a server made by :func:`create_server`, by name, each callable in-process
    with fastmcp's public ``Tool.run(arguments)`` (they need no request context or server
    middleware); the environment's gateway calls them so. Empty for any other server."""
    from mcp_servers._core.build import direct_tools as tools_of

    return tools_of(server)


def server_warmer(server: FastMCP) -> Any:
    """``warm()`` of a server made by :func:`create_server` (builds its indexes ahead of the
    first call; mail, calendar and chat have one), or None."""
    from mcp_servers._core.build import server_warmer as warmer

    return warmer(server)


__all__ = [
    "MODES",
    "OPTIONAL_SERVER_NAMES",
    "SERVERS",
    "SERVER_NAMES",
    "create_server",
    "create_tools",
    "direct_tools",
    "get_definition",
    "register_server",
    "server_warmer",
    "unregister_server",
]
