"""A host uid of its own for each run's sandbox, leased from a range (``sandbox_uids``).

The kernel counts ``RLIMIT_NPROC`` (and user-namespace creation) per host uid. With one
sandbox user for every run, one trial's fork bomb took the whole count and every other
trial's bubblewrap failed ("Creating new namespace failed: Resource temporarily
unavailable"). A root server therefore gives each run (one world) a uid nobody else holds,
the same number as its gid, and ``RLIMIT_NPROC`` then bounds that run alone.

A uid is held by an exclusive ``flock`` on ``<state dir>/<uid>.lock``: race-free between
processes and servers in one process (a lock belongs to its open file description), given
back by :meth:`UidLease.release` or by the kernel when the process dies, so a crashed server
never keeps a uid. A uid that has a passwd entry is never handed out. The state directory
must be root's alone (not group- or world-writable, not a symlink): whoever could write
there could hold every uid. Several hosts' worth of servers sharing one kernel (root
containers without their own user namespace) must share that directory or get disjoint
ranges; see docs/security.md, "One trial cannot starve another".
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import pwd
import stat
from dataclasses import dataclass

from atoll.errors import CodedError, ErrorCode

DEFAULT_UIDS = "1000000000-1000099999"
DEFAULT_STATE_DIR = "/run/atoll-sandbox-uids"


class UidPoolError(CodedError):
    """No uid can be leased (bad range or state directory, or every uid is held)."""

    code = ErrorCode.sandbox_identity


def parse_range(text: str) -> tuple[int, int]:
    """``"FIRST-LAST"`` (inclusive) as ``(first, last)``; UidPoolError naming the setting."""
    first_text, sep, last_text = text.strip().partition("-")
    try:
        first, last = int(first_text), int(last_text)
    except ValueError:
        first = last = -1
    if not sep or first < 1 or last < first or last >= 2**32 - 2:
        raise UidPoolError(
            f"ATOLL_CODE_SANDBOX_UIDS {text!r} is not a range FIRST-LAST of unprivileged uids "
            f"(e.g. {DEFAULT_UIDS})"
        )
    return first, last


def _mapped(map_file: str, first: int, last: int) -> bool:
    """Whether ``first..last`` lie inside one extent of this process's uid (gid) map."""
    try:
        lines = open(map_file).read().split("\n")  # noqa: SIM115
    except OSError:
        return True  # no user namespaces here: every id is the host's
    for line in lines:
        fields = line.split()
        if len(fields) == 3:
            inside, _, count = (int(field) for field in fields)
            if inside <= first and last < inside + count:
                return True
    return False


@dataclass
class UidLease:
    """One leased uid (the gid is the same number) and the lock that holds it."""

    uid: int
    fd: int | None

    @property
    def gid(self) -> int:
        return self.uid

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # the flock goes with the last descriptor of its file
            self.fd = None


def _state_dir(path: str) -> int:
    """The state directory, opened; created root-only when missing. UidPoolError when someone
    else could write there."""
    with contextlib.suppress(FileExistsError):
        os.makedirs(path, mode=0o700)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise UidPoolError(f"sandbox uid state directory {path!r} cannot be opened: {exc.strerror}") from None
    info = os.fstat(fd)
    if info.st_uid != os.geteuid() or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        os.close(fd)
        raise UidPoolError(
            f"sandbox uid state directory {path!r} must belong to uid {os.geteuid()} and be writable "
            "by it alone (ATOLL_CODE_SANDBOX_STATE_DIR)"
        )
    return fd


def lease_uid(uids: str, state_dir: str, start_hint: int = 0) -> UidLease:
    """Lease a free uid of the range ``uids`` (``"FIRST-LAST"``), trying from ``start_hint``
    onwards (spreads servers over the range). Raises UidPoolError when the range or the
    state directory is unusable or every uid of the range is held."""
    first, last = parse_range(uids)
    if not (_mapped("/proc/self/uid_map", first, last) and _mapped("/proc/self/gid_map", first, last)):
        raise UidPoolError(
            f"ATOLL_CODE_SANDBOX_UIDS {uids!r} is not inside this process's uid and gid maps "
            "(/proc/self/uid_map): choose a range the container maps"
        )
    count = last - first + 1
    directory = _state_dir(state_dir)
    try:
        for step in range(count):
            uid = first + (start_hint + step) % count
            with contextlib.suppress(KeyError):
                pwd.getpwuid(uid)
                continue  # a real account's uid: never the sandbox's
            fd = os.open(
                f"{uid}.lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600, dir_fd=directory
            )
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as exc:
                os.close(fd)
                if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
                    continue
                raise
            return UidLease(uid, fd)
    finally:
        os.close(directory)
    raise UidPoolError(
        f"every uid of ATOLL_CODE_SANDBOX_UIDS {uids!r} is held by a run ({count} runs at once): "
        "widen the range"
    )
