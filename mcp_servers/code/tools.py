"""``code_exec``: one shell command in the sandbox, with its output and exit status."""

from __future__ import annotations

import os
from typing import Annotated

from pydantic import BaseModel, Field

from mcp_servers._core import ServerContext, ToolError
from mcp_servers.code.sandbox import SandboxLimits, SandboxUnavailable, run_command
from mcp_servers.code.server import SERVER

_TRUE = {"1", "true", "yes", "on"}


class ExecResult(BaseModel):
    output: str
    exit_code: int | None
    timed_out: bool
    killed_reason: str | None = None
    truncated: bool
    output_bytes: int
    duration_s: float
    sandbox: str

    def render_text(self) -> str:
        footer = []
        if self.truncated:
            footer.append(f"output truncated: {self.output_bytes} bytes produced, first part shown; "
                          "write large output to a file and read it in ranges")
        if self.killed_reason:
            footer.append(f"killed: {self.killed_reason}")
        else:
            footer.append(f"exit code {self.exit_code}")
        return self.output + ("\n" if self.output and not self.output.endswith("\n") else "") + \
            "\n".join(f"[{line}]" for line in footer)


def _limits(ctx: ServerContext, timeout_s: float | None) -> SandboxLimits:
    defaults = SandboxLimits()
    configured_timeout = float(ctx.option("timeout_s", defaults.timeout_s))
    return SandboxLimits(
        timeout_s=min(timeout_s, configured_timeout) if timeout_s else configured_timeout,
        cpu_s=int(ctx.option("cpu_s", defaults.cpu_s)),
        memory_mb=int(ctx.option("memory_mb", defaults.memory_mb)),
        max_processes=int(ctx.option("max_processes", defaults.max_processes)),
        max_file_mb=int(ctx.option("max_file_mb", defaults.max_file_mb)),
        max_write_mb=int(ctx.option("max_write_mb", defaults.max_write_mb)),
        tmp_mb=int(ctx.option("tmp_mb", defaults.tmp_mb)),
        max_output_chars=int(ctx.option("max_output_chars", defaults.max_output_chars)),
    )


def _trust_outer_sandbox(ctx: ServerContext) -> bool:
    value = ctx.option("trust_outer_sandbox")
    if value is None:
        value = os.environ.get("ATOLL_CODE_TRUST_OUTER_SANDBOX", "")
    return str(value).strip().lower() in _TRUE


@SERVER.tool(action="exec")
def code_exec(
    ctx: ServerContext,
    code: str,
    timeout_s: Annotated[float | None, Field(gt=0)] = None,
) -> ExecResult:
    """Run a shell command (bash -c) with the world's files as the working directory
    /filesystem; returns its combined stdout/stderr (capped) and exit code.

    Args:
        code: the shell command, e.g. "python3 analysis.py" or "python3 -c 'print(1+1)'".
        timeout_s: wall-clock limit in seconds (at most the server's limit, default 300).
    """
    if not code.strip():
        raise ToolError("invalid_argument", "code: the command is empty", argument="code")
    if "\x00" in code:
        raise ToolError("invalid_argument", "code: contains a NUL byte", argument="code")
    try:
        result = run_command(
            code, ctx.fs_root, _limits(ctx, timeout_s), bwrap=ctx.option("bwrap_path", "bwrap"),
            trust_outer_sandbox=_trust_outer_sandbox(ctx),
        )
    except SandboxUnavailable as exc:
        raise ToolError(
            "unsupported",
            f"code execution is disabled: {exc}. Run where bubblewrap can create user namespaces, or "
            "set ATOLL_CODE_TRUST_OUTER_SANDBOX=1 only inside an outer sandbox (gVisor, Kata)",
        ) from None
    return ExecResult(
        output=result.output, exit_code=result.exit_code, timed_out=result.timed_out,
        killed_reason=result.killed_reason, truncated=result.truncated, output_bytes=result.output_bytes,
        duration_s=result.duration_s, sandbox=result.sandbox,
    )
