"""The bubblewrap command line, and which way of building the sandbox works here.

Two ways to give the sandbox a ``/proc``, tried in this order when the server starts:

- ``procfs``: a fresh procfs of the sandbox's own PID namespace, remounted read-only as a
  whole (``/proc/sys``, ``/proc/sysrq-trigger`` and the rest included; nothing under it can
  be written).
- ``minimal-proc``: where the kernel refuses a fresh procfs — Docker and Kubernetes mask
  paths under the container's ``/proc`` (``/proc/kcore`` bound to ``/dev/null``, ``/proc/sys``
  read-only, …), and a user namespace may only mount procfs where an unmasked one is
  visible, so bubblewrap's ``--proc`` fails with "Can't mount proc on /newroot/proc:
  Operation not permitted" — ``/proc`` is a read-only tmpfs holding read-only binds of a few
  system-wide files (``cpuinfo``, ``meminfo``, ``stat``, …). No process of the sandbox or of
  the host is listed there, no sysctl is reachable; ``/proc/self`` (and so ``/dev/fd``,
  ``ps``) is missing, which costs compatibility, not containment.

Everything else is the same in both: every namespace unshared (no network), no nested user
namespaces (the seccomp filter of :mod:`mcp_servers.code.seccomp`; in ``procfs`` mode also
``--disable-userns``),
``/usr`` and the interpreter's prefix read-only, a size-capped ``/tmp``, the world's
filesystem root bound read-write at ``/filesystem``, no inherited environment.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping

SANDBOX_ROOT = "/filesystem"
MODES = ("procfs", "minimal-proc")
_MINIMAL_PROC_FILES = ("cpuinfo", "meminfo", "stat", "uptime", "loadavg", "version", "filesystems")
_PROC_REFUSED = "Can't mount proc"
_PROBE_CACHE: dict[tuple[object, ...], tuple[str | None, str | None]] = {}
_PROBE_LOCK = threading.Lock()


def python_prefixes() -> list[str]:
    """Prefixes of the interpreter that carries numpy, pandas, openpyxl … (read-only)."""
    prefixes = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.prefix)}
    return sorted(p for p in prefixes if not p.startswith("/usr"))


def sandbox_environment() -> dict[str, str]:
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


def _proc_arguments(mode: str) -> list[str]:
    if mode == "procfs":
        return ["--proc", "/proc", "--remount-ro", "/proc"]
    args = ["--tmpfs", "/proc"]
    for name in _MINIMAL_PROC_FILES:
        args += ["--ro-bind-try", f"/proc/{name}", f"/proc/{name}"]
    return args + ["--remount-ro", "/proc"]


def bwrap_argv(
    bwrap: str,
    mode: str,
    *,
    tmp_bytes: int,
    root_source: str,
    prefix_sources: Mapping[str, str],
    command: list[str],
    seccomp_fd: int | None = None,
) -> list[str]:
    """The command line. ``root_source`` is bound at ``/filesystem``; ``prefix_sources`` maps
    each interpreter prefix to the path bubblewrap reads it from (itself, or its staged alias)."""
    args = [
        bwrap,
        "--unshare-all",  # user, ipc, pid, net, uts, cgroup: no network at all
        "--unshare-user",
        "--die-with-parent",
        "--new-session",
        "--hostname", "sandbox",
        "--uid", "1000", "--gid", "1000",
        "--ro-bind", "/usr", "/usr",
        "--symlink", "usr/bin", "/bin",
        "--symlink", "usr/sbin", "/sbin",
        "--symlink", "usr/lib", "/lib",
    ]  # fmt: skip
    if mode == "procfs":
        # No nested user namespaces (no way back to capabilities, no file capabilities to
        # set). bubblewrap does it through /proc/sys/user, which a masked /proc keeps read-only.
        args.append("--disable-userns")
    if os.path.isdir("/usr/lib64"):
        args += ["--symlink", "usr/lib64", "/lib64"]
    for path in ("/etc/ld.so.cache", "/etc/fonts", "/etc/localtime", "/etc/alternatives", "/etc/mime.types"):
        args += ["--ro-bind-try", path, path]
    args += _proc_arguments(mode)
    args += ["--dev", "/dev", "--size", str(tmp_bytes), "--tmpfs", "/tmp"]
    # After the tmpfs, so an interpreter that lives under /tmp (a CI checkout) stays visible.
    for prefix, source in sorted(prefix_sources.items()):
        args += ["--ro-bind", source, prefix]
    args += ["--bind", root_source, SANDBOX_ROOT, "--chdir", SANDBOX_ROOT, "--clearenv"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    for name, value in sandbox_environment().items():
        args += ["--setenv", name, value]
    return args + ["--"] + command


Launch = Callable[[str, str], tuple[list[str], Callable[[], None], Callable[[], None], tuple[int, ...]]]
"""``launch(mode, root)`` -> (argv, before_exec, clean_up, pass_fds): how bubblewrap is started."""


def _try(launch: Launch, mode: str) -> str | None:
    """None when a sandbox of ``mode`` runs ``/bin/true`` here, else bubblewrap's complaint."""
    scratch = tempfile.mkdtemp(prefix="atoll-sandbox-probe-")
    os.chmod(scratch, 0o755)  # the sandbox user must be able to enter it
    try:
        argv, before_exec, clean_up, pass_fds = launch(mode, scratch)
        try:
            completed = subprocess.run(
                argv, capture_output=True, text=True, timeout=30, cwd="/", env={"PATH": "/usr/bin:/bin"},
                preexec_fn=before_exec, pass_fds=pass_fds,
            )  # fmt: skip
        finally:
            clean_up()
        if completed.returncode == 0:
            return None
        return completed.stderr.strip()[:300] or f"exit status {completed.returncode}"
    except (OSError, subprocess.SubprocessError) as exc:
        return f"bubblewrap failed to start: {exc}"
    finally:
        os.rmdir(scratch)


def probe(
    bwrap: str | None, requested: str, launch: Launch, cache_key: object
) -> tuple[str | None, str | None]:
    """``(mode, None)`` for the first mode that works (``requested``: "auto" or one of
    :data:`MODES`), or ``(None, reason)``; cached per bubblewrap, mode and sandbox user."""
    key = (bwrap, requested, cache_key)
    with _PROBE_LOCK:
        if key in _PROBE_CACHE:
            return _PROBE_CACHE[key]
        result: tuple[str | None, str | None]
        if requested not in ("auto", *MODES):
            result = (None, f"proc_mode {requested!r} is not one of auto, {', '.join(MODES)}")
        elif not bwrap or not shutil.which(bwrap):
            result = (
                None,
                f"bubblewrap not found ({bwrap or 'bwrap'} is not on PATH; Debian package 'bubblewrap')",
            )
        else:
            result = _probe_modes(launch, MODES if requested == "auto" else (requested,))
        _PROBE_CACHE[key] = result
        return result


def _probe_modes(launch: Launch, modes: tuple[str, ...]) -> tuple[str | None, str | None]:
    failures = []
    for mode in modes:
        complaint = _try(launch, mode)
        if complaint is None:
            return mode, None
        failures.append(f"{mode}: {complaint}")
        if mode == "procfs" and _PROC_REFUSED not in complaint:
            break  # not the masked-/proc case: the other mode fails the same way
    return None, "bubblewrap cannot build a sandbox here (" + "; ".join(failures) + ")"
