"""A tiny MCP server over stdio, as an Archipelago config would launch it."""

import os

from fastmcp import FastMCP

server = FastMCP("child")


@server.tool
def echo(text: str) -> str:
    """Return the text, tagged with this process's greeting."""
    return f"{os.environ.get('GREETING', 'child')}:{text}"


@server.tool
def pid() -> int:
    """This child's process id."""
    return os.getpid()


if __name__ == "__main__":
    server.run(transport="stdio", show_banner=False)
