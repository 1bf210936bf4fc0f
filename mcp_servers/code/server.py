"""The code server's definition (the tool registers itself on import); its options are
:class:`~mcp_servers.code.config.CodeOptions`."""

from mcp_servers._core import ServerDefinition
from mcp_servers.code.config import CodeOptions

SERVER = ServerDefinition(
    "code",
    consolidated_name="code",
    description=(
        "Run shell commands (bash) over the world's files, which are the working directory "
        "/filesystem. Python 3 with numpy, pandas, scipy, openpyxl, python-docx, python-pptx and "
        "matplotlib is available. No network."
    ),
    options=CodeOptions,
)
