"""Run an agent's shell command in a bubblewrap sandbox, as an unprivileged host user.

What the command sees is set in :mod:`mcp_servers.code.bwrap` (the world's files at
``/filesystem``, read-only ``/usr`` and interpreter, a read-only ``/proc`` of its own or a
minimal one, no network, no app data, no inherited environment). Who it is on the host is
set in :mod:`mcp_servers.code.identity` (never root; a fresh session keyring).

Limits of one call, counted per run (one world: :mod:`mcp_servers.code.runs`) so that one
trial cannot starve another:
- a host uid of the run's own when the server is root, so the process-count rlimit binds the
  run alone;
- memory, processes and CPU share: a cgroup per call (:mod:`mcp_servers.code.cgroup`),
  removed afterwards, inside the run's cgroup, which holds the same limits for all the
  run's calls together; per process the rlimits (CPU seconds, address space, process count,
  file size, no core files) where no cgroup can be made;
- a wall-clock timeout that kills the whole process tree (the sandbox's PID namespace dies
  with its init, the cgroup is emptied);
- bytes added under the world root, across every process of the run: a watchdog walks the
  whole tree (every entry, by directory descriptors) and counts deleted-but-open files of
  the run's processes, kills the run past the cap, and once the run is over takes the
  overshoot back by removing the newest files the run created;
- output captured while reading up to a cap (the rest is drained and counted).

After every call the entries the run created or changed lose set-uid/set-gid bits and file
capabilities. Without a working bubblewrap the sandbox refuses to run, unless the server is
told it already runs inside an outer sandbox (gVisor, Kata) with ``trust_outer_sandbox``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import resource
import selectors
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from atoll.errors import CodedError, ErrorCode
from mcp_servers._core.options import InvalidOption
from mcp_servers.code import seccomp, worldtree
from mcp_servers.code.bwrap import SANDBOX_ROOT, bwrap_argv, probe, python_prefixes, sandbox_environment
from mcp_servers.code.cgroup import CgroupLimits, RunCgroup, available_controllers
from mcp_servers.code.config import CodeOptions, SandboxLimits
from mcp_servers.code.diskcap import DiskCap, after_run
from mcp_servers.code.identity import (
    IdentityError,
    SandboxIdentity,
    UidRange,
    describe_isolation,
    join_new_session_keyring,
    resolve_identity,
)
from mcp_servers.code.runs import Run, run_for
from mcp_servers.code.staging import Staging, staging_supported
from mcp_servers.code.uids import UidPoolError

_MB = 1024 * 1024


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


@dataclass(frozen=True)
class SandboxStatus:
    """Whether ``code_exec`` can run here, how, and as whom (shown by the environment)."""

    available: bool
    mode: str | None
    reason: str | None
    user: str | None
    cgroup: tuple[str, ...] = ()
    isolation: str | None = None  # how runs are kept apart, or why they may not be

    def as_dict(self) -> dict[str, Any]:
        return {"available": self.available, "mode": self.mode, "reason": self.reason,
                "user": self.user, "cgroup": list(self.cgroup), "isolation": self.isolation}  # fmt: skip


class SandboxUnavailable(CodedError):
    """bubblewrap is missing or cannot build a sandbox here, or no sandbox user is set."""

    code = ErrorCode.sandbox_unavailable


@dataclass
class _Launcher:
    """Builds one bubblewrap start: the command line and what the child does before exec."""

    bwrap: str
    identity: SandboxIdentity | None
    tmp_bytes: int = 1 << 20
    extra_before_exec: list = field(default_factory=list)

    def __call__(self, mode: str, root: str, command: list[str] | None = None):  # noqa: ANN204
        prefixes = python_prefixes()
        staging = None
        if self.identity is not None and staging_supported():
            staging = Staging([root, *prefixes])
        alias = staging.alias if staging is not None else (lambda path: path)
        try:
            seccomp_fd = seccomp.filter_fd()
        except BaseException:
            if staging is not None:
                staging.remove()
            raise
        argv = bwrap_argv(
            self.bwrap, mode, tmp_bytes=self.tmp_bytes, root_source=alias(root),
            prefix_sources={p: alias(p) for p in prefixes}, command=command or ["/bin/true"], seccomp_fd=seccomp_fd,
        )  # fmt: skip
        steps = list(self.extra_before_exec)
        identity = self.identity

        def before_exec() -> None:
            for step in steps:  # rlimits, the cgroup: while still root
                step()
            if staging is not None:
                staging.enter()
            if identity is not None:
                identity.drop()
            join_new_session_keyring()

        def clean_up() -> None:
            if staging is not None:
                staging.remove()
            if seccomp_fd is not None:
                os.close(seccomp_fd)

        return argv, before_exec, clean_up, (() if seccomp_fd is None else (seccomp_fd,))


def _settings(options: CodeOptions | Mapping[str, Any] | None) -> CodeOptions:
    return options if isinstance(options, CodeOptions) else CodeOptions.resolve(options)


def sandbox_status(
    options: CodeOptions | Mapping[str, Any] | None = None, identity: SandboxIdentity | None = None
) -> SandboxStatus:
    """Probe (once per configuration) and report; never raises (invalid settings, or no uid
    to lease, are the reason it is unavailable). ``options`` as given to the server, or
    resolved already; ``identity``: a run's own, to probe with instead of leasing one."""
    try:
        settings = _settings(options)
        plan = resolve_identity(settings)
    except (IdentityError, InvalidOption) as exc:
        return SandboxStatus(False, None, str(exc), None)
    user = plan.describe() if plan else f"uid {os.geteuid()} (the server's own)"
    controllers = tuple(available_controllers())
    isolation = describe_isolation(plan, bool(controllers))
    bwrap = settings.bwrap_path
    lease = None
    try:
        if isinstance(plan, UidRange) and identity is None:
            identity, lease = plan.lease()  # proves the range and the state folder work
        elif not isinstance(plan, UidRange):
            identity = plan
        mode, reason = probe(bwrap, settings.proc_mode, _Launcher(bwrap, identity), plan)
    except UidPoolError as exc:
        return SandboxStatus(False, None, exc.message, user, controllers, isolation)
    finally:
        if lease is not None:
            lease.release()
    if mode is None and settings.trust_outer_sandbox:
        return SandboxStatus(True, "outer (trusted)", reason, user, controllers, isolation)
    return SandboxStatus(mode is not None, mode, reason, user, controllers, isolation)


