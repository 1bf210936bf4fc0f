"""`atoll mcp NAME`: run one MCP app server standalone (stdio or Streamable HTTP)."""

from __future__ import annotations

import typer

from atoll.errors import AtollError, ErrorCode

_TRANSPORTS = ("stdio", "http")


def _parse_options(pairs: list[str]) -> dict[str, str]:
    options: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise AtollError(ErrorCode.invalid_option, f"--option {pair!r}: expected KEY=VALUE")
        options[key.strip()] = value
    return options


def mcp(
    name: str = typer.Argument(
        ...,
        help="server name: mail, calendar, chat, filesystem, code, spreadsheets, documents, pdfs, presentations, market_data",
    ),
    transport: str = typer.Option("stdio", "--transport", "-t", help="stdio or http (Streamable HTTP)"),
    fs_root: str = typer.Option(
        "/filesystem", "--fs-root", envvar="ATOLL_FS_ROOT", help="folder the agent sees as /"
    ),
    apps_data_root: str = typer.Option(
        "/.apps_data",
        "--apps-data-root",
        envvar="ATOLL_APPS_DATA_ROOT",
        help="app data folder (mail, calendar, chat)",
    ),
    mode: str = typer.Option(
        "individual", "--mode", help="individual tools or one consolidated NAME(action=...) tool"
    ),
    host: str = typer.Option("127.0.0.1", "--host", help="HTTP bind address"),
    port: int = typer.Option(8000, "--port", help="HTTP port"),
    path: str = typer.Option("/mcp", "--path", help="HTTP endpoint path"),
    user_email: str | None = typer.Option(
        None, "--user-email", envvar="ATOLL_USER_EMAIL", help="the world's user (mail/chat/calendar identity)"
    ),
    user_name: str | None = typer.Option(
        None, "--user-name", envvar="ATOLL_USER_NAME", help="the world's user's display name"
    ),
    option: list[str] = typer.Option([], "--option", "-o", help="extra server option KEY=VALUE (repeatable)"),
) -> None:
    """Run one MCP server standalone."""
    if transport not in _TRANSPORTS:
        raise AtollError(
            ErrorCode.invalid_transport,
            f"--transport must be one of {', '.join(_TRANSPORTS)}, got {transport!r}",
        )
    options = _parse_options(option)
    if user_email:
        options["user_email"] = user_email
    if user_name:
        options["user_name"] = user_name

    from atoll.runtime import freeze_startup_heap
    from mcp_servers import create_server

    server = create_server(name, fs_root=fs_root, apps_data_root=apps_data_root, mode=mode, options=options)
    freeze_startup_heap()
    if transport == "stdio":
        server.run(transport="stdio", show_banner=False)
    else:
        # One JSON body per request, as the environment's /mcp answers (no SSE stream per call).
        server.run(transport="http", show_banner=False, host=host, port=port, path=path, json_response=True)
