"""Who the sandboxed command is on the host, and the fresh keyring it gets.

A server running as root must not hand the sandbox host uid 0: inside bubblewrap's user
namespace the command would still own every root-owned file the sandbox can see (procfs
writes such as ``kernel/core_pattern``, set-uid-root files left in the world). So, when the
server's euid is 0, the child drops to a dedicated unprivileged host user before bubblewrap
starts — ``atoll-sandbox`` by default, created by ``scripts/setup.sh`` and by the
environment image — and bubblewrap, no longer privileged, maps the sandbox's uid 1000 to
that user. The user is configurable: ``ATOLL_CODE_SANDBOX_USER`` (a name), or
``ATOLL_CODE_SANDBOX_UID`` and ``ATOLL_CODE_SANDBOX_GID`` (numbers, no passwd entry needed);
the server options ``sandbox_user``, ``sandbox_uid``, ``sandbox_gid`` win over them.

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
from typing import TYPE_CHECKING

from atoll.errors import CodedError

if TYPE_CHECKING:
    from mcp_servers.code.config import CodeOptions

DEFAULT_USER = "atoll-sandbox"
_KEYCTL_JOIN_SESSION_KEYRING = 1
_SYS_KEYCTL = {"x86_64": 250, "aarch64": 219, "arm64": 219}.get(platform.machine())
_LIBC = ctypes.CDLL(None, use_errno=True)


class IdentityError(CodedError):
    """The sandbox user cannot be determined (the message says what to configure)."""

    code = "sandbox_identity"


@dataclass(frozen=True)
class SandboxIdentity:
    """The host uid/gid the sandboxed command runs as; ``drop`` runs in the child."""

    uid: int
    gid: int
    name: str

    def drop(self) -> None:
        """Become this user for good (groups, then gid, then uid: the order that works)."""
        os.setgroups([])
        os.setresgid(self.gid, self.gid, self.gid)
        os.setresuid(self.uid, self.uid, self.uid)

    def describe(self) -> str:
        return f"{self.name} (uid {self.uid}, gid {self.gid})"


def resolve_identity(options: CodeOptions) -> SandboxIdentity | None:
    """The user to drop to, or None when the server is not root (it then runs the sandbox
    as itself). Raises IdentityError when the server is root and no usable user is set."""
    if os.geteuid() != 0:
        return None
    uid, gid = options.sandbox_uid, options.sandbox_gid  # positive when set (CodeOptions)
    if uid is not None or gid is not None:
        if uid is None or gid is None:
            raise IdentityError("set both ATOLL_CODE_SANDBOX_UID and ATOLL_CODE_SANDBOX_GID, or neither")
        return SandboxIdentity(uid, gid, f"uid {uid}")
    name = (options.sandbox_user or "").strip() or DEFAULT_USER
    try:
        entry = pwd.getpwnam(name)
    except KeyError:
        raise IdentityError(
            f"the server runs as root and the sandbox user {name!r} does not exist: create it "
            "(scripts/setup.sh does: useradd --system --user-group atoll-sandbox) or set "
            "ATOLL_CODE_SANDBOX_UID and ATOLL_CODE_SANDBOX_GID"
        ) from None
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise IdentityError(f"the sandbox user {name!r} has uid or gid 0; use an unprivileged user")
    return SandboxIdentity(entry.pw_uid, entry.pw_gid, name)


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
