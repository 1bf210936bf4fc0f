"""The code server's definition (the tool registers itself on import)."""

from pydantic import Field

from mcp_servers._core import ServerDefinition
from mcp_servers._core.options import ServerOptions


class CodeOptions(ServerOptions):
    """Options of the code server (each also read from ``ATOLL_CODE_<NAME>`` when not given,
    see :mod:`mcp_servers.code.config`); the limits default to ``SandboxLimits``."""

    timeout_s: float | None = Field(None, gt=0, description="limit of one command")
    cpu_s: int | None = Field(None, ge=1)
    memory_mb: int | None = Field(None, ge=1)
    max_processes: int | None = Field(None, ge=1)
    max_file_mb: int | None = Field(None, ge=1)
    max_write_mb: int | None = Field(None, ge=1)
    max_world_mb: int | None = Field(None, ge=1)
    tmp_mb: int | None = Field(None, ge=1)
    max_output_chars: int | None = Field(None, ge=1)
    cpu_weight: int | None = Field(None, ge=1)
    max_concurrent: int | None = Field(None, ge=1, description="commands run at once")
    bwrap_path: str | None = None
    proc_mode: str | None = None
    trust_outer_sandbox: bool | None = Field(None, description="run without bubblewrap (gVisor/Kata only)")
    sandbox_user: str | None = None
    sandbox_uid: int | None = None
    sandbox_gid: int | None = None


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
