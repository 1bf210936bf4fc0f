"""Who the sandboxed command is on the host, and the fresh keyring it gets.

A server running as root must not hand the sandbox host uid 0: inside bubblewrap's user
namespace the command would still own every root-owned file the sandbox can see (procfs
writes such as ``kernel/core_pattern``, set-uid-root files left in the world). So, when the
server's euid is 0, the child drops to an unprivileged host uid before bubblewrap starts,
and bubblewrap, no longer privileged, maps the sandbox's uid 1000 to it.

By default that uid is the run's own (:class:`UidRange`, :mod:`mcp_servers.code.uids`): one
uid per world, leased from ``ATOLL_CODE_SANDBOX_UIDS``, so the kernel's per-uid counts
(``RLIMIT_NPROC``) bind each run alone. A fixed user shared by every run is still possible —
``ATOLL_CODE_SANDBOX_USER`` (a name), or ``ATOLL_CODE_SANDBOX_UID`` and
``ATOLL_CODE_SANDBOX_GID`` (numbers, no passwd entry needed); the server options
``sandbox_user``, ``sandbox_uid``, ``sandbox_gid`` win over them — for a host that serves one
environment only: runs sharing it share its process count.

A server that is not root runs the sandbox as itself, as before.

The session keyring is inherited across fork, exec and set-uid, and whoever possesses a
keyring may read its keys whatever their uid: the child therefore joins a new anonymous
session keyring (``KEYCTL_JOIN_SESSION_KEYRING``) after the drop, so the server's keys are
out of reach.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import pwd
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from atoll.errors import CodedError, ErrorCode
from mcp_servers.code.uids import DEFAULT_UIDS, UidLease, UidPoolError, lease_uid, parse_range

if TYPE_CHECKING:
    from mcp_servers.code.config import CodeOptions

_KEYCTL_JOIN_SESSION_KEYRING = 1
_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219, "arm64": 219}.get(platform.machine())
_LIBC = ctypes.CDLL(None, use_errno=True)


class IdentityError(CodedError):
    """The sandbox user cannot be determined (the message says what to configure)."""

    code = ErrorCode.sandbox_identity


@dataclass(frozen=True)
class SandboxIdentity:
    """The host uid/gid the sandboxed command runs as; ``drop`` runs in the child."""

    uid: int
    gid: int
    name: str
    per_run: bool = False  # leased for one run (a UidRange's), not shared by every run

    def drop(self) -> None:
        """Become this user for good (groups, then gid, then uid: the order that works)."""
        os.setgroups([])
        os.setresgid(self.gid, self.gid, self.gid)
        os.setresuid(self.uid, self.uid, self.uid)

    def describe(self) -> str:
        return f"{self.name} (uid {self.uid}, gid {self.gid})"


@dataclass(frozen=True)
class UidRange:
    """Each run drops to a uid of its own, leased from ``uids`` (``FIRST-LAST``)."""

    uids: str
    state_dir: str

    def lease(self, start_hint: int = 0) -> tuple[SandboxIdentity, UidLease]:
        """A free uid as an identity, and the lease to release (UidPoolError if none)."""
        lease = lease_uid(self.uids, self.state_dir, start_hint)
        return SandboxIdentity(lease.uid, lease.gid, f"uid {lease.uid}", per_run=True), lease

    def describe(self) -> str:
        return f"a uid of its own per run, from {self.uids}"


def resolve_identity(options: CodeOptions) -> SandboxIdentity | UidRange | None:
    """Whom the sandbox runs as: None when the server is not root (it then runs the sandbox
    as itself), a fixed user when one is configured, else a uid of its own per run. Raises
    IdentityError when the server is root and the configured user or range is unusable."""
    if os.geteuid() != 0:
        return None
    uid, gid = options.sandbox_uid, options.sandbox_gid  # positive when set (CodeOptions)
    if uid is not None or gid is not None:
        if uid is None or gid is None:
            raise IdentityError("set both ATOLL_CODE_SANDBOX_UID and ATOLL_CODE_SANDBOX_GID, or neither")
        return SandboxIdentity(uid, gid, f"uid {uid}")
    name = (options.sandbox_user or "").strip()
    if not name:
        uids = options.sandbox_uids or DEFAULT_UIDS
        try:
            parse_range(uids)
        except UidPoolError as exc:
            raise IdentityError(exc.message) from None
        return UidRange(uids, options.sandbox_state_dir)
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise IdentityError(
            f"the server runs as root and the sandbox user {name!r} does not exist: create it "
            "(useradd --system --user-group NAME), or unset ATOLL_CODE_SANDBOX_USER for a uid "
            "of its own per run"
        ) from None
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise IdentityError(f"the sandbox user {name!r} has uid or gid 0; use an unprivileged user")
    return SandboxIdentity(entry.pw_uid, entry.pw_gid, name)


def describe_isolation(plan: SandboxIdentity | UidRange | None, cgroups: bool) -> str:
    """One line for /health: whether a run's limits are its own, and what to do if not."""
    cgroup = (
        "a cgroup per run (memory, processes, CPU)"
        if cgroups
        else "no cgroup (memory bounded per process and by the container's own limits)"
    )
    if isinstance(plan, UidRange):
        return f"per run: a host uid of its own and {cgroup}"
    if plan is not None:
        return (
            f"shared: every run drops to {plan.describe()}, so runs share its process count "
            f"(unset ATOLL_CODE_SANDBOX_USER/UID/GID for a uid per run); {cgroup}"
        )
    try:
        namespaced = Path("/proc/self/uid_map").read_text().split()[:3] != ["0", "0", "4294967295"]
    except OSError:
        namespaced = False
    where = (
        "this process's user namespace maps it to a host uid of this container's own"
        if namespaced
        else "other environments on this host that run as the same uid share its process count: "
        "give each its own user namespace (Kubernetes hostUsers: false) or run it as root"
    )
    return f"per server uid {os.geteuid()}: {where}; {cgroup}"


def join_new_session_keyring() -> None:
    """Replace the calling process's session keyring with a new, empty one (in the child).

    Where the syscall is filtered (ENOSYS, EPERM from a seccomp profile) the sandbox, which
    inherits the same filter, cannot reach any keyring either, so that is not an error.
    """
    if _SYS_KEYCTL is None:
        raise OSError(errno.ENOSYS, "keyctl syscall number unknown on this architecture")
    if _LIBC.syscall(_SYS_KEYCTL, _KEYCTL_JOIN_SESSION_KEYRING, None) < 0:
        code = ctypes.get_errno()
        if code not in (errno.ENOSYS, errno.EPERM):
            raise OSError(code, f"cannot join a new session keyring: {os.strerror(code)}")
