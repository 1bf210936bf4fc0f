"""The world's filesystem tree as a sandbox run sees it: ownership, disk use, clean-up.

Every walk goes by directory file descriptors — each directory opened with ``O_NOFOLLOW``
relative to its parent, every change made with ``dir_fd`` and without following links — so
a concurrent sandbox that swaps a directory for a symlink can only make the walk skip that
name, never reach outside the root. The walks see every entry (no entry budget): the disk
cap has to hold however many files a world has.

- :func:`prepare` (server running as root): give the sandbox user the entries it must be
  able to change — directories, symlinks and single-link regular files not yet its own.
  A file with more than one link is left alone: its other name may be outside the world.
- :func:`measure`: allocated bytes and entries; with ``keep_inodes`` also the inode numbers
  of regular files, to tell a run's new files from the world's.
- :func:`finish`: after the run, strip set-uid/set-gid bits and file capabilities from
  every entry changed since the run began, and list the files the run created.
- :func:`trim`: remove the newest of those files until the run is back under its cap (a
  writer is only killed after it passed the cap; this takes the overshoot back).
- :func:`unlinked_open_bytes`: space held by deleted files the run's processes keep open or
  mapped, which no directory walk can see.
"""

from __future__ import annotations

import contextlib
import os
import stat
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from atoll.errors import CodedError, ErrorCode

MAX_DEPTH = 400
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_SETID = stat.S_ISUID | stat.S_ISGID
_CAPABILITY = "security.capability"


class TreeTooDeep(CodedError):
    """The tree nests directories deeper than :data:`MAX_DEPTH`."""

    code = ErrorCode.tree_too_deep


@dataclass
class TreeUsage:
    allocated_bytes: int = 0
    entries: int = 0
    inodes: set[int] = field(default_factory=set)


@dataclass
class NewFile:
    parts: tuple[str, ...]
    inode: int
    mtime_ns: int
    allocated_bytes: int


@dataclass
class Finish:
    usage: TreeUsage
    stripped: int = 0
    new_files: list[NewFile] = field(default_factory=list)
    too_deep_removed: int = 0
    new_entries: list[tuple[tuple[str, ...], int]] = field(default_factory=list)  # (parts, inode)


Visit = Callable[[int, str, os.stat_result, tuple[str, ...]], None]


def _listing(fd: int) -> Iterable[os.DirEntry]:
    with os.scandir(fd) as entries:
        return iter(list(entries))


