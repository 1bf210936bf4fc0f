"""Cgroups for the sandbox: one per run (one world), and inside it one per ``code_exec`` call.

Rlimits bind one process at a time (three processes of 1.5 GiB each pass a 2 GiB
``RLIMIT_AS``). A call's group caps what all of the call's processes use together —
``memory.max`` with no swap, ``pids.max``, a CPU weight below the server's — and lets the
server list and kill every process of the call when it ends, then remove the group. The
run's group (:meth:`RunCgroup.create_parent`, ``atoll-run-*``) holds every call group of
that run and carries the same limits, so several concurrent calls of one run share one
memory and one process budget, and CPU is shared fairly between runs, not between calls.

Both cgroup versions are used as the host mounts them, controller by controller: a cgroup
v1 hierarchy holding the controller (the server's own group in it must be writable), or the
cgroup v2 group of the server where ``cgroup.subtree_control`` delegates it (the server tries
to enable it there). Where no controller can be had (most unprivileged containers mount
``/sys/fs/cgroup`` read-only), :meth:`RunCgroup.create` returns None and the rlimits plus the
container's own limits are what holds; :func:`available_controllers` says which case applies.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

CONTROLLERS = ("memory", "pids", "cpu")
_PREFIX = "atoll-sandbox-"  # a call's group
_RUN_PREFIX = "atoll-run-"  # a run's group, parent of its calls' groups


@dataclass(frozen=True)
class CgroupLimits:
    memory_bytes: int
    max_pids: int
    cpu_weight: int  # cgroup v2 scale: 1..10000, 100 is the default weight


@dataclass(frozen=True)
class _Hierarchy:
    """Where this process sits in one hierarchy, and which of our controllers it carries."""

    parent: Path
    version: int
    controllers: tuple[str, ...]


def _mounts() -> list[tuple[str, str, set[str]]]:
    """(mount point, fs type, options) of every cgroup mount."""
    found = []
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) >= 4 and fields[2] in ("cgroup", "cgroup2"):
                found.append((fields[1], fields[2], set(fields[3].split(","))))
    return found


def _own_paths() -> tuple[dict[str, str], str | None]:
    """This process's group per v1 controller, and its v2 group (None: no v2 line)."""
    v1: dict[str, str] = {}
    v2 = None
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            if controllers == "":
                v2 = path
            for name in controllers.split(","):
                v1[name] = path
    return v1, v2


def _v2_delegates(group: Path, wanted: list[str]) -> tuple[str, ...]:
    """Which of ``wanted`` the v2 ``group`` passes to its children (enabling them if it can)."""
    try:
        offered = set((group / "cgroup.controllers").read_text().split())
    except OSError:
        return ()
    delegated = set()
    for name in wanted:
        if name not in offered:
            continue
        with contextlib.suppress(OSError):
            if name not in (group / "cgroup.subtree_control").read_text().split():
                # Fails (EBUSY) when the group holds processes itself: then it stays off.
                (group / "cgroup.subtree_control").write_text(f"+{name}")
            if name in (group / "cgroup.subtree_control").read_text().split():
                delegated.add(name)
    return tuple(sorted(delegated))


def _hierarchies() -> list[_Hierarchy]:
    v1_paths, v2_path = _own_paths()
    found: list[_Hierarchy] = []
    claimed: set[str] = set()
    v2_mount = None
    for mount_point, fs_type, options in _mounts():
        if fs_type == "cgroup2":
            v2_mount = mount_point
            continue
        carried = tuple(sorted(name for name in CONTROLLERS if name in options and name not in claimed))
        own = v1_paths.get(carried[0]) if carried else None
        if own is None:
            continue
        parent = Path(mount_point) / own.lstrip("/")
        if parent.is_dir() and os.access(parent, os.W_OK):
            found.append(_Hierarchy(parent, 1, carried))
            claimed.update(carried)
    missing = [name for name in CONTROLLERS if name not in claimed]
    if missing and v2_mount is not None and v2_path is not None:
        parent = Path(v2_mount) / v2_path.lstrip("/")
        if os.access(parent, os.W_OK):
            delegated = _v2_delegates(parent, missing)
            if delegated:
                found.append(_Hierarchy(parent, 2, delegated))
    return found


def available_controllers() -> list[str]:
    """``["memory (cgroup v1)", …]``: what a run's group would limit here; empty: none."""
    return [f"{name} (cgroup v{h.version})" for h in _hierarchies() for name in h.controllers]


def _write(path: Path, value: str) -> None:
    path.write_text(value)


