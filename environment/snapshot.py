"""Deterministic snapshots and manifests: the same world always gives the same bytes.

:func:`write_snapshot` writes the world as a tar.gz (:mod:`atoll.world_archive`): members
``filesystem/…`` then ``.apps_data/…`` (each tree sorted by path), regular files and
directories only, normalised (mtime :data:`atoll.world_archive.SNAPSHOT_MTIME`, uid/gid 0,
empty user and group names, mode 0644 or 0755, PAX, gzip header with mtime 0 and no name).
:func:`build_manifest` describes the same members as a :class:`atoll.world_manifest.WorldManifest`
(path, size, sha256, executable bit): ``write_archive(build_manifest(roots), contents)`` is
``write_snapshot(roots)`` byte for byte.

A symlink is stored as the regular file it points to when that file lies inside the same
root; every other symlink, and every special file, is left out, so nothing outside the world
can leak into a snapshot. Both read the world through one walk
(:mod:`environment.world_walk`: descriptors beneath each root, size and hole caps, a
deadline, stable reads); the manifest reuses a file's hash while its stat is unchanged
(:class:`environment.stat_cache.StatCache`).
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass
from typing import BinaryIO, Protocol

from pydantic import ValidationError

from atoll.errors import AtollError, ErrorCode, first_problem
from atoll.runtime import world_work
from atoll.world_archive import ArchiveWriter
from atoll.world_manifest import Entry, WorldManifest
from environment.populate import WorldRoots
from environment.stat_cache import StatCache, hash_member
from environment.world_walk import (
    COPY_ATTEMPTS,
    Budget,
    Member,
    SnapshotLimits,
    SnapshotTimeout,
    SnapshotTooLarge,
    WorldWalk,
    stable_copy,
)

__all__ = [
    "COPY_ATTEMPTS",
    "SnapshotInfo",
    "SnapshotLimits",
    "SnapshotTimeout",
    "SnapshotTooLarge",
    "StatCache",
    "UnlistableMember",
    "build_manifest",
    "write_snapshot",
]


@dataclass(frozen=True)
class SnapshotInfo:
    """What was written: compressed size, sha256 of the archive, counts and sizes read."""

    size_bytes: int
    sha256: str
    files: int
    directories: int
    skipped: int
    apparent_bytes: int = 0
    allocated_bytes: int = 0


class UnlistableMember(AtollError):
    """The world holds a name a manifest cannot carry (not UTF-8, a backslash, atoll's reserved
    prefix): the snapshot archives it, a manifest would refuse it, so no manifest is made."""

    def __init__(self, member: str, reason: str) -> None:
        shown = member.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        super().__init__(
            ErrorCode.world_not_manifestable,
            f"{shown!r} cannot be listed in a world manifest ({reason}); take a full snapshot",
        )


def write_snapshot(roots: WorldRoots, sink: BinaryIO, limits: SnapshotLimits | None = None) -> SnapshotInfo:
    """Write the world's snapshot to ``sink``. Blocking: call from a worker thread.

    Raises SnapshotTooLarge and SnapshotTimeout (AtollError) past ``limits``, OSError when a
    root cannot be read; the archive is then incomplete *and* lacks the gzip trailer, so it
    can never pass for valid.
    """
    budget = Budget(limits or SnapshotLimits())
    writer = ArchiveWriter(sink)
    walk = WorldWalk(roots, budget)
    files = directories = skipped = 0
    try:
        for root_fd, member in walk:
            if member.is_dir:
                writer.add_directory(member.member)
                directories += 1
                continue
            copy = stable_copy(root_fd, member, budget)
            if copy is None:  # gone, or replaced by something that is not a file inside
                skipped += 1
                continue
            with copy:
                size = copy.seek(0, os.SEEK_END)
                copy.seek(0)
                writer.add_file(member.member, _Deadline(copy, budget), size, executable=member.executable)
            files += 1
    except BaseException:
        writer.abort()
        raise
    # Only a complete walk reaches this, which writes the tar end and the gzip trailer.
    size, sha256 = writer.finish()
    return SnapshotInfo(
        size, sha256, files, directories, skipped + walk.skipped, budget.apparent, budget.allocated
    )


class BlobSink(Protocol):
    """Takes copies of the files whose content it wants while a manifest is built."""

    def wants(self, sha256: str) -> bool: ...
    def take(self, root_fd: int, member: Member, budget: Budget) -> tuple[int, str] | None: ...


def build_manifest(
    roots: WorldRoots,
    limits: SnapshotLimits | None = None,
    cache: StatCache | None = None,
    *,
    blobs: BlobSink | None = None,
) -> WorldManifest:
    """The manifest of exactly the members :func:`write_snapshot` would archive now, each file
    hashed unless ``cache`` holds its hash under an unchanged stat (the cache is updated, and
    forgets members no longer in the world). Blocking: call from a worker thread.

    With ``blobs``, each file whose hash ``blobs.wants`` is copied there as it is listed, and
    its entry is what that copy holds (a file that changed since it was hashed is listed as
    copied), so the manifest and the blobs always agree.

    Raises what :func:`write_snapshot` raises, and UnlistableMember (``world_not_manifestable``)
    for a name a manifest cannot carry.
    """
    with world_work():  # local files only, even with blobs (the caller's spool or folder)
        return _build_manifest(roots, limits, cache, blobs)


def _build_manifest(
    roots: WorldRoots, limits: SnapshotLimits | None, cache: StatCache | None, blobs: BlobSink | None
) -> WorldManifest:
    budget = Budget(limits or SnapshotLimits())
    entries: list[Entry] = []
    for root_fd, member in WorldWalk(roots, budget):
        if member.is_dir:
            entries.append(_entry(member.member, type="dir"))
            continue
        hashed = hash_member(root_fd, member, budget, cache)
        if hashed is not None and blobs is not None and blobs.wants(hashed[1]):
            hashed = blobs.take(root_fd, member, budget)
        if hashed is None:  # gone, or replaced by something that is not a file inside
            continue
        size, sha256 = hashed
        entries.append(
            _entry(member.member, type="file", size=size, sha256=sha256, executable=member.executable)
        )
    if cache is not None:
        cache.retain({entry.path for entry in entries if entry.type == "file"})
    return WorldManifest(entries=entries)


def _entry(
    path: str, *, type: str, size: int = 0, sha256: str | None = None, executable: bool = False
) -> Entry:
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        raise UnlistableMember(path, "the name is not UTF-8") from None
    try:
        return _checked_entry(path, type, size, sha256, executable)
    except ValidationError as exc:
        raise UnlistableMember(path, first_problem(exc).message) from None


@functools.lru_cache(maxsize=1 << 16)
def _checked_entry(path: str, type: str, size: int, sha256: str | None, executable: bool) -> Entry:
    """An entry, validated once per distinct value: entries are immutable, and a world listed
    again (the freshness check, each delta, every trial of a seed) repeats most of them. A
    refused name raises, which is never cached."""
    return Entry(path=path, type=type, size=size, sha256=sha256, executable=executable)


class _Deadline:
    """A reader that checks the snapshot's deadline while tarfile copies it into the archive."""

    def __init__(self, raw: BinaryIO, budget: Budget) -> None:
        self.raw = raw
        self.budget = budget

    def read(self, size: int = -1) -> bytes:
        self.budget.check_time()
        return self.raw.read(size)

    def readinto(self, buffer: bytearray | memoryview) -> int:
        self.budget.check_time()
        return self.raw.readinto(buffer)  # type: ignore[attr-defined]  # a file's, not in BinaryIO's stubs
