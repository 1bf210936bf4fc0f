"""The filesystem server's definition (tools register themselves on import)."""

from mcp_servers._core import ServerDefinition

SERVER = ServerDefinition(
    "filesystem",
    consolidated_name="filesystem",
    description=(
        "Read-only access to the files of the world. Paths are virtual: '/' is the root of the "
        "world's files, e.g. '/Reports/q3.xlsx'."
    ),
)
