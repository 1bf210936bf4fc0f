"""What one run — one world, whatever server instance serves it — keeps across its
``code_exec`` calls: its host identity and its cgroup.

Several environments (trials) run side by side on one machine, each over its own world. One
trial exhausting its limits must never make another's ``code_exec`` fail, so everything the
kernel counts is counted per run:

- processes per host uid (``RLIMIT_NPROC``): a root server gives each run a uid of its own
  (:class:`~mcp_servers.code.identity.UidRange`), and the rlimit is the run's process limit;
- memory, processes and CPU share: the run's cgroup (``atoll-run-*``) parents every call's
  group and carries the run's limits, so concurrent calls of one run share them;
- disk: the world cap (``max_world_mb``) is per world already.

A run is keyed by the world root's real path. It is started at its first call and kept for
the life of the process; an idle run (no call in flight) is given up when its world is gone,
when more than a few dozen are kept, or when the uid range is exhausted, and its uid goes
back to the range (so a long-lived process serving many worlds one after the other, as tests
do, never runs out). A run given up and used again gets a new uid; the world's files are
handed to it before its first call, as before every call.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mcp_servers.code.cgroup import CgroupLimits, RunCgroup, remove_stale_run_groups
from mcp_servers.code.identity import SandboxIdentity, UidRange
from mcp_servers.code.uids import UidLease, UidPoolError

_MB = 1024 * 1024


@dataclass
class Run:
    """One world's sandbox identity and cgroup, shared by its calls."""

    root: str
    identity: SandboxIdentity | None
    lease: UidLease | None
    group: RunCgroup | None
    active: int = 0
    last_used: float = 0.0

    def close(self) -> None:
        if self.group is not None:
            self.group.kill_and_remove()
            self.group = None
        if self.lease is not None:
            self.lease.release()
            self.lease = None


_RUNS: dict[tuple[str, object], Run] = {}
_LOCK = threading.Lock()
#: Idle runs kept per process beyond this many are given up, oldest first: each holds a lock
#: file descriptor and a cgroup (a process that serves one world keeps its one run for ever).
_KEPT = 32
_SWEPT = False


@contextlib.contextmanager
def run_for(fs_root: Path, plan: SandboxIdentity | UidRange | None, limits: CgroupLimits) -> Iterator[Run]:
    """The run of ``fs_root`` for the length of one call (started if new). ``plan`` is
    :func:`~mcp_servers.code.identity.resolve_identity`'s answer. Raises UidPoolError when
    the run needs a uid of its own and none can be leased."""
    root = os.path.realpath(fs_root)
    key = (root, plan)
    with _LOCK:
        run = _RUNS.get(key)
        if run is None:
            run = _RUNS[key] = _start(root, plan, limits)
        elif run.group is not None and run.active == 0 and not run.group.exists():
            run.group = RunCgroup.create_parent(limits)  # removed under us: see _start
        run.active += 1
    try:
        yield run
    finally:
        with _LOCK:
            run.active -= 1
            run.last_used = time.monotonic()


def _start(root: str, plan: SandboxIdentity | UidRange | None, limits: CgroupLimits) -> Run:
    global _SWEPT
    if not _SWEPT:  # groups of servers killed before they could remove theirs (SIGKILL, SIGTERM)
        _SWEPT = True
        remove_stale_run_groups()
    _give_up_idle(only_gone=True)
    idle = sorted((run.last_used, key) for key, run in _RUNS.items() if run.active == 0)
    for _, key in idle[: max(0, len(_RUNS) - _KEPT + 1)]:
        _RUNS.pop(key).close()
    identity: SandboxIdentity | None = plan if isinstance(plan, SandboxIdentity) else None
    lease = None
    if isinstance(plan, UidRange):
        # The lowest free uid: lock files stay as many as runs held at once (never the range).
        try:
            identity, lease = plan.lease()
        except UidPoolError:
            if not _give_up_idle(only_gone=False):
                raise
            identity, lease = plan.lease()
    return Run(root, identity, lease, RunCgroup.create_parent(limits))


def _give_up_idle(*, only_gone: bool) -> int:
    """Close idle runs (those whose world is gone, or all idle ones); how many. Under _LOCK."""
    closing = [
        key
        for key, run in _RUNS.items()
        if run.active == 0 and (not only_gone or not os.path.isdir(run.root))
    ]
    for key in closing:
        _RUNS.pop(key).close()
    return len(closing)


def calls_in_flight(fs_root: Path) -> int:
    """Calls running now over the world at ``fs_root`` (whatever identity plan serves them):
    while any runs, a process of the world's sandbox may be alive (populate keeps no file then)."""
    root = os.path.realpath(fs_root)
    with _LOCK:
        return sum(run.active for (run_root, _), run in _RUNS.items() if run_root == root)


def close_idle_runs() -> int:
    """Give every idle run's uid and cgroup back (tests; a server that is being emptied)."""
    with _LOCK:
        return _give_up_idle(only_gone=False)


@atexit.register
def _close_all() -> None:
    with _LOCK:
        for run in _RUNS.values():
            with contextlib.suppress(Exception):
                run.close()
        _RUNS.clear()