def _rlimits(limits: SandboxLimits, processes: int) -> None:
    """Runs in the child between fork and exec: the limits every sandboxed process inherits."""
    resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_s, limits.cpu_s))
    resource.setrlimit(resource.RLIMIT_AS, (limits.memory_mb * _MB, limits.memory_mb * _MB))
    resource.setrlimit(resource.RLIMIT_NPROC, (processes, processes))
    resource.setrlimit(resource.RLIMIT_FSIZE, (limits.max_file_mb * _MB, limits.max_file_mb * _MB))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_command(
    code: str, fs_root: Path, limits: SandboxLimits, options: CodeOptions | Mapping[str, Any] | None = None
) -> SandboxResult:
    """Run ``code`` with ``bash -c`` in the sandbox; never raises for what the code does.

    Raises SandboxUnavailable when no sandbox can be built and no outer sandbox is trusted
    (or the settings are invalid: the reason names the option or variable).
    """
    try:
        settings = _settings(options)
        plan = resolve_identity(settings)
        run_limits = CgroupLimits(limits.memory_mb * _MB, limits.max_processes, limits.cpu_weight)
        with run_for(fs_root, plan, run_limits) as run:
            return _run_in(run, code, fs_root, limits, settings)
    except (IdentityError, InvalidOption, UidPoolError) as exc:
        raise SandboxUnavailable(exc.message) from None