def _apply(group: Path, hierarchy: _Hierarchy, limits: CgroupLimits) -> None:
    for name in hierarchy.controllers:
        if name == "pids":
            _write(group / "pids.max", str(limits.max_pids))
        elif name == "cpu":
            if hierarchy.version == 2:
                _write(group / "cpu.weight", str(limits.cpu_weight))
            else:  # v1 shares: 1024 is the default, as 100 is for v2's weight
                _write(group / "cpu.shares", str(max(2, limits.cpu_weight * 1024 // 100)))
        elif name == "memory":
            if hierarchy.version == 2:
                _write(group / "memory.max", str(limits.memory_bytes))
                for optional, value in (("memory.swap.max", "0"), ("memory.oom.group", "1")):
                    if (group / optional).exists():
                        _write(group / optional, value)
            else:
                _write(group / "memory.limit_in_bytes", str(limits.memory_bytes))
                # memsw (memory + swap) equal to the memory limit: no swap. Absent when the
                # kernel does not account swap; swappiness 0 then keeps the group off swap.
                if (group / "memory.memsw.limit_in_bytes").exists():
                    _write(group / "memory.memsw.limit_in_bytes", str(limits.memory_bytes))
                if (group / "memory.swappiness").exists():
                    _write(group / "memory.swappiness", "0")


class RunCgroup:
    """One call's (or one run's) groups, one per hierarchy, limits set; the call's child
    enters its call groups before exec."""

    def __init__(
        self, groups: list[Path], controllers: list[str], hierarchies: list[_Hierarchy] | None = None
    ) -> None:
        self.groups = groups
        self.controllers = controllers
        self.hierarchies = hierarchies or []  # as children see them: the group as parent
        self._procs = [str(group / "cgroup.procs") for group in groups]

    @classmethod
    def create(cls, limits: CgroupLimits, parent: RunCgroup | None = None) -> RunCgroup | None:
        """A call's fresh groups with ``limits``, inside ``parent`` (the run's groups) when
        given, else in the server's own; None where no controller can be had."""
        hierarchies = parent.hierarchies if parent is not None else _hierarchies()
        return cls._make(_PREFIX, limits, hierarchies)

    @classmethod
    def create_parent(cls, limits: CgroupLimits) -> RunCgroup | None:
        """A run's groups, parents of its calls' groups; None where none can be made. Named
        after this process, so that :func:`remove_stale_run_groups` knows whose they are."""
        return cls._make(f"{_RUN_PREFIX}{os.getpid()}-", limits, _hierarchies())

    def exists(self) -> bool:
        return all(group.is_dir() for group in self.groups)

    @classmethod
    def _make(cls, prefix: str, limits: CgroupLimits, hierarchies: list[_Hierarchy]) -> RunCgroup | None:
        name = prefix + uuid.uuid4().hex[:12]
        groups: list[Path] = []
        controllers: list[str] = []
        children: list[_Hierarchy] = []
        for hierarchy in hierarchies:
            group = hierarchy.parent / name
            try:
                group.mkdir()
                groups.append(group)
                _apply(group, hierarchy, limits)
            except OSError:
                continue  # this hierarchy stays unused; the group is removed with the rest
            controllers += [f"{c} (cgroup v{hierarchy.version})" for c in hierarchy.controllers]
            # v2 groups pass a controller on only where their subtree_control enables it.
            passed = (
                hierarchy.controllers
                if hierarchy.version == 1
                else _v2_delegates(group, list(hierarchy.controllers))
            )
            if passed:
                children.append(_Hierarchy(group, hierarchy.version, tuple(passed)))
        if not controllers:
            cls(groups, []).kill_and_remove()
            return None
        return cls(groups, controllers, children)

    def enter(self) -> None:
        """Move the calling process into every group (call it in the child, before exec)."""
        for procs in self._procs:
            fd = os.open(procs, os.O_WRONLY)
            try:
                os.write(fd, b"0")  # "0": the writing process itself (v1 and v2)
            finally:
                os.close(fd)

    def members(self) -> list[int]:
        pids: set[int] = set()
        for procs in self._procs:
            with contextlib.suppress(OSError, ValueError):
                pids.update(int(pid) for pid in Path(procs).read_text().split())
        return sorted(pids)

    def kill_and_remove(self, timeout_s: float = 10.0) -> None:
        """SIGKILL every process left in the groups, wait for them to go, remove the groups
        (a run's groups: the call groups left inside them first)."""
        for group in self.groups:
            for child in group.glob(_PREFIX + "*"):
                RunCgroup([child], []).kill_and_remove(timeout_s)
        for group in self.groups:
            kill_file = group / "cgroup.kill"  # cgroup v2, Linux >= 5.14: one write kills all
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
        for group in self.groups:
            for _ in range(50):  # a memory group may take a moment to release its last charges
                try:
                    group.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


def leftover_groups() -> list[Path]:
    """Call groups still present under this process's hierarchies (for tests and health)."""
    return [
        path
        for h in _hierarchies()
        for pattern in (_PREFIX + "*", f"{_RUN_PREFIX}*/{_PREFIX}*")
        for path in h.parent.glob(pattern)
    ]


def remove_stale_run_groups() -> int:
    """Remove run groups whose server process is gone (killed before it could remove them);
    how many. Only empty groups can be removed, so a live run's calls are never touched."""
    removed = 0
    for hierarchy in _hierarchies():
        for group in hierarchy.parent.glob(_RUN_PREFIX + "*"):
            owner = group.name[len(_RUN_PREFIX) :].split("-", 1)[0]
            if not owner.isdigit() or int(owner) == os.getpid() or Path(f"/proc/{owner}").exists():
                continue
            with contextlib.suppress(OSError):
                for child in group.glob(_PREFIX + "*"):
                    child.rmdir()
                group.rmdir()
                removed += 1
    return removed