def _walk(root: Path, visit: Visit, usage: TreeUsage, too_deep: list[tuple[str, ...]] | None = None) -> None:
    """Call ``visit`` for every entry under ``root`` (not ``root`` itself) and add each one
    to ``usage``. A folder at :data:`MAX_DEPTH` is not entered: it is added to ``too_deep``,
    or, without that list, TreeTooDeep is raised. OSError when ``root`` cannot be opened."""
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    stack: list[tuple[int, Iterable[os.DirEntry], tuple[str, ...]]] = []
    try:
        root_stat = os.fstat(root_fd)
        usage.allocated_bytes += root_stat.st_blocks * 512
        stack.append((root_fd, _listing(root_fd), ()))
        while stack:
            fd, entries, parts = stack[-1]
            entry = next(entries, None)  # type: ignore[call-overload]
            if entry is None:
                stack.pop()
                if fd != root_fd:
                    os.close(fd)
                continue
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue  # gone meanwhile
            usage.entries += 1
            usage.allocated_bytes += info.st_blocks * 512
            visit(fd, entry.name, info, parts)
            if stat.S_ISDIR(info.st_mode):
                if len(stack) >= MAX_DEPTH:
                    if too_deep is None:
                        raise TreeTooDeep(f"directories nested deeper than {MAX_DEPTH} levels")
                    too_deep.append((*parts, entry.name))
                    continue
                try:
                    child = os.open(entry.name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue  # replaced by a link or removed meanwhile: not ours to follow
                try:
                    stack.append((child, _listing(child), (*parts, entry.name)))
                except OSError:
                    os.close(child)
    finally:
        for fd, _, _ in stack:
            if fd != root_fd:
                os.close(fd)
        os.close(root_fd)


def measure(root: Path, *, keep_inodes: bool = False) -> TreeUsage:
    usage = TreeUsage()

    def visit(fd: int, name: str, info: os.stat_result, parts: tuple[str, ...]) -> None:
        if keep_inodes:
            usage.inodes.add(info.st_ino)

    _walk(root, visit, usage)
    return usage


def prepare(root: Path, uid: int, gid: int) -> TreeUsage:
    """Hand the tree to ``uid:gid`` (see the module doc) and measure it, inodes kept."""
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        info = os.fstat(root_fd)
        if (info.st_uid, info.st_gid) != (uid, gid):
            os.fchown(root_fd, uid, gid)
    finally:
        os.close(root_fd)
    usage = TreeUsage()

    def visit(fd: int, name: str, info: os.stat_result, parts: tuple[str, ...]) -> None:
        mode = info.st_mode
        usage.inodes.add(info.st_ino)
        if (info.st_uid, info.st_gid) == (uid, gid):
            return
        if stat.S_ISDIR(mode) or stat.S_ISLNK(mode) or (stat.S_ISREG(mode) and info.st_nlink == 1):
            with contextlib.suppress(OSError):
                os.chown(name, uid, gid, dir_fd=fd, follow_symlinks=False)

    _walk(root, visit, usage)
    return usage


def _strip(fd: int, name: str, info: os.stat_result) -> bool:
    """Clear set-id bits and file capabilities of one entry; True when anything changed."""
    changed = False
    if info.st_mode & _SETID and (stat.S_ISREG(info.st_mode) or stat.S_ISDIR(info.st_mode)):
        flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC
        with contextlib.suppress(OSError):
            handle = os.open(name, flags, dir_fd=fd)
            try:
                now = os.fstat(handle)
                if now.st_ino == info.st_ino and now.st_mode & _SETID:
                    os.fchmod(handle, stat.S_IMODE(now.st_mode) & ~_SETID)
                    changed = True
            finally:
                os.close(handle)
    if stat.S_ISREG(info.st_mode):
        # The parent's fd names the directory; the last component is never followed.
        path = f"/proc/self/fd/{fd}/{name}"
        try:
            os.getxattr(path, _CAPABILITY, follow_symlinks=False)
        except OSError:
            return changed  # ENODATA: no capabilities (the usual case)
        with contextlib.suppress(OSError):
            os.removexattr(path, _CAPABILITY, follow_symlinks=False)
            changed = True
    return changed


def finish(root: Path, since_ns: int, baseline_inodes: set[int]) -> Finish:
    """Strip what the run changed (ctime at or after ``since_ns``); list its new files;
    remove folders nested deeper than :data:`MAX_DEPTH` (no later walk, snapshot or call
    could go through them)."""
    result = Finish(usage=TreeUsage())

    def visit(fd: int, name: str, info: os.stat_result, parts: tuple[str, ...]) -> None:
        if info.st_ctime_ns < since_ns:
            return
        if _strip(fd, name, info):
            result.stripped += 1
        if info.st_ino in baseline_inodes:
            return
        result.new_entries.append(((*parts, name), info.st_ino))
        if stat.S_ISREG(info.st_mode):
            result.new_files.append(
                NewFile((*parts, name), info.st_ino, info.st_mtime_ns, info.st_blocks * 512)
            )

    too_deep: list[tuple[str, ...]] = []
    _walk(root, visit, result.usage, too_deep)
    for parts in too_deep:
        remove_subtree(root, parts)
        result.too_deep_removed += 1
    return result


_HELD_FDS = 64  # descriptors one removal keeps open; deeper chains are cut and moved up


def remove_subtree(root: Path, parts: tuple[str, ...]) -> None:
    """Remove the folder at ``parts`` (relative to ``root``) and everything below it, by
    descriptors and without following links, however deep it nests: a chain deeper than
    :data:`_HELD_FDS` is cut by renaming its lower part to a temporary name in ``root``,
    which is then removed in turn."""
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        pending = [parts]
        while pending:
            target = pending.pop()
            try:
                parent = _open_parent_at(root_fd, target)
            except OSError:
                continue
            try:
                _remove_below(root_fd, parent, target[-1], pending)
            finally:
                os.close(parent)
    finally:
        os.close(root_fd)


def _open_parent_at(root_fd: int, parts: tuple[str, ...]) -> int:
    fd = os.dup(root_fd)
    try:
        for part in parts[:-1]:
            child = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


def _remove_below(root_fd: int, parent_fd: int, name: str, pending: list[tuple[str, ...]]) -> None:
    try:
        stack = [(parent_fd, name, os.open(name, _DIR_FLAGS, dir_fd=parent_fd))]
    except OSError:
        return
    try:
        while stack:
            above, folder, fd = stack[-1]
            sub = None
            with os.scandir(fd) as entries:
                for entry in entries:
                    if entry.is_dir(follow_symlinks=False):
                        sub = entry.name
                        break
                    with contextlib.suppress(OSError):
                        os.unlink(entry.name, dir_fd=fd)
            if sub is None:
                stack.pop()
                os.close(fd)
                with contextlib.suppress(OSError):
                    os.rmdir(folder, dir_fd=above)
                continue
            try:
                if len(stack) >= _HELD_FDS:
                    moved = f".atoll-deep-{uuid.uuid4().hex}"
                    os.rename(sub, moved, src_dir_fd=fd, dst_dir_fd=root_fd)
                    pending.append((moved,))
                else:
                    stack.append((fd, sub, os.open(sub, _DIR_FLAGS, dir_fd=fd)))
            except OSError:
                return  # swapped or unremovable meanwhile: leave the rest, never loop on it
    finally:
        for _, _, fd in stack:
            os.close(fd)


def _open_parent(root: Path, parts: tuple[str, ...]) -> int:
    root_fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        return _open_parent_at(root_fd, parts)
    finally:
        os.close(root_fd)


def trim(root: Path, new_files: list[NewFile], excess_bytes: int) -> int:
    """Remove the newest ``new_files`` until ``excess_bytes`` are freed; returns the count."""
    removed = 0
    for new in sorted(new_files, key=lambda item: item.mtime_ns, reverse=True):
        if excess_bytes <= 0:
            break
        info = _remove_if_same(root, new.parts, new.inode)
        if info is not None:
            excess_bytes -= info.st_blocks * 512
            removed += 1
    return removed


def trim_entries(root: Path, new_entries: list[tuple[tuple[str, ...], int]], excess: int) -> int:
    """Remove ``excess`` of the entries the run created (files, links, folders), deepest
    first, so a folder is empty when its turn comes; returns how many went. A folder that
    still holds something older is left."""
    removed = 0
    for parts, inode in sorted(new_entries, key=lambda item: len(item[0]), reverse=True):
        if removed >= excess:
            break
        if _remove_if_same(root, parts, inode) is not None:
            removed += 1
    return removed


def _remove_if_same(root: Path, parts: tuple[str, ...], inode: int) -> os.stat_result | None:
    """Remove the entry at ``parts`` below ``root`` if it is still inode ``inode`` (a folder
    only when empty), never following a link; its stat when it went, else None."""
    try:
        fd = _open_parent(root, parts)
    except OSError:
        return None
    try:
        info = os.stat(parts[-1], dir_fd=fd, follow_symlinks=False)
        if info.st_ino != inode:
            return None
        if stat.S_ISDIR(info.st_mode):
            os.rmdir(parts[-1], dir_fd=fd)
        else:
            os.unlink(parts[-1], dir_fd=fd)
        return info
    except OSError:
        return None
    finally:
        os.close(fd)


def unlinked_open_bytes(pids: Iterable[int]) -> int:
    """Allocated bytes of deleted regular files that ``pids`` hold open or mapped."""
    seen: dict[tuple[int, int], int] = {}
    for pid in pids:
        base = f"/proc/{pid}"
        candidates: list[str] = []
        with contextlib.suppress(OSError):
            candidates += [f"{base}/fd/{name}" for name in os.listdir(f"{base}/fd")]
        with contextlib.suppress(OSError), open(f"{base}/maps") as maps:
            for line in maps:
                if line.rstrip().endswith("(deleted)"):
                    candidates.append(f"{base}/map_files/{line.split(None, 1)[0]}")
        for candidate in candidates:
            try:
                info = os.stat(candidate)
            except OSError:
                continue
            if stat.S_ISREG(info.st_mode) and info.st_nlink == 0:
                seen[(info.st_dev, info.st_ino)] = info.st_blocks * 512
    return sum(seen.values())


def descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (for runs without a cgroup to list them)."""
    children: dict[int, list[int]] = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
        except (OSError, IndexError):
            continue
        children.setdefault(int(fields[1]), []).append(int(name))
    found, queue = [], [pid]
    while queue:
        current = queue.pop()
        found.append(current)
        queue.extend(children.get(current, ()))
    return found
