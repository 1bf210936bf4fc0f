"""Run an agent's shell command in a bubblewrap sandbox.

What the command sees: the world's filesystem root at ``/filesystem`` (read-write, the
working directory), a fresh size-capped ``/tmp``, ``/usr`` and the Python that carries
the analysis libraries (read-only), and nothing else of the host — no app data, no home,
no network (every namespace unshared), an environment with no inherited variables.

Limits: CPU seconds, address space, process count and file size (rlimits, set before
exec and inherited inside; the process count also by a ``pids`` cgroup where the server
can make one, since the rlimit does not bind a server running as root), a wall-clock
timeout that kills the whole process tree (the sandbox's PID namespace dies with its
init), bytes written under the root (a watchdog), and output captured while reading up
to a cap (the rest is drained and counted, never buffered).

Without a working bubblewrap the sandbox refuses to run, unless the server is told the
process already runs inside an outer sandbox (gVisor, Kata) with ``trust_outer_sandbox``.
"""

from __future__ import annotations

import contextlib
import os
import resource
import selectors
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from mcp_servers.code.pids import PidsCgroup

SANDBOX_ROOT = "/filesystem"
_PROBE_CACHE: dict[str, str | None] = {}
_PROBE_LOCK = threading.Lock()


@dataclass(frozen=True)
class SandboxLimits:
    timeout_s: float = 300.0
    cpu_s: int = 600
    memory_mb: int = 4096
    max_processes: int = 256
    max_file_mb: int = 1024
    max_write_mb: int = 2048
    tmp_mb: int = 512
    max_output_chars: int = 100_000


@dataclass
class SandboxResult:
    output: str
    exit_code: int | None
    timed_out: bool = False
    killed_reason: str | None = None
    truncated: bool = False
    output_bytes: int = 0
    duration_s: float = 0.0
    sandbox: str = "bubblewrap"
    notes: list[str] = field(default_factory=list)


class SandboxUnavailable(Exception):
    """bubblewrap is missing or cannot create namespaces here."""


def _python_mounts() -> list[str]:
    """Prefixes of the interpreter that carries numpy, pandas, openpyxl … (read-only)."""
    prefixes = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)}
    return sorted(p for p in prefixes if not p.startswith("/usr"))


def _bwrap_command(bwrap: str, fs_root: Path, limits: SandboxLimits, command: list[str]) -> list[str]:
    args = [
        bwrap,
        "--unshare-all",  # user, ipc, pid, net, uts, cgroup: no network at all
        "--die-with-parent",
        "--new-session",
        "--hostname", "sandbox",
        "--uid", "1000", "--gid", "1000",
        "--ro-bind", "/usr", "/usr",
        "--symlink", "usr/bin", "/bin",
        "--symlink", "usr/sbin", "/sbin",
        "--symlink", "usr/lib", "/lib",
    ]
    if os.path.isdir("/usr/lib64"):
        args += ["--symlink", "usr/lib64", "/lib64"]
    for path in ("/etc/ld.so.cache", "/etc/fonts", "/etc/localtime", "/etc/alternatives", "/etc/mime.types"):
        args += ["--ro-bind-try", path, path]
    args += [
        "--proc", "/proc",
        "--dev", "/dev",
        "--size", str(limits.tmp_mb * 1024 * 1024), "--tmpfs", "/tmp",
    ]
    # After the tmpfs, so an interpreter that lives under /tmp (a CI checkout) stays visible.
    for prefix in _python_mounts():
        args += ["--ro-bind", prefix, prefix]
    args += [
        "--bind", str(fs_root), SANDBOX_ROOT,
        "--chdir", SANDBOX_ROOT,
        "--clearenv",
    ]
    for name, value in _sandbox_environment().items():
        args += ["--setenv", name, value]
    return args + ["--"] + command


def _sandbox_environment() -> dict[str, str]:
    bin_dirs = [os.path.join(os.path.realpath(sys.prefix), "bin"), "/usr/local/bin", "/usr/bin", "/bin"]
    return {
        "PATH": ":".join(dict.fromkeys(bin_dirs)),
        "HOME": "/tmp",
        "TMPDIR": "/tmp",
        "LANG": "C.UTF-8",
        "MPLBACKEND": "Agg",
        "MPLCONFIGDIR": "/tmp/matplotlib",
        "OPENBLAS_NUM_THREADS": "1",
        "OMP_NUM_THREADS": "1",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
    }


