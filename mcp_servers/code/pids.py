"""A process-count ceiling for one sandbox run, from the cgroup ``pids`` controller.

``RLIMIT_NPROC`` alone does not hold when the server runs as root: the sandbox's user is
mapped to root outside its user namespace, and the kernel never applies the process limit to
root's processes. A fork bomb then reaches tens of thousands of processes on two cores and
takes twenty seconds and more to die. A ``pids`` cgroup caps the run's processes whatever
their user, and lets the server kill every one of them when the run ends.

The cgroup is used where the server can create one: a cgroup v1 ``pids`` hierarchy, or a
cgroup v2 group whose ``cgroup.subtree_control`` already delegates ``pids``. Elsewhere
(most unprivileged containers) :func:`PidsCgroup.create` returns None and the rlimit, which
does hold for a non-root server, is the limit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from pathlib import Path

_CGROUP_ROOT = Path("/sys/fs/cgroup")


def _own_group(controller: str | None) -> Path | None:
    """Where this process sits in the hierarchy holding ``controller`` (None: cgroup v2)."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controller is None and controllers == "":
            return _CGROUP_ROOT / path.lstrip("/")
        if controller is not None and controller in controllers.split(","):
            return _CGROUP_ROOT / controller / path.lstrip("/")
    return None


def _parent_directory() -> Path | None:
    """A cgroup directory under which this process may create a group limiting pids."""
    v1 = _own_group("pids")
    if v1 is not None and v1.is_dir():
        return v1 if os.access(v1, os.W_OK) else None
    v2 = _own_group(None)
    if v2 is None:
        return None
    with contextlib.suppress(OSError):
        if "pids" in (v2 / "cgroup.subtree_control").read_text().split() and os.access(v2, os.W_OK):
            return v2
    return None


class PidsCgroup:
    """One run's group: ``pids.max`` set, the sandbox's first process moved in before exec."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._procs = str(path / "cgroup.procs")

    @classmethod
    def create(cls, max_pids: int) -> PidsCgroup | None:
        """A fresh group limited to ``max_pids`` processes, or None where none can be made."""
        parent = _parent_directory()
        if parent is None:
            return None
        path = parent / f"atoll-sandbox-{uuid.uuid4().hex[:12]}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(max_pids))
        except OSError:
            with contextlib.suppress(OSError):
                path.rmdir()
            return None
        return cls(path)

    def enter(self) -> None:
        """Move the calling process into the group (call it in the child, before exec)."""
        fd = os.open(self._procs, os.O_WRONLY)
        try:
            os.write(fd, b"0")  # "0": the writing process itself (v1 and v2)
        finally:
            os.close(fd)

    def members(self) -> list[int]:
        try:
            return [int(pid) for pid in Path(self._procs).read_text().split()]
        except OSError:
            return []

    def kill_and_remove(self, timeout_s: float = 10.0) -> None:
        """SIGKILL every process left in the group, wait for them to go, remove the group."""
        kill_file = self.path / "cgroup.kill"  # cgroup v2, Linux >= 5.14: one write kills all
        if kill_file.exists():
            with contextlib.suppress(OSError):
                kill_file.write_text("1")
        deadline = time.monotonic() + timeout_s
        while True:
            pids = self.members()
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                break
            time.sleep(0.02)
        with contextlib.suppress(OSError):
            self.path.rmdir()
