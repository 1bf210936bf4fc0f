"""Reachable names for the folders bubblewrap binds, when the server is root.

bubblewrap, started as the unprivileged sandbox user, resolves every bind source by path,
and that user may have no way there: a checkout in ``/root`` (mode 0700), a world under a
root-only temporary folder. The child therefore, while still root, enters a mount
namespace of its own (the server's is untouched) and binds each source onto an empty folder
under a fresh, world-traversable staging folder; bubblewrap then binds from there. The
staging mounts die with that namespace when the run ends; :meth:`Staging.remove` deletes
the empty folders.

Where the server is root but may not create a mount namespace (a container without
``CAP_SYS_ADMIN``), :func:`staging_supported` is False and the sources are used by their
own paths, which the sandbox user must then be able to reach (in the images they are).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import subprocess
import tempfile

_CLONE_NEWNS = 0x00020000
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_LIBC = ctypes.CDLL(None, use_errno=True)


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise OSError(code, f"{what}: {os.strerror(code)}")


def _private_mount_namespace() -> None:
    _check(_LIBC.unshare(_CLONE_NEWNS), "unshare(CLONE_NEWNS)")
    _check(_LIBC.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "mount --make-rprivate /")


@functools.cache
def staging_supported() -> bool:
    """Whether a child of this (root) server may make a private mount namespace."""
    try:
        completed = subprocess.run(["/bin/true"], preexec_fn=_private_mount_namespace, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return completed.returncode == 0


class Staging:
    """``alias(source)`` names for ``sources``; ``enter()`` (in the child) mounts them."""

    def __init__(self, sources: list[str]) -> None:
        self.folder = tempfile.mkdtemp(prefix="atoll-sandbox-staging-")
        os.chmod(self.folder, 0o755)
        self._aliases: dict[str, str] = {}
        for index, source in enumerate(dict.fromkeys(sources)):
            alias = os.path.join(self.folder, str(index))
            os.mkdir(alias, 0o755)
            self._aliases[source] = alias
        self._mounts = [(os.fsencode(s), os.fsencode(a)) for s, a in self._aliases.items()]

    def alias(self, source: str) -> str:
        return self._aliases[source]

    def enter(self) -> None:
        """In the child, before dropping root: private namespace, then the binds."""
        _private_mount_namespace()
        for source, alias in self._mounts:
            _check(_LIBC.mount(source, alias, None, _MS_BIND | _MS_REC, None), f"bind {source!r}")

    def remove(self) -> None:
        # A folder is still a mount point only while the child's namespace lives; then it stays.
        for folder in (*self._aliases.values(), self.folder):
            with contextlib.suppress(OSError):
                os.rmdir(folder)
