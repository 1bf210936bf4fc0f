"""The stat cache: a world file's sha256, reused while its ``stat`` says it did not change.

Each member path is remembered with ``(st_dev, st_ino, st_size, st_mtime_ns, st_ctime_ns)``
of the file as it was hashed; the file is read and hashed again when any of them differs.
``ctime`` is what makes this safe against an agent: an unprivileged process can set
``mtime`` back (``os.utime``) after rewriting a file with the same size, but every write,
``utime`` and ``chmod`` moves ``ctime`` to the present, and nothing sets it back.

One blind spot remains, the one git calls *racily clean*: a file rewritten within the same
tick of the kernel's timestamp clock as the write before it keeps its ``ctime``. So a hash is
only kept when the file's ``ctime`` is older than the coarse clock after the read: any later
write then gets a later ``ctime``. (:func:`wait_for_clock_tick` lets a caller that has just
written the world wait the one tick for its hashes to be kept.)

Hashing reads the file as the snapshot does (:mod:`environment.world_walk`): by descriptor
beneath its root, holes as zeros without reading them, and again while two ``fstat`` calls
around the read disagree.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from typing import BinaryIO

from environment.world_walk import Budget, Member, open_member, read_stable, spool

# The clock the kernel stamps files with (without multigrain timestamps): one tick is 1-10 ms.
_COARSE_CLOCK = getattr(time, "CLOCK_REALTIME_COARSE", 5)
_CHUNK = 1 << 20
_ZEROS = bytes(_CHUNK)

StatKey = tuple[int, int, int, int, int]


def stat_key(info: os.stat_result) -> StatKey:
    return (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns)


def coarse_now_ns() -> int:
    """The kernel's coarse real-time clock, the one that stamps ``ctime``."""
    return time.clock_gettime_ns(_COARSE_CLOCK)


def wait_for_clock_tick(since_ns: int | None = None) -> None:
    """Wait until the coarse clock is past ``since_ns`` (default: now on the fine clock), so
    every file written before the call has a ``ctime`` older than it (a few milliseconds)."""
    since = time.time_ns() if since_ns is None else since_ns
    step = max(time.clock_getres(_COARSE_CLOCK), 0.001)
    while coarse_now_ns() <= since:
        time.sleep(step)


@dataclass(frozen=True)
class _Cached:
    key: StatKey
    sha256: str
    holes: int  # counted again on a hit, so a cached sparse file meets the same cap


class StatCache:
    """Member path → the file's stat key and sha256 (module doc). Not thread-safe: used under
    the world lock. ``hashed`` counts the files read and hashed rather than found here."""

    def __init__(self) -> None:
        self._entries: dict[str, _Cached] = {}
        self.hashed = 0

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, member: str, info: os.stat_result) -> _Cached | None:
        cached = self._entries.get(member)
        return cached if cached is not None and cached.key == stat_key(info) else None

    def store(self, member: str, info: os.stat_result, sha256: str, holes: int) -> None:
        self._entries[member] = _Cached(stat_key(info), sha256, holes)

    def retain(self, members: set[str]) -> None:
        """Forget every member not in ``members`` (gone from the world)."""
        for member in self._entries.keys() - members:
            del self._entries[member]

    def clear(self) -> None:
        self._entries.clear()

    def swap(self, other: StatCache) -> None:
        """Exchange entries with ``other``: a world's files moved elsewhere by rename keep their
        stat keys, so their hashes go with them (environment.world_parking)."""
        self._entries, other._entries = other._entries, self._entries


class _Hasher:
    """A sink for :func:`environment.world_walk.copy_data` that hashes the file's content as the
    archive holds it (holes as zeros) instead of keeping it. Regions arrive in increasing
    offsets; a region written again or a truncation below what was hashed (the file changed
    during the read) marks it ``torn``, and the read is not used."""

    def __init__(self, _size: int = 0) -> None:
        self.digest = hashlib.sha256()
        self.size = 0
        self.torn = False
        self._at = 0

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        self._at = self.size if whence == os.SEEK_END else offset
        return self._at

    def write(self, data: bytes) -> int:
        if self._at < self.size:
            self.torn = True
            return len(data)
        gap = self._at - self.size
        while gap > 0:
            self.digest.update(_ZEROS[: min(gap, _CHUNK)])
            gap -= min(gap, _CHUNK)
        self.digest.update(data)
        self.size = self._at = self._at + len(data)
        return len(data)

    def truncate(self, size: int) -> int:
        if size < self.size:
            self.torn = True
        return size

    def close(self) -> None:
        pass


def hash_member(
    root_fd: int, member: Member, budget: Budget, cache: StatCache | None
) -> tuple[int, str] | None:
    """(size, sha256) of the member's file, from ``cache`` when its stat key is unchanged, or
    None when it is gone or no longer a regular file inside. Raises what the walk's budget
    raises (SnapshotTooLarge, SnapshotTimeout).

    The stat the walk took of the file (``member.info``) is looked up first: a file whose stat
    key the cache holds is not opened at all (two manifests per trial open no unchanged file).
    That stat is as good as one taken after opening: the walk took it through the same
    folders, by descriptor, of a regular file; the key changes with every write to the inode;
    and a file changed after either stat is a change after the listing, whichever it was."""
    if cache is not None and member.info is not None:
        cached = cache.lookup(member.member, member.info)
        if cached is not None:
            budget.count_holes(member.member, cached.holes)
            return member.info.st_size, cached.sha256
    opened = open_member(root_fd, member)
    if opened is None:
        return None
    descriptor, before = opened
    with os.fdopen(descriptor, "rb", buffering=0):  # closes the descriptor
        if cache is not None and (cached := cache.lookup(member.member, before)) is not None:
            budget.count_holes(member.member, cached.holes)
            return before.st_size, cached.sha256
        hasher, holes, stable = read_stable(descriptor, before, member.member, budget, _Hasher)
        if hasher.torn:
            # The file never held still and the last read saw it shrink: hash one whole copy
            # of it instead, as the snapshot would archive it.
            copy, holes, stable = read_stable(descriptor, os.fstat(descriptor), member.member, budget, spool)
            with copy:
                size, sha256 = _hash_copy(copy)
        else:
            size, sha256 = hasher.size, hasher.digest.hexdigest()
        budget.count_holes(member.member, holes)
        if cache is not None:
            cache.hashed += 1
            if stable is not None and stable.st_ctime_ns < coarse_now_ns():
                cache.store(member.member, stable, sha256, holes)
        return size, sha256


def _hash_copy(copy: BinaryIO) -> tuple[int, str]:
    digest = hashlib.sha256()
    size = 0
    copy.seek(0)
    while chunk := copy.read(_CHUNK):
        digest.update(chunk)
        size += len(chunk)
    return size, digest.hexdigest()
