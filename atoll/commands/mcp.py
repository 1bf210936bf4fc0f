"""`atoll mcp NAME`: run one MCP app server standalone."""

from __future__ import annotations

import typer


def mcp(name: str = typer.Argument(..., help="server name, e.g. mail")) -> None:
    """Run one MCP server standalone."""
    raise typer.BadParameter(f"unknown server {name!r}")
