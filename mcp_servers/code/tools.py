"""``code_exec``: one shell command in the sandbox, with its output and exit status."""

from __future__ import annotations

import asyncio
import functools
import os
import weakref
from pathlib import Path
from typing import Annotated

import anyio.to_thread
from anyio import CapacityLimiter
from pydantic import BaseModel, Field

from atoll.errors import ErrorCode
from mcp_servers._core import ServerContext, ToolError
from mcp_servers._core.options import InvalidOption
from mcp_servers.code.config import CodeOptions
from mcp_servers.code.sandbox import SandboxUnavailable, run_command
from mcp_servers.code.server import SERVER

# Sandbox runs wait in their own queue, so long ones never hold the event loop's shared worker
# threads (anyio's default 40), which every other tool and /data/* need. One per event loop
# and world: one run's long calls never make another run's calls wait.
_POOLS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, CapacityLimiter]] = (
    weakref.WeakKeyDictionary()
)


class ExecResult(BaseModel):
    output: str
    exit_code: int | None
    timed_out: bool
    killed_reason: str | None = None
    truncated: bool
    output_bytes: int
    duration_s: float
    sandbox: str
    notes: list[str] = []

    def render_text(self) -> str:
        footer = []
        if self.truncated:
            footer.append(
                f"output truncated: {self.output_bytes} bytes produced, first part shown; "
                "write large output to a file and read it in ranges"
            )
        if self.killed_reason:
            footer.append(f"killed: {self.killed_reason}")
        else:
            footer.append(f"exit code {self.exit_code}")
        footer += self.notes  # what the server did to the world after the call
        return (
            self.output
            + ("\n" if self.output and not self.output.endswith("\n") else "")
            + "\n".join(f"[{line}]" for line in footer)
        )


def _settings(ctx: ServerContext) -> CodeOptions:
    """The server's settings (its options over ``ATOLL_CODE_*``); an invalid one is named."""
    try:
        return CodeOptions.resolve(ctx.options)
    except InvalidOption as exc:
        raise ToolError(ErrorCode.unsupported, f"code execution is misconfigured: {exc.message}") from None


def _pool(settings: CodeOptions, fs_root: Path) -> CapacityLimiter:
    pools = _POOLS.setdefault(asyncio.get_running_loop(), {})
    key = os.path.realpath(fs_root)
    pool = pools.get(key)
    if pool is None:
        pool = pools[key] = CapacityLimiter(settings.max_concurrent)
    return pool


@SERVER.tool(action="exec")
async def code_exec(
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
        raise ToolError(ErrorCode.invalid_argument, "code: the command is empty", argument="code")
    if "\x00" in code:
        raise ToolError(ErrorCode.invalid_argument, "code: contains a NUL byte", argument="code")
    if not ctx.fs_root.is_dir():
        raise ToolError(
            ErrorCode.not_found,
            f"the world's filesystem root {ctx.fs_root} does not exist (populate it first)",
        )
    settings = _settings(ctx)
    run = functools.partial(run_command, code, ctx.fs_root, settings.limits(timeout_s), settings)
    try:
        result = await anyio.to_thread.run_sync(run, limiter=_pool(settings, ctx.fs_root))
    except SandboxUnavailable as exc:
        raise ToolError(
            ErrorCode.unsupported,
            f"code execution is disabled: {exc}. Run where bubblewrap can create user namespaces, or "
            "set ATOLL_CODE_TRUST_OUTER_SANDBOX=1 only inside an outer sandbox (gVisor, Kata)",
        ) from None
    return ExecResult(
        output=result.output,
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        killed_reason=result.killed_reason,
        truncated=result.truncated,
        output_bytes=result.output_bytes,
        duration_s=result.duration_s,
        sandbox=result.sandbox,
        notes=result.notes,
    )
