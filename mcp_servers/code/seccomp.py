"""A small seccomp filter for the sandbox: no new user namespaces, no keyrings, whatever the mode.

bubblewrap's ``--disable-userns`` sets the sandbox's nested-namespace limit through
``/proc/sys/user``, which a masked ``/proc`` (the ``minimal-proc`` mode) keeps read-only.
This filter holds in both modes: ``unshare`` and ``clone`` with ``CLONE_NEWUSER`` fail with
EPERM, ``clone3`` (whose flags live in memory a filter cannot read) with ENOSYS, so libc
falls back to ``clone``, and system calls of another ABI (i386, x32) with ENOSYS. Without a
user namespace of its own the command cannot regain capabilities, mount, or write file
capabilities. ``add_key``, ``request_key`` and ``keyctl`` fail with EPERM: besides the fresh
session keyring, the sandbox user's own keyring (shared by all its runs) is out of reach too. bubblewrap installs it (``--seccomp FD``) just before it executes the command.
"""

from __future__ import annotations

import errno
import os
import platform
import struct

_ARCHES = {  # audit arch, unshare, clone, clone3, add_key, request_key, keyctl
    "x86_64": (0xC000003E, 272, 56, 435, 248, 249, 250),
    "aarch64": (0xC00000B7, 97, 220, 435, 217, 218, 219),
    "arm64": (0xC00000B7, 97, 220, 435, 217, 218, 219),
}
_CLONE_NEWUSER = 0x10000000
_X32_BIT = 0x40000000
_LOAD, _JEQ, _JGE, _JSET, _RET = 0x20, 0x15, 0x35, 0x45, 0x06
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000
_NR, _ARCH, _ARG0 = 0, 4, 16  # offsets in struct seccomp_data (little-endian: low word of arg 0)


def _op(code: int, k: int, jt: int = 0, jf: int = 0) -> bytes:
    return struct.pack("<HBBI", code, jt, jf, k)


def filter_program() -> bytes | None:
    """The compiled filter for this machine, or None where its numbers are not known."""
    numbers = _ARCHES.get(platform.machine())
    if numbers is None:
        return None
    arch, unshare, clone, clone3, add_key, request_key, keyctl = numbers
    program = [
        _op(_LOAD, _ARCH),  # 0
        _op(_JEQ, arch, 0, 12),  # 1: another ABI -> ENOSYS
        _op(_LOAD, _NR),  # 2
        _op(_JGE, _X32_BIT, 10, 0),  # 3: x32 -> ENOSYS
        _op(_JEQ, clone3, 9, 0),  # 4: -> ENOSYS
        _op(_JEQ, add_key, 7, 0),  # 5: keyrings -> EPERM
        _op(_JEQ, request_key, 6, 0),  # 6
        _op(_JEQ, keyctl, 5, 0),  # 7
        _op(_JEQ, unshare, 1, 0),  # 8: -> look at the flags
        _op(_JEQ, clone, 0, 2),  # 9: not clone -> allow
        _op(_LOAD, _ARG0),  # 10
        _op(_JSET, _CLONE_NEWUSER, 1, 0),  # 11: -> EPERM
        _op(_RET, _ALLOW),  # 12
        _op(_RET, _ERRNO | errno.EPERM),  # 13
        _op(_RET, _ERRNO | errno.ENOSYS),  # 14
    ]
    return b"".join(program)


def filter_fd() -> int | None:
    """A memfd holding the program, read from its start by bubblewrap (close it), or None."""
    program = filter_program()
    if program is None:
        return None
    fd = os.memfd_create("atoll-sandbox-seccomp", os.MFD_CLOEXEC)
    os.write(fd, program)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