def _run_in(
    run: Run, code: str, fs_root: Path, limits: SandboxLimits, settings: CodeOptions
) -> SandboxResult:
    status = sandbox_status(settings, run.identity)
    if not status.available:
        raise SandboxUnavailable(status.reason or "no sandbox can be built here")
    identity = run.identity
    started = time.monotonic()
    started_ns = time.time_ns()
    try:
        baseline = (worldtree.prepare(fs_root, identity.uid, identity.gid) if identity
                    else worldtree.measure(fs_root, keep_inodes=True))  # fmt: skip
    except worldtree.TreeTooDeep as exc:
        return SandboxResult(
            "", None, killed_reason=f"not started: {exc} under {SANDBOX_ROOT}", sandbox=status.mode or ""
        )
    cap = DiskCap.for_run(limits, baseline)
    group = RunCgroup.create(
        CgroupLimits(limits.memory_mb * _MB, limits.max_processes, limits.cpu_weight), parent=run.group
    )
    # RLIMIT_NPROC counts every process of a host uid. A run's own uid: the run's processes,
    # exactly. A user shared by every run: where the cgroup caps this run's processes, the
    # rlimit only guards the user as a whole.
    shared = identity is not None and not identity.per_run
    processes = limits.max_processes * (8 if group is not None and shared else 1)
    steps: list[Callable[[], object]] = [
        functools.partial(_rlimits, limits, processes),
        functools.partial(os.chdir, str(fs_root)),
    ]
    if group is not None:
        steps.append(group.enter)  # while still root: the group's files are root's
    launcher = _Launcher(settings.bwrap_path, identity, limits.tmp_mb * _MB, steps)
    command = ["/bin/bash", "-c", code]
    if status.mode == "outer (trusted)":
        launcher.bwrap = ""
    argv, before_exec, clean_up, pass_fds = launcher(status.mode or "", str(fs_root), command)
    env = {"PATH": "/usr/bin:/bin"}
    if status.mode == "outer (trusted)":
        argv, env, pass_fds = command, sandbox_environment(), ()
    try:
        process = subprocess.Popen(
            argv, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            start_new_session=True, preexec_fn=before_exec, pass_fds=pass_fds,
        )  # fmt: skip
    except BaseException:
        clean_up()
        if group is not None:
            group.kill_and_remove()
        raise
    result = SandboxResult(
        output="", exit_code=None, sandbox="bubblewrap" if status.mode != "outer (trusted)" else status.mode
    )
    if status.mode == "minimal-proc":
        result.sandbox = "bubblewrap (minimal /proc)"
    try:
        captured = _supervise(process, group, fs_root, baseline, cap, limits, started, result)
    finally:
        _kill_tree(process)
        if group is not None:  # anything that left the process group (setsid) goes too
            group.kill_and_remove()
        assert process.stdout is not None
        process.stdout.close()
        clean_up()
    killed, notes = after_run(fs_root, baseline, started_ns, cap)
    result.killed_reason = result.killed_reason or killed
    result.notes += notes
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


def _supervise(
    process: subprocess.Popen, group: RunCgroup | None, fs_root: Path, baseline: worldtree.TreeUsage,
    cap: DiskCap, limits: SandboxLimits, started: float, result: SandboxResult,
) -> bytearray:  # fmt: skip
    """Read output until the run ends, times out or passes the disk cap."""
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
                members = group.members() if group is not None else worldtree.descendants(process.pid)
                try:
                    over = cap.passed(fs_root, baseline, members)
                except worldtree.TreeTooDeep as exc:
                    result.killed_reason = f"{exc} under {SANDBOX_ROOT}"
                    break
                # A walk of a big tree takes a while: look again after a few of its durations.
                next_disk_check = time.monotonic() + max(0.2, 3 * (time.monotonic() - now))
                if over:
                    result.killed_reason = over
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
    return captured


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


_REPORT: dict[str, Any] = {}
_REPORT_LOCK = threading.Lock()


def sandbox_report() -> dict[str, Any]:
    """The default configuration's :class:`SandboxStatus` as a dict, without waiting: the
    first call starts the probe in the background and reports ``available: None`` until it
    is done (for health endpoints, which must answer at once)."""
    with _REPORT_LOCK:
        if not _REPORT:
            _REPORT.update(available=None, mode=None, reason="probing the sandbox", user=None, cgroup=[])

            def run() -> None:
                report = sandbox_status().as_dict()
                with _REPORT_LOCK:
                    _REPORT.update(report)

            threading.Thread(target=run, name="atoll-sandbox-probe", daemon=True).start()
        return dict(_REPORT)