def probe(bwrap: str | None) -> str | None:
    """None when bubblewrap can build a sandbox here, else the reason it cannot (cached)."""
    key = bwrap or ""
    with _PROBE_LOCK:
        if key in _PROBE_CACHE:
            return _PROBE_CACHE[key]
        reason: str | None
        if not bwrap or not shutil.which(bwrap):
            reason = f"bubblewrap not found ({bwrap or 'bwrap'} is not on PATH; Debian package 'bubblewrap')"
        else:
            scratch = Path(os.environ.get("TMPDIR", "/tmp"))
            check = _bwrap_command(bwrap, scratch, SandboxLimits(), ["/bin/true"])
            try:
                completed = subprocess.run(check, capture_output=True, text=True, timeout=30)
                reason = None if completed.returncode == 0 else (
                    f"bubblewrap cannot create namespaces here: {completed.stderr.strip()[:300]}"
                )
            except (OSError, subprocess.TimeoutExpired) as exc:
                reason = f"bubblewrap failed to start: {exc}"
        _PROBE_CACHE[key] = reason
        return reason


def _rlimits(limits: SandboxLimits) -> None:
    """Runs in the child between fork and exec: the limits every sandboxed process inherits."""
    mb = 1024 * 1024
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * mb, limits.memory_mb * mb))
    resource.setrlimit(resource.RLIMIT_NPROC, (limits.max_processes, limits.max_processes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.max_file_mb * mb, limits.max_file_mb * mb))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def _tree_bytes(root: Path, *, cap_entries: int = 50_000) -> int:
    total = 0
    seen = 0
    stack = [str(root)]
    while stack and seen < cap_entries:
        try:
            with os.scandir(stack.pop()) as entries:
                for entry in entries:
                    seen += 1
                    try:
                        if entry.is_dir(follow_symlinks=False):
                            stack.append(entry.path)
                        elif entry.is_file(follow_symlinks=False):
                            total += entry.stat(follow_symlinks=False).st_blocks * 512
                    except OSError:
                        continue
        except OSError:
            continue
    return total


def run_command(
    code: str,
    fs_root: Path,
    limits: SandboxLimits,
    *,
    bwrap: str | None = "bwrap",
    trust_outer_sandbox: bool = False,
) -> SandboxResult:
    """Run ``code`` with ``bash -c`` in the sandbox; never raises for what the code does.

    Raises SandboxUnavailable when bubblewrap cannot run and no outer sandbox is trusted.
    """
    command = ["/bin/bash", "-c", code]
    reason = probe(bwrap)
    if reason is None:
        argv = _bwrap_command(bwrap or "bwrap", fs_root, limits, command)
        cwd, env, kind = None, {"PATH": "/usr/bin:/bin"}, "bubblewrap"
    elif trust_outer_sandbox:
        argv = command
        cwd, env, kind = str(fs_root), _sandbox_environment(), "outer (trusted)"
    else:
        raise SandboxUnavailable(reason)

    started = time.monotonic()
    baseline = _tree_bytes(fs_root)
    group = PidsCgroup.create(limits.max_processes)

    def before_exec() -> None:
        _rlimits(limits)
        if group is not None:
            group.enter()

    try:
        process = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=before_exec,
        )  # fmt: skip
    except BaseException:
        if group is not None:
            group.kill_and_remove()
        raise
    result = SandboxResult(output="", exit_code=None, sandbox=kind)
    captured = bytearray()
    byte_cap = limits.max_output_chars * 4  # enough bytes for the character cap in any UTF-8 text
    deadline = started + limits.timeout_s
    next_disk_check = started + 0.2
    selector = selectors.DefaultSelector()
    assert process.stdout is not None
    selector.register(process.stdout, selectors.EVENT_READ)
    try:
        while True:
            now = time.monotonic()
            if now >= deadline:
                result.timed_out = True
                result.killed_reason = f"wall-clock timeout after {limits.timeout_s:g} s"
                break
            if now >= next_disk_check:
                next_disk_check = now + 0.2
                if _tree_bytes(fs_root) - baseline > limits.max_write_mb * 1024 * 1024:
                    result.killed_reason = f"wrote more than {limits.max_write_mb} MB under {SANDBOX_ROOT}"
                    break
            if not selector.select(timeout=min(0.25, max(deadline - now, 0.01))):
                if process.poll() is not None:
                    break
                continue
            chunk = os.read(process.stdout.fileno(), 65536)
            if not chunk:
                break
            result.output_bytes += len(chunk)
            room = byte_cap - len(captured)
            if room > 0:
                captured += chunk[:room]
    finally:
        selector.close()
        _kill_tree(process)
        if group is not None:  # anything that left the process group (setsid) goes too
            group.kill_and_remove()
        process.stdout.close()
    result.exit_code = process.returncode if result.killed_reason is None else None
    result.duration_s = round(time.monotonic() - started, 3)
    text = captured.decode("utf-8", errors="replace")
    if len(text) > limits.max_output_chars or result.output_bytes > len(captured):
        result.truncated = True
        text = text[: limits.max_output_chars]
    result.output = text
    if result.exit_code is not None and result.exit_code < 0:
        result.notes.append(f"killed by signal {signal.Signals(-result.exit_code).name}")
    return result


def _kill_tree(process: subprocess.Popen) -> None:
    """SIGKILL the process group, even when its leader already exited (background children);
    under bubblewrap the PID namespace also takes every descendant with it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    try:
        process.wait(timeout=10)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
