"""The code server's definition (the tool registers itself on import)."""

from mcp_servers._core import ServerDefinition

SERVER = ServerDefinition(
    "code",
    consolidated_name="code",
    description=(
        "Run shell commands (bash) over the world's files, which are the working directory "
        "/filesystem. Python 3 with numpy, pandas, scipy, openpyxl, python-docx, python-pptx and "
        "matplotlib is available. No network."
    ),
)
