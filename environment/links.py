"""Where a link of an extracted archive really leads, judged on the staging tree itself.

A symlink's target is resolved *physically*: component by component on the directories that
exist, each symlink met on the way read and followed as the kernel would follow it, ``..``
taken from the directory actually reached. Checking the text of one target (``a/up/..``
looks like ``a``) misses chains such as ``a/up -> ..`` then ``e1 -> a/up/..``, which lead
above the root. Components that do not exist (yet) are applied as written, so a dangling
link that would climb out once its folders appear is caught as well.

The walk holds directory descriptors opened with ``O_NOFOLLOW``, so it never passes through
a symlink it has not judged.
"""

from __future__ import annotations

import errno
import os
import stat
from collections import deque

from atoll.errors import CodedError, ErrorCode

#: Symlinks followed while resolving one target before it counts as a loop (Linux's limit).
MAX_HOPS = 40
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


class LinkEscape(CodedError):
    """The link leads outside the root (``reason`` says how)."""

    code = ErrorCode.link_escape

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def resolve_link(root: str, link_dir: str, target: str) -> str:
    """The path inside ``root`` that a symlink in folder ``link_dir`` with ``target`` leads to.

    ``link_dir`` is relative to ``root`` ("" for the root itself). Raises LinkEscape when the
    target is absolute, climbs above ``root`` (directly or through other symlinks), loops, or
    uses ``..`` below a folder that does not exist (where it would lead once that folder
    appears cannot be known, so such a link is not kept).
    """
    if not target or target.startswith("/"):
        raise LinkEscape("absolute or empty target")
    pending = deque(part for part in link_dir.split("/") if part)
    pending.extend(target.split("/"))
    stack: list[int] = [os.open(root, _DIR_FLAGS)]
    names: list[str] = []
    try:
        _walk(stack, names, pending)
    finally:
        for descriptor in stack:
            os.close(descriptor)
    return "/".join(names)


def _walk(stack: list[int], names: list[str], pending: deque[str]) -> None:
    """Resolve ``pending`` from the directory ``stack[-1]`` (whose path is ``names``)."""
    hops = 0
    missing = False  # set once a component does not exist: the rest is taken as written
    while pending:
        part = pending.popleft()
        if part in ("", "."):
            continue
        if part == "..":
            if missing:
                raise LinkEscape("'..' below a folder that does not exist")
            if not names:
                raise LinkEscape("leads above the root")
            names.pop()
            os.close(stack.pop())
            continue
        if missing:
            names.append(part)
            continue
        try:
            info = os.lstat(part, dir_fd=stack[-1])
        except FileNotFoundError:
            missing = True
            names.append(part)
            continue
        if stat.S_ISLNK(info.st_mode):
            hops += 1
            if hops > MAX_HOPS:
                raise LinkEscape(f"more than {MAX_HOPS} symlinks in a chain (a loop?)")
            inner = os.readlink(part, dir_fd=stack[-1])
            if not inner or inner.startswith("/"):
                raise LinkEscape(f"goes through the symlink {'/'.join([*names, part])!r} to {inner!r}")
            pending.extendleft(reversed(inner.split("/")))
            continue
        if not stat.S_ISDIR(info.st_mode):
            # A file: any further component fails with ENOTDIR and reaches nothing.
            names.append(part)
            return
        try:
            descriptor = os.open(part, _DIR_FLAGS, dir_fd=stack[-1])
        except OSError as exc:  # replaced since the lstat: judge it as missing
            if exc.errno not in (errno.ENOENT, errno.ELOOP, errno.ENOTDIR):
                raise
            missing = True
            names.append(part)
            continue
        stack.append(descriptor)
        names.append(part)
